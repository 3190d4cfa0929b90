#include "moejit/moe_layer.hpp"

#include <algorithm>
#include <string>

#include "driver/cuda_api.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "ops/device_ptr.hpp"
#include "moejit/quant.hpp"
#include "ops/fp8_gemm_config.hpp"
#include "ops/fp8_grouped_gemm.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/k_order.hpp"
#include "ops/kernel_launch.hpp"
#include "ops/kernel_params.hpp"
#include "ops/launch_contracts.hpp"
#include "ops/layer_plan.hpp"
#include "ops/layer_plans.hpp"
#include "ops/moe_keys.hpp"
#include "ops/tensor_map.hpp"

namespace moejit {
namespace {
using ops::dptr;
using ops::launch_kernel;

constexpr std::size_t align256(std::size_t v) { return (v + 255) & ~std::size_t(255); }

// Workspace layout for T tokens. Why bm = 8 for the tile lists: it bounds every
// configuration's tile count, so the layout depends on T alone.
struct Layout {
  std::size_t offsets, sorted_route, route_row, route_chunks, tiles[2][4], tail[4], h, y, total;
  std::size_t xq = 0, xs = 0, hq = 0, hs = 0;  // FP8 modes: quantized X and H (appended)
};
Layout layout_for(const MoeLayerShape& s, QuantMode quant, std::uint64_t T) {
  const std::uint64_t R = T * s.top_k;
  const std::uint64_t mt = ops::max_m_tiles(R, s.experts, 8);
  Layout l{};
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += align256(bytes);
    return here;
  };
  l.offsets = take(4 * (s.experts + 1));
  l.sorted_route = take(4 * R);
  l.route_row = take(4 * R);
  l.route_chunks = take(4 * s.experts * ops::route_chunks(R));  // chunked routing's counts (route() scratch)
  for (auto& t : l.tiles) {
    for (int i = 0; i < 3; ++i) t[i] = take(4 * mt);
    t[3] = take(4 * 5);  // num_tiles, then the work-item counters of gate_up and down (GroupedGemmParams::item_counter)
  }
  for (int i = 0; i < 3; ++i) l.tail[i] = take(4 * std::min<std::uint64_t>(s.experts, R));  // one tile per expert
  l.tail[3] = take(4 * 5);  // num_tiles and the (unused) work-item counters the routing kernel zeroes
  l.h = take(2 * R * s.intermediate);
  // Y holds the down projection's split-K partials: up to kSplitKMax of them
  // while rows <= kSplitKMaxRows (monotonic in T). Sized for fp32 even where Y
  // is bf16 (no split-K: it uses half of this): the size stays a function of T
  // alone, monotonic, and never depends on the tile heuristic.
  const std::uint64_t y_rows = std::max<std::uint64_t>(R, std::min<std::uint64_t>(R, ops::kSplitKMaxRows) * ops::kSplitKMax);
  l.y = take(4 * y_rows * s.hidden);
  if (ops::is_fp8(quant)) {
    const bool mx = quant == QuantMode::mxfp8;
    l.xq = take(T * s.hidden);
    l.xs = take(mx ? T * s.hidden / 32 : 4 * T);
    l.hq = take(R * s.intermediate);
    l.hs = take(mx ? R * s.intermediate / 32 : 4 * R);
  }
  l.total = at;
  return l;
}

}  // namespace

namespace ops {
void check_shape(const MoeLayerShape& s, QuantMode quant) {
  auto bad = [](const char* f, std::uint64_t v, const char* why) {
    throw InvalidArgument(std::string("MoeLayerShape.") + f + "=" + std::to_string(v) + ": " + why);
  };
  if (s.hidden == 0 || s.hidden % 32 != 0) bad("hidden", s.hidden, "must be a positive multiple of 32");
  if (s.intermediate == 0 || s.intermediate % 32 != 0)
    bad("intermediate", s.intermediate, "must be a positive multiple of 32");
  if (s.experts == 0 || s.experts > kRouteMaxExperts) bad("experts", s.experts, "must be in [1, 4096]");
  if (s.top_k == 0 || s.top_k > s.experts) bad("top_k", s.top_k, "must be in [1, experts]");
  // All four modes: bf16, w4a16_mxfp4, mxfp8, fp8_per_token (the MX and FP8
  // modes' K % 32 rule is covered by hidden / intermediate % 32 above).
  (void)quant;
  if (s.act == Activation::swiglu_oai && !(s.act_limit > 0.f))
    throw InvalidArgument("MoeLayerShape.act_limit=" + std::to_string(s.act_limit) + ": swiglu_oai needs a limit > 0");
}
}  // namespace ops

