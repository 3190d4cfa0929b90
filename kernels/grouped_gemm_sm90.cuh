// Grouped GEMM over expert-sorted routed rows (MoE gate_up and down projections),
// bf16 tensor cores (mma.sync m16n8k16), fp32 accumulation, for sm_90a.
//
//   gate_up: H[r] = act(X[t(r)] @ W1[e]^T + b1[e])   (X gathered by token in the loader)
//   down:    Y[r] = gamma[r] * (H[r] @ W2[e]^T + b2[e])
//
// Weights: bf16 [E, N, K], or MXFP4: e2m1 data [E, N, K/2] (even element in the
// low nibble) + E8M0 scales [E, N, K/32], dequantized to bf16 in registers.
//
// ---- Tunable parameters (MmaGemmKernel, kernels/kernel_configs.cuh: the
// fields in lower case; the host heuristic in src/ops/grouped_gemm_config.cpp
// chooses them from the specialization key) ----
//   WARPS_M, WARPS_N : warp grid of the CTA (THREADS = 32 * WARPS_M * WARPS_N)
//   MI, NI           : m16 tiles and n8 tiles per warp
//                      BM = 16 * MI * WARPS_M rows, BN = 8 * NI * WARPS_N columns
//   STAGES           : cp.async pipeline depth (shared memory ring of k-slices)
//   BK               : 64 (fixed): one k-slice; K % 32 == 0 is required, a partial
//                      last slice (K % 64 == 32) is zero-filled when K_TAIL.
//   split-K (gridDim.z, run time): CTA z reduces k-slices [KT*z/S, KT*(z+1)/S) and
//                      writes its partial sum to out + z * out_split_stride; only
//                      z = 0 adds the bias. For fp32 outputs (down) only (the
//                      heuristic refuses a bf16-out down key it would split); the
//                      combine sums the S partials in a fixed order. S comes from
//                      the heuristic (a function of the key), so a bucket always
//                      runs the same reduction order.
// Shared memory: STAGES * (A BM*128 B + B BN*128 B (bf16) or BN*32 B (MXFP4)), plus for
// MXFP4 all E8M0 scales of the CTA's BN weight rows, BN * scale_row_pitch(K) bytes.
//
// Why the scales are loaded once per tile: 2 bytes per row per k-slice are too
// small and too unaligned (K/32 bytes per row) for a pipelined cp.async, and a
// plain load per slice stalls every iteration for a whole memory latency. One
// 4-byte cp.async sweep over each row's aligned span at the start costs one latency.
//
// Why a permuted K order: within a 64-wide k-slice, lane q (= lane % 4) of the
// MMA owns k in [16q, 16q + 16) for all four k16 steps (step s uses
// 16q + 4s + {0..3}) instead of the MMA's natural {2q, 2q+1, 2q+8, 2q+9}. The
// reduction is a sum, so any permutation applied to both operands is exact;
// this one gives each lane 8 contiguous bytes of packed MXFP4 weights (one 64-bit
// shared load per slice, one E8M0 scale) and 8 contiguous bytes of activations
// per step. Rows never mix: every output element is a fixed-order sum over its
// own row, so padding rows cannot change a real row's bits.

