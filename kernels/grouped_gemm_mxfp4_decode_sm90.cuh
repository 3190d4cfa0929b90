// MXFP4 grouped GEMM for decode (few routed rows per expert), sm_90a:
// out^T = W X^T with mma.sync m16n8k16, MXFP4 weights as the A operand (16
// weight rows per MMA), up to 8 routed rows of one expert as the B operand.
// Same semantics and parameters as grouped_gemm_sm90.cuh (GroupedGemmParams):
//   gate_up: H[r] = act(X[t(r)] @ W1[e]^T + b1[e]);  down: Y[r] = gamma[r] * (H[r] @ W2[e]^T + b2[e]).
//
// Why this shape: a decode step is bound by streaming the weights of the
// experts hit (W4A16 gpt-oss-120b T = 1: 53 MB, 12.5 us at 4.2 TB/s). Each warp
// loads its weights straight into registers (16 bytes per lane per row, the
// four lanes of a row covering 64 contiguous bytes per load), DEPTH super-steps ahead,
// with no shared memory ring and no CTA barrier in the loop: a warp waits only
// for its own loads. Activations (up to 8 * NT rows per tile) are read through
// L1, or (XS) staged once per CTA in shared memory, which frees the registers
// that let six CTAs per SM fit (CTAS).
// The warps of a CTA may split K; their partial sums are reduced through
// shared memory in warp order, so results are deterministic and every key
// always runs the same reduction.
//
// ---- Tunable parameters (Mxfp4DecodeKernel, kernels/kernel_configs.cuh: the
// fields in lower case; chosen in src/ops/grouped_gemm_config.cpp) ----
//   WN     : warps along N; each owns MW groups of 16 weight rows (BN = 16 * MW * WN)
//   KW     : warps along K (dividing KSEG = min(4, S), S = ceil(K / 256));
//            warp row wk reduces K segments [KSEG*wk/KW, KSEG*(wk+1)/KW)
//   MW     : 16-row weight groups per warp
//   NT     : n8 token tiles per m-tile (BM = 8 * NT routed rows of one expert)
//   DEPTH  : super-steps of weights in flight per warp (registers: 20 * MW per step)
//   CTAS   : resident CTAs per SM asked of ptxas (caps registers at 64K / (CTAS * threads));
//            6 with XS (80 registers, no spill): at small T the CTAs' lives are
//            latency chains, so the number of waves sets the time
//   XS     : 0, or (NT = 1) the tile's activation rows are staged once per CTA in
//            dynamic shared memory, at most XS rows (host: min(8, bucket * top_k)),
//            each S * 256 k long (zeros past K) in B-fragment order (x_pairs
//            applied once), pitch S * 512 + 16 bytes, 16-byte groups swizzled
//            (xs_unit) so a warp's fragment loads are free of bank conflicts.
//            The loop then reads one 16-byte shared load per weight word instead
//            of a 16-byte global load, four byte permutes and a k predicate.
//            Alone that measured no faster (gpt-oss T = 1: 96 registers, 5 CTAs
//            per SM, the same number of waves); its value is the 80-register fit.
//   FR     : <= 32 routes, NT = 1: every warp routes topk_ids itself
//            (decode_route_in_warp) instead of reading the routing kernel's
//            tile lists; gate_up's CTA (0, 0) writes the routing outputs, so
//            MoeLayer::run launches no routing kernel: at an idle start one
//            host launch (4.3 us) fewer precedes gate_up.
//   (derived) PREFETCH = NT == 1: the epilogue's bias and router weights are
//            loaded before the weight loop (two token tiles: in the epilogue,
//            ~25 registers fewer)
//   Super-step: 256 k; lane q owns the 32-k chunks [32q, 32q + 32) and
//            [128 + 32q, 160 + 32q) of it, so the four lanes of a row read 64
//            contiguous bytes per load (whole 32-byte sectors; interleaved
//            halves measured 49 % excess L2 sectors in ncu).
// Requirements (checked on the host): K % 32 == 0, N % 16 == 0; KSEG % KW == 0,
// WN * KW <= 32, CTAS * 32 * WN * KW <= 2048 (MOEJIT_GEMM_TUNE is checked against these).

