// FP8 per-token grouped GEMM for decode (a bucket averaging at most 8 routed
// rows per expert hit; an expert with more gets several 8-row tiles), sm_90a: out^T = W X^T with mma.sync m16n8k32 e4m3 -> f32, e4m3
// weights as the A operand (16 weight rows per MMA), up to 8 routed rows of
// one expert as B. Same semantics and scales as grouped_gemm_fp8_sm90.cuh's
// per-token mode: every k32 product moves into the fp32 accumulator, and
// v = (acc * sa) * sw in the epilogue (sa per activation row, sw per expert
// (WSCALE 0) or per output channel (1)).
// Parameters: GroupedGemmParams (a: e4m3 rows, a_row_stride in bytes; a_scales:
// fp32 per row of a; w: e4m3 [E, N, K]; w_scales: fp32 [E] or [E, N]); the
// tile lists hold 8-row m-tiles. At <= 32 routes the host may pass topk_ids
// instead: every warp then routes them itself (decode_routing.cuh), and
// gate_up's CTA (0, 0) writes the routing outputs for down and the combine.
//
// Why this shape: at decode the layer streams the weights of the experts hit
// (gpt-oss-120b T = 64: 1.8 GB over both GEMMs), and an e4m3 weight needs no
// conversion. Each warp streams its 16 weight rows of a K range straight into
// registers, DEPTH units of 64 k ahead, with no shared memory ring and no
// barrier in the loop (the pattern of grouped_gemm_mxfp4_decode_sm90.cuh,
// without its dequantization): per 1024 weights a warp issues two 16-byte
// weight loads, one activation load and two MMAs.
// Why 16 bytes per lane: the four lanes of a row then read 64 contiguous bytes
// per load; with 8 bytes per lane (one 32-byte sector per row and load) the
// same kernel streamed at 2.1 TB/s where this one reaches 3.3 (gpt-oss-120b
// T = 64), the miss slots of an SM filling with sector-sized requests.
//
// K order: the MMA's lane q owns logical k {4q..4q+3} (a0/a1, b0) and
// {16+4q..16+4q+3} (a2/a3, b1). In a unit of 64 k lane q holds physical bytes
// [16q, 16q + 16) of each row and of the activation column; MMA m of the unit
// takes its bytes [16q + 8m, 16q + 8m + 8). The same permutation on both
// operands of a sum is exact (per-token scales do not depend on k).
//
// K is cut into KSEG = min(4, units of 64 k) fixed segments (a function of K alone);
// warp row wk sums segments [KSEG wk / KW, KSEG (wk + 1) / KW), each from
// zero, and the segments are added in order (in registers or through shared
// memory): the bits do not depend on KW. Rows never mix, so padding rows
// cannot change a real row's bits.
//
// ---- Tunable parameters (Fp8DecodeKernel, kernels/kernel_configs.cuh: the
// fields in lower case; chosen in src/ops/fp8_gemm_config.cpp) ----
//   WN    : warps along N, 16 weight rows each (BN = 16 * WN)
//   KW    : warps along K (1, 2 or 4; the host takes 2 or 4 only when K has at
//           least 4 units, so KSEG = 4 and every warp row owns whole segments)
//   DEPTH : units of 64 k in flight per warp (12 registers each)
//   CTAS  : resident CTAs per SM asked of ptxas
// Requirements (host): K % 16 == 0, N % 16 == 0, N * K < 2^32 (32-bit row offsets).

namespace moejit {

// 16-byte activation load through L1 (re-read by the CTA's other warps).
__device__ __forceinline__ void ldg_v4_act(const void* ptr, u32 (&r)[4]) {
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "l"(ptr));
}

