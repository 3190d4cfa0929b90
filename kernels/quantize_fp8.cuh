// Activation quantizers on the GPU, bf16 rows -> e4m3 (the FP8 MoE layer's X and
// H): per-token FP8 (one fp32 scale per row) and MXFP8 (one E8M0 scale per 32).
// Row-independent by construction (a row's codes and scale depend on that row
// alone), so padding a batch never changes a real row's bits. NVRTC-clean; the
// translation unit puts kernels/quantize_mxfp4.cuh first and reuses its exact
// integer encoders (mxq::mx_scale_byte, mxq::encode_scaled), which the CPU tests
// check against the CPU quantizers bit for bit.
//
// Rules (include/moejit/quant.hpp):
//   per-token: amax over the row; NaN/Inf anywhere -> scale NaN, codes 0;
//     amax == 0 -> scale 1, codes = signed zeros; else scale = max(fp32(amax / 448),
//     2^-149) and code_i = e4m3_rne_sat(fp32(x_i / scale)) (IEEE divisions,
//     __fdiv_rn, never the fast approximation).
//   MXFP8: per 32-block, scale byte = mx_scale_byte<E4m3>(amax) (0xFF for
//     NaN/Inf, codes 0), code_i = encode_scaled<E4m3>(x_i, s).
//
// ---- Tunable parameters -------------------------------------------------------
//   kQuantFp8Threads : CTA size of both kernels (the host reads it through the
//                      launch contract). Per-token: one CTA per row; MXFP8: one
//                      thread per 8 elements (4 threads per 32-block).
// Requirements: cols % 8 == 0 (per-token) / % 32 == 0 (MXFP8); input rows
// 16-byte aligned (in and in_row_stride % 8 == 0); output code rows 8-byte
// aligned (out_row_stride % 8 == 0).

namespace moejit {
namespace f8q {

typedef mxq::uint8_t u8;
typedef mxq::uint16_t u16;
typedef mxq::uint32_t u32;
typedef mxq::uint64_t u64;
typedef long long i64;

constexpr int kQuantFp8Threads = 256;

// Eight bf16 (one 16-byte load) as fp32 bit patterns.
__device__ __forceinline__ u32 umax(u32 a, u32 b) { return a > b ? a : b; }

__device__ __forceinline__ void load8(const u16* p, u32 (&bits)[8]) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    bits[2 * i] = w[i] << 16;
    bits[2 * i + 1] = w[i] & 0xFFFF0000u;
  }
}

__device__ __forceinline__ void store8(u8* p, const u32 (&code)[8]) {
  const u32 lo = code[0] | (code[1] << 8) | (code[2] << 16) | (code[3] << 24);
  const u32 hi = code[4] | (code[5] << 8) | (code[6] << 16) | (code[7] << 24);
  uint2 v;
  v.x = lo;
  v.y = hi;
  *reinterpret_cast<uint2*>(p) = v;
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

// Per-token: one CTA per row (grid-stride over rows), each thread a few 8-element
// chunks. Why a whole CTA: a row is a chain of dependent steps (load, amax,
// one IEEE division per element, the integer encoder), and at decode there
// are only T rows (X) or T * top_k (H); a single warp per row would run that
// chain one instruction at a time on one SM (ncu: 19 us for one gpt-oss row of
// 2880), a CTA runs it THREADS / 32 times as wide. The amax is a maximum, so
// the split does not change a bit.
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
quantize_fp8_per_token_kernel(const u16* in, i64 in_row_stride, u64 rows, int cols, u8* out, i64 out_row_stride,
                              float* scales) {
  quant_pdl_enter();
  constexpr int kWarps = THREADS / 32;
  __shared__ u32 warp_amax[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int chunks = cols >> 3;
  // The bound depends on blockIdx only: every thread of the CTA runs the same
  // rows, so the barriers below are uniform.
  for (u64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const u16* row = in + (i64)r * in_row_stride;
    u32 amax = 0;
    for (int c = threadIdx.x; c < chunks; c += THREADS) {
      u32 b[8];
      load8(row + c * 8, b);
#pragma unroll
      for (int i = 0; i < 8; ++i) amax = umax(amax, b[i] & 0x7FFFFFFFu);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = umax(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
    if (lane == 0) warp_amax[warp] = amax;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kWarps; ++w) amax = umax(amax, warp_amax[w]);
    __syncthreads();  // warp_amax is rewritten by the next row
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
    u8* orow = out + (i64)r * out_row_stride;
    for (int c = threadIdx.x; c < chunks; c += THREADS) {
      u32 b[8], code[8];
      load8(row + c * 8, b);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        code[i] = nonfinite ? 0u
                            : mxq::encode_scaled<mxq::E4m3>(__float_as_uint(__fdiv_rn(__uint_as_float(b[i]), scale)), 0);
      store8(orow + c * 8, code);
    }
    if (threadIdx.x == 0) scales[r] = scale;
  }
}

template <int THREADS>
__global__ void __launch_bounds__(THREADS)
quantize_mxfp8_kernel(const u16* in, i64 in_row_stride, u64 rows, int cols, u8* out, i64 out_row_stride, u8* scales,
                      i64 scale_row_stride) {
  quant_pdl_enter();
  const int lane = threadIdx.x & 31;
  const u64 chunks_per_row = (u64)(cols >> 3);
  const u64 total = rows * chunks_per_row;  // a multiple of 4: blocks never straddle lanes groups
  const u64 step = (u64)gridDim.x * THREADS;
  // The bound depends on the warp's base only: all lanes run the same
  // iterations, so full-mask shuffles are safe.
  for (u64 base = (u64)blockIdx.x * THREADS + (threadIdx.x & ~31u); base < total; base += step) {
    const u64 i = base + lane;
    const bool ok = i < total;
    u64 r = 0, c = 0;
    u32 b[8];
    u32 amax = 0;
    if (ok) {
      r = i / chunks_per_row;
      c = i - r * chunks_per_row;
      load8(in + (i64)r * in_row_stride + c * 8, b);
#pragma unroll
      for (int k = 0; k < 8; ++k) amax = umax(amax, b[k] & 0x7FFFFFFFu);
    }
    amax = umax(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));
    amax = umax(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 2));
    if (ok) {
      const u32 sbyte = mxq::mx_scale_byte<mxq::E4m3>(amax);
      u32 code[8];
#pragma unroll
      for (int k = 0; k < 8; ++k)
        code[k] = sbyte == 0xFFu ? 0u : mxq::encode_scaled<mxq::E4m3>(b[k], (int)sbyte - 127);
      store8(out + (i64)r * out_row_stride + c * 8, code);
      if ((c & 3) == 0) scales[(i64)r * scale_row_stride + (i64)(c >> 2)] = (u8)sbyte;
    }
  }
}

}  // namespace f8q
}  // namespace moejit