namespace moejit {

// 16-byte unit of staged activation group gi (8 k, B-fragment order) in its
// row: lanes q and q + 2 of a fragment load read groups 8 apart, which without
// the swap would share banks (XS above).
__device__ __forceinline__ u32 xs_unit(u32 gi) { return gi ^ (((gi >> 3) & 1u) << 1); }

template <Mxfp4DecodeKernel C>
__global__ void __launch_bounds__(32 * C.wn * C.kw, C.ctas) grouped_gemm_mxfp4_decode_kernel(const GroupedGemmParams p) {
  constexpr int WN = C.wn, KW = C.kw, MW = C.mw, NT = C.nt, DEPTH = C.depth, CTAS = C.ctas, XS = C.xs;
  constexpr bool FR = C.fr;
  constexpr int ACT = C.epilogue.act, BIAS = C.epilogue.bias;
  constexpr bool GATHER = C.epilogue.gather, ROUTER_WEIGHT = C.epilogue.router_weight, OUT_F32 = C.epilogue.out_f32;
  constexpr int kSuper = 256;
  // The tile schedule and the activations come from earlier launches. With
  // p.tiles_ready (down inside MoeLayer::run) the tile fields (or, with FR,
  // topk_ids), the first weight super-steps and the bias are loaded before the
  // wait, so they overlap gate_up's tail; H, and with FR the router weights
  // (through sorted_route, which gate_up's CTA (0, 0) writes), come after it.
  if (!p.tiles_ready) pdl_wait();
  pdl_launch_dependents();
  static_assert(!FR || NT == 1, "fused routing: one n8 token tile");
  const int tile = blockIdx.y;
  int num_tiles, expert, row_begin, row_end;
  int fr_src = 0;  // FR: the activation row of this lane's token column
  if constexpr (FR) {
    int f[4];
    decode_route_in_warp<GATHER>(p, tile, f, fr_src);
    expert = f[0], row_begin = f[1], row_end = f[2], num_tiles = f[3];
  } else {
    // The tile lists hold gridDim.y entries, so the tile's fields can be read
    // alongside the count (one memory latency before the first weight load).
    num_tiles = *p.num_tiles;
    expert = p.tile_expert[tile];
    row_begin = p.tile_row_begin[tile];
    row_end = p.tile_row_end[tile];
  }
  if (tile >= num_tiles) {
    decode_leave_without_tile(p);
    return;
  }
  const int N = p.n, K = p.k;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wn = warp % WN, wk = warp / WN;
  const int g = lane >> 2, q = lane & 3;
  const int n_warp = (blockIdx.x * WN + wn) * 16 * MW;  // first logical row of the warp

  // Weight and scale rows of the lane (fragment rows g (half 0) and g + 8
  // (half 1)), advanced to the lane's first chunk of a super-step (16 q bytes, q scales).
  const u32 w_row_bytes = (u32)K / 2u;
  const u32 s_row_bytes = (u32)K / 32u;
  const u8* w_row[MW][2];
  const u8* s_row[MW][2];
  bool grp_ok[MW];
#pragma unroll
  for (int mw = 0; mw < MW; ++mw) {
    const int L0 = n_warp + mw * 16;
    grp_ok[mw] = L0 < N;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int L = grp_ok[mw] ? group_row<ACT>(L0, g + 8 * half) : 0;
      const i64 phys = (i64)expert * N + physical_row<ACT>(L, N);
      w_row[mw][half] = p.w + phys * w_row_bytes + 16 * q;
      s_row[mw][half] = p.w_scales + phys * s_row_bytes + q;
    }
  }
  const u16* x_row[NT];  // set after the first weight loads are issued

  // K in KSEG fixed segments (a function of K alone); warp row wk owns
  // KSEG / KW consecutive ones. Each segment is summed from zero and the
  // segments are added in order, in registers (KW = 1) or through shared
  // memory: the bits do not depend on KW, so buckets whose configurations
  // differ only in the K split give identical results (padding invariance).
  const int S = (K + kSuper - 1) / kSuper;
  const int KSEG = S < 4 ? S : 4;
  const int seg_begin = KSEG * wk / KW, seg_end = KSEG * (wk + 1) / KW;
  const int s_begin = (int)(((i64)S * seg_begin) / KSEG);
  const int s_end = (int)(((i64)S * seg_end) / KSEG);

  // One accumulator per chunk of the super-step (two independent MMA chains
  // per step instead of one of 16 dependent MMAs); a segment's sum is
  // acc[0] + acc[1], in that order, whatever the configuration.
  float acc[2][MW][NT][4], total[MW][NT][4];
#pragma unroll
  for (int mw = 0; mw < MW; ++mw)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[0][mw][nt][c] = acc[1][mw][nt][c] = total[mw][nt][c] = 0.f;

