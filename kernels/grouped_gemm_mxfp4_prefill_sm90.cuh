// MXFP4 grouped GEMM for prefill (many routed rows per expert), sm_90a:
// out^T = W X^T with mma.sync m16n8k16, MXFP4 weights as the A operand,
// a tile of up to 8 * NT routed rows of one expert as the B operand.
// Same semantics and parameters as grouped_gemm_sm90.cuh (GroupedGemmParams).
//
// Why swap AB here too: each lane dequantizes a weight word once and feeds it to
// NT MMAs (one per n8 token tile), and the weights go global -> registers with
// no shared memory round trip; only the activation tile, shared by all warps of
// the CTA, goes through a cp.async ring in shared memory. Instruction count per
// MMA (dequantization / NT, activation permutes / MW, 1 HMMA) is about half of
// the activations-as-A kernel's. n8 tiles past the tile's last row are skipped,
// so an expert's last tile pads to 8 rows, not to 8 * NT.
//
// ---- Tunable parameters (template arguments; src/ops/grouped_gemm_config.cpp) ----
//   WARPS  : warps of the CTA, each on MW groups of 16 weight rows (BN = 16 * MW * WARPS)
//   MW     : 16-row weight groups per warp
//   NT     : n8 token tiles (BM = 8 * NT routed rows)
//   STAGES : activation slices in the shared memory ring (BM * 256 bytes each)
//   DEPTH  : weight slices in flight per warp, in registers (16 * MW registers each)
//   Slice  : 128 k; lane q owns k [32q, 32q + 32) of it (one 16-byte chunk per row).
// Shared memory: STAGES * BM * 256 bytes. Requirements (host-checked): K % 32 == 0, N % 16 == 0.

namespace moejit {

// Shared-memory slot of 16-byte activation chunk c (0..15) of tile row r: lane
// (g, q) reads chunk 4q + j of row g, so a quarter warp (rows 2i, 2i+1; q 0..3)
// must hit 8 distinct 16-byte bank groups: fold chunk bit 3 into bit 1 and the
// row parity into bit 0.
__device__ __forceinline__ int x_slot(int r, int c) { return c ^ ((c >> 3) << 1) ^ (r & 1); }

template <int WARPS, int MW, int NT, int STAGES, int DEPTH, int ACT, int BIAS, bool GATHER, bool ROUTER_WEIGHT,
          bool OUT_F32>
__global__ void __launch_bounds__(32 * WARPS) grouped_gemm_mxfp4_prefill_kernel(const GroupedGemmParams p) {
  constexpr int kSlice = 128;
  constexpr int BM = 8 * NT;
  constexpr int kThreads = 32 * WARPS;
  constexpr int kRowBytes = kSlice * 2;
  constexpr int kStageBytes = BM * kRowBytes;
  constexpr int kXChunks = BM * 16;
  static_assert(kXChunks % kThreads == 0, "activation loader: BM * 16 must be a multiple of the CTA size");
  constexpr int X_ITERS = kXChunks / kThreads;

  const int tile = blockIdx.y;
  if (tile >= *p.num_tiles) return;
  const int expert = p.tile_expert[tile];
  const int row_begin = p.tile_row_begin[tile];
  const int row_end = p.tile_row_end[tile];
  const int N = p.n, K = p.k;
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int n_warp = (blockIdx.x * WARPS + warp) * 16 * MW;
  // n8 tiles holding real rows (warp-uniform); the rest are skipped.
  const int rows = row_end - row_begin;
  const int nt_valid = rows >= BM ? NT : (rows + 7) / 8;

  extern __shared__ __align__(128) u8 smem[];
  const u32 smem_base = smem_addr(smem);

  // Activation loader: chunk c of tile row r per iteration (the gather by token
  // happens once per tile).
  const u16* x_src[X_ITERS];
  bool x_ok[X_ITERS];
#pragma unroll
  for (int i = 0; i < X_ITERS; ++i) {
    const int idx = tid + i * kThreads;
    const int r = row_begin + (idx >> 4);
    x_ok[i] = r < row_end;
    i64 src = 0;
    if (x_ok[i]) src = GATHER ? (i64)(p.sorted_route[r] / p.top_k) : (i64)r;
    x_src[i] = p.a + src * p.a_row_stride + (idx & 15) * 8;
  }
  auto load_x = [&](int kt, int slot) {
    const u32 base = smem_base + slot * kStageBytes;
#pragma unroll
    for (int i = 0; i < X_ITERS; ++i) {
      const int idx = tid + i * kThreads;
      const int r = idx >> 4, c = idx & 15;
      const int k = kt * kSlice + c * 8;
      // Zero past K: the weights there are zero, and 0 * garbage may be NaN.
      const bool ok = x_ok[i] && k < K;
      cp_async_16(base + r * kRowBytes + (x_slot(r, c) << 4), ok ? (const void*)(x_src[i] + kt * kSlice) : (const void*)p.a,
                  ok ? 16u : 0u);
    }
  };

  // Weight and scale rows of the lane: fragment rows g (half 0) and g + 8 (half 1).
  const i64 w_row_bytes = K / 2;
  const int s_row_bytes = K / 32;
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
      w_row[mw][half] = p.w + phys * w_row_bytes;
      s_row[mw][half] = p.w_scales + phys * s_row_bytes;
    }
  }
  const int KT = (K + kSlice - 1) / kSlice;
  auto load_w = [&](u32 (&wb)[MW][2][4], u32 (&sb)[MW][2], int kt) {
    const int k = kt * kSlice + 32 * q;
#pragma unroll
    for (int mw = 0; mw < MW; ++mw)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        if (kt < KT && grp_ok[mw] && k < K) {
          ldg_stream_v4(w_row[mw][half] + k / 2, wb[mw][half]);
          sb[mw][half] = ldg_u8(s_row[mw][half] + k / 32);
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) wb[mw][half][j] = 0u;
          sb[mw][half] = 127u;  // factor 1 for the zero weights past K
        }
      }
  };

  float acc[MW][NT][4];