MoeLayer::MoeLayer(Runtime& runtime, const MoeLayerShape& shape, QuantMode quant, Target target)
    : MoeLayer(runtime, shape, quant, default_weight_scale(quant), target) {}

MoeLayer::MoeLayer(Runtime& runtime, const MoeLayerShape& shape, QuantMode quant, WeightScale wscale, Target target)
    : runtime_(runtime), shape_(shape), quant_(quant), target_(target), wscale_(wscale) {
  ops::check_shape(shape, quant);
  SpecKey probe = make_gemm_key(OpKind::gate_up, quant, 1, 32, 32, target);
  probe.weight_scale = wscale;
  validate(probe);  // wscale must fit quant (throws InvalidArgument naming wscale)
  plans_ = std::make_shared<MoeLayerPlans>(shape_, quant_, wscale_, target_, runtime.gemm_tuning());
}

const ops::MoeLayerPlan& MoeLayer::plan_for(std::uint32_t num_tokens) const {
  return plans_->get(round_up_tokens(num_tokens));
}

std::size_t MoeLayer::workspace_size(std::uint32_t max_tokens) const {
  return layout_for(shape_, quant_, max_tokens).total;
}

MoeWorkspaceView MoeLayer::workspace_view(const MoeLayerArgs& a) const {
  return workspace_view(a, a.num_tokens > 0 ? &plan_for(a.num_tokens) : nullptr);
}

MoeWorkspaceView MoeLayer::workspace_view(const MoeLayerArgs& a, const ops::MoeLayerPlan* plan) const {
  const Layout l = layout_for(shape_, quant_, a.num_tokens);
  MoeWorkspaceView v;
  v.expert_offsets = a.workspace + l.offsets;
  v.sorted_route = a.workspace + l.sorted_route;
  v.route_row = a.workspace + l.route_row;
  for (int g = 0; g < 2; ++g)
    for (int i = 0; i < 4; ++i) v.tiles[g][i] = a.workspace + l.tiles[g][i];
  for (int i = 0; i < 4; ++i) v.tail_tiles[i] = a.workspace + l.tail[i];
  v.h = a.workspace + l.h;
  v.y = a.workspace + l.y;
  // X in the fragment k order lives in Y's bytes: gate_up reads it before
  // down writes Y (down waits for gate_up), and the gate_up step writes it anew.
  v.xk = v.y;
  if (plan != nullptr) {
    v.y_dtype = plan->y_dtype;
    v.y_splits = plan->y_splits;
    v.h_fragment_order = plan->h_fragment_order;
    // Both GEMMs on the same m-tile height (decode: 8 or 16 rows; prefill: the
    // same wgmma tile) share one tile list: the routing kernel builds it once.
    if (plan->shared_tiles)
      for (int i = 0; i < 4; ++i) v.tiles[1][i] = v.tiles[0][i];
  }
  v.y_split_stride = static_cast<std::size_t>(a.num_tokens) * shape_.top_k * shape_.hidden;
  if (ops::is_fp8(quant_)) {
    v.xq = a.workspace + l.xq;
    v.xs = a.workspace + l.xs;
    v.hq = a.workspace + l.hq;
    v.hs = a.workspace + l.hs;
  }
  return v;
}