  constexpr int kUnits = MW * NT;
  __shared__ float red[KW > 1 ? 4 * WN * kUnits * 4 * 32 : 1];  // [segment][wn][unit][c][lane]
  int seg = seg_begin;
  int seg_next = (int)(((i64)S * (seg + 1)) / KSEG);  // first super-step of the next segment
  // End of segment seg: move its sum out of acc.
  auto flush = [&]() {
#pragma unroll
    for (int mw = 0; mw < MW; ++mw)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const float sum = acc[0][mw][nt][c] + acc[1][mw][nt][c];
          if (KW > 1)
            red[(((seg * WN + wn) * kUnits + mw * NT + nt) * 4 + c) * 32 + lane] = sum;
          else
            total[mw][nt][c] = seg == 0 ? sum : total[mw][nt][c] + sum;
          acc[0][mw][nt][c] = acc[1][mw][nt][c] = 0.f;
        }
    ++seg;
    seg_next = (int)(((i64)S * (seg + 1)) / KSEG);
  };

  u32 xs_lane[2] = {0u, 0u};  // XS: [j < 2, j >= 2] shared address of the lane's groups at k = 0 (set below)

  // Register ring: [slot][group][half][chunk] 16 bytes of weights + 1 scale byte.
  u32 wbuf[DEPTH][MW][2][2][4];
  u32 sbuf[DEPTH][MW][2][2];
  const u32 k_lane = 32u * q;
  // With XS (activations not in the loop's registers) the weight ring advances
  // by chunk (below); measured without XS at 4 CTAs per SM it was no faster.
  constexpr bool CHUNK_RING = XS > 0;
  // Chunk c (0, 1) of super-step s into a ring slot.
  auto load_chunk = [&](u32 (&wb)[MW][2][2][4], u32 (&sb)[MW][2][2], int s, int c) {
    const u32 k = (u32)s * kSuper + k_lane + 128u * c;
#pragma unroll
    for (int mw = 0; mw < MW; ++mw)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        // A chunk past K (or past this warp's range) has zero weights and
        // scale 127 (factor 1): a stray 0xFF scale would turn 0 into NaN.
        if (s < s_end && grp_ok[mw] && k < (u32)K) {
          // 128-byte L2 prefetch: as fast as 256 here, with a third less DRAM
          // over-read (docs/kernels.md, "Weight loads and the L2 prefetch size").
          ldg_stream_v4<128>(w_row[mw][half] + ((u32)s * (kSuper / 2) + 64u * c), wb[mw][half][c]);
          sb[mw][half][c] = ldg_u8(s_row[mw][half] + ((u32)s * (kSuper / 32) + 4u * c));
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) wb[mw][half][c][j] = 0u;
          sb[mw][half][c] = 127u;
        }
      }
  };
  auto load = [&](u32 (&wb)[MW][2][2][4], u32 (&sb)[MW][2][2], int s) {
#pragma unroll
    for (int c = 0; c < 2; ++c) load_chunk(wb, sb, s, c);
  };
  // One super-step. FAST: every E8M0 byte of the warp's step is <= 128, so one
  // bf16x2 multiply per pair applies the whole scale; otherwise the second
  // factor (e8m0_to_e2m1_factors) follows where needed. The two copies give
  // identical bits wherever both apply (2^(s-1) is the same first factor).
  auto compute_chunk = [&](const u32 (&wb)[MW][2][2][4], const u32 (&sb)[MW][2][2], int s, int c, bool fast) {
    {
      const u32 k = (u32)s * kSuper + k_lane + 128u * c;
      const bool k_ok = k < (u32)K;
      u32 f1[MW][2], f2[MW][2];
      bool big[MW][2];
#pragma unroll
      for (int mw = 0; mw < MW; ++mw)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          if (fast) {
            f1[mw][half] = e8m0_small_factor(sb[mw][half][c]);
            f2[mw][half] = 0u;
            big[mw][half] = false;
          } else {
            e8m0_to_e2m1_factors(sb[mw][half][c], f1[mw][half], f2[mw][half], big[mw][half]);
          }
        }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        u32 a[MW][2][4];
#pragma unroll
        for (int mw = 0; mw < MW; ++mw)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            dequant_word(wb[mw][half][c][j], f1[mw][half], a[mw][half]);
            if (!fast && big[mw][half]) scale_big(f2[mw][half], a[mw][half]);
          }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          // Past K the weights are zero; the activations must be too (0 * Inf).
          u32 b[4];
          if (XS > 0) {
            lds128(xs_lane[j >> 1] + (u32)s * 512u + 256u * c + 16u * j, b[0], b[1], b[2], b[3]);
          } else {
            u32 x[4] = {0u, 0u, 0u, 0u};
            if (k_ok) ldg_v4(x_row[nt] + ((u32)s * kSuper + 128u * c + 8u * j), x);
            x_pairs(x, b);
          }
