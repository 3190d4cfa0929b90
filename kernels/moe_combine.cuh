// MoE combine: out[t] = sum over slots j = 0..top_k-1 (and split-K partials z) of
// Y[z][route_row[t * top_k + j]], summed in fp32 in (j, z) order (no atomics: bit-reproducible), written as bf16.
// Router weights were already applied by the down projection's epilogue.
//
// ---- Tunable parameters -------------------------------------------------------
//   THREADS : CTA size; one CTA per (token = blockIdx.x, column block of THREADS*4
//             columns = blockIdx.y).
//   Y_BF16  : Y is bf16 (the down projection without split-K; splits == 1): 8-byte
//             loads of 4 values, widened to fp32 before the sum. false: fp32 Y,
//             16-byte loads. Why bf16 Y: at large T the combine is bound by
//             reading Y (R * hidden values), so half the bytes is close to half
//             the time, and the down projection stores half as much.
// Requirements: hidden % 4 == 0, Y rows aligned to 4 elements (y_row_stride % 4 == 0).

namespace moejit {

struct CombineParams {
  const void* y;         // [splits, rows, hidden] fp32, or [rows, hidden] bf16 (Y_BF16); expert-sorted rows
  i64 y_row_stride;      // elements
  i64 y_split_stride;    // elements between partials
  int splits;            // >= 1 (1 with Y_BF16)
  const int* route_row;  // [T * top_k], -1 = dropped route
  u16* out;              // bf16 [T, hidden]
  i64 out_row_stride;    // elements
  int hidden, top_k;
};

// Four consecutive Y values from element `at`, as fp32.
template <bool Y_BF16>
__device__ __forceinline__ float4 load_y4(const void* y, i64 at) {
  if (Y_BF16) {
    const uint2 v = *(const uint2*)((const u16*)y + at);
    // Exact widening: each bf16 becomes the high half of an fp32 (the lower
    // address is the low half of each 32-bit word).
    return make_float4(__uint_as_float(v.x << 16), __uint_as_float(v.x & 0xffff0000u), __uint_as_float(v.y << 16),
                       __uint_as_float(v.y & 0xffff0000u));
  }
  return *(const float4*)((const float*)y + at);
}

template <int THREADS, bool Y_BF16>
__global__ void __launch_bounds__(THREADS) moe_combine_kernel(const CombineParams p) {
  pdl_wait();  // Y comes from the down projection
  pdl_launch_dependents();
  const int t = blockIdx.x;
  const int c = (blockIdx.y * THREADS + threadIdx.x) * 4;
  if (c >= p.hidden) return;
  float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
  for (int j = 0; j < p.top_k; ++j) {
    const int r = p.route_row[(i64)t * p.top_k + j];
    if (r < 0) continue;
    for (int z = 0; z < p.splits; ++z) {
      const float4 v = load_y4<Y_BF16>(p.y, z * p.y_split_stride + (i64)r * p.y_row_stride + c);
      s0 += v.x; s1 += v.y; s2 += v.z; s3 += v.w;
    }
  }
  u16* o = p.out + (i64)t * p.out_row_stride + c;
  *(u32*)(o) = pack_bf16x2(s0, s1);
  *(u32*)(o + 2) = pack_bf16x2(s2, s3);
}

}  // namespace moejit
