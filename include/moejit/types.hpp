#pragma once
// Small vocabulary types shared by the whole API. Every enum has to_string()
// and a parse_*() that accepts exactly the to_string() spelling.
#include <cstdint>
#include <string>
#include <string_view>

// Opaque CUDA Driver API handles, declared exactly as cuda.h declares them, so
// users need not include cuda.h to use moejit and may include it too.
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUfunc_st* CUfunction;
typedef struct CUmod_st* CUmodule;
typedef struct CUctx_st* CUcontext;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphExec_st* CUgraphExec;
typedef unsigned long long CUdeviceptr_v2;

namespace moejit {

using DevicePtr = CUdeviceptr_v2;  // a device address, as cuMemAlloc returns it

// Which kernel family a key selects.
enum class OpKind : std::uint8_t {
  gate_up,   // grouped GEMM, H[r] = act(X[t(r)] @ W1[e]^T + b1[e]); X gathered by token
  down,      // grouped GEMM, Y[r] = gamma[r] * (H[r] @ W2[e]^T + b2[e])
  wgrad,     // dW[e] = sum_r grad[r]^T x X[t(r)]
  route,     // topk_ids -> per-expert counts, offsets, expert-sorted routed rows
  combine,   // out[t] = sum over slots j of Y[row(t, j)], fixed order
  quantize,  // bf16/fp32 -> MXFP4 / MXFP8 / per-token FP8 quantizers on the GPU
  k_order,   // bf16 rows -> the same rows in the MXFP4 warp-specialized GEMM's fragment k order
};

// Number format of the weights (and, for the FP8 modes, of the activations).
enum class QuantMode : std::uint8_t {
  bf16,           // bf16 weights [E, N, K], bf16 activations
  w4a16_mxfp4,    // e2m1 weights packed 2/byte along K + E8M0 scale per 32 K; bf16 activations
  mxfp8,          // e4m3 weights and activations, E8M0 scale per 32 K on both
  fp8_per_token,  // e4m3 activations with fp32 scale per row; e4m3 weights, fp32 scale per expert or channel
};

// Element types of tensors at the API boundary.
enum class DType : std::uint8_t { none, f32, bf16, f16, e4m3, u8, i32 };

// Activation applied in the gate_up epilogue.
enum class Activation : std::uint8_t {
  none,        // H = X W1^T + b1 (N columns)
  silu_gated,  // gate = first N/2 columns, up = second N/2: H = silu(gate) * up (N/2 columns)
  swiglu_oai,  // gpt-oss: gate at even, linear at odd columns; g = min(g, limit),
               // l = clamp(l, -limit, limit), H = g * sigmoid(alpha g) * (l + 1) (N/2 columns)
};

// Compilation target, e.g. sm_90a (major 9, minor 0, arch-specific features on).
struct Target {
  std::uint16_t sm = 90;         // 10 * major + minor
  bool arch_specific = true;     // the 'a' suffix: wgmma, setmaxnreg
  friend bool operator==(const Target&, const Target&) = default;
};

std::string_view to_string(OpKind);
std::string_view to_string(QuantMode);
std::string_view to_string(DType);
std::string_view to_string(Activation);
std::string to_string(const Target&);  // "sm_90a"

// Parsers: exact to_string() spellings. Throw InvalidArgument naming the text and
// listing the accepted spellings.
OpKind parse_op_kind(std::string_view);
QuantMode parse_quant_mode(std::string_view);
DType parse_dtype(std::string_view);
Activation parse_activation(std::string_view);
Target parse_target(std::string_view);  // "sm_90a", "sm_90", "sm_100a"

// Size in bytes of one element (0 for DType::none).
std::size_t dtype_size(DType);

}  // namespace moejit
