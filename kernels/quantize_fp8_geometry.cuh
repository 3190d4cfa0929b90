// How the FP8 activation quantizers (quantize_fp8.cuh) lay threads over rows:
// one definition, read by the kernels (NVRTC) and by the host that sizes their
// grid (src/quant/quantize_fp8_gpu.cpp). Plain C++ only, no includes.
#ifndef MOEJIT_KERNELS_QUANTIZE_FP8_GEOMETRY_CUH
#define MOEJIT_KERNELS_QUANTIZE_FP8_GEOMETRY_CUH

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define MOEJIT_QUANT_GEOMETRY_FN __host__ __device__
#else
#define MOEJIT_QUANT_GEOMETRY_FN
#endif

namespace moejit {
namespace f8q {

// CTA size of both quantizers.
constexpr int kQuantFp8Threads = 256;

// Threads that share one row of `cols` columns (a multiple of 8): a power of
// two from 32 to kQuantFp8Threads, about two 16-byte chunks (8 bf16) per
// thread. Why two: the row's values stay in registers between its amax and its
// encode, and a short row (Qwen3's H, 768 columns) does not leave most of a
// CTA idle; a CTA takes kQuantFp8Threads / quant_fp8_row_threads(cols) rows.
MOEJIT_QUANT_GEOMETRY_FN constexpr int quant_fp8_row_threads(int cols) {
  const int half_chunks = (cols / 8 + 1) / 2;
  int g = 32;
  while (g < half_chunks && g < kQuantFp8Threads) g *= 2;
  return g;
}

MOEJIT_QUANT_GEOMETRY_FN constexpr int quant_fp8_rows_per_cta(int cols) { return kQuantFp8Threads / quant_fp8_row_threads(cols); }

}  // namespace f8q
}  // namespace moejit

#endif  // MOEJIT_KERNELS_QUANTIZE_FP8_GEOMETRY_CUH