#pragma unroll
          for (int mw = 0; mw < MW; ++mw) mma_word(acc[c][mw][nt], a[mw][0], a[mw][1], b);
        }
      }
    }
  };
  auto compute = [&](const u32 (&wb)[MW][2][2][4], const u32 (&sb)[MW][2][2], int s, bool fast) {
#pragma unroll
    for (int c = 0; c < 2; ++c) compute_chunk(wb, sb, s, c, fast);
  };
  // Any E8M0 byte above 128 in chunk c of the warp's step: the slow copy of the chunk.
  auto chunk_is_fast = [&](const u32 (&sb)[MW][2][2], int c) {
    u32 big = 0u;
#pragma unroll
    for (int mw = 0; mw < MW; ++mw)
#pragma unroll
      for (int half = 0; half < 2; ++half) big |= e8m0_big_bit(sb[mw][half][c]);
    return !__any_sync(0xffffffffu, big != 0u);
  };
  // Any E8M0 byte above 128 in the warp's step: the slow copy of the step.
  auto step_is_fast = [&](const u32 (&sb)[MW][2][2]) {
    u32 big = 0u;
#pragma unroll
    for (int mw = 0; mw < MW; ++mw)
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int c = 0; c < 2; ++c) big |= e8m0_big_bit(sb[mw][half][c]);
    return !__any_sync(0xffffffffu, big != 0u);
  };

