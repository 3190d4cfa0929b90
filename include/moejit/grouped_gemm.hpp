#pragma once
// Grouped GEMM over rows already sorted by expert, on the GPU: for the rows r of
// group (expert) e, [expert_offsets[e], expert_offsets[e + 1]),
//
//   Y[r] = A[r] @ W[e]^T + b[e]           A [M, K], W [E, N, K], b [E, N], Y [M, N] bf16
//
// in fp32 accumulation, Y rounded once to bf16. The group-sizes interface of
// torch._grouped_mm(offs=...) (with offs = expert_offsets[1..E] and
// expert_offsets[0] = 0) and of the contiguous layouts of DeepGEMM and AITER:
// for training frameworks and engines that permute rows themselves instead of
// calling the whole MoeLayer. The kernels are the MoE layer's down-projection
// kernels (no router weight, top_k = 1), chosen per row bucket
// round_up_tokens(M) as the layer chooses them.
//
// Formats (W, and the dtype of A):
//   bf16:          A bf16, W bf16 [E, N, K]
//   w4a16_mxfp4:   A bf16, W e2m1 packed [E, N, K/2] + E8M0 scales [E, N, K/32]
//   mxfp8:         A e4m3 [M, K] + E8M0 scales [M, K/32] (quantize_fp8_gpu);
//                  W e4m3 [E, N, K] + E8M0 scales [E, N, K/32]
//   fp8_per_token: A e4m3 [M, K] + fp32 scales [M] (one per row);
//                  W e4m3 [E, N, K] + fp32 scales [E] (per_expert) or [E, N] (per_channel)
// (docs/formats.md has the encodings; they are the MoeWeights::w2 layouts of
// moejit/moe_layer.hpp.) b: the shape's BiasKind (bf16 or f32) per expert and
// output column, or none.
//
// Rows outside [expert_offsets[0], expert_offsets[E]) belong to no group: their
// Y rows are unspecified after the call. Preconditions on the offsets (device
// memory, not read by the host): non-decreasing, in [0, M]. The device clamps
// each one to [0, M]; offsets that decrease are undefined behaviour (overlapping
// groups can overrun the workspace's tile lists), as for torch._grouped_mm.
// Deterministic: every row's bits depend only on its own A row, its
// group's weights and the row bucket's kernel (padding invariance as
// moejit/moe_layer.hpp describes it). Asynchronous on the caller's stream;
// nothing allocates, synchronizes or compiles on the launch path once the
// row bucket's plan (built on its first use, kept) and kernels exist
// (prewarm() builds both for every bucket up to max_rows).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "moejit/key.hpp"
#include "moejit/runtime.hpp"
#include "moejit/types.hpp"

namespace moejit {

class GroupedGemmPlans;  // the per-row-bucket plans of one GroupedGemm (library-internal)

struct GroupedGemmShape {
  std::uint32_t n = 0;        // output columns N: a positive multiple of 32
  std::uint32_t k = 0;        // reduction K: a positive multiple of 32
  std::uint32_t experts = 0;  // groups E: 1..4096
  BiasKind bias = BiasKind::none;
};

struct GroupedGemmArgs {
  std::uint32_t num_rows = 0;       // M (0: nothing is launched; pointers may be null)
  DevicePtr a = 0;                  // [M, K] bf16, or e4m3 codes in FP8 modes; 16-byte aligned
  std::int64_t a_row_stride = 0;    // elements (bf16) or bytes (e4m3); 0 = K. bf16: multiple of 8; e4m3: of 16
  DevicePtr a_scales = 0;           // FP8 modes only: fp32 [M] (fp8_per_token, 4-byte aligned) or
                                    // E8M0 [M, K/32] (mxfp8, contiguous rows)
  DevicePtr expert_offsets = 0;     // int32 [E + 1], device memory, 4-byte aligned
  DevicePtr w = 0;                  // the mode's weights (above), 16-byte aligned
  DevicePtr w_scales = 0;           // w4a16_mxfp4 / mxfp8: E8M0 (4-byte aligned for w4a16_mxfp4);
                                    // fp8_per_token: fp32, 4-byte aligned; bf16: unused
  DevicePtr bias = 0;               // [E, N] of the shape's BiasKind, or 0 when it is none
  DevicePtr out = 0;                // Y bf16 [M, N], 16-byte aligned
  std::int64_t out_row_stride = 0;  // elements; 0 = N; a multiple of 8 and >= N
  DevicePtr workspace = 0;          // workspace_size_for(M) bytes (workspace_size(M) is enough), 256-byte aligned
  std::size_t workspace_bytes = 0;
};

class GroupedGemm {
 public:
  // Throws InvalidArgument naming the field (n, k not a positive multiple of
  // 32, experts outside [1, 4096], a weight scale that does not fit quant).
  GroupedGemm(Runtime& runtime, const GroupedGemmShape& shape, QuantMode quant, Target target = {});
  GroupedGemm(Runtime& runtime, const GroupedGemmShape& shape, QuantMode quant, WeightScale wscale,
              Target target = {});

  const GroupedGemmShape& shape() const noexcept { return shape_; }
  QuantMode quant() const noexcept { return quant_; }
  WeightScale weight_scale() const noexcept { return wscale_; }

  // Bytes of workspace every call with num_rows <= max_rows fits in (routing
  // metadata, and room for fp32 split-K partials in bf16 / w4a16_mxfp4, whose
  // small row buckets split K). Monotonic in max_rows: size a buffer once.
  std::size_t workspace_size(std::uint32_t max_rows) const;
  // Bytes a call with exactly num_rows rows needs (<= workspace_size(num_rows)):
  // the metadata, plus partials only where that row bucket's kernel splits K.
  // For callers that allocate per call.
  std::size_t workspace_size_for(std::uint32_t num_rows) const;

  // Every key a call with round_up_tokens(M) == row_bucket requests, in launch
  // order: route (the m-tile lists), the GEMM (op=down router_weight=0
  // top_k=1), and the combine that sums split-K partials when the kernel
  // splits K.
  std::vector<SpecKey> keys(std::uint32_t row_bucket) const;
  // Compiles (or loads from the cache) the kernels of every bucket up to
  // round_up_tokens(max_rows), so that calls with M <= max_rows compile
  // nothing (then Runtime::seal() if wanted). Returns the number of distinct
  // keys. Throws what Runtime::compiled throws.
  std::size_t prewarm(std::uint32_t max_rows) const;

  // Enqueues the routing-metadata kernel and the GEMM (and the split-K sum).
  // Throws InvalidArgument naming the argument (null or misaligned pointer,
  // bad stride, too small a workspace, M > 2^31 - 1), DriverError, SealedMiss;
  // bad arguments launch nothing.
  void run(const GroupedGemmArgs& args, CUstream stream) const;

 private:
  void check_args(const GroupedGemmArgs& a) const;
  Runtime& runtime_;
  GroupedGemmShape shape_;
  QuantMode quant_;
  WeightScale wscale_;
  Target target_;
  std::shared_ptr<GroupedGemmPlans> plans_;  // built once per row bucket; shared by copies
};

}  // namespace moejit
