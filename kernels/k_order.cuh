// op=k_order: bf16 rows -> the same rows with each block of 32 columns in the
// fragment k order of the MXFP4 warp-specialized grouped GEMM
// (grouped_gemm_mxfp4_ws_sm90.cuh, K_ORDER_IN; the order: fragment_k_position
// in mxfp4_fragments.cuh): column 8q + j + 4e (q, j in 0..3, e in 0..1) goes
// to 8j + 2q + e. The MoE layer runs it on X before that gate_up, whose
// consumers then turn each pair of e2m1 codes into one bf16x2 in about four
// instructions instead of six.
//
// One thread per 32-column block of a row: four 16-byte loads (chunk q holds
// columns 8q .. 8q + 7), per chunk four byte permutes that pair column j with
// j + 4, four 16-byte stores (output chunk j = pair j of chunks 0..3). Bound by
// memory: 4 bytes moved per column.
//
// Launch: any grid (grid-stride loop over rows * cols / 32 blocks), THREADS per
// CTA; programmatic dependent launch: waits for the launch before it before
// reading X, and lets the GEMM after it launch early.
// Arguments: in (bf16 [rows, in_row_stride], 16-byte aligned rows), rows,
// cols (% 32 == 0), out (bf16 [rows, cols], 16-byte aligned).

namespace moejit {

template <int THREADS>
__global__ void __launch_bounds__(THREADS) k_order_kernel(const u16* __restrict__ in, long long in_row_stride,
                                                          long long rows, int cols, u16* __restrict__ out) {
  pdl_wait();
  pdl_launch_dependents();
  const long long per_row = cols / 32;
  const long long total = rows * per_row;
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < total; i += (long long)gridDim.x * THREADS) {
    const long long r = i / per_row;
    const long long c0 = 32 * (i - r * per_row);
    const uint4* src = (const uint4*)(in + r * in_row_stride + c0);
    uint4 x[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) x[q] = src[q];
    u32 y[4][4];  // y[j][q]: columns {8q + j, 8q + j + 4}
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      y[0][q] = prmt(x[q].x, x[q].z, 0x5410);
      y[1][q] = prmt(x[q].x, x[q].z, 0x7632);
      y[2][q] = prmt(x[q].y, x[q].w, 0x5410);
      y[3][q] = prmt(x[q].y, x[q].w, 0x7632);
    }
    uint4* dst = (uint4*)(out + r * cols + c0);
#pragma unroll
    for (int j = 0; j < 4; ++j) dst[j] = make_uint4(y[j][0], y[j][1], y[j][2], y[j][3]);
  }
}

}  // namespace moejit