#pragma unroll
  for (int d = 0; d < DEPTH; ++d) load(wbuf[d], sbuf[d], s_begin + d);
  // Activation row of the lane in each n8 tile (B column g), at the lane's first chunk.
  // A padding column reads the tile's first row: columns never mix, and the
  // epilogue stores only real rows, so no zero fill or predicate is needed.
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int r0 = row_begin + nt * 8 + g;
    const int r = r0 < row_end ? r0 : row_begin;
    const i64 src = FR ? (i64)fr_src : GATHER ? (i64)(p.sorted_route[r] / p.top_k) : (i64)r;
    x_row[nt] = p.a + src * p.a_row_stride + 32 * q;
  }

  // One n8 token tile (PREFETCH): the epilogue's operands (bias of the
  // thread's two fragment rows, router weights of its two token columns) are
  // loaded now, so their latency hides under the weight loop instead of
  // trailing it: the CTA's life at small T is a chain of memory round trips
  // (tile fields, each super-step's weights, then these), not its few
  // super-steps of arithmetic. Two token tiles keep the loads in the epilogue:
  // prefetched, they cost ~25 registers (152 -> 177) and a resident CTA.
  constexpr bool PREFETCH = NT == 1;
  float bias2[MW][2], gamma2[NT][2];
  // The router weights go through sorted_route, which with FR is written by
  // gate_up's CTA (0, 0), the launch just before down: with FR they wait.
  const bool gamma_after_wait = FR && p.tiles_ready;
  if (PREFETCH) {
#pragma unroll
    for (int mw = 0; mw < MW; ++mw) swapab_bias_pair<ACT, BIAS>(p, N, expert, n_warp + mw * 16, g, grp_ok[mw], bias2[mw]);
    if (!gamma_after_wait)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) swapab_gamma_pair<ROUTER_WEIGHT>(p, row_begin + nt * 8, row_end, q, gamma2[nt]);
  }

  if (p.tiles_ready) pdl_wait();
  // The activation loads (ldg_v4: asm without a memory operand, which the
  // compiler may move) take their addresses from here, after the wait.
  const u16* a_base = p.a;
  asm volatile("" : "+l"(a_base)::"memory");
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) asm volatile("" : "+l"(x_row[nt])::"memory");
  if (PREFETCH && gamma_after_wait)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) swapab_gamma_pair<ROUTER_WEIGHT>(p, row_begin + nt * 8, row_end, q, gamma2[nt]);

  // XS: stage the tile's activation rows (x_pairs order, zeros past K) once;
  // the lane then reads its B pairs with one shared load per weight word.
  extern __shared__ __align__(16) u8 xs_smem[];
  const u32 xs_pitch = (u32)S * 512u + 16u;
  if (XS > 0) {
    static_assert(XS == 0 || NT == 1, "staged activations need one n8 token tile");
    const int tile_rows = row_end - row_begin < XS ? row_end - row_begin : XS;
    const u32 base = smem_addr(xs_smem);
    const int groups = S * 32;
    for (int r = 0; r < tile_rows; ++r) {
      const int rr = row_begin + r;
      const i64 src = FR && GATHER ? (i64)__shfl_sync(0xffffffffu, fr_src, 4 * r)
                      : GATHER     ? (i64)(p.sorted_route[rr] / p.top_k)
                                   : (i64)rr;
      const u16* xr = a_base + src * p.a_row_stride;
      for (int gi = threadIdx.x; gi < groups; gi += 32 * WN * KW) {
        u32 x[4] = {0u, 0u, 0u, 0u}, b[4];
        if (gi * 8 < K) ldg_v4(xr + 8 * gi, x);
        x_pairs(x, b);
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(base + r * xs_pitch + 16u * xs_unit((u32)gi)),
                     "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]));
      }
    }
    __syncthreads();
    // Column g of the tile is row g (a padding column reads row 0). Group
    // 32 s + 16 c + 4 q + j sits at unit 32 s + 16 c + 4 q + (j ^ 2 (q >> 1)).
    const u32 row_base = base + (u32)(g < tile_rows ? g : 0) * xs_pitch + 64u * q;
    const u32 jx = 32u * (q >> 1);  // 16 bytes * (2 (q >> 1))
    xs_lane[0] = row_base + jx;     // j = 0, 1: unit j + 2 (q >> 1)
    xs_lane[1] = row_base - jx;     // j = 2, 3: unit j - 2 (q >> 1)
  }
  for (int s = s_begin; s < s_end; s += DEPTH) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      if (s + d < s_end) {
        if (CHUNK_RING) {
          // The ring advances one 32-k chunk at a time: chunk c of the step
          // DEPTH ahead is loaded as soon as chunk c is consumed, so the next
          // weights are in flight while chunk 1 is computed.
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            if (chunk_is_fast(sbuf[d], c))
              compute_chunk(wbuf[d], sbuf[d], s + d, c, true);
            else
              compute_chunk(wbuf[d], sbuf[d], s + d, c, false);
            load_chunk(wbuf[d], sbuf[d], s + d + DEPTH, c);
          }
        } else {
          if (step_is_fast(sbuf[d]))
            compute(wbuf[d], sbuf[d], s + d, true);
          else
            compute(wbuf[d], sbuf[d], s + d, false);
          load(wbuf[d], sbuf[d], s + d + DEPTH);
        }
        if (s + d + 1 == seg_next) flush();
      }
    }
  }

  // Epilogue: unit u = (mw, nt) of warp column wn is finished by warp row u % KW,
  // after adding the segments' sums in segment order. Without PREFETCH the
  // tile is re-read here rather than kept live across the loop (ptxas spilled
  // it otherwise) and swapab_epilogue loads the bias and router weights.
  if (!PREFETCH) {
    const volatile int* te = p.tile_expert;
    const volatile int* tb = p.tile_row_begin;
    const volatile int* tn = p.tile_row_end;
    expert = te[tile];
    row_begin = tb[tile];
    row_end = tn[tile];
  }
  auto finish = [&](int mw, int nt, const float (&v)[4]) {
    if (PREFETCH)
      swapab_epilogue_values<ACT, BIAS, OUT_F32>(p, n_warp + mw * 16, row_begin + nt * 8, row_end, v, bias2[mw],
                                                 gamma2[nt], g, q);
    else
      swapab_epilogue<ACT, BIAS, ROUTER_WEIGHT, OUT_F32>(p, expert, n_warp + mw * 16, row_begin + nt * 8, row_end, v,
                                                         g, q);
  };
  if (KW > 1) {
    __syncthreads();
#pragma unroll
    for (int mw = 0; mw < MW; ++mw)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int u = mw * NT + nt;
        if (u % KW != wk) continue;
        float v[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) v[c] = red[((wn * kUnits + u) * 4 + c) * 32 + lane];
        for (int sg = 1; sg < KSEG; ++sg)
#pragma unroll
          for (int c = 0; c < 4; ++c) v[c] += red[(((sg * WN + wn) * kUnits + u) * 4 + c) * 32 + lane];
        if (grp_ok[mw]) finish(mw, nt, v);
      }
  } else {
#pragma unroll
    for (int mw = 0; mw < MW; ++mw)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
        if (grp_ok[mw]) finish(mw, nt, total[mw][nt]);
  }
}

}  // namespace moejit
