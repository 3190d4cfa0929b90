// FP8 grouped GEMM for decode (at most 8 routed rows per expert hit), sm_90a:
// out^T = W X^T with mma.sync m16n8k32 e4m3 -> f32, e4m3 weights as the A
// operand (16 weight rows per MMA), up to 8 routed rows of one expert as B.
// Same semantics and scale rules as grouped_gemm_fp8_sm90.cuh:
//   per-token (QUANT kF8DecodePerToken): v = (acc * sa) * sw in the epilogue,
//              sw per expert (WSCALE 0) or per output channel (1);
//   MXFP8 (kF8DecodeMx): one k32 MMA is one 32-block; its product t goes to a
//              zeroed temporary and acc = fma(t * sa, sw, acc).
// Every k32 product moves into the fp32 accumulator (promotion every 32 K).
// Parameters: GroupedGemmParams (a: e4m3 rows, a_row_stride in bytes; a_scales:
// fp32 per row, or E8M0 [rows, K/32] for MXFP8; w: e4m3 [E, N, K]; w_scales:
// fp32 [E] / [E, N] or E8M0 [E, N, K/32]); the tile lists hold 8-row m-tiles.
//
// Why this shape: at decode the layer streams the weights of the experts hit
// (gpt-oss-120b T = 1: 66 MB for gate_up, 33 MB for down in FP8), and an e4m3
// weight needs no conversion: a 32-block of 16 weight rows is one MMA fed by
// two 8-byte loads per lane. Each warp streams its 16 rows of a K range
// straight into registers, DEPTH 32-blocks ahead, with no shared memory ring
// and no barrier in the loop (the pattern of grouped_gemm_mxfp4_decode_sm90.cuh,
// without its dequantization). Per 512 weights a warp issues 2 weight loads,
// one activation load and one MMA (MXFP8: 4 scale-byte loads and the promotion
// besides), so the stream, not instruction issue, sets the time.
//
// K order: lane q of the MMA owns logical k {4q..4q+3} (a0/a1, b0) and
// {16+4q..16+4q+3} (a2/a3, b1) of a 32-block; we feed it physical bytes
// [8q, 8q+8) of the block for weights and activations alike (one 8-byte load
// per row; the four lanes of a row read one 32-byte sector). The same
// permutation on both operands of a sum is exact, and it stays inside the
// block, so one MMA still covers exactly one MX block.
//
// K is cut into KSEG = min(4, K/32 blocks) fixed segments (a function of K
// alone); warp row wk sums segments [KSEG wk / KW, KSEG (wk + 1) / KW), each
// from zero, and the segments are added in order (in registers or through
// shared memory): the bits do not depend on KW. Rows never mix, so padding
// rows cannot change a real row's bits.
//
// ---- Tunable parameters (template arguments; src/ops/fp8_gemm_config.cpp) ----
//   WN    : warps along N, 16 weight rows each (BN = 16 * WN)
//   KW    : warps along K (1, 2 or 4; KSEG % KW == 0 is checked on the host)
//   DEPTH : 32-blocks in flight per warp (registers: 6 per block, MXFP8 8)
//   CTAS  : resident CTAs per SM asked of ptxas
// Requirements (host): K % 16 == 0 (MXFP8: K % 32 == 0), N % 16 == 0.

namespace moejit {

enum { kF8DecodePerToken = 0, kF8DecodeMx = 1 };
constexpr int kF8DecodeMaxBlocks = 512;  // MXFP8: K / 32 at most (the staged activation scales)

__device__ __forceinline__ void ldg_v2(const void* ptr, u32& a, u32& b) {
  asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(a), "=r"(b) : "l"(ptr));
}
// Streamed weights: no L1 allocation.
__device__ __forceinline__ void ldg_stream_v2(const void* ptr, u32& a, u32& b) {
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(a), "=r"(b) : "l"(ptr));
}

template <int WN, int KW, int DEPTH, int CTAS, int QUANT, int WSCALE, int ACT, int BIAS, bool GATHER,
          bool ROUTER_WEIGHT, bool OUT_F32>
