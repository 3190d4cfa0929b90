#pragma once
// Weight gradient of one MoE grouped GEMM (training), on the GPU:
//
//   dW[e][n][k] = sum over routed rows r of expert e of grad[r][n] * X[src(r)][k]
//   db[e][n]    = sum over routed rows r of expert e of grad[r][n]      (optional)
//
// rows are the expert-sorted routed rows of MoeLayer::route (or any routing with
// the same metadata): rows of expert e are [expert_offsets[e], expert_offsets[e+1]),
// sorted_route[r] = t * top_k + j. For gate_up's weights pass X = the layer input
// [T, K] with gather = by_token (src(r) = token of r); for down's weights pass
// X = H [rows, K] with gather = by_row (src(r) = r).
// fp32 accumulation on bf16 tensor cores, the routed rows as the reduction
// dimension: from 64 routed rows per expert on average (token bucket x top_k /
// experts) a persistent warp-specialized wgmma kernel (kernels/moe_wgrad_sm90.cuh;
// grad tiles by TMA, X rows gathered by cp.async), below it an mma.sync kernel
// (kernels/moe_wgrad_mma_sm90.cuh). The kernel follows from the key alone, so
// one token bucket always runs the same summation order.
// Deterministic: each output element is a fixed-order sum over its expert's
// rows (no floating-point atomics), bit-reproducible run to run and independent
// of other experts. Experts with no rows get dW[e] = 0 (and db[e] = 0) written.
// All offsets 64-bit. Asynchronous on the caller's stream; allocates nothing.
#include <cstdint>

#include "moejit/key.hpp"
#include "moejit/runtime.hpp"
#include "moejit/types.hpp"

namespace moejit {

enum class WgradGather : std::uint8_t { by_token, by_row };

struct MoeWgradShape {
  std::uint32_t experts = 0;  // E (local)
  std::uint32_t top_k = 0;    // routes per token (for by_token gather)
  std::uint32_t n = 0;        // output channels N (gate_up: 2I or I; down: D); multiple of 8
  std::uint32_t k = 0;        // input features K (gate_up: D; down: I); multiple of 8
  DType out_dtype = DType::f32;  // dW dtype: f32 or bf16 (db is always fp32)
};

struct MoeWgradArgs {
  std::uint32_t num_tokens = 0;      // T (bucketing for the key; rows <= T * top_k)
  DevicePtr grad = 0;                // bf16 [rows, N] (rows <= T * top_k), 16-byte aligned
  std::int64_t grad_row_stride = 0;  // elements, multiple of 8; 0 = N
  DevicePtr x = 0;                   // bf16 [T, K] (by_token) or [rows, K] (by_row), 16-byte aligned
  std::int64_t x_row_stride = 0;     // elements, multiple of 8; 0 = K
  WgradGather gather = WgradGather::by_token;
  DevicePtr expert_offsets = 0;      // int32 [E + 1]
  DevicePtr sorted_route = 0;        // int32 [rows] (by_token only; may be 0 for by_row)
  DevicePtr dw = 0;                  // [E, N, K] out_dtype, contiguous, 16-byte aligned
  DevicePtr db = 0;                  // fp32 [E, N] or 0 (not computed)
};

// The specialization key: op=wgrad quant=bf16 token_bucket=round_up_tokens(T)
// n k experts top_k out_dtype. Throws InvalidArgument naming the field.
SpecKey moe_wgrad_key(const MoeWgradShape& shape, std::uint32_t token_bucket, const Target& target = Target{});

class MoeWgrad {
 public:
  // Throws InvalidArgument naming the field (n or k not a positive multiple of 8,
  // experts not in [1, 65535], top_k == 0, out_dtype not f32/bf16).
  MoeWgrad(Runtime& runtime, const MoeWgradShape& shape, Target target = {});
  const MoeWgradShape& shape() const noexcept { return shape_; }
  // Enqueues the kernel. num_tokens == 0 still writes dW = 0 (and db = 0): every
  // expert has no rows. Throws InvalidArgument (null / misaligned pointer, bad
  // stride: names the argument), DriverError (also when the driver refuses the
  // TMA map of grad), SealedMiss.
  void run(const MoeWgradArgs& args, CUstream stream) const;

 private:
  Runtime& runtime_;
  MoeWgradShape shape_;
  Target target_;
};

}  // namespace moejit
