// MoE combine: out[t] = sum over slots j = 0..top_k-1 (and split-K partials z) of
// Y[z][route_row[t * top_k + j]], summed in fp32 in (j, z) order (no atomics: bit-reproducible), written as bf16.
// Router weights were already applied by the down projection's epilogue.
//
// ---- Tunable parameters (CombineKernel, kernels/kernel_configs.cuh: the fields
// in lower case; chosen in src/ops/launch_contracts.hpp) ----
//   THREADS   : CTA size. The grid is flat over units u = t * (hidden / COLS) + chunk,
//               one (token, COLS-column chunk) per thread, so a CTA may span two
//               tokens and only the grid's last CTA has idle threads. Why flat:
//               one CTA per (token, THREADS * COLS columns) left 20 % of the
//               third CTA idle at hidden 2880, and a CTA of hidden / COLS threads
//               (360) would make THREADS depend on the shape.
//   COLS      : columns per thread. bf16 Y: 8 (one 16-byte load per Y row; needs
//               hidden % 8 == 0), or 4 (8-byte loads) where hidden % 8 != 0.
//               f32 Y: 4 (one 16-byte load). Why not 8 (2 x 16 B) for f32: a
//               thread then holds 8 registers per row in flight, so a window of
//               IN_FLIGHT rows costs 64 registers and about half the resident
//               threads, for the same bytes in flight per SM; and at small T
//               (where f32 Y comes from split-K) it halves the threads that
//               issue loads.
//   IN_FLIGHT : Y rows a thread loads before it sums any of them. Its top_k
//               route_row entries are read first, then every Y row of the window
//               is loaded, then they are added in (j, z) order; top_k * splits
//               above IN_FLIGHT runs in windows of IN_FLIGHT, same order. Why:
//               one dependent route -> Y chain per slot left ~8 B in flight per
//               thread (2.6 TB/s at T = 4096); a window keeps top_k * 16 B.
//               The codegen uses min(top_k, 8) (ops::combine_in_flight): at
//               top_k 4 a fixed 8 held registers for 4 idle slots (74 vs 48).
//   Y_BF16    : Y is bf16 (the down projection without split-K; splits == 1, and
//               the kernel takes it as 1): widened exactly to fp32 before the
//               sum. false: fp32 Y, `splits` partials. Why bf16 Y: at large T the
//               combine is bound by reading Y (R * hidden values), so half the
//               bytes is close to half the time, and the down projection stores
//               half as much.
// Requirements: hidden % COLS == 0; Y, y_row_stride and y_split_stride aligned to
// COLS elements (16 bytes with COLS = 8 bf16 or 4 f32; 8 bytes with 4 bf16);
// out 4-byte aligned and out_row_stride even (4-byte stores; one 2 * COLS-byte
// store where the address allows it); the grid's threads <= 2^32 (32-bit unit
// index). The host's choice of COLS and grid: ops::combine_cols / combine_ctas
// (src/ops/launch_contracts.hpp), checked by MoeLayer::combine.

