// BF16 grouped GEMM for prefill, sm_90a: persistent, warp-specialized, both
// operands in shared memory ("bf16 WS").
//   gate_up: H[r] = act(X[t(r)] @ W1[e]^T + b1[e]);  down: Y[r] = gamma[r] * (H[r] @ W2[e]^T + b2[e]).
// A work item is a 128-row m-tile of one expert (two consumer warpgroups of
// 64 routed rows: the wgmma M dimension) times BN weight rows (the wgmma N
// dimension, 128 or 256), K in 64-wide slices. Same parameters and tile lists
// as the other grouped GEMMs (GroupedGemmParams; m-tiles of 128 rows).
//
// Roles (384 threads, one CTA per SM, grid <= the SM count):
//   warpgroup 0, the producer: for every slice of every work item the CTA
//     owns, waits for the ring slot to be free (empty mbarrier); thread 0
//     adds the weight tile's bytes to the slot's full mbarrier and issues
//     the TMA copy of the slice's BN weight rows (one box, or a gate box and
//     an up box; w_map below); every thread copies with cp.async its share of
//     the slice's 128 activation rows (gathered by token for gate_up: TMA
//     cannot gather rows on sm_90), then arrives on the full mbarrier with
//     cp.async.mbarrier.arrive.noinc. The barrier completes when the TMA
//     bytes and every thread's copies have landed; the producer never waits
//     for data (the cp.async protocol of grouped_gemm_mxfp4_ws_sm90.cuh, where
//     it is measured). Both tiles are K-major with 128-byte rows, 128-byte
//     swizzled.
//   warpgroups 1 and 2, the consumers: wait on the full mbarrier, issue four
//     m64nBNk16 wgmma per slice with both operands read by descriptor, keep
//     one wgmma group in flight and release a slot on its empty mbarrier once
//     the group that read it retired. A consumer warpgroup whose 64 rows lie
//     past the expert's last row issues no wgmma (it only passes the slots
//     back). The epilogue (bias, activation, router weight, store) runs while
//     the producer already fills the next item's slices.
// Work items: (m-tile, weight block) pairs walked by every CTA with stride
// gridDim.x, in groups of kBf16WsGroup consecutive m-tiles (an expert's
// m-tiles are consecutive in the tile list), weight-block major inside a
// group: the CTAs running at one time share a few weight blocks and one
// group's activation rows, so each weight block comes from DRAM about once
// per group and the rest of its reads hit L2. (m-tile major, every m-tile
// re-read its expert's whole weight matrix, more than L2 holds: gpt-oss-120b
// T = 16384 gate_up read 17 GB for 4.2 GB of weights.) The m-tile count
// comes from the routing kernel (device memory): no host synchronization,
// CUDA-graph capturable.
// Gated activations: the ring's first BN / 2 rows are the gate rows of BN / 2
// consecutive outputs, the last BN / 2 their up rows, so the gate and up
// accumulators of an output sit in the same thread (n8 blocks i and
// i + BN / 16).
// w_map, the weights [E, N, K] bf16 as a 4D tensor map (innermost first; box
// K 64 x the rows of one copy; 128-byte swizzle; src/ops/tensor_map.cpp):
//   no activation : {K, N, 1, E},     box {64, BN, 1, 1},     coordinates (k, n0, 0, e)
//   silu_gated    : {K, N / 2, 2, E}, box {64, BN / 2, 1, 1}, gate (k, c0, 0, e), up (k, c0, 1, e)
//                   (gate rows [0, N / 2), up rows [N / 2, N))
//   swiglu_oai    : {K, 2, N / 2, E}, box {64, 1, BN / 2, 1}, gate (k, 0, c0, e), up (k, 1, c0, e)
//                   (gate and up rows interleaved)
// Rows past N and k past K arrive as zeros (no tail code).
// Registers: every role fits the launch bound's 168 per thread (ptxas -v: no
// spills), so no warpgroup trades registers with setmaxnreg; the producer's
// unrolled copy addresses spill below about 160.
// Bits: each output element is a fixed-order sum over k of m64nBNk16 steps of
// its own routed row and weight row: padding rows cannot change a real row.
//
// ---- Tunable parameters (template arguments; src/ops/grouped_gemm_config.cpp) ----
//   BN     : weight rows per work item, 128 or 256 (accumulators: BN / 2 per consumer thread)
//   STAGES : ring depth (>= 2)
// Shared memory (bytes): 1024 (alignment) + STAGES * (128 * 128 + BN * 128) + STAGES * 16 (mbarriers).
// K % 32 == 0; K % 64 == 32 zero-fills the second half of the last slice (K_TAIL).
// N % 16 == 0.

