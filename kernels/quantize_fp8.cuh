// Activation quantizers on the GPU, bf16 rows -> e4m3 (the FP8 MoE layer's X and
// H): per-token FP8 (one fp32 scale per row) and MXFP8 (one E8M0 scale per 32).
// Row-independent by construction (a row's codes and scale depend on that row
// alone), so padding a batch never changes a real row's bits. NVRTC-clean; the
// translation unit puts kernels/quantize_mxfp4.cuh (its exact integer
// mxq::mx_scale_byte) and kernels/quantize_fp8_geometry.cuh first.
//
// Rules (include/moejit/quant.hpp):
//   per-token: amax over the row; NaN/Inf anywhere -> scale NaN, codes 0;
//     amax == 0 -> scale 1, codes = signed zeros; else scale = max(fp32(amax / 448),
//     2^-149) and code_i = e4m3_rne_sat(fp32(x_i / scale)) (IEEE divisions,
//     __fdiv_rn, never the fast approximation).
//   MXFP8: per 32-block, scale byte = mx_scale_byte<E4m3>(amax) (0xFF for
//     NaN/Inf, codes 0), code_i = e4m3_rne_sat(x_i / 2^(s - 127)).
// e4m3_rne_sat is the hardware conversion cvt.rn.satfinite.e4m3x2.f32, two
// values per instruction: round to nearest even, saturating at +-448, signed
// zeros kept, subnormal inputs and results exact (no -ftz): the same code as
// mxq::encode_scaled<E4m3>(bits, 0), the CPU quantizers' encoder, for every
// finite fp32 (the GPU tests compare the quantizers with the CPU bit for bit).
// MXFP8's x_i / 2^(s - 127) is the product x_i * 2^(127 - s), exact: it
// cannot overflow (s is the smallest with amax <= 448 * 2^(s - 127)), and a
// product below 2^-126, where fp32 would round, encodes to a signed zero
// either way.
//
// Geometry (quantize_fp8_geometry.cuh): quant_fp8_row_threads(COLS) threads
// share a row, each thread a few 16-byte chunks of it (chunk c of the row at
// thread c % G), so a warp reads and writes contiguous bytes; a CTA of
// kQuantFp8Threads takes several rows at once. COLS is a compile-time constant
// (the key's n), so no index needs a division.
// Requirements: COLS % 8 == 0 (per-token) / % 32 == 0 (MXFP8); input rows
// 16-byte aligned (in and in_row_stride % 8 == 0); output code rows 8-byte
// aligned (out_row_stride % 8 == 0).

