// The grouped GEMM over rows already sorted by expert (moejit/grouped_gemm.hpp):
// the routing kernel in its group-offsets form builds the m-tile list, then the
// MoE layer's down-projection kernel of the row bucket runs without router
// weights (top_k = 1), writing bf16 Y straight into the caller's output; where
// that kernel splits K, its fp32 partials go to the workspace and the combine
// kernel (top_k = 1, route_row the identity) sums them into Y.
#include "moejit/grouped_gemm.hpp"

#include <algorithm>
#include <set>
#include <string>

#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/moe_shape.hpp"
#include "moejit/quant.hpp"
#include "ops/bucket_plans.hpp"
#include "ops/device_ptr.hpp"
#include "ops/fp8_gemm_config.hpp"
#include "ops/fp8_grouped_gemm.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/kernel_launch.hpp"
#include "ops/kernel_params.hpp"
#include "ops/launch_contracts.hpp"
#include "ops/moe_keys.hpp"
#include "ops/tensor_map.hpp"

namespace moejit {
namespace {
using ops::dptr;
using ops::launch_kernel;

constexpr std::size_t align256(std::size_t v) { return (v + 255) & ~std::size_t(255); }

// The grouped GEMM as a one-expert-per-row MoE shape: hidden = N (the down
// projection's output), intermediate = K (its input), top_k = 1.
MoeLayerShape as_layer_shape(const GroupedGemmShape& g) {
  MoeLayerShape s;
  s.hidden = g.n;
  s.intermediate = g.k;
  s.experts = g.experts;
  s.top_k = 1;
  s.act = Activation::none;
  s.down_bias = g.bias;
  return s;
}

struct Layout {
  std::size_t offsets, sorted_route, route_row, tiles[4], y, total;
};
// Tile lists sized for bm = 8, which bounds every configuration's tile count;
// then y_rows fp32 rows of N split-K partials (last, so the metadata offsets do
// not depend on it).
Layout layout_for(const GroupedGemmShape& g, std::uint64_t M, std::uint64_t y_rows) {
  Layout l{};
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += align256(bytes);
    return here;
  };
  l.offsets = take(4 * (std::uint64_t(g.experts) + 1));
  l.sorted_route = take(4 * M);
  l.route_row = take(4 * M);
  const std::uint64_t mt = ops::max_m_tiles(M, g.experts, 8);
  for (int i = 0; i < 3; ++i) l.tiles[i] = take(4 * mt);
  l.tiles[3] = take(4 * 5);  // num_tiles, then the work-item counters (GroupedGemmParams::item_counter)
  l.y = take(4 * y_rows * g.n);
  l.total = at;
  return l;
}


[[noreturn]] void bad_arg(const char* field, std::uint64_t v, const std::string& why) {
  throw InvalidArgument(std::string("GroupedGemmArgs.") + field + "=" + std::to_string(v) + ": " + why);
}
}  // namespace

namespace ops {
// What one row bucket launches.
struct GroupedGemmPlan {
  SpecKey route_key, gemm_key, combine_key;
  GemmConfig config;   // bf16 / w4a16_mxfp4
  Fp8GemmConfig fp8;   // mxfp8 / fp8_per_token
  int bm = 0;
  unsigned splits = 1;      // > 1: fp32 partials in the workspace, summed by the combine
};

GroupedGemmPlan make_grouped_gemm_plan(const GroupedGemmShape& g, QuantMode quant, WeightScale wscale, std::uint32_t bucket,
               const Target& target, const GemmTuning& tuning) {
  const MoeLayerShape s = as_layer_shape(g);
  GroupedGemmPlan p;
  p.route_key = route_key(s, bucket, target);
  p.gemm_key = gemm_key(OpKind::down, s, quant, wscale, bucket, target, tuning);
  p.gemm_key.router_weight = false;
  if (is_fp8(quant)) {
    p.fp8 = choose_fp8_config(p.gemm_key, tuning);
    p.bm = p.fp8.bm();
  } else {
    p.config = choose_config(p.gemm_key, tuning);
    p.bm = p.config.bm();
    p.splits = static_cast<unsigned>(p.config.splits);
  }
  if (p.splits > 1) p.combine_key = combine_key(s, DType::f32, bucket, target);
  return p;
}
}  // namespace ops

