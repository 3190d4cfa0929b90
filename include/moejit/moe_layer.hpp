#pragma once
// A whole MoE layer on the GPU: routing -> gate_up grouped GEMM -> down grouped
// GEMM -> combine, on the caller's stream and device buffers. Semantics (the
// float64 reference: docs/formats.md, "The float64 MoE reference"):
//
//   rows r: the routes (t, j) with topk_ids[t, j] != -1, sorted by expert e(r)
//   gate_up: H[r] = act(X[t(r)] @ W1[e]^T + b1[e])        W1 [E, 2I, D]
//   down:    Y[r] = gamma[t, j] * (H[r] @ W2[e]^T + b2[e])  W2 [E, D, I], stored in y_dtype
//   combine: out[t] = sum over j = 0..top_k-1 of Y[row(t, j)] (fixed order, in fp32 over the
//            stored Y values, then rounded to bf16)
//
// Y is stored in bf16 when the down projection keeps K whole, in fp32 when it
// splits K into partials (MoeWorkspaceView::y_dtype says which for T tokens;
// FP8 modes: always bf16, their kernels keep K whole). The down and combine keys carry that dtype.
//
// Every kernel comes from the Runtime by specialization key; the token bucket is
// round_up_tokens(T). Nothing allocates on the launch path: the caller provides a
// workspace of workspace_size(max_tokens) bytes. Results are bit-reproducible, and
// a token's output does not depend on the other tokens of the batch (padding
// invariance) as long as the batch sizes compared pick the same down
// projection K split: the kernels' tiles and K splits otherwise never change a
// row's bits, but split-K partials (activations-as-A down kernel, tiny T only;
// MoeWorkspaceView::y_splits > 1) sum in another order than one pass and keep Y
// in fp32.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "moejit/key.hpp"
#include "moejit/moe_shape.hpp"
#include "moejit/runtime.hpp"
#include "moejit/tuning.hpp"
#include "moejit/types.hpp"

