// Parameters and epilogue functions shared by the bf16 / MXFP4 grouped GEMM kernels
// (grouped_gemm_sm90.cuh and grouped_gemm_mxfp4_wgmma_sm90.cuh: routed rows as
// the MMA's M dimension; grouped_gemm_mxfp4_decode_sm90.cuh: MXFP4 weights as
// the A operand, "swap AB") and by the TMA warp-specialized kernel
// (grouped_gemm_tma_ws_sm90.cuh: bf16 and both FP8 modes). GroupedGemmParams
// itself is in kernel_params.cuh, which host and NVRTC both compile.

namespace moejit {

enum { kQuantBf16 = 0, kQuantMxfp4 = 1 };
enum { kActNone = 0, kActSiluGated = 1, kActSwigluOai = 2 };
enum { kBiasNone = 0, kBiasF32 = 1, kBiasBf16 = 2 };

// GroupedGemmParams (the launch parameters): kernel_params.cuh.

// Bytes per weight row in the shared scale table: the row's K/32 scales plus up
// to 3 bytes of alignment slack in front, rounded up to 4. The host computes the
// same (src/ops/grouped_gemm_config.cpp).
__host__ __device__ __forceinline__ int scale_row_pitch(int K) { return ((K / 32 + 3) + 3) & ~3; }

// Logical output column -> physical weight row. silu_gated weights hold gate
// in rows [0, N/2) and up in [N/2, N); the kernel interleaves them (gate at even,
// up at odd logical columns) so that both halves of one output meet in one thread.
template <int ACT>
__device__ __forceinline__ int physical_row(int n, int N) {
  if (ACT == kActSiluGated) return (n & 1) ? (N >> 1) + (n >> 1) : (n >> 1);
  return n;
}


// Bias of logical output column n (physical weight row physical_row(n)) of expert e.
template <int BIAS, int ACT>
__device__ __forceinline__ float bias_at(const void* bias, int expert, int n, int N) {
  const i64 i = (i64)expert * N + physical_row<ACT>(n, N);
  if (BIAS == kBiasF32) return ((const float*)bias)[i];
  if (BIAS == kBiasBf16) return bf16_bits_to_f32(((const u16*)bias)[i]);
  return 0.f;
}

// Gated activation of one output: SiLU-gated (gate * sigmoid(gate) * up) or
// gpt-oss SwiGLU (model card: alpha 1.702, limit 7.0, +1 on the linear half).
template <int ACT>
__device__ __forceinline__ float gated_act(float gate, float up, float alpha, float limit) {
  if (ACT == kActSiluGated) return gate * sigmoidf_(gate) * up;
  // Comparisons, not fminf/fmaxf: a NaN gate or linear value must stay NaN.
  const float gt = gate > limit ? limit : gate;
  const float lin = up > limit ? limit : (up < -limit ? -limit : up);
  return gt * sigmoidf_(alpha * gt) * (lin + 1.f);
}

// Epilogue of two adjacent logical columns n, n + 1 of sorted row r for the
// kernels whose accumulator rows are routed rows (activations as the A
// operand): bias (when add_bias), then the router weight gamma and the store;
// for gated activations n is the gate and n + 1 the up column of output n / 2.
// OUT_F32 writes split-K partial z; bf16 output (gate_up, and down when K is
// not split) has no partials and ignores z.
template <int ACT, int BIAS, bool OUT_F32>
__device__ __forceinline__ void store_column_pair(const GroupedGemmParams& p, int expert, int r, int n, float v0,
                                                  float v1, float gamma, bool add_bias, int z) {
  const int N = p.n;
  if (BIAS != kBiasNone && add_bias) {
    v0 += bias_at<BIAS, ACT>(p.bias, expert, n, N);
    v1 += bias_at<BIAS, ACT>(p.bias, expert, n + 1, N);
  }
  if (OUT_F32) {
    float* o = (float*)p.out + z * p.out_split_stride + (i64)r * p.out_row_stride + n;
    o[0] = v0 * gamma;
    o[1] = v1 * gamma;
  } else if (ACT == kActNone) {
    u16* o = (u16*)p.out + (i64)r * p.out_row_stride + n;
    *(u32*)o = pack_bf16x2(v0 * gamma, v1 * gamma);
  } else {
    const float h = gated_act<ACT>(v0, v1, p.act_alpha, p.act_limit);
    ((u16*)p.out)[(i64)r * p.out_row_stride + (n >> 1)] = f32_to_bf16_bits(h * gamma);
  }
}

}  // namespace moejit