// The plans of one GroupedGemm, one per row bucket it has run.
class GroupedGemmPlans : public ops::BucketPlans<ops::GroupedGemmPlan> {
 public:
  using BucketPlans::BucketPlans;
};

GroupedGemm::GroupedGemm(Runtime& runtime, const GroupedGemmShape& shape, QuantMode quant, Target target)
    : GroupedGemm(runtime, shape, quant, default_weight_scale(quant), target) {}

GroupedGemm::GroupedGemm(Runtime& runtime, const GroupedGemmShape& shape, QuantMode quant, WeightScale wscale,
                         Target target)
    : runtime_(runtime), shape_(shape), quant_(quant), wscale_(wscale), target_(target) {
  auto bad = [](const char* f, std::uint64_t v, const char* why) {
    throw InvalidArgument(std::string("GroupedGemmShape.") + f + "=" + std::to_string(v) + ": " + why);
  };
  if (shape.n == 0 || shape.n % 32 != 0) bad("n", shape.n, "must be a positive multiple of 32");
  if (shape.k == 0 || shape.k % 32 != 0) bad("k", shape.k, "must be a positive multiple of 32");
  if (shape.experts == 0 || shape.experts > ops::kRouteMaxExperts) bad("experts", shape.experts, "must be in [1, 4096]");
  SpecKey probe = make_gemm_key(OpKind::down, quant, 1, 32, 32, target);
  probe.weight_scale = wscale;
  validate(probe);  // wscale must fit quant (throws InvalidArgument naming wscale)
  plans_ = std::make_shared<GroupedGemmPlans>(
      [s = shape_, quant, wscale, target, tuning = runtime.gemm_tuning()](std::uint32_t bucket) {
        return ops::make_grouped_gemm_plan(s, quant, wscale, bucket, target, tuning);
      });
  // Every key of the smallest bucket: a shape the kernels cannot run fails here.
  (void)keys(1);
}

// The bound over every M <= max_rows: partials as the layer sizes them (at most
// kSplitKMax while rows <= kSplitKMaxRows, where the heuristics split K); the
// FP8 kernels never split K.
std::size_t GroupedGemm::workspace_size(std::uint32_t max_rows) const {
  const std::uint64_t y_rows =
      ops::is_fp8(quant_) ? 0 : std::min<std::uint64_t>(max_rows, ops::kSplitKMaxRows) * ops::kSplitKMax;
  return layout_for(shape_, max_rows, y_rows).total;
}

std::size_t GroupedGemm::workspace_size_for(std::uint32_t num_rows) const {
  if (num_rows == 0) return 0;
  const ops::GroupedGemmPlan& p = plans_->get(round_up_tokens(num_rows));
  return layout_for(shape_, num_rows, p.splits > 1 ? std::uint64_t(num_rows) * p.splits : 0).total;
}

std::vector<SpecKey> GroupedGemm::keys(std::uint32_t row_bucket) const {
  if (row_bucket == 0) throw InvalidArgument("row_bucket must be >= 1, got 0");
  const ops::GroupedGemmPlan& p = plans_->get(row_bucket);
  std::vector<SpecKey> k{p.route_key, p.gemm_key};
  if (p.splits > 1) k.push_back(p.combine_key);
  return k;
}

std::size_t GroupedGemm::prewarm(std::uint32_t max_rows) const {
  if (max_rows == 0) throw InvalidArgument("max_rows must be >= 1, got 0");
  std::set<std::string> seen;
  for (std::uint32_t b : prewarm_set(max_rows))
    for (const SpecKey& k : keys(b))
      if (seen.insert(k.to_text()).second) runtime_.compiled(k);
  return seen.size();
}