#pragma unroll
  for (int mw = 0; mw < MW; ++mw)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[mw][nt][c] = 0.f;

  auto compute = [&](const u32 (&wb)[MW][2][4], const u32 (&sb)[MW][2], int slot) {
    const u32 xs = smem_base + slot * kStageBytes;
    u32 f1[MW][2], f2[MW][2];
    bool big[MW][2];
    bool any_big = false;
#pragma unroll
    for (int mw = 0; mw < MW; ++mw)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        e8m0_to_e2m1_factors(sb[mw][half], f1[mw][half], f2[mw][half], big[mw][half]);
        any_big |= big[mw][half];
      }
    const bool warp_big = __any_sync(0xffffffffu, any_big);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      u32 a[MW][2][4];
#pragma unroll
      for (int mw = 0; mw < MW; ++mw)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          dequant_word(wb[mw][half][j], f1[mw][half], a[mw][half]);
          if (warp_big && big[mw][half]) scale_big(f2[mw][half], a[mw][half]);
        }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        if (nt < nt_valid) {
          const int r = nt * 8 + g;
          u32 x[4], b[4];
          lds128(xs + r * kRowBytes + (x_slot(r, 4 * q + j) << 4), x[0], x[1], x[2], x[3]);
          x_pairs(x, b);
#pragma unroll
          for (int mw = 0; mw < MW; ++mw) mma_word(acc[mw][nt], a[mw][0], a[mw][1], b);
        }
      }
    }
  };

  // Prologue: STAGES - 1 activation slices, DEPTH weight slices.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_x(s, s);
    cp_async_commit();
  }
  u32 wbuf[DEPTH][MW][2][4];
  u32 sbuf[DEPTH][MW][2];
#pragma unroll
  for (int d = 0; d < DEPTH; ++d) load_w(wbuf[d], sbuf[d], d);

  for (int kt0 = 0; kt0 < KT; kt0 += DEPTH) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      const int kt = kt0 + d;
      if (kt < KT) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int next = kt + STAGES - 1;
        if (next < KT) load_x(next, next % STAGES);
        cp_async_commit();
        compute(wbuf[d], sbuf[d], kt % STAGES);
        load_w(wbuf[d], sbuf[d], kt + DEPTH);
      }
    }
  }
  cp_async_wait<0>();

#pragma unroll
  for (int mw = 0; mw < MW; ++mw)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      if (grp_ok[mw] && nt < nt_valid)
        swapab_epilogue<ACT, BIAS, ROUTER_WEIGHT, OUT_F32>(p, expert, n_warp + mw * 16, row_begin + nt * 8, row_end,
                                                           acc[mw][nt], g, q);
}

}  // namespace moejit