namespace moejit {

class MoeLayerPlans;  // the per-bucket plans of one layer (library-internal)
namespace ops {
struct MoeLayerPlan;
}

// Every key the MoE layer op requests for T tokens with round_up_tokens(T) == token_bucket,
// in launch order (route, gate_up, down, combine). The down key's out field is
// the dtype of Y (bf16 or f32, see above); the combine key's out field is the
// same dtype, the Y it reads (the combine always writes bf16). Prewarm enumerates the same
// function, so a sealed runtime never misses. Throws InvalidArgument for a shape
// the kernels cannot run (message names the field).
// FP8 modes (mxfp8, fp8_per_token) add the activation quantizers:
// route, quantize(X: n = D), gate_up, quantize(H: n = I), down, combine.
// w4a16_mxfp4 where both GEMMs run the warp-specialized kernel adds the
// reorder of X into its fragment k order (op=k_order, tokens=1, n = D) after
// the route: route, k_order, gate_up, down, combine.
// w4a16_mxfp4 at buckets with split tail (large T, ops::split_tail_bucket)
// appends the gate_up and down keys of the smaller bucket whose kernels run
// the experts' last 1..64 rows (6 keys; launched after each GEMM's main tiles).
std::vector<SpecKey> moe_layer_keys(const MoeLayerShape& shape, QuantMode quant,
                                    std::uint32_t token_bucket, const Target& target);
// The same with an explicit weight-scale granularity (fp8_per_token: per_expert
// or per_channel; the overload above uses default_weight_scale(quant)).
std::vector<SpecKey> moe_layer_keys(const MoeLayerShape& shape, QuantMode quant, WeightScale wscale,
                                    std::uint32_t token_bucket, const Target& target);
// The same under an explicit GEMM tuning (moejit/tuning.hpp); the overloads
// above use the process's MOEJIT_GEMM_TUNE, a MoeLayer and prewarm use their
// Runtime's (Runtime::gemm_tuning). Also throws InvalidArgument for a tuning
// that breaks a kernel's contract for one of the keys.
std::vector<SpecKey> moe_layer_keys(const MoeLayerShape& shape, QuantMode quant, WeightScale wscale,
                                    std::uint32_t token_bucket, const Target& target, const GemmTuning& tuning);

// Expert weights in device memory, all contiguous (row-major, no padding).
//   bf16:        w1 bf16 [E, 2I, D], w2 bf16 [E, D, I]; scales unused (0)
//   w4a16_mxfp4: w1 uint8 [E, 2I, D/2] e2m1 pairs (even k in the low nibble),
//                w1_scales uint8 [E, 2I, D/32] E8M0; w2 [E, D, I/2], w2_scales [E, D, I/32]
//                (OCP Microscaling Formats v1.0; the gpt-oss checkpoint's *_blocks/*_scales)
//   biases: [E, 2I] and [E, D] in the dtype of shape.gate_up_bias / down_bias
//           (f32 or bf16), or 0 when the shape has none.
//   mxfp8:       w1 e4m3 [E, 2I, D] + w1_scales E8M0 [E, 2I, D/32]; w2 e4m3 [E, D, I] +
//                w2_scales E8M0 [E, D, I/32]. X and H are quantized per 32-block on the GPU.
//   fp8_per_token: w1 e4m3 [E, 2I, D], w2 e4m3 [E, D, I]; w*_scales fp32 [E]
//                (WeightScale::per_expert) or [E, N] (per_channel, N = 2I / D);
//                X and H are quantized per row (fp32 scale) on the GPU.
// With act == none, W1 is [E, I, D] (H = X W1^T + b1 directly).
// gate_up row order: silu_gated: gate rows [0, I), up rows [I, 2I);
// swiglu_oai: gate at even rows, linear at odd rows (gpt-oss).
// All pointers 16-byte aligned (checked: w1 and w2 16 bytes, the MXFP4 and
// fp8_per_token scales 4 bytes, b1 and b2 their dtype's size: the least the
// kernels need; InvalidArgument names the field and address).
struct MoeWeights {
  DevicePtr w1 = 0, w1_scales = 0, b1 = 0;
  DevicePtr w2 = 0, w2_scales = 0, b2 = 0;
};

// Per-call tensors.
struct MoeLayerArgs {
  std::uint32_t num_tokens = 0;   // T; 0 launches nothing (x, topk_ids, topk_weights, out, workspace may then be null, workspace_bytes 0)
  DevicePtr x = 0;                // bf16 [T, D], row stride x_row_stride elements (multiple of 8)
  std::int64_t x_row_stride = 0;  // 0 = D
  DevicePtr topk_ids = 0;         // int32 [T, top_k], contiguous; -1 drops a route (expert parallelism)
  DevicePtr topk_weights = 0;     // fp32 [T, top_k], contiguous (router weights gamma)
  DevicePtr out = 0;              // bf16 [T, D], 4-byte aligned, row stride out_row_stride elements (even)
  std::int64_t out_row_stride = 0;  // 0 = D
  DevicePtr workspace = 0;        // >= workspace_size(T) bytes, 256-byte aligned
  std::size_t workspace_bytes = 0;
};

// Position of column c of an H row stored in the fragment k order
// (MoeWorkspaceView::h_fragment_order): inside each block of 32 columns,
// c = 8q + 2s + t + 4e (q in 0..3; s, t, e in 0..1) goes to 16s + 8t + 2q + e, so
// that the warp-specialized MXFP4 down kernel finds the activations of a
// packed e2m1 word's nibble pairs {i, i + 4} where its wgmma fragments want
// them (docs/kernels.md, "Middle range and large prefill").
constexpr std::uint32_t h_column_position(std::uint32_t c) {
  return (c & ~31u) | ((c >> 1) & 1u) << 4 | (c & 1u) << 3 | ((c >> 3) & 3u) << 1 | ((c >> 2) & 1u);
}

// Device views of the routing metadata and intermediates inside a workspace,
// for callers that run the steps one by one (for example to time each GEMM).
// The routing metadata is route()'s output; where both GEMMs run the MXFP4
// decode kernel at <= 32 routes (and <= 256 experts), gate_up routes topk_ids
// itself and writes all of it too, rows of one expert in route order (run()
// then launches no routing kernel). Within an expert the row order is not
// part of the contract either way.
struct MoeWorkspaceView {
  DevicePtr expert_offsets = 0;  // int32 [E + 1]
  DevicePtr sorted_route = 0;    // int32 [T * top_k]: route id t * top_k + j of each sorted row
  DevicePtr route_row = 0;       // int32 [T * top_k]: sorted row of each route, -1 if dropped
  DevicePtr tiles[2][4] = {};    // per GEMM (0 gate_up, 1 down), written by route() (and, at <= 32
                                 // routes on the MXFP4 decode kernels, by gate_up itself, which
                                 // routes topk_ids and rewrites these in route order): int32
                                 // tile_expert, tile_row_begin, tile_row_end [max m-tiles] and
                                 // int32 num_tiles [5]: the m-tile count, then the work-item
                                 // counters of the persistent gate_up and down kernels and their
                                 // done counts (zeroed by route(); each GEMM zeroes its own again
                                 // when it ends). When both GEMMs use the same m-tile height
                                 // (every configuration today) tiles[1][i] == tiles[0][i]: one list,
                                 // built once; compare the pointers, never treat them as two buffers