namespace moejit {
namespace f8q {

typedef mxq::uint8_t u8;
typedef mxq::uint16_t u16;
typedef mxq::uint32_t u32;
typedef mxq::uint64_t u64;
typedef long long i64;

__device__ __forceinline__ u32 umax(u32 a, u32 b) { return a > b ? a : b; }

// Eight bf16 (one 16-byte chunk) as fp32 bit patterns.
__device__ __forceinline__ void unpack8(const uint4& v, u32 (&bits)[8]) {
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    bits[2 * i] = w[i] << 16;
    bits[2 * i + 1] = w[i] & 0xFFFF0000u;
  }
}

__device__ __forceinline__ u32 amax8(const uint4& v) {
  u32 b[8], a = 0;
  unpack8(v, b);
#pragma unroll
  for (int i = 0; i < 8; ++i) a = umax(a, b[i] & 0x7FFFFFFFu);
  return a;
}

// e4m3 codes of lo (low byte) and hi: cvt.rn.satfinite (the header's rule).
__device__ __forceinline__ u32 e4m3x2(float lo, float hi) {
  unsigned short d;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
  return d;
}

// The eight codes of q[0..8) as two words, element 0 in the lowest byte.
__device__ __forceinline__ uint2 pack_codes(const float (&q)[8]) {
  uint2 v;
  v.x = e4m3x2(q[0], q[1]) | (e4m3x2(q[2], q[3]) << 16);
  v.y = e4m3x2(q[4], q[5]) | (e4m3x2(q[6], q[7]) << 16);
  return v;
}

// Launched with programmatic stream serialization (src/quant/quantize_fp8_gpu.cpp):
// wait for the launch before this one (which may write the input) before the
// first read or write, then let the next launch (the FP8 GEMM, which waits
// for this one in turn) start its prologue. The order is part of the
// contract: a decode GEMM with tiles_ready reads topk_ids, the tile lists and
// the weights before its own wait, and gate_up's CTA (0, 0) writes the
// routing outputs there, which is safe only because this kernel let it start
// after every earlier launch had finished.
__device__ __forceinline__ void quant_pdl_enter() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// The chunks of one row a thread owns: chunk gi + v * G for v < V, held in
// registers from the load to the encode.
template <int THREADS, int COLS>
struct RowSplit {
  static constexpr int kChunks = COLS / 8;
  static constexpr int kG = quant_fp8_row_threads(COLS);
  static constexpr int kRowsPerCta = THREADS / kG;
  static constexpr int kV = (kChunks + kG - 1) / kG;
  static_assert(COLS % 8 == 0 && kG % 32 == 0 && THREADS % kG == 0, "quantizer geometry");
};

// Per-token: G threads per row (grid-stride over groups of rows). The amax is
// a maximum, so how the row is split does not change a bit.
template <int THREADS, int COLS>
__global__ void __launch_bounds__(THREADS)
quantize_fp8_per_token_kernel(const u16* in, i64 in_row_stride, u64 rows, u8* out, i64 out_row_stride,
                              float* scales) {
  quant_pdl_enter();
  typedef RowSplit<THREADS, COLS> S;
  constexpr int kWarpsPerRow = S::kG / 32;
  __shared__ u32 warp_amax[THREADS / 32];
  const int gi = threadIdx.x % S::kG, slot = threadIdx.x / S::kG, warp = threadIdx.x >> 5;
  // The bound depends on blockIdx only: every thread of the CTA runs the same
  // iterations, so the barriers and full-warp shuffles below are uniform.
  for (u64 r0 = (u64)blockIdx.x * S::kRowsPerCta; r0 < rows; r0 += (u64)gridDim.x * S::kRowsPerCta) {
    const u64 r = r0 + slot;
    const bool live = r < rows;
    const u16* row = in + (i64)r * in_row_stride;
    uint4 v[S::kV];
    u32 amax = 0;
#pragma unroll
    for (int i = 0; i < S::kV; ++i) {
      const int c = gi + i * S::kG;
      v[i] = make_uint4(0u, 0u, 0u, 0u);
      if (live && c < S::kChunks) v[i] = *reinterpret_cast<const uint4*>(row + c * 8);
      amax = umax(amax, amax8(v[i]));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = umax(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
    if (kWarpsPerRow > 1) {
      if ((threadIdx.x & 31) == 0) warp_amax[warp] = amax;
      __syncthreads();
#pragma unroll
      for (int w = 0; w < kWarpsPerRow; ++w) amax = umax(amax, warp_amax[slot * kWarpsPerRow + w]);
      __syncthreads();  // warp_amax is rewritten by the next rows
    }
    const bool nonfinite = amax >= 0x7F800000u;
    float scale;
    if (nonfinite) {
      scale = __uint_as_float(0x7FC00000u);
    } else if (amax == 0u) {
      scale = 1.0f;
    } else {
      scale = __fdiv_rn(__uint_as_float(amax), 448.0f);
      if (scale == 0.0f) scale = __uint_as_float(1u);  // 2^-149
    }
    if (!live) continue;
    u8* orow = out + (i64)r * out_row_stride;
#pragma unroll
    for (int i = 0; i < S::kV; ++i) {
      const int c = gi + i * S::kG;
      if (c >= S::kChunks) break;
      u32 b[8];
      unpack8(v[i], b);
      float q[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) q[k] = nonfinite ? 0.0f : __fdiv_rn(__uint_as_float(b[k]), scale);
      *reinterpret_cast<uint2*>(orow + c * 8) = pack_codes(q);
    }
    if (gi == 0) scales[r] = scale;
  }
}

// MXFP8: G threads per row as above; a 32-block is four 16-byte chunks held by
// four consecutive lanes (G is a multiple of 32 and COLS of 32, so a block
// never straddles a warp or a row's end).
template <int THREADS, int COLS>
__global__ void __launch_bounds__(THREADS)
quantize_mxfp8_kernel(const u16* in, i64 in_row_stride, u64 rows, u8* out, i64 out_row_stride, u8* scales,
                      i64 scale_row_stride) {
  quant_pdl_enter();
  typedef RowSplit<THREADS, COLS> S;
  static_assert(COLS % 32 == 0, "MXFP8 rows are whole 32-blocks");
  const int gi = threadIdx.x % S::kG, slot = threadIdx.x / S::kG;
  // The bound depends on blockIdx only, and every lane runs every chunk step
  // (inactive ones with zeros), so the full-warp shuffles are uniform.
  for (u64 r0 = (u64)blockIdx.x * S::kRowsPerCta; r0 < rows; r0 += (u64)gridDim.x * S::kRowsPerCta) {
    const u64 r = r0 + slot;
    const bool live = r < rows;
    const u16* row = in + (i64)r * in_row_stride;
    uint4 v[S::kV];
#pragma unroll
    for (int i = 0; i < S::kV; ++i) {
      const int c = gi + i * S::kG;
      v[i] = make_uint4(0u, 0u, 0u, 0u);
      if (live && c < S::kChunks) v[i] = *reinterpret_cast<const uint4*>(row + c * 8);
    }
#pragma unroll
    for (int i = 0; i < S::kV; ++i) {
      const int c = gi + i * S::kG;
      u32 amax = amax8(v[i]);
      amax = umax(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));
      amax = umax(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 2));
      if (!live || c >= S::kChunks) continue;
      const u32 sbyte = mxq::mx_scale_byte<mxq::E4m3>(amax);
      // 2^(127 - sbyte), sbyte in [0, 254]: 2^-127 is the subnormal 0x00400000.
      const int e = 127 - (int)sbyte;
      const float f = __uint_as_float(e >= -126 ? (u32)(e + 127) << 23 : 0x00400000u);
      u32 b[8];
      unpack8(v[i], b);
      float q[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) q[k] = sbyte == 0xFFu ? 0.0f : __fmul_rn(__uint_as_float(b[k]), f);
      *reinterpret_cast<uint2*>(out + (i64)r * out_row_stride + c * 8) = pack_codes(q);
      if ((c & 3) == 0) scales[(i64)r * scale_row_stride + (c >> 2)] = (u8)sbyte;
    }
  }
}

}  // namespace f8q
}  // namespace moejit