void MoeLayer::check_args(const MoeLayerArgs& a) const {
  auto bad = [](const char* f, std::uint64_t v, const std::string& why) {
    throw InvalidArgument(std::string("MoeLayerArgs.") + f + "=" + std::to_string(v) + ": " + why);
  };
  const std::uint64_t D = shape_.hidden;
  if (std::uint64_t(a.num_tokens) * shape_.top_k > 0x7fffffffull)
    bad("num_tokens", a.num_tokens, "num_tokens * top_k must fit in int32");
  // Why T = 0 may pass null tensors: frameworks pass empty tensors with null
  // data; nothing is launched for them.
  const bool empty = a.num_tokens == 0;
  if (!a.x && !empty) bad("x", a.x, "null");
  if (!a.topk_ids && !empty) bad("topk_ids", a.topk_ids, "null");
  if (!a.topk_weights && !empty) bad("topk_weights", a.topk_weights, "null");
  if (!a.out && !empty) bad("out", a.out, "null");
  if (a.out % 4) bad("out", a.out, "must be 4-byte aligned (the combine stores bf16 pairs)");
  if (a.x % 16) bad("x", a.x, "must be 16-byte aligned");
  // The combine indexes its threads (num_tokens * hidden / cols, cols 4 or 8) in
  // 32 bits; checked here with cols = 4 so run() refuses before any launch.
  if (!ops::combine_fits(a.num_tokens, D, 4))
    bad("num_tokens", a.num_tokens, "num_tokens * hidden / 4 must not exceed 2^32 (the combine's threads)");
  const std::int64_t xs = a.x_row_stride ? a.x_row_stride : std::int64_t(D);
  if (xs < std::int64_t(D) || xs % 8) bad("x_row_stride", xs, "must be >= hidden and a multiple of 8");
  const std::int64_t os = a.out_row_stride ? a.out_row_stride : std::int64_t(D);
  if (os < std::int64_t(D) || os % 2) bad("out_row_stride", os, "must be >= hidden and even");
  if ((!a.workspace && !empty) || a.workspace % 256)
    bad("workspace", a.workspace, "must be non-null and 256-byte aligned");
  const std::size_t need = empty ? 0 : workspace_size(a.num_tokens);
  if (a.workspace_bytes < need)
    bad("workspace_bytes", a.workspace_bytes, "need " + std::to_string(need) + " for num_tokens=" +
                                                  std::to_string(a.num_tokens));
}

void MoeLayer::route(const MoeLayerArgs& a, CUstream stream) const {
  check_args(a);
  if (a.num_tokens == 0) return;
  const ops::MoeLayerPlan& plan = plan_for(a.num_tokens);
  route(a, plan, workspace_view(a, &plan), stream);
}