  DevicePtr tail_tiles[4] = {};  // split tail (large T, MXFP4): int32 tile_expert, tile_row_begin,
                                 // tile_row_end [E] and num_tiles [5] (the count and four counters
                                 // route() zeroes) of each expert's last 1..64 rows, run as
                                 // one-warpgroup tiles; tiles[0] then leaves them out
  DevicePtr h = 0;               // bf16 [T * top_k, I]; column order: h_fragment_order
  // true: H's columns are in the fragment k order of the MXFP4 warp-specialized
  // kernels (w4a16_mxfp4 at the buckets where they run, docs/kernels.md):
  // column c of a row is stored at h_column_position(c), a permutation inside
  // each block of 32 columns. false: column c at c (every other kernel and mode).
  bool h_fragment_order = false;
  DevicePtr xk = 0;              // bf16 [T, D]: X in the fragment k order, gate_up's input where
                                 // h_fragment_order (the layer's k_order kernel writes it in the
                                 // gate_up step). It shares Y's bytes: down overwrites it
  DevicePtr y = 0;               // y_dtype [y_splits, T * top_k, D]: the down projection's output,
                                 // router weight applied; with split-K its fp32 partials,
                                 // a row's Y being the sum over the splits. Until down ran,
                                 // where h_fragment_order, it holds xk
  DType y_dtype = DType::f32;    // the down key's out_dtype: bf16 when y_splits == 1 (always
                                 // in FP8 modes, which never split K); f32 with split-K and
                                 // when num_tokens == 0
  std::uint32_t y_splits = 1;    // partials the combine sums (1 = Y itself)
  std::size_t y_split_stride = 0;  // elements between partials (T * top_k * D)
  // FP8 modes only (0 otherwise): quantized X [T, D] and H [T * top_k, I] (e4m3
  // codes) and their scales (fp8_per_token: fp32 per row; mxfp8: E8M0 [rows, cols/32]).
  DevicePtr xq = 0, xs = 0, hq = 0, hs = 0;
};

class MoeLayer {
 public:
  // The layer's kernels follow runtime.gemm_tuning() (RuntimeOptions::gemm_tuning).
  // Checks the shape (hidden % 32 == 0, intermediate % 32 == 0 (% 16 for bf16 N), experts in
  // [1, 4096], top_k in [1, experts] ...) and throws InvalidArgument naming the field.
  MoeLayer(Runtime& runtime, const MoeLayerShape& shape, QuantMode quant, Target target = {});
  // With an explicit weight-scale granularity (fp8_per_token: per_expert or
  // per_channel). Throws InvalidArgument naming wscale when it does not fit quant.
  MoeLayer(Runtime& runtime, const MoeLayerShape& shape, QuantMode quant, WeightScale wscale, Target target = {});

  const MoeLayerShape& shape() const noexcept { return shape_; }
  QuantMode quant() const noexcept { return quant_; }
  WeightScale weight_scale() const noexcept { return wscale_; }
  Runtime& runtime() const noexcept { return runtime_; }  // its kernels' source and GEMM tuning

  // Bytes of workspace for up to max_tokens tokens (monotonic in max_tokens).
  std::size_t workspace_size(std::uint32_t max_tokens) const;
  // Where each intermediate lives inside args.workspace for T tokens.
  MoeWorkspaceView workspace_view(const MoeLayerArgs& args) const;

  // The whole layer: route, gate_up, down, combine; asynchronous on `stream`.
  // Throws InvalidArgument (null pointer, misaligned pointer or stride, workspace
  // too small: names the argument and value; both GEMMs' weights are checked
  // before the first launch), DriverError, SealedMiss (strict seal).
  void run(const MoeWeights& w, const MoeLayerArgs& args, CUstream stream) const;

  // The steps on their own (same preconditions as run(); each needs the previous).
  // Where MoeWorkspaceView::h_fragment_order, gate_up also writes X in that
  // order into Y's bytes (MoeWorkspaceView::xk): a gate_up after down
  // overwrites Y, so combine must come before the next gate_up.
  void route(const MoeLayerArgs& args, CUstream stream) const;
  void gate_up(const MoeWeights& w, const MoeLayerArgs& args, CUstream stream) const;
  void down(const MoeWeights& w, const MoeLayerArgs& args, CUstream stream) const;
  void combine(const MoeLayerArgs& args, CUstream stream) const;

 private:
  void check_args(const MoeLayerArgs& args) const;
  // The plan of the bucket of args.num_tokens (>= 1): keys, configurations and
  // launch order, built once per bucket and kept (MoeLayerPlans).
  const ops::MoeLayerPlan& plan_for(std::uint32_t num_tokens) const;
  MoeWorkspaceView workspace_view(const MoeLayerArgs& args, const ops::MoeLayerPlan* plan) const;
  void route(const MoeLayerArgs& args, const ops::MoeLayerPlan& plan, const MoeWorkspaceView& v,
             CUstream stream) const;
  void combine(const MoeLayerArgs& args, const ops::MoeLayerPlan& plan, const MoeWorkspaceView& v,
               CUstream stream) const;
  Runtime& runtime_;
  MoeLayerShape shape_;
  QuantMode quant_;
  Target target_;
  WeightScale wscale_ = WeightScale::none;
  std::shared_ptr<MoeLayerPlans> plans_;  // shared by copies: plans depend only on the fields above
};

}  // namespace moejit