namespace moejit {

// CombineParams (the launch parameters): kernel_params.cuh.

// COLS consecutive Y values as loaded (raw bits): bf16 pairs or fp32 words.
template <int COLS, bool Y_BF16>
struct CombineYVec {
  static constexpr int kWords = Y_BF16 ? COLS / 2 : COLS;
  static_assert(kWords == 2 || kWords == 4, "one 8- or 16-byte load per Y row");
  u32 w[kWords];
};

template <int COLS, bool Y_BF16>
__device__ __forceinline__ void load_y(CombineYVec<COLS, Y_BF16>& v, const void* y, i64 at) {
  const void* src = Y_BF16 ? (const void*)((const u16*)y + at) : (const void*)((const float*)y + at);
  if constexpr (CombineYVec<COLS, Y_BF16>::kWords == 4) {
    const uint4 q = *(const uint4*)src;
    v.w[0] = q.x, v.w[1] = q.y, v.w[2] = q.z, v.w[3] = q.w;
  } else {
    const uint2 q = *(const uint2*)src;
    v.w[0] = q.x, v.w[1] = q.y;
  }
}

// s[i] += Y value i, as fp32. Exact widening of bf16: each becomes the high half
// of an fp32 (the lower address is the low half of each 32-bit word).
template <int COLS, bool Y_BF16>
__device__ __forceinline__ void add_y(float (&s)[COLS], const CombineYVec<COLS, Y_BF16>& v) {
#pragma unroll
  for (int i = 0; i < COLS; ++i) {
    const u32 bits = Y_BF16 ? ((i & 1) ? v.w[i / 2] & 0xffff0000u : v.w[i / 2] << 16) : v.w[i];
    s[i] += __uint_as_float(bits);
  }
}

template <CombineKernel C>
__global__ void __launch_bounds__(C.threads) moe_combine_kernel(const CombineParams p) {
  constexpr int THREADS = C.threads, COLS = C.cols, IN_FLIGHT = C.in_flight;
  constexpr bool Y_BF16 = C.y_bf16;
  static_assert(COLS == 4 || COLS == 8, "COLS: 4 or 8 columns per thread");
  static_assert(IN_FLIGHT >= 1, "IN_FLIGHT: at least one Y row per window");
  pdl_wait();  // Y comes from the down projection
  pdl_launch_dependents();
  const u32 chunks = (u32)(p.hidden / COLS);
  const u32 u = blockIdx.x * (u32)THREADS + threadIdx.x;
  const u32 t = u / chunks;
  if (t >= (u32)p.num_tokens) return;
  const int c = (int)(u - t * chunks) * COLS;
  const int* rr = p.route_row + (i64)t * p.top_k;
  const int splits = Y_BF16 ? 1 : p.splits;
  const int items = p.top_k * splits;  // (j, z) pairs, j-major

  float s[COLS];
#pragma unroll
  for (int i = 0; i < COLS; ++i) s[i] = 0.f;  // a token whose routes are all dropped writes +0
  int j = 0, z = 0;  // (slot, partial) of the window's first item
  for (int q0 = 0; q0 < items; q0 += IN_FLIGHT) {
    int r[IN_FLIGHT], zi[IN_FLIGHT];
#pragma unroll
    for (int i = 0; i < IN_FLIGHT; ++i) {
      zi[i] = z;
      r[i] = q0 + i < items ? rr[j] : -1;
      if (++z == splits) z = 0, ++j;
    }
    CombineYVec<COLS, Y_BF16> v[IN_FLIGHT];
#pragma unroll
    for (int i = 0; i < IN_FLIGHT; ++i)
      if (r[i] >= 0) load_y(v[i], p.y, zi[i] * p.y_split_stride + (i64)r[i] * p.y_row_stride + c);
    // Dropped slots add nothing, as before (a sum from +0 never becomes -0, so
    // adding +0 instead would not change the bits either).
#pragma unroll
    for (int i = 0; i < IN_FLIGHT; ++i)
      if (r[i] >= 0) add_y(s, v[i]);
  }

  u16* o = p.out + (i64)t * p.out_row_stride + c;
  u32 w[COLS / 2];
#pragma unroll
  for (int i = 0; i < COLS / 2; ++i) w[i] = pack_bf16x2(s[2 * i], s[2 * i + 1]);
  // Why the check: out and its row stride need only be even; where the address
  // is 2 * COLS-aligned (the layer's default out), one wide store instead of COLS / 2.
  if (((unsigned long long)o & (2 * COLS - 1)) == 0) {
    if constexpr (COLS == 8)
      *(uint4*)o = make_uint4(w[0], w[1], w[2], w[3]);
    else
      *(uint2*)o = make_uint2(w[0], w[1]);
  } else {
#pragma unroll
    for (int i = 0; i < COLS / 2; ++i) *(u32*)(o + 2 * i) = w[i];
  }
}

}  // namespace moejit