__global__ void __launch_bounds__(32 * WN * KW, CTAS) grouped_gemm_fp8_decode_kernel(const GroupedGemmParams p) {
  constexpr bool MX = QUANT == kF8DecodeMx;
  // Everything this kernel reads but the weights may come from the launch
  // before it (the activation quantizer); nothing before the wait.
  pdl_wait();
  pdl_launch_dependents();
  const int tile = blockIdx.y;
  if (tile >= *p.num_tiles) return;
  const int expert = p.tile_expert[tile];
  const int row_begin = p.tile_row_begin[tile];
  const int row_end = p.tile_row_end[tile];
  const int N = p.n, K = p.k;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wn = warp % WN, wk = warp / WN;
  const int g = lane >> 2, q = lane & 3;
  const int L0 = (blockIdx.x * WN + wn) * 16;  // first logical weight row of the warp
  const bool grp_ok = L0 < N;
  const int nb = (K + 31) / 32;  // 32-blocks
  const int s_row_bytes = K / 32;

  // Weight rows of the lane: fragment rows g (h = 0) and g + 8 (h = 1), as
  // 32-bit offsets from the expert's first row (an expert's N * K bytes fit):
  // fewer 64-bit pointers live across the loop.
  const u8* w_expert = p.w + (i64)expert * N * K + 8 * q;
  const u8* ws_expert = p.w_scales + (i64)expert * N * s_row_bytes;
  u32 w_off[2], ws_off[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const u32 pr = grp_ok ? (u32)physical_row<ACT>(group_row<ACT>(L0, g + 8 * h), N) : 0u;
    w_off[h] = pr * (u32)K;
    ws_off[h] = pr * (u32)s_row_bytes;
  }
  // Source row of token column c (a padding column reads the tile's first row).
  auto src_of = [&](int c) -> i64 {
    const int r = row_begin + c < row_end ? row_begin + c : row_begin;
    return GATHER ? (i64)(p.sorted_route[r] / p.top_k) : (i64)r;
  };
  const u8* x_row = (const u8*)p.a + src_of(g) * p.a_row_stride + 8 * q;
  // MXFP8: the tile's activation scales, staged once per CTA ([column][block],
  // K <= 16384 is checked on the host), so the register ring holds only the
  // weights' (measured: 80 registers spilled with both in the ring).
  __shared__ u8 xs_tile[MX ? 8 * kF8DecodeMaxBlocks : 1];
  if (MX) {
    const u8* xs_base = (const u8*)p.a_scales;
    for (int i = threadIdx.x; i < 8 * nb; i += 32 * WN * KW) {
      const int c = i / nb, b = i - c * nb;
      xs_tile[i] = ldg_u8(xs_base + src_of(c) * s_row_bytes + b);
    }
    __syncthreads();
  }

  const int KSEG = nb < 4 ? nb : 4;
  const int seg_begin = KSEG * wk / KW, seg_end = KSEG * (wk + 1) / KW;
  const int b_begin = (int)(((i64)nb * seg_begin) / KSEG);
  const int b_end = (int)(((i64)nb * seg_end) / KSEG);

  // Register ring: per block, weight rows g / g + 8 (two words each), the
  // activation column (two words) and, MXFP8, the two weight scale bytes.
  u32 ra[DEPTH][2][2], rb[DEPTH][2], rs[DEPTH][2];
  auto load = [&](int d, int b) {
    const bool ok = b < b_end && 32 * b + 8 * q + 8 <= K;  // past K: zeros (and scale 127, a factor 1)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (ok && grp_ok) {
        ldg_stream_v2(w_expert + w_off[h] + 32 * b, ra[d][h][0], ra[d][h][1]);
      } else {
        ra[d][h][0] = ra[d][h][1] = 0u;
      }
    }
    if (ok) {
      ldg_v2(x_row + 32 * b, rb[d][0], rb[d][1]);
    } else {
      rb[d][0] = rb[d][1] = 0u;
    }
    if (MX) {
      const bool bok = b < b_end;
#pragma unroll
      for (int h = 0; h < 2; ++h) rs[d][h] = bok && grp_ok ? ldg_u8(ws_expert + ws_off[h] + b) : 127u;
    }
  };

  float acc[4] = {0.f, 0.f, 0.f, 0.f}, total[4] = {0.f, 0.f, 0.f, 0.f};
  __shared__ float red[KW > 1 ? 4 * WN * 4 * 32 : 1];  // [segment][wn][c][lane]
  int seg = seg_begin;
  int seg_next = (int)(((i64)nb * (seg + 1)) / KSEG);  // first block of the next segment
  auto flush = [&]() {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      if (KW > 1)
        red[((seg * WN + wn) * 4 + c) * 32 + lane] = acc[c];
      else
        total[c] = seg == 0 ? acc[c] : total[c] + acc[c];
      acc[c] = 0.f;
    }
    ++seg;
    seg_next = (int)(((i64)nb * (seg + 1)) / KSEG);
  };
  auto compute = [&](int d, int b) {
    float t[4];
    mma_e4m3_16832_zero(t, ra[d][0][0], ra[d][1][0], ra[d][0][1], ra[d][1][1], rb[d][0], rb[d][1]);
    if (MX) {
      const float sw0 = e8m0_to_f32(rs[d][0]), sw1 = e8m0_to_f32(rs[d][1]);
      const float sa0 = e8m0_to_f32(xs_tile[(2 * q) * nb + b]), sa1 = e8m0_to_f32(xs_tile[(2 * q + 1) * nb + b]);
      // t0, t1: weight row g, columns 2q, 2q + 1; t2, t3: row g + 8.
      acc[0] = fmaf(t[0] * sa0, sw0, acc[0]);
      acc[1] = fmaf(t[1] * sa1, sw0, acc[1]);
      acc[2] = fmaf(t[2] * sa0, sw1, acc[2]);
      acc[3] = fmaf(t[3] * sa1, sw1, acc[3]);
    } else {
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[c] += t[c];
    }
  };