template <Fp8DecodeKernel C>
__global__ void __launch_bounds__(32 * C.wn * C.kw, C.ctas) grouped_gemm_fp8_decode_kernel(const GroupedGemmParams p) {
  constexpr int WN = C.wn, KW = C.kw, DEPTH = C.depth, CTAS = C.ctas, WSCALE = C.wscale;
  constexpr int ACT = C.epilogue.act, BIAS = C.epilogue.bias;
  constexpr bool GATHER = C.epilogue.gather, ROUTER_WEIGHT = C.epilogue.router_weight, OUT_F32 = C.epilogue.out_f32;
  constexpr int kUnit = 64;  // k per unit: 16 bytes per lane and row
  // What this kernel reads comes from earlier launches: the activation codes
  // and scales from the quantizer just before it; the tile lists (or, with
  // in-warp routing, topk_ids) and the weights from before that. With
  // p.tiles_ready (MoeLayer::run: the launch before this one is this call's
  // quantizer) the tile fields are read (or topk_ids routed) and the first
  // DEPTH units of weights are in flight before the wait, so their round
  // trips overlap the quantizer; the activations come after it.
  if (!p.tiles_ready) pdl_wait();
  pdl_launch_dependents();
  const int tile = blockIdx.y;
  // In-warp routing (p.topk_ids set, <= 32 routes): the layer launches no
  // routing kernel; gate_up's CTA (0, 0) writes the routing outputs.
  const bool fr = p.topk_ids != nullptr;
  int num_tiles, expert, row_begin, row_end;
  int fr_src = 0;  // in-warp routing: the activation row of this lane's token column g
  if (fr) {
    int f[4];
    decode_route_in_warp<GATHER>(p, tile, f, fr_src);
    expert = f[0], row_begin = f[1], row_end = f[2], num_tiles = f[3];
  } else {
    num_tiles = *p.num_tiles;
    expert = tile < num_tiles ? p.tile_expert[tile] : -1;
    row_begin = tile < num_tiles ? p.tile_row_begin[tile] : 0;
    row_end = tile < num_tiles ? p.tile_row_end[tile] : 0;
  }
  // No tile, or a dropped route's -1 expert from a tile list made elsewhere.
  if (tile >= num_tiles || expert < 0) {
    decode_leave_without_tile(p);
    return;
  }
  const int N = p.n, K = p.k;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wn = warp % WN, wk = warp / WN;
  const int g = lane >> 2, q = lane & 3;
  const int L0 = (blockIdx.x * WN + wn) * 16;  // first logical weight row of the warp
  const bool grp_ok = L0 < N;
  const int nu = (K + kUnit - 1) / kUnit;

  // Weight rows of the lane: fragment rows g (h = 0) and g + 8 (h = 1), as
  // 32-bit offsets from the expert's first row (an expert's N * K bytes fit):
  // fewer 64-bit pointers live across the loop.
  const u8* w_expert = p.w + (i64)expert * N * K + 16 * q;
  u32 w_off[2];
#pragma unroll
  for (int h = 0; h < 2; ++h)
    w_off[h] = grp_ok ? (u32)physical_row<ACT>(group_row<ACT>(L0, g + 8 * h), N) * (u32)K : 0u;
  // Source row of token column c (a padding column reads the tile's first
  // row); with in-warp routing lane 4c holds column c's.
  auto src_of = [&](int c) -> i64 {
    const int r = row_begin + c < row_end ? row_begin + c : row_begin;
    const int fr_c = __shfl_sync(0xffffffffu, fr_src, 4 * c);
    return fr && GATHER ? (i64)fr_c : GATHER ? (i64)(p.sorted_route[r] / p.top_k) : (i64)r;
  };

  const int KSEG = nu < 4 ? nu : 4;
  const int seg_begin = KSEG * wk / KW, seg_end = KSEG * (wk + 1) / KW;
  const int u_begin = (int)(((i64)nu * seg_begin) / KSEG);
  const int u_end = (int)(((i64)nu * seg_end) / KSEG);

  // Register ring: per unit, weight rows g / g + 8 and the activation column.
  u32 ra[DEPTH][2][4], rb[DEPTH][4];
  auto unit_ok = [&](int u) { return u < u_end && kUnit * u + 16 * (q + 1) <= K; };  // past K: zeros
  auto load_w = [&](int d, int u) {
    const bool ok = unit_ok(u) && grp_ok;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (ok) {
        // 256-byte L2 prefetch: DRAM reads about 1.26x the weights with it,
        // but the smaller block and no hint both measured slower (too few
        // bytes in flight; docs/kernels.md, "Weight loads and the L2 prefetch size").
        ldg_stream_v4<256>(w_expert + w_off[h] + kUnit * u, ra[d][h]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) ra[d][h][j] = 0u;
      }
    }
  };
  const u8* x_row = nullptr;  // set after the wait
  auto load_x = [&](int d, int u) {
    if (unit_ok(u)) {
      ldg_v4_act(x_row + kUnit * u, rb[d]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) rb[d][j] = 0u;
    }
  };

  float acc[4] = {0.f, 0.f, 0.f, 0.f}, total[4] = {0.f, 0.f, 0.f, 0.f};
  __shared__ float red[KW > 1 ? 4 * WN * 4 * 32 : 1];  // [segment][wn][c][lane]
  int seg = seg_begin;
  int seg_next = (int)(((i64)nu * (seg + 1)) / KSEG);  // first unit of the next segment
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
    seg_next = (int)(((i64)nu * (seg + 1)) / KSEG);
  };
  auto compute = [&](int d) {
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      // MMA m: words 2m (logical k 4q..4q+3) and 2m + 1 (16 + 4q..) of each
      // row and of the activation column.
      float t[4];
      mma_e4m3_16832_zero(t, ra[d][0][2 * m], ra[d][1][2 * m], ra[d][0][2 * m + 1], ra[d][1][2 * m + 1],
                          rb[d][2 * m], rb[d][2 * m + 1]);
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[c] += t[c];
    }
  };