namespace moejit {

template <int WARPS_M, int WARPS_N, int MI, int NI, int STAGES, int QUANT>
struct GroupedGemmTraits {
  static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
  static constexpr int kBM = 16 * MI * WARPS_M;
  static constexpr int kBN = 8 * NI * WARPS_N;
  static constexpr int kBK = 64;
  static constexpr int kABytes = kBM * kBK * 2;
  static constexpr int kBBytes = QUANT == kQuantMxfp4 ? kBN * kBK / 2 : kBN * kBK * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  // CTAs per SM the register allocation must allow (__launch_bounds__): 3 for
  // MXFP4 48-row tiles (<= 168 registers, no spills). 64-row MXFP4 tiles with a
  // bias and bf16 tiles keep more operands live and spill under that bound
  // (tests/cpu/test_kernel_sources.cpp checks every variant).
  static constexpr int kMinBlocks =
      (QUANT == kQuantMxfp4 && MI * WARPS_M == 3 && kThreads == 128) ? 3 : 1;
};

template <MmaGemmKernel C>
__global__ void __launch_bounds__(32 * C.warps_m * C.warps_n,
                                  GroupedGemmTraits<C.warps_m, C.warps_n, C.mi, C.ni, C.stages, C.quant>::kMinBlocks)
grouped_gemm_kernel(const GroupedGemmParams p) {
  constexpr int WARPS_M = C.warps_m, WARPS_N = C.warps_n, MI = C.mi, NI = C.ni, STAGES = C.stages, QUANT = C.quant;
  constexpr bool K_TAIL = C.k_tail;
  constexpr int ACT = C.epilogue.act, BIAS = C.epilogue.bias;
  constexpr bool GATHER = C.epilogue.gather, ROUTER_WEIGHT = C.epilogue.router_weight, OUT_F32 = C.epilogue.out_f32;
  using Tr = GroupedGemmTraits<WARPS_M, WARPS_N, MI, NI, STAGES, QUANT>;
  constexpr int THREADS = Tr::kThreads, BM = Tr::kBM, BN = Tr::kBN, BK = Tr::kBK;
  static_assert((BM * 8) % THREADS == 0, "A loader: BM*8 must be a multiple of THREADS");
  constexpr int A_ITERS = BM * 8 / THREADS;
  constexpr int B_CHUNKS = QUANT == kQuantMxfp4 ? BN * 2 : BN * 8;
  constexpr int B_ITERS = (B_CHUNKS + THREADS - 1) / THREADS;

  pdl_wait();  // the tile schedule and the activations come from earlier launches
  pdl_launch_dependents();
  const int tile = blockIdx.y;
  if (tile >= *p.num_tiles) return;
  const int expert = p.tile_expert[tile];
  const int row_begin = p.tile_row_begin[tile];
  const int row_end = p.tile_row_end[tile];
  const int N = p.n, K = p.k;
  const int n0 = blockIdx.x * BN;

  extern __shared__ __align__(128) u8 smem[];
  const u32 smem_base = smem_addr(smem);
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
  const int g = lane >> 2, q = lane & 3;

  // Per-thread A sources (the token gather happens once per tile).
  const u16* a_src[A_ITERS];
  bool a_ok[A_ITERS];
  const int a_chunk = tid & 7;
#pragma unroll
  for (int i = 0; i < A_ITERS; ++i) {
    const int row = (tid >> 3) + i * (THREADS / 8);
    const int r = row_begin + row;
    a_ok[i] = r < row_end;
    i64 src_row = 0;
    if (a_ok[i]) src_row = GATHER ? (i64)(p.sorted_route[r] / p.top_k) : (i64)r;
    a_src[i] = p.a + src_row * p.a_row_stride + a_chunk * 8;
  }

  const i64 w_row_bytes = QUANT == kQuantMxfp4 ? (i64)(K / 2) : (i64)K * 2;
  const u8* w_expert = p.w + (i64)expert * N * w_row_bytes;
  const int s_row_bytes = K / 32;
  const u8* s_expert = QUANT == kQuantMxfp4 ? p.w_scales + (i64)expert * N * s_row_bytes : nullptr;
  const int KT_ALL = (K + BK - 1) / BK;
  const int kt_begin = (int)(((i64)KT_ALL * blockIdx.z) / gridDim.z);
  const int KT = (int)(((i64)KT_ALL * (blockIdx.z + 1)) / gridDim.z) - kt_begin;

  auto load_stage = [&](int kt, int slot) {
    const int k0 = kt * BK;
    const u32 sa = smem_base + slot * Tr::kStageBytes;
    const u32 sb = sa + Tr::kABytes;
#pragma unroll
    for (int i = 0; i < A_ITERS; ++i) {
      const int row = (tid >> 3) + i * (THREADS / 8);
      const bool ok = a_ok[i] && (!K_TAIL || k0 + a_chunk * 8 < K);
      const u32 dst = sa + row * 128 + ((a_chunk ^ (row & 7)) << 4);
      cp_async_16(dst, ok ? (const void*)(a_src[i] + k0) : (const void*)p.a, ok ? 16u : 0u);
    }
#pragma unroll
    for (int i = 0; i < B_ITERS; ++i) {
      const int idx = tid + i * THREADS;
      if (B_CHUNKS % THREADS == 0 || idx < B_CHUNKS) {
        if (QUANT == kQuantMxfp4) {
          const int row = idx >> 1, c = idx & 1;
          const int n = n0 + row;
          const bool ok = n < N && (!K_TAIL || k0 + c * 32 < K);
          const u8* src = w_expert + (i64)physical_row<ACT>(n, N) * w_row_bytes + k0 / 2 + c * 16;
          cp_async_16(sb + row * 32 + c * 16, ok ? (const void*)src : (const void*)p.w, ok ? 16u : 0u);
        } else {
          const int row = idx >> 3, c = idx & 7;
          const int n = n0 + row;
          const bool ok = n < N && (!K_TAIL || k0 + c * 8 < K);
          const u8* src = w_expert + (i64)physical_row<ACT>(n, N) * w_row_bytes + (i64)k0 * 2 + c * 16;
          cp_async_16(sb + row * 128 + ((c ^ (row & 7)) << 4), ok ? (const void*)src : (const void*)p.w,
                      ok ? 16u : 0u);
        }
      }
    }
  };
  // MXFP4: the E8M0 scales of this CTA's BN weight rows, all of K, into shared
  // memory behind the pipeline ring (see the note at the top of the file).
  const int s_pitch = scale_row_pitch(K);
  const u32 s_table = smem_base + STAGES * Tr::kStageBytes;
  if (QUANT == kQuantMxfp4) {
    for (int row = warp; row < BN; row += THREADS / 32) {
      const int n = n0 + row;
      if (n >= N) continue;
      const i64 start = (i64)physical_row<ACT>(n, N) * s_row_bytes;
      const i64 astart = start & ~(i64)3;
      const int chunks = (int)(((start + s_row_bytes + 3) & ~(i64)3) - astart) / 4;
      for (int c = lane; c < chunks; c += 32)
        cp_async_4(s_table + row * s_pitch + c * 4, s_expert + astart + c * 4);
    }
  }
  // Offset of this lane's weight rows in the scale table (alignment slack included).
  int s_row_off[NI];
#pragma unroll
  for (int ni = 0; ni < NI; ++ni) {
    const int nl = warp_n * NI * 8 + ni * 8 + g;
    const int n = n0 + nl < N ? n0 + nl : N - 1;
    s_row_off[ni] = nl * s_pitch + (int)(((i64)physical_row<ACT>(n, N) * s_row_bytes) & 3);
  }

  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[mi][ni][c] = 0.f;

  // Prologue: fill STAGES-1 slices.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_stage(kt_begin + s, s);
    cp_async_commit();  // the scale sweep joins the first group
  }

  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = kt + STAGES - 1;
    const int next_slot = next % STAGES;
    if (next < KT) load_stage(kt_begin + next, next_slot);
    cp_async_commit();