void MoeLayer::route(const MoeLayerArgs& a, const ops::MoeLayerPlan& plan, const MoeWorkspaceView& v,
                     CUstream stream) const {
  const KernelRef k = runtime_.get(plan.route_key);
  RouteParams p{};
  p.topk_ids = dptr(a.topk_ids);
  p.num_routes = static_cast<int>(a.num_tokens * shape_.top_k);
  p.num_experts = static_cast<int>(shape_.experts);
  // The staged kernel's shared memory holds kRouteStagedRoutes routes; the
  // bucket's routes (>= num_routes) decide staging, so this cannot fire.
  if (plan.route_staged && std::uint64_t(p.num_routes) > ops::kRouteStagedRoutes)
    throw InvalidArgument("MoeLayerArgs.num_tokens=" + std::to_string(a.num_tokens) +
                          ": more routes than the staged routing kernel holds (internal bucket error)");
  p.expert_offsets = dptr(v.expert_offsets);
  p.sorted_route = dptr(v.sorted_route);
  p.route_row = dptr(v.route_row);
  const int bms[2] = {plan.gate_up.bm, plan.down.bm};
  for (int g = 0; g < 2; ++g) {
    // A list shared with gate_up (workspace_view) is built once: bm 0 skips it.
    const bool shared = g == 1 && v.tiles[1][0] == v.tiles[0][0];
    const int bm = shared ? 0 : bms[g];
    p.tiles[g] = {bm, dptr(v.tiles[g][0]), dptr(v.tiles[g][1]), dptr(v.tiles[g][2]),
                  dptr(v.tiles[g][3])};
  }
  if (plan.tail_bucket != 0) {
    // Both GEMMs use tiles[0] (128-row tiles, aliased) and the tail list.
    if (p.tiles[1].bm != 0)
      throw InvalidArgument("MoeLayerArgs.num_tokens=" + std::to_string(a.num_tokens) +
                            ": split tail with two tile lists (internal heuristic error)");
    p.tail_rows = 64;
    p.tail = {64, dptr(v.tail_tiles[0]), dptr(v.tail_tiles[1]), dptr(v.tail_tiles[2]),
              dptr(v.tail_tiles[3])};
  }
  if (ops::route_chunked(shape_.experts, std::uint64_t(plan.route_key.token_bucket) * shape_.top_k,
                         std::uint64_t(p.num_routes))) {
    // Chunked: count, lists, scatter (kernels/moe_routing.cuh, "Phases").
    p.chunk_counts = dptr(a.workspace + layout_for(shape_, quant_, a.num_tokens).route_chunks);
    p.chunk_routes = static_cast<int>(ops::kRouteChunkRoutes);
    const auto chunks = static_cast<unsigned>(ops::route_chunks(std::uint64_t(p.num_routes)));
    p.phase = 1;
    launch_kernel(k, chunks, 1, &p, stream);
    p.phase = 2;
    launch_kernel(k, 1, 1, &p, stream);
    p.phase = 3;
    launch_kernel(k, chunks, 1, &p, stream);
    return;
  }
  launch_kernel(k, 1, 1, &p, stream);
}