namespace moejit {

// Register budgets per role (setmaxnreg; the CTA's pool: the consumers take
// at most what the producer gives up).
struct Bf16WsRegs {
  static constexpr int kLaunch = 168, kProducer = 40, kConsumer = 232;
  static_assert(128 * (kLaunch - kProducer) >= 256 * (kConsumer - kLaunch), "the consumers take what the producer releases");
};

template <int BN>
struct Bf16WsLayout {
  static constexpr int kBm = 128, kBk = 64;
  static constexpr int kXBytes = kBm * 128;  // activation rows of a slice, 128-byte swizzled
  static constexpr int kWBytes = BN * 128;   // weight rows of a slice, 128-byte swizzled
  static constexpr int kStageBytes = kXBytes + kWBytes;
  static constexpr int kThreads = 384;
};

// Work item -> (m-tile, weight block) in the grouped order above. The last
// group may hold fewer m-tiles.
constexpr int kBf16WsGroup = 8;
__device__ __forceinline__ void bf16_ws_item(int item, int tiles, int NB, int& tile, int& nb) {
  const int group = item / (kBf16WsGroup * NB);
  const int first = group * kBf16WsGroup;
  const int rows = min(kBf16WsGroup, tiles - first);
  const int within = item - group * kBf16WsGroup * NB;
  nb = within / rows;
  tile = first + (within - nb * rows);
}

template <int BIAS>
__device__ __forceinline__ float bf16_ws_bias(const void* bias, i64 i) {
  if (BIAS == kBiasF32) return ((const float*)bias)[i];
  if (BIAS == kBiasBf16) return bf16_bits_to_f32(((const u16*)bias)[i]);
  return 0.f;
}
template <int BN, int STAGES, int ACT, int BIAS, bool GATHER, bool ROUTER_WEIGHT, bool OUT_F32, bool K_TAIL>
__global__ void __launch_bounds__(384, 1) grouped_gemm_bf16_ws_kernel(const GroupedGemmParams p, const __grid_constant__ TensorMap w_map) {
  using L = Bf16WsLayout<BN>;
  static_assert(BN == 128 || BN == 256, "BN: 128 or 256 weight rows");
  static_assert(STAGES >= 2, "a ring of at least two slices");
  static_assert(!(OUT_F32 && ACT != kActNone), "gated activations write bf16");
  constexpr int BM = L::kBm, BK = L::kBk;
  constexpr bool GATED = ACT != kActNone;
  constexpr int NC = GATED ? BN / 2 : BN;  // output columns per item

  extern __shared__ __align__(128) u8 smem_raw[];
  const u32 base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const u32 x_ring = base;                          // STAGES * kXBytes (1024-byte aligned slots)
  const u32 w_ring = x_ring + STAGES * L::kXBytes;  // STAGES * kWBytes
  const u32 full_bar = w_ring + STAGES * L::kWBytes;  // STAGES mbarriers: slice landed
  const u32 empty_bar = full_bar + STAGES * 8;        // STAGES mbarriers: slot free
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_bar + 8 * s, 128);  // every producer thread
      mbar_init(empty_bar + 8 * s, 8);   // every consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the TMA unit
  }
  __syncthreads();
  pdl_wait();  // tile lists, X or H come from earlier launches
  pdl_launch_dependents();

  const int N = p.n, K = p.k;
  const int NOUT = GATED ? N / 2 : N;
  const int NB = (NOUT + NC - 1) / NC;
  const int KT = (K + BK - 1) / BK;
  const int tiles = *p.num_tiles;
  const int items = tiles * NB;

  if (warp < 4) {
    // ---------------- producer ----------------
    setmaxnreg_dec<Bf16WsRegs::kProducer>();
    if (tid == 0) tma_prefetch(&w_map);
    const int unit = tid & 7, row0 = tid >> 3;  // 16-byte unit of a 128-byte row; rows row0 + 16 j
    int it = 0;
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
      int tile, nb;
      bf16_ws_item(item, tiles, NB, tile, nb);
      const int c0 = nb * NC;
      const int expert = p.tile_expert[tile], row_begin = p.tile_row_begin[tile], row_end = p.tile_row_end[tile];
      int xrow[BM / 16];  // source row of X (gate_up: the token) or H, -1 past the tile's rows
#pragma unroll
      for (int j = 0; j < BM / 16; ++j) {
        const int r = row_begin + row0 + 16 * j;
        xrow[j] = r < row_end ? (GATHER ? p.sorted_route[r] / p.top_k : r) : -1;
      }
      for (int kt = 0; kt < KT; ++kt, ++it) {
        const int slot = it % STAGES;
        const u32 full = full_bar + 8 * slot;
        mbar_wait(empty_bar + 8 * slot, ((it / STAGES) & 1) ^ 1);
        const u32 ws = w_ring + slot * L::kWBytes;
        if (tid == 0) {
          mbar_expect_tx(full, L::kWBytes);
          if constexpr (ACT == kActNone) {
            tma_load_4d(ws, &w_map, full, kt * BK, c0, 0, expert);
          } else if constexpr (ACT == kActSiluGated) {
            tma_load_4d(ws, &w_map, full, kt * BK, c0, 0, expert);
            tma_load_4d(ws + BN / 2 * 128, &w_map, full, kt * BK, c0, 1, expert);
          } else {
            tma_load_4d(ws, &w_map, full, kt * BK, 0, c0, expert);
            tma_load_4d(ws + BN / 2 * 128, &w_map, full, kt * BK, 1, c0, expert);
          }
        }
        const int k = kt * BK + unit * 8;
        const bool k_ok = !K_TAIL || k < K;
        const u32 xs = x_ring + slot * L::kXBytes;
#pragma unroll
        for (int j = 0; j < BM / 16; ++j) {
          const int r = row0 + 16 * j;
          const bool live = xrow[j] >= 0 && k_ok;
          const u16* src = p.a + (live ? (i64)xrow[j] * p.a_row_stride + k : 0);
          cp_async_16(xs + r * 128 + ((unit ^ (r & 7)) << 4), src, live ? 16u : 0u);
        }
        cp_async_mbar_arrive(full_bar + 8 * slot);
      }
    }
    cp_async_wait_n<0>();
    return;
  }

  // ---------------- consumers ----------------
  setmaxnreg_inc<Bf16WsRegs::kConsumer>();
  const int wg = (warp - 4) >> 2;        // consumer warpgroup: tile rows 64 wg .. 64 wg + 63
  const int wr16 = ((warp - 4) & 3) * 16;  // the warp's 16 rows inside them
  const int g = lane >> 2, q = lane & 3;
  int it = 0;
  auto release = [&](int slot) {
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_bar + 8 * slot);
  };
  float acc[BN / 2];
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    int tile, nb;
    bf16_ws_item(item, tiles, NB, tile, nb);
    const int c0 = nb * NC;
    const int expert = p.tile_expert[tile], row_begin = p.tile_row_begin[tile], row_end = p.tile_row_end[tile];
    const bool active = row_begin + 64 * wg < row_end;  // warpgroup-uniform
    int pending = -1;  // slot whose wgmma group is still in flight
    for (int kt = 0; kt < KT; ++kt, ++it) {
      const int slot = it % STAGES;
      mbar_wait(full_bar + 8 * slot, (it / STAGES) & 1);
      if (!active) {
        release(slot);
        continue;
      }
      const u64 da = ws_desc_sw128(x_ring + slot * L::kXBytes + wg * 64 * 128);
      const u64 db = ws_desc_sw128(w_ring + slot * L::kWBytes);
      ws_wgmma_fence();
#pragma unroll
      for (int s = 0; s < BK / 16; ++s) wgmma_m64k16_ss<BN>(acc, da + 2 * s, db + 2 * s, kt > 0 || s > 0);
      ws_wgmma_commit();
      ws_wgmma_wait<1>();  // retires the group before this one
      if (pending >= 0) release(pending);
      pending = slot;
    }
    ws_wgmma_wait<0>();
    if (pending >= 0) release(pending);
    if (!active) continue;
    // Router weights of the thread's two rows. Loaded here, not before the K
    // loop: across it, their two registers spill next to 128 accumulators.
    const int r_lo = row_begin + 64 * wg + wr16 + g, r_hi = r_lo + 8;
    float gam_lo = 1.f, gam_hi = 1.f;
    if (ROUTER_WEIGHT) {
      if (r_lo < row_end) gam_lo = p.gamma[p.sorted_route[r_lo]];
      if (r_hi < row_end) gam_hi = p.gamma[p.sorted_route[r_hi]];
    }

    // Epilogue: acc[4i .. 4i + 3] is the m16n8 C fragment of n8 block i: rows
    // r_lo (elements 0, 1) and r_hi (2, 3), ring columns 8 i + 2 q, + 1.
    const i64 bias_row = (i64)expert * N;
    if constexpr (GATED) {
#pragma unroll
      for (int i = 0; i < BN / 16; ++i) {
        const int col = c0 + 8 * i + 2 * q;
        if (col >= NOUT) break;
        float bg[2] = {0.f, 0.f}, bu[2] = {0.f, 0.f};
        if (BIAS != kBiasNone) {
#pragma unroll
          for (int t = 0; t < 2; ++t) {
            const int c = col + t;
            bg[t] = bf16_ws_bias<BIAS>(p.bias, bias_row + (ACT == kActSiluGated ? c : 2 * c));
            bu[t] = bf16_ws_bias<BIAS>(p.bias, bias_row + (ACT == kActSiluGated ? (N >> 1) + c : 2 * c + 1));
          }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = h ? r_hi : r_lo;
          if (r >= row_end) continue;
          const float gm = h ? gam_hi : gam_lo;
          float o[2];
#pragma unroll
          for (int t = 0; t < 2; ++t)
            o[t] = gm * gated_act<ACT>(acc[4 * i + 2 * h + t] + bg[t], acc[4 * (i + BN / 16) + 2 * h + t] + bu[t],
                                       p.act_alpha, p.act_limit);
          *(u32*)((u16*)p.out + (i64)r * p.out_row_stride + col) = pack_bf16x2(o[0], o[1]);
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < BN / 8; ++i) {
        const int n = c0 + 8 * i + 2 * q;
        if (n >= NOUT) break;
        const float b[2] = {bf16_ws_bias<BIAS>(p.bias, bias_row + n), bf16_ws_bias<BIAS>(p.bias, bias_row + n + 1)};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = h ? r_hi : r_lo;
          if (r >= row_end) continue;
          const float gm = h ? gam_hi : gam_lo;
          const float v0 = (acc[4 * i + 2 * h] + b[0]) * gm, v1 = (acc[4 * i + 2 * h + 1] + b[1]) * gm;
          if (OUT_F32) {
            float* o = (float*)p.out + (i64)r * p.out_row_stride + n;
            o[0] = v0;
            o[1] = v1;
          } else {
            *(u32*)((u16*)p.out + (i64)r * p.out_row_stride + n) = pack_bf16x2(v0, v1);
          }
        }
      }
    }
  }
}

}  // namespace moejit