#pragma unroll
  for (int d = 0; d < DEPTH; ++d) load(d, b_begin + d);
  for (int b = b_begin; b < b_end; b += DEPTH) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      if (b + d < b_end) {
        compute(d, b + d);
        load(d, b + d + DEPTH);
        if (b + d + 1 == seg_next) flush();
      }
    }
  }

  // Epilogue: warp row 0 of each warp column adds the segments in order.
  float v[4];
  if (KW > 1) {
    __syncthreads();
    if (wk != 0) return;
#pragma unroll
    for (int c = 0; c < 4; ++c) v[c] = red[((0 * WN + wn) * 4 + c) * 32 + lane];
    for (int sg = 1; sg < KSEG; ++sg)
#pragma unroll
      for (int c = 0; c < 4; ++c) v[c] += red[((sg * WN + wn) * 4 + c) * 32 + lane];
  } else {
#pragma unroll
    for (int c = 0; c < 4; ++c) v[c] = total[c];
  }
  if (!grp_ok) return;
  if (!MX) {
    const float* as = p.a_scales;
    const float sa[2] = {as[src_of(2 * q)], as[src_of(2 * q + 1)]};
    const float* ws = (const float*)p.w_scales;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float sw = WSCALE == 1 ? ws[(i64)expert * N + physical_row<ACT>(group_row<ACT>(L0, g + 8 * h), N)]
                                   : ws[expert];
#pragma unroll
      for (int c = 0; c < 2; ++c) v[2 * h + c] = (v[2 * h + c] * sa[c]) * sw;
    }
  }
  float bias2[2], gamma2[2];
  swapab_bias_pair<ACT, BIAS>(p, N, expert, L0, g, true, bias2);
  swapab_gamma_pair<ROUTER_WEIGHT>(p, row_begin, row_end, q, gamma2);
  swapab_epilogue_values<ACT, BIAS, OUT_F32>(p, L0, row_begin, row_end, v, bias2, gamma2, g, q);
}

}  // namespace moejit