namespace {
// The weights of one bf16/MXFP4 GEMM (gate_up: w1, w1_scales, b1; down: w2, ...).
// Throws InvalidArgument naming the field.
void check_gemm_weights(OpKind op, const MoeLayerShape& s, QuantMode quant, const MoeWeights& w) {
  const bool gate_up = op == OpKind::gate_up;
  const DevicePtr wt = gate_up ? w.w1 : w.w2;
  const DevicePtr sc = gate_up ? w.w1_scales : w.w2_scales;
  const DevicePtr bias = gate_up ? w.b1 : w.b2;
  const BiasKind bk = gate_up ? s.gate_up_bias : s.down_bias;
  const char* name = gate_up ? "w1" : "w2";
  if (!wt || wt % 16) throw InvalidArgument(std::string("MoeWeights.") + name + " must be non-null and 16-byte aligned");
  if (quant == QuantMode::w4a16_mxfp4 && !sc)
    throw InvalidArgument(std::string("MoeWeights.") + name + "_scales is null; w4a16_mxfp4 needs E8M0 scales");
  // The prefill kernels copy an expert's scale rows in 4-byte words (cp.async).
  if (quant == QuantMode::w4a16_mxfp4 && sc % 4)
    throw InvalidArgument(std::string("MoeWeights.") + name + "_scales=" + std::to_string(sc) +
                          " (byte address) must be 4-byte aligned");
  if (bk != BiasKind::none && !bias)
    throw InvalidArgument(std::string("MoeWeights.") + (gate_up ? "b1" : "b2") + " is null but the shape has a bias");
  // The kernels read the bias as its own dtype (4-byte f32, 2-byte bf16 loads).
  const unsigned bias_align = bk == BiasKind::f32 ? 4u : 2u;
  if (bk != BiasKind::none && bias % bias_align)
    throw InvalidArgument(std::string("MoeWeights.") + (gate_up ? "b1" : "b2") + "=" + std::to_string(bias) +
                          " (byte address) must be " + std::to_string(bias_align) + "-byte aligned");
}

// tiles_ready: the launch just before this one on the stream is this layer
// call's gate_up (MoeLayer::run), so topk_ids, the routing kernel's outputs
// (when it ran) and the weights were complete before it started: the MXFP4
// decode kernel reads its tile fields (or routes, FR), issues its first weight
// loads and loads the bias before griddepcontrol.wait. With FR, gate_up writes
// sorted_route, so the router weights (read through it) wait (the kernel's
// gamma_after_wait). The public down() cannot know what was launched before
// it, so it passes false.
void run_gemm(Runtime& rt, OpKind op, const MoeLayerShape& s, QuantMode quant, const ops::GemmPlan& g_plan,
              const MoeWeights& w, const MoeLayerArgs& a, const MoeWorkspaceView& v, CUstream stream,
              bool tiles_ready = false) {
  const bool gate_up = op == OpKind::gate_up;
  const SpecKey& key = g_plan.key;
  const ops::GemmConfig& c = g_plan.config;
  const KernelRef k = rt.get(key);
  check_gemm_weights(op, s, quant, w);
  const DevicePtr wt = gate_up ? w.w1 : w.w2;
  const DevicePtr sc = gate_up ? w.w1_scales : w.w2_scales;
  const DevicePtr bias = gate_up ? w.b1 : w.b2;
  const BiasKind bk = gate_up ? s.gate_up_bias : s.down_bias;
  const std::uint64_t R = std::uint64_t(a.num_tokens) * s.top_k;
  GroupedGemmParams p{};
  if (gate_up) {
    p.a = dptr(a.x);
    p.a_row_stride = a.x_row_stride ? a.x_row_stride : s.hidden;
    p.out = dptr(v.h);
    p.out_row_stride = s.intermediate;
  } else {
    p.a = dptr(v.h);
    p.a_row_stride = s.intermediate;
    p.out = dptr(v.y);
    p.out_row_stride = s.hidden;
    p.out_split_stride = static_cast<std::int64_t>(R) * s.hidden;
    p.gamma = dptr(a.topk_weights);
  }
  p.w = dptr(wt);
  p.w_scales = dptr(sc);
  p.bias = dptr(bk != BiasKind::none ? bias : 0);
  const int g = gate_up ? 0 : 1;
  p.sorted_route = dptr(v.sorted_route);
  p.tile_expert = dptr(v.tiles[g][0]);
  p.tile_row_begin = dptr(v.tiles[g][1]);
  p.tile_row_end = dptr(v.tiles[g][2]);
  p.num_tiles = dptr(v.tiles[g][3]);
  p.item_counter = dptr(v.tiles[g][3] + 4 * (1 + g));
  p.n = static_cast<int>(key.n);
  p.k = static_cast<int>(key.k);
  p.top_k = static_cast<int>(s.top_k);
  p.act_alpha = key.act_alpha;
  p.act_limit = key.act_limit;
  p.tiles_ready = tiles_ready ? 1 : 0;
  if (c.fr) {  // the kernel routes topk_ids itself; gate_up's CTA (0, 0) writes route()'s outputs
    p.topk_ids = dptr(a.topk_ids);
    p.num_routes = static_cast<int>(R);
    p.num_experts = static_cast<int>(s.experts);
    p.route_expert_offsets = dptr(v.expert_offsets);
    p.route_sorted_route = dptr(v.sorted_route);
    p.route_route_row = dptr(v.route_row);
    for (int i = 0; i < 4; ++i) p.route_tiles[i] = dptr(v.tiles[0][i]);
  }
  const std::uint32_t tiles = ops::max_m_tiles(R, s.experts, g_plan.bm);
  if (tiles > 65535)
    throw InvalidArgument("MoeLayerArgs.num_tokens=" + std::to_string(a.num_tokens) +
                          ": too many m-tiles for one launch (" + std::to_string(tiles) + " > 65535)");
  // Split tail: each expert's last 1..64 rows (the tail list route() built)
  // with the one-warpgroup kernel of a smaller bucket. It reads only what was
  // complete before the main launch passed its wait (tile lists, X or H), so
  // it waits for that launch only before it exits (wait_at_exit): the next
  // launch, which waits for this one, still finds every row of this GEMM done.
  // Its kernel is fetched first: a failing get() must not leave the main
  // tiles launched without their tail.
  const KernelRef tk = g_plan.has_tail ? rt.get(g_plan.tail_key) : k;
  p.num_experts = static_cast<int>(s.experts);  // the persistent kernel bounds its scale reads by it
  if (c.kernel == ops::GemmKernel::bf16_ws) {
    p.expert_offsets = dptr(v.expert_offsets);
    const CUtensorMap map = ops::weight_map(wt, s.experts, key.n, key.k, 2, key.act, c.bn());
    launch_kernel(k, c.grid_x(key.n, tiles), c.grid_y(tiles), &p, stream, g_plan.splits, &map);
  } else if (c.kernel == ops::GemmKernel::mxfp4_ws) {
    const CUtensorMap map = ops::packed_weight_map(wt, s.experts, key.n, key.k, key.act, c.bn());
    if (g_plan.k_order) {  // gate_up reads X in its fragment k order: reordered into xk first
      const KernelRef ko = rt.get(g_plan.k_order_key);
      ops::launch_k_order(ko, a.x, p.a_row_stride, a.num_tokens, s.hidden, v.xk, stream);
      p.a = dptr(v.xk);
      p.a_row_stride = s.hidden;
    }
    launch_kernel(k, c.grid_x(key.n, tiles), c.grid_y(tiles), &p, stream, g_plan.splits, &map);
  } else {
    launch_kernel(k, c.grid_x(key.n, tiles), c.grid_y(tiles), &p, stream, g_plan.splits);
  }
  if (g_plan.has_tail) {
    GroupedGemmParams tp = p;
    tp.tile_expert = dptr(v.tail_tiles[0]);
    tp.tile_row_begin = dptr(v.tail_tiles[1]);
    tp.tile_row_end = dptr(v.tail_tiles[2]);
    tp.num_tiles = dptr(v.tail_tiles[3]);
    tp.item_counter = nullptr;  // (the tail's MXFP4 kernel walks a static order)
    tp.wait_at_exit = 1;
    tp.tiles_ready = 0;
    launch_kernel(tk, g_plan.tail_grid_n, static_cast<unsigned>(std::min<std::uint64_t>(s.experts, R)), &tp, stream);
  }
}
}  // namespace

