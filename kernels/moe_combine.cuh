// MoE combine: out[t] = sum over slots j = 0..top_k-1 (and split-K partials z) of
// Y[z][route_row[t * top_k + j]], summed in fp32 in (j, z) order (no atomics: bit-reproducible), written as bf16.
// Router weights were already applied by the down projection's epilogue.
//
// ---- Tunable parameters -------------------------------------------------------
//   THREADS : CTA size; one CTA per (token = blockIdx.x, column block of THREADS*4
//             columns = blockIdx.y).
// Requirements: hidden % 4 == 0, Y rows 16-byte aligned (y_row_stride % 4 == 0).

namespace moejit {

struct CombineParams {
  const float* y;        // [splits, rows, hidden] fp32, expert-sorted rows (split-K partials)
  i64 y_row_stride;      // elements
  i64 y_split_stride;    // elements between partials
  int splits;            // >= 1
  const int* route_row;  // [T * top_k], -1 = dropped route
  u16* out;              // bf16 [T, hidden]
  i64 out_row_stride;    // elements
  int hidden, top_k;
};

template <int THREADS>
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
      const float4 v = *(const float4*)(p.y + z * p.y_split_stride + (i64)r * p.y_row_stride + c);
      s0 += v.x; s1 += v.y; s2 += v.z; s3 += v.w;
    }
  }
  u16* o = p.out + (i64)t * p.out_row_stride + c;
  *(u32*)(o) = pack_bf16x2(s0, s1);
  *(u32*)(o + 2) = pack_bf16x2(s2, s3);
}

}  // namespace moejit