#pragma unroll
  for (int d = 0; d < DEPTH; ++d) load_w(d, u_begin + d);
  if (p.tiles_ready) pdl_wait();
  // The quantizer's outputs (activation codes and scales) only from here, and
  // the routing kernel's sorted_route when it ran (with in-warp routing gate_up
  // takes the rows from its own routing, fr_src).
  x_row = (const u8*)p.a + src_of(g) * p.a_row_stride + 16 * q;
#pragma unroll
  for (int d = 0; d < DEPTH; ++d) load_x(d, u_begin + d);
  for (int u = u_begin; u < u_end; u += DEPTH) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      if (u + d < u_end) {
        compute(d);
        load_w(d, u + d + DEPTH);
        load_x(d, u + d + DEPTH);
        if (u + d + 1 == seg_next) flush();
      }
    }
  }

  // Epilogue: warp row 0 of each warp column adds the segments in order.
  float v[4];
  if (KW > 1) {
    __syncthreads();
    if (wk != 0) return;
#pragma unroll
    for (int c = 0; c < 4; ++c) v[c] = red[(wn * 4 + c) * 32 + lane];
    for (int sg = 1; sg < KSEG; ++sg)
#pragma unroll
      for (int c = 0; c < 4; ++c) v[c] += red[((sg * WN + wn) * 4 + c) * 32 + lane];
  } else {
#pragma unroll
    for (int c = 0; c < 4; ++c) v[c] = total[c];
  }
  if (!grp_ok) return;
  // v0, v1: weight row g, token columns 2q, 2q + 1; v2, v3: row g + 8.
  const float sa[2] = {p.a_scales[src_of(2 * q)], p.a_scales[src_of(2 * q + 1)]};
  const float* ws = (const float*)p.w_scales;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float sw =
        WSCALE == 1 ? ws[(i64)expert * N + physical_row<ACT>(group_row<ACT>(L0, g + 8 * h), N)] : ws[expert];
#pragma unroll
    for (int c = 0; c < 2; ++c) v[2 * h + c] = (v[2 * h + c] * sa[c]) * sw;
  }
  float bias2[2], gamma2[2];
  swapab_bias_pair<ACT, BIAS>(p, N, expert, L0, g, true, bias2);
  swapab_gamma_pair<ROUTER_WEIGHT>(p, row_begin, row_end, q, gamma2);
  swapab_epilogue_values<ACT, BIAS, OUT_F32>(p, L0, row_begin, row_end, v, bias2, gamma2, g, q);
}

}  // namespace moejit