namespace {
// FP8 modes: quantize the GEMM's bf16 input rows (X by token, or H by routed
// row) with the row-independent GPU quantizer, then run the FP8 grouped GEMM.
// tiles_ready: inside MoeLayer::run, where the quantizer just before the
// decode GEMM is this call's, so the GEMM reads its tile fields (or routes
// topk_ids) and issues its first weight loads before griddepcontrol.wait.
void run_fp8_gemm(Runtime& rt, OpKind op, const MoeLayerShape& s, QuantMode quant, const ops::GemmPlan& g_plan,
                  const MoeWeights& w, const MoeLayerArgs& a, const MoeWorkspaceView& v, CUstream stream,
                  bool tiles_ready = false) {
  const bool gate_up = op == OpKind::gate_up;
  const SpecKey& key = g_plan.key;
  const char* name = gate_up ? "w1" : "w2";
  const DevicePtr wt = gate_up ? w.w1 : w.w2;
  const DevicePtr sc = gate_up ? w.w1_scales : w.w2_scales;
  if (!wt || wt % 16) throw InvalidArgument(std::string("MoeWeights.") + name + " must be non-null and 16-byte aligned");
  if (!sc) throw InvalidArgument(std::string("MoeWeights.") + name + "_scales is null; " + std::string(to_string(quant)) +
                                 " needs weight scales");
  // fp8_per_token scales are fp32 (4-byte loads); MXFP8's E8M0 bytes need no alignment.
  if (quant == QuantMode::fp8_per_token && sc % 4)
    throw InvalidArgument(std::string("MoeWeights.") + name + "_scales=" + std::to_string(sc) +
                          " (byte address) must be 4-byte aligned (fp32 scales)");
  const DevicePtr fb = gate_up ? w.b1 : w.b2;
  const unsigned fb_align = key.bias == BiasKind::f32 ? 4u : 2u;
  if (key.bias != BiasKind::none && fb % fb_align)
    throw InvalidArgument(std::string("MoeWeights.") + (gate_up ? "b1" : "b2") + "=" + std::to_string(fb) +
                          " (byte address) must be " + std::to_string(fb_align) + "-byte aligned");
  const std::uint64_t R = std::uint64_t(a.num_tokens) * s.top_k;
  const std::uint64_t in_rows = gate_up ? a.num_tokens : R;
  const std::uint32_t K = key.k;
  const DevicePtr in = gate_up ? a.x : v.h;
  const std::int64_t in_stride = gate_up ? (a.x_row_stride ? a.x_row_stride : s.hidden) : s.intermediate;
  const DevicePtr codes = gate_up ? v.xq : v.hq;
  const DevicePtr scales = gate_up ? v.xs : v.hs;
  quantize_fp8_gpu(rt.get(g_plan.quantize_key), quant, in, in_stride, in_rows, K, codes, scales, stream);
  const int g = gate_up ? 0 : 1;
  ops::Fp8GemmArgs f;
  f.a = codes;
  f.a_row_stride = K;
  f.a_scales = scales;
  f.a_scale_row_stride = K / 32;
  f.w = wt;
  f.w_scales = sc;
  f.bias = gate_up ? w.b1 : w.b2;
  f.gamma = gate_up ? 0 : a.topk_weights;
  f.out = gate_up ? v.h : v.y;
  f.out_row_stride = gate_up ? s.intermediate : s.hidden;
  f.sorted_route = v.sorted_route;
  f.tile_expert = v.tiles[g][0];
  f.tile_row_begin = v.tiles[g][1];
  f.tile_row_end = v.tiles[g][2];
  f.num_tiles = v.tiles[g][3];
  f.item_counter = v.tiles[g][3] + 4 * (1 + g);
  f.expert_offsets = v.expert_offsets;
  f.max_tiles = ops::max_m_tiles(R, s.experts, g_plan.bm);
  if (f.max_tiles > 65535)
    throw InvalidArgument("MoeLayerArgs.num_tokens=" + std::to_string(a.num_tokens) +
                          ": too many m-tiles for one launch (" + std::to_string(f.max_tiles) + " > 65535)");
  if (key.bias != BiasKind::none && !f.bias)
    throw InvalidArgument(std::string("MoeWeights.") + (gate_up ? "b1" : "b2") + " is null but the shape has a bias");
  if (g_plan.fp8.decode) f.tiles_ready = tiles_ready;
  if (g_plan.fp8.fr) {  // the kernel routes topk_ids itself; gate_up's CTA (0, 0) writes route()'s outputs
    f.topk_ids = a.topk_ids;
    f.num_routes = static_cast<std::uint32_t>(R);
    f.route_expert_offsets = v.expert_offsets;
    f.route_sorted_route = v.sorted_route;
    f.route_route_row = v.route_row;
    for (int i = 0; i < 4; ++i) f.route_tiles[i] = v.tiles[0][i];
  }
  ops::launch_fp8_grouped_gemm(rt.get(key), key, g_plan.fp8, f, stream);
}
}  // namespace