    const int slot = kt % STAGES;
    const u32 sa = smem_base + slot * Tr::kStageBytes;
    const u32 sb = sa + Tr::kABytes;

    if (QUANT == kQuantMxfp4) {
      // MXFP4. The lane's 16 k of the slice, 16q..16q+15, are taken in the MMA
      // slot order {0,4},{1,5} (step 0), {2,6},{3,7} (step 1), then the same
      // on 8..15 (steps 2, 3): the pairs e2m1x8_to_bf16x2x4_scaled produces.
      // Activations are permuted to match with byte permutes on 16-byte loads.
      u32 wq[NI][2], f1[NI], f2[NI];
      bool big[NI];
      bool any_big = false;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int nl = warp_n * NI * 8 + ni * 8 + g;
        lds64(sb + nl * 32 + q * 8, wq[ni][0], wq[ni][1]);
        // K_TAIL: the missing half of the last slice has zero weights and no
        // scale; read none (a stray 0xFF byte would turn 0 into NaN).
        const int sj = (kt_begin + kt) * 2 + (q >> 1);
        const u32 sbyte = (K_TAIL && sj >= s_row_bytes) ? 127u : lds8(s_table + s_row_off[ni] + sj);
        e8m0_to_e2m1_factors(sbyte, f1[ni], f2[ni], big[ni]);
        any_big |= big[ni];
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        u32 bp[NI][4];
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
          e2m1x8_to_bf16x2x4_scaled(wq[ni][h], bp[ni]);
#pragma unroll
          for (int j = 0; j < 4; ++j) bp[ni][j] = mul_bf16x2(bp[ni][j], f1[ni]);
        }
        // Scales above 2 (E8M0 > 128) and NaN need a second factor; rare, so
        // the whole warp skips it unless a lane needs it.
        if (__any_sync(0xffffffffu, any_big)) {
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            if (big[ni]) {
#pragma unroll
              for (int j = 0; j < 4; ++j) bp[ni][j] = mul_bf16x2(bp[ni][j], f2[ni]);
            }
          }
        }
        // One m16 tile at a time keeps only 8 activation registers live.
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          const int row = warp_m * MI * 16 + mi * 16 + g;
          const u32 off = (((2 * q + h) ^ (row & 7)) << 4);
          u32 r0[4], r1[4];
          lds128(sa + row * 128 + off, r0[0], r0[1], r0[2], r0[3]);
          lds128(sa + (row + 8) * 128 + off, r1[0], r1[1], r1[2], r1[3]);