void GroupedGemm::check_args(const GroupedGemmArgs& a) const {
  const std::uint64_t M = a.num_rows;
  if (M > 0x7fffffffull) bad_arg("num_rows", M, "must fit in int32");
  if (M == 0) return;
  const bool fp8 = ops::is_fp8(quant_);
  const std::int64_t as = a.a_row_stride ? a.a_row_stride : std::int64_t(shape_.k);
  if (!a.a || a.a % 16) bad_arg("a", a.a, "must be non-null and 16-byte aligned");
  if (as < std::int64_t(shape_.k) || as % (fp8 ? 16 : 8))
    bad_arg("a_row_stride", static_cast<std::uint64_t>(as),
            fp8 ? "must be >= K and a multiple of 16 (bytes of e4m3 codes)" : "must be >= K and a multiple of 8");
  if (fp8 && !a.a_scales) bad_arg("a_scales", a.a_scales, "null; FP8 modes need the activation scales");
  if (quant_ == QuantMode::fp8_per_token && a.a_scales % 4) bad_arg("a_scales", a.a_scales, "must be 4-byte aligned (fp32)");
  if (!a.expert_offsets || a.expert_offsets % 4)
    bad_arg("expert_offsets", a.expert_offsets, "must be non-null and 4-byte aligned (int32 [E + 1])");
  if (!a.w || a.w % 16) bad_arg("w", a.w, "must be non-null and 16-byte aligned");
  if (quant_ != QuantMode::bf16 && !a.w_scales) bad_arg("w_scales", a.w_scales, "null; this mode needs weight scales");
  if ((quant_ == QuantMode::w4a16_mxfp4 || quant_ == QuantMode::fp8_per_token) && a.w_scales % 4)
    bad_arg("w_scales", a.w_scales, "must be 4-byte aligned");
  if (shape_.bias != BiasKind::none) {
    const unsigned align = shape_.bias == BiasKind::f32 ? 4u : 2u;
    if (!a.bias || a.bias % align)
      bad_arg("bias", a.bias, "must be non-null and " + std::to_string(align) + "-byte aligned (the shape has a bias)");
  }
  if (!a.out || a.out % 16) bad_arg("out", a.out, "must be non-null and 16-byte aligned");
  const std::int64_t os = a.out_row_stride ? a.out_row_stride : std::int64_t(shape_.n);
  if (os < std::int64_t(shape_.n) || os % 8)
    bad_arg("out_row_stride", static_cast<std::uint64_t>(os), "must be >= N and a multiple of 8");
  if (!a.workspace || a.workspace % 256) bad_arg("workspace", a.workspace, "must be non-null and 256-byte aligned");
}