void MoeLayer::gate_up(const MoeWeights& w, const MoeLayerArgs& a, CUstream stream) const {
  check_args(a);
  if (a.num_tokens == 0) return;
  const ops::MoeLayerPlan& plan = plan_for(a.num_tokens);
  const MoeWorkspaceView v = workspace_view(a, &plan);
  if (plan.fp8)
    run_fp8_gemm(runtime_, OpKind::gate_up, shape_, quant_, plan.gate_up, w, a, v, stream);
  else
    run_gemm(runtime_, OpKind::gate_up, shape_, quant_, plan.gate_up, w, a, v, stream);
}

void MoeLayer::down(const MoeWeights& w, const MoeLayerArgs& a, CUstream stream) const {
  check_args(a);
  if (a.num_tokens == 0) return;
  const ops::MoeLayerPlan& plan = plan_for(a.num_tokens);
  const MoeWorkspaceView v = workspace_view(a, &plan);
  if (plan.fp8)
    run_fp8_gemm(runtime_, OpKind::down, shape_, quant_, plan.down, w, a, v, stream);
  else
    run_gemm(runtime_, OpKind::down, shape_, quant_, plan.down, w, a, v, stream);
}

void MoeLayer::combine(const MoeLayerArgs& a, CUstream stream) const {
  check_args(a);
  if (a.num_tokens == 0) return;
  const ops::MoeLayerPlan& plan = plan_for(a.num_tokens);
  combine(a, plan, workspace_view(a, &plan), stream);
}