#pragma unroll
          for (int t = 0; t < 2; ++t) {
            u32 af[4];
            af[0] = prmt(r0[t], r0[t + 2], 0x5410);
            af[2] = prmt(r0[t], r0[t + 2], 0x7632);
            af[1] = prmt(r1[t], r1[t + 2], 0x5410);
            af[3] = prmt(r1[t], r1[t + 2], 0x7632);
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) mma_bf16_16816(acc[mi][ni], af, bp[ni][2 * t], bp[ni][2 * t + 1]);
          }
        }
      }
    } else {
      // bf16 weights: lane q's k of step s are 16q + 4s + {0..3}, the same
      // 8 contiguous bytes in A and B.
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        u32 af[MI][4];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          const int row = warp_m * MI * 16 + mi * 16 + g;
          const int chunk = 2 * q + (s >> 1);
          const u32 off = ((chunk ^ (row & 7)) << 4) + (s & 1) * 8;
          lds64(sa + row * 128 + off, af[mi][0], af[mi][2]);
          lds64(sa + (row + 8) * 128 + off, af[mi][1], af[mi][3]);
        }
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
          u32 b0, b1;
          const int nl = warp_n * NI * 8 + ni * 8 + g;
          const int chunk = 2 * q + (s >> 1);
          lds64(sb + nl * 128 + ((chunk ^ (nl & 7)) << 4) + (s & 1) * 8, b0, b1);
#pragma unroll
          for (int mi = 0; mi < MI; ++mi) mma_bf16_16816(acc[mi][ni], af[mi], b0, b1);
        }
      }
    }
  }
  cp_async_wait<0>();

  // Epilogue: bias, activation / router weight, store. d0,d1: row g, cols 2q,2q+1;
  // d2,d3: row g+8.
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = row_begin + warp_m * MI * 16 + mi * 16 + g + half * 8;
      if (r >= row_end) continue;
      float gamma = 1.f;
      if (ROUTER_WEIGHT) gamma = p.gamma[p.sorted_route[r]];
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int n = n0 + warp_n * NI * 8 + ni * 8 + 2 * q;
        if (n >= N) continue;
        store_column_pair<ACT, BIAS, OUT_F32>(p, expert, r, n, acc[mi][ni][half * 2 + 0], acc[mi][ni][half * 2 + 1],
                                              gamma, blockIdx.z == 0, blockIdx.z);
      }
    }
  }
}

}  // namespace moejit