void GroupedGemm::run(const GroupedGemmArgs& a, CUstream stream) const {
  check_args(a);
  if (a.num_rows == 0) return;
  const std::uint32_t M = a.num_rows;
  const ops::GroupedGemmPlan& plan = plans_->get(round_up_tokens(M));
  const std::uint32_t tiles = ops::max_m_tiles(M, shape_.experts, plan.bm);
  if (tiles > 65535) bad_arg("num_rows", M, "too many m-tiles for one launch (" + std::to_string(tiles) + " > 65535)");
  const Layout l = layout_for(shape_, M, plan.splits > 1 ? std::uint64_t(M) * plan.splits : 0);
  if (a.workspace_bytes < l.total)
    bad_arg("workspace_bytes", a.workspace_bytes,
            "need " + std::to_string(l.total) + " for num_rows=" + std::to_string(M) + " (workspace_size_for)");
  // Every kernel before the first launch: a miss after seal or a failing
  // compile launches nothing.
  const KernelRef rk = runtime_.get(plan.route_key);
  const KernelRef gk = runtime_.get(plan.gemm_key);
  const KernelRef ck = plan.splits > 1 ? runtime_.get(plan.combine_key) : KernelRef{};
  const DevicePtr ws = a.workspace;
  const DevicePtr tile[4] = {ws + l.tiles[0], ws + l.tiles[1], ws + l.tiles[2], ws + l.tiles[3]};

  RouteParams r{};
  r.num_routes = static_cast<int>(M);
  r.num_experts = static_cast<int>(shape_.experts);
  r.expert_offsets = dptr(ws + l.offsets);
  r.sorted_route = dptr(ws + l.sorted_route);
  r.route_row = dptr(ws + l.route_row);
  r.tiles[0] = {plan.bm, dptr(tile[0]), dptr(tile[1]), dptr(tile[2]), dptr(tile[3])};
  r.tiles[1] = {0, nullptr, nullptr, nullptr, nullptr};
  r.group_offsets = dptr(a.expert_offsets);
  launch_kernel(rk, 1, 1, &r, stream);

  const std::int64_t as = a.a_row_stride ? a.a_row_stride : std::int64_t(shape_.k);
  const std::int64_t os = a.out_row_stride ? a.out_row_stride : std::int64_t(shape_.n);
  const SpecKey& key = plan.gemm_key;
  if (ops::is_fp8(quant_)) {
    ops::Fp8GemmArgs f;
    f.a = a.a;
    f.a_row_stride = as;
    f.a_scales = a.a_scales;
    f.a_scale_row_stride = shape_.k / 32;
    f.w = a.w;
    f.w_scales = a.w_scales;
    f.bias = shape_.bias != BiasKind::none ? a.bias : 0;
    f.out = a.out;
    f.out_row_stride = os;
    f.sorted_route = ws + l.sorted_route;
    f.tile_expert = tile[0];
    f.tile_row_begin = tile[1];
    f.tile_row_end = tile[2];
    f.num_tiles = tile[3];
    f.item_counter = tile[3] + 4;
    f.expert_offsets = ws + l.offsets;
    f.max_tiles = tiles;
    ops::launch_fp8_grouped_gemm(gk, key, plan.fp8, f, stream);
    return;
  }
  const ops::GemmConfig& c = plan.config;
  GroupedGemmParams p{};
  p.a = dptr(a.a);
  p.a_row_stride = as;
  p.w = dptr(a.w);
  p.w_scales = dptr(a.w_scales);
  p.bias = dptr(shape_.bias != BiasKind::none ? a.bias : 0);
  if (plan.splits > 1) {  // fp32 partials [splits, M, N] in the workspace
    p.out = dptr(ws + l.y);
    p.out_row_stride = shape_.n;
    p.out_split_stride = static_cast<std::int64_t>(M) * shape_.n;
  } else {
    p.out = dptr(a.out);
    p.out_row_stride = os;
  }
  p.sorted_route = dptr(ws + l.sorted_route);
  p.tile_expert = dptr(tile[0]);
  p.tile_row_begin = dptr(tile[1]);
  p.tile_row_end = dptr(tile[2]);
  p.num_tiles = dptr(tile[3]);
  p.item_counter = dptr(tile[3] + 4);
  p.n = static_cast<int>(key.n);
  p.k = static_cast<int>(key.k);
  p.top_k = 1;
  p.num_experts = static_cast<int>(shape_.experts);
  p.expert_offsets = dptr(ws + l.offsets);
  if (c.kernel == ops::GemmKernel::bf16_ws) {
    const CUtensorMap map = ops::weight_map(a.w, shape_.experts, key.n, key.k, 2, Activation::none, c.bn());
    launch_kernel(gk, c.grid_x(key.n, tiles), c.grid_y(tiles), &p, stream, plan.splits, &map);
  } else if (c.kernel == ops::GemmKernel::mxfp4_ws) {
    const CUtensorMap map = ops::packed_weight_map(a.w, shape_.experts, key.n, key.k, Activation::none, c.bn());
    launch_kernel(gk, c.grid_x(key.n, tiles), c.grid_y(tiles), &p, stream, plan.splits, &map);
  } else {
    launch_kernel(gk, c.grid_x(key.n, tiles), c.grid_y(tiles), &p, stream, plan.splits);
  }
  if (plan.splits > 1) {
    CombineParams cp{};
    cp.y = dptr(ws + l.y);
    cp.y_row_stride = shape_.n;
    cp.y_split_stride = static_cast<std::int64_t>(M) * shape_.n;
    cp.splits = static_cast<int>(plan.splits);
    cp.route_row = dptr(ws + l.route_row);
    cp.out = dptr(a.out);
    cp.out_row_stride = os;
    cp.hidden = static_cast<int>(shape_.n);
    cp.top_k = 1;
    cp.num_tokens = static_cast<int>(M);
    const std::uint32_t cols = ops::combine_cols(shape_.n, false);
    launch_kernel(ck, static_cast<unsigned>(ops::combine_ctas(M, shape_.n, cols)), 1, &cp, stream);
  }
}

}  // namespace moejit