void MoeLayer::combine(const MoeLayerArgs& a, const ops::MoeLayerPlan& plan, const MoeWorkspaceView& v,
                       CUstream stream) const {
  // Columns per thread as the codegen derives them from the key (8: 16-byte
  // loads of bf16 Y, which need hidden % 8 == 0 and 16-byte aligned Y rows: Y
  // is 256-byte aligned and its row stride is hidden, a multiple of 32 here).
  const KernelRef k = runtime_.get(plan.combine_key);
  CombineParams p{};
  p.y = dptr(v.y);
  p.y_row_stride = shape_.hidden;
  p.y_split_stride = static_cast<std::int64_t>(v.y_split_stride);
  p.splits = static_cast<int>(v.y_splits);  // 1 in FP8 modes (no split-K there)
  p.route_row = dptr(v.route_row);
  p.out = dptr(a.out);
  p.out_row_stride = a.out_row_stride ? a.out_row_stride : shape_.hidden;
  p.hidden = static_cast<int>(shape_.hidden);
  p.top_k = static_cast<int>(shape_.top_k);
  p.num_tokens = static_cast<int>(a.num_tokens);
  launch_kernel(k, static_cast<unsigned>(ops::combine_ctas(a.num_tokens, shape_.hidden, plan.combine_cols)), 1, &p, stream);
}

void MoeLayer::run(const MoeWeights& w, const MoeLayerArgs& a, CUstream stream) const {
  check_args(a);
  // Both GEMMs' weights before the first launch: bad input launches nothing.
  if (!ops::is_fp8(quant_)) {
    check_gemm_weights(OpKind::gate_up, shape_, quant_, w);
    check_gemm_weights(OpKind::down, shape_, quant_, w);
  }
  if (a.num_tokens == 0) return;
  // Everything but the tensors comes from the bucket's plan: keys, configs and
  // the launch order (at <= 32 routes the decode GEMMs route topk_ids
  // themselves: no routing kernel, one host launch fewer before gate_up).
  const ops::MoeLayerPlan& plan = plan_for(a.num_tokens);
  const MoeWorkspaceView v = workspace_view(a, &plan);
  for (std::uint8_t i = 0; i < plan.num_steps; ++i) {
    switch (plan.steps[i]) {
      case ops::LayerStep::route:
        route(a, plan, v, stream);
        break;
      case ops::LayerStep::gate_up:
        // FP8: tiles_ready, the launch before the GEMM is this call's quantizer.
        if (plan.fp8)
          run_fp8_gemm(runtime_, OpKind::gate_up, shape_, quant_, plan.gate_up, w, a, v, stream, /*tiles_ready=*/true);
        else
          run_gemm(runtime_, OpKind::gate_up, shape_, quant_, plan.gate_up, w, a, v, stream);
        break;
      case ops::LayerStep::down:
        // tiles_ready: the launch before this one is this call's gate_up
        // (FP8: its quantizer of H).
        if (plan.fp8)
          run_fp8_gemm(runtime_, OpKind::down, shape_, quant_, plan.down, w, a, v, stream, /*tiles_ready=*/true);
        else
          run_gemm(runtime_, OpKind::down, shape_, quant_, plan.down, w, a, v, stream, /*tiles_ready=*/true);
        break;
      case ops::LayerStep::combine:
        combine(a, plan, v, stream);
        break;
    }
  }
}

}  // namespace moejit
