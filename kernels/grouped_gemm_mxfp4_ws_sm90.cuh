// MXFP4 grouped GEMM for prefill and the middle range, sm_90a: persistent,
// warp-specialized, weights as the wgmma A operand ("WS").
//   gate_up: H[r] = act(X[t(r)] @ W1[e]^T + b1[e]);  down: Y[r] = gamma[r] * (H[r] @ W2[e]^T + b2[e]).
// Computed as out^T = W X^T: 64 * CWG weight rows (CWG consumer warpgroups of
// 64, 16 per warp) times BM routed rows of one expert (the wgmma N dimension, 32 to
// 192), K in 64-wide slices. Same parameters and tile lists as the other
// grouped GEMMs (GroupedGemmParams; m-tiles of BM rows).
//
// Roles (128 * (1 + CWG) threads, one CTA per SM, grid <= the SM count):
//   warpgroup 0, the producer (WsRegs): for every slice of every work
//     item the CTA owns, waits for the ring slot to be free (empty mbarrier),
//     then thread 0 copies the slice's packed e2m1 weights (64 * CWG rows x 32
//     bytes) with one TMA box (w_map, src/ops/tensor_map.cpp packed_weight_map:
//     mbarrier transaction bytes), and every thread copies with cp.async its
//     share of the slice's BM activation rows (gathered by token for gate_up,
//     128-byte swizzled: the K-major B operand) and the two 4-byte words
//     holding each row's two E8M0 scales, then arms the slot's full mbarrier
//     with cp.async.mbarrier.arrive.noinc: the barrier completes when the box
//     and every producer thread's copies landed, and the producer never waits
//     for data. Why TMA for the weights: a row's 32 bytes of a slice lie K / 2
//     bytes from the next row's, so per-thread 16-byte copies cost the load
//     unit a cache line each (two per row and slice); the TMA unit walks the
//     box by itself.
//     Why not a wait_group + arrive: the producer then signals a slice only
//     after it could issue a later one, which ties the consumers' progress to
//     a producer round trip per slice (measured: T = 512 gate_up 1119 us
//     against 963 with the hardware-armed arrival).
//   warpgroups 1 .. CWG, the consumers (WsRegs): wait on the full
//     mbarrier, build their wgmma A fragments straight from the packed weights
//     in registers (half a slice at a time: one E8M0 scale per row; about four
//     instructions per bf16x2 with the activations in the fragment k order,
//     K_ORDER_IN, six without: below), issue m64nBMk16 wgmma with B from the ring, and
//     release a slot on its empty mbarrier once the wgmmas that read it have
//     retired. The epilogue (bias, activation, router weight, store) of a work
//     item runs while the producer already fills the next item's slices.
// Work items: (m-tile, 64 * CWG-row weight block) pairs, m-tile major, walked by
// every CTA with stride gridDim.x: CTAs running at the same time share an
// m-tile's activation rows in L2. The m-tile count comes from the routing
// kernel (device memory): no host synchronization, CUDA-graph capturable.
// Why the consumers issue no loads: in the single-role weights-as-A kernel
// every warp also issued the cp.async of its share of the next slices and
// waited at a CTA barrier per slice; here the consumers' per-slice work is the
// dequantization and the wgmma, and nothing else.
// Bits: each output element is a fixed-order sum over k of m64nBMk16 steps of
// its own weight row and routed row: padding rows cannot change a real row.
//
// ---- Tunable parameters (Mxfp4WsKernel, kernels/kernel_configs.cuh: the
// fields in lower case; chosen in src/ops/grouped_gemm_config.cpp) ----
//   BM     : routed rows per m-tile, 32, 64, 128 or 192 (accumulators: BM / 2 per consumer thread;
//            ptxas allocates every role within the launch bound's 168 registers, so 256 spills)
//   CWG    : consumer warpgroups, 2 or 4 (four hide the dequantization's
//            latency with 16 consumer warps per SM; their 96-register budget
//            holds the accumulators of BM <= 64 only)
//   STAGES : ring depth (>= 2)
//   K_ORDER_IN  : the activation rows (X or H) hold each 32-column block in the
//                 fragment k order (mxfp4_fragments.cuh, fragment_k_position):
//                 a thread's e2m1 pairs are then nibbles i and i + 4 of one
//                 packed word (e2m1x8_to_bf16x2x4_scaled, one LDS.32 per row
//                 and half slice). Without it a pair is the two nibbles of
//                 byte q of each word: a byte permute and a 4-bit shift more
//                 per pair, and 16-byte shared loads of which a thread uses 4.
//                 The MoE layer's H (gate_up -> down) is written in that order.
//   K_ORDER_OUT : store the output columns in the fragment k order (gate_up's H
//                 for a K_ORDER_IN down).
// Shared memory (bytes): 1024 (alignment) + STAGES * (BM * 128 + BN * 32 + BN * 8) + STAGES * 16 (mbarriers)
// + 2 * BM * 4 (router weights), BN = 64 * CWG.
// K % 32 == 0; K % 64 == 32 zero-fills the second half of the last slice (K_TAIL).
// N % 16 == 0 (a warp's 16 rows are all in or all out). w_scales 4-byte aligned.

namespace moejit {

// Byte q of the packed word x (two e2m1 codes: k even in the low nibble) ->
// bf16x2 {even, odd} scaled by f1 (e8m0_small_factor). sel = q | (4 + q) << 8.
__device__ __forceinline__ u32 ws_e2m1_byte_to_bf16x2(u32 x, u32 sel, u32 f1) {
  const u32 t = prmt(x, x >> 4, sel) & 0x000F000Fu;
  return mul_bf16x2((t * 0x1040u) & 0x81C081C0u, f1);
}

// Register budget. A CTA's warps trade registers through the CTA's own pool:
// setmaxnreg.inc waits until warps of the same CTA released enough with
// setmaxnreg.dec, so the consumers may take at most what the producer gives
// up: 128 * (kLaunch - kProducer) >= 128 * CWG * (kConsumer - kLaunch).
// ptxas reports for a kernel with setmaxnreg the launch bound's whole budget
// (65536 / threads, rounded down to 8: 168 with two consumer warpgroups, 96
// with four; the CPU kernel-source test checks every variant reports it) and
// allocates each role's code within that role's setmaxnreg budget.
template <int CWG>
struct WsRegs {
  static constexpr int kThreads = 128 * (1 + CWG);
  static constexpr int kLaunch = (65536 / kThreads) & ~7;
  static constexpr int kProducer = CWG == 2 ? 80 : 56;
  static constexpr int kConsumer = (kLaunch + (kLaunch - kProducer) / CWG) & ~7;
  static_assert(128 * (kLaunch - kProducer) >= 128 * CWG * (kConsumer - kLaunch),
                "the consumers cannot take more registers than the producer releases");
};

template <int BM, int CWG>
struct WsLayout {
  static constexpr int kBn = 64 * CWG, kBk = 64;
  static constexpr int kXBytes = BM * 128;    // activation rows of a slice, 128-byte swizzled
  static constexpr int kWBytes = kBn * 32;    // packed weights: ring row rr at rr * 32
  static constexpr int kSBytes = kBn * 8;     // two scale words per ring row
  static constexpr int kStageBytes = kXBytes + kWBytes + kSBytes;
};

template <Mxfp4WsKernel C>
__global__ void __launch_bounds__(WsRegs<C.cwg>::kThreads, 1) grouped_gemm_mxfp4_ws_kernel(const GroupedGemmParams p,
                                                                                          const __grid_constant__ TensorMap w_map) {
  constexpr int BM = C.bm, CWG = C.cwg, STAGES = C.stages;
  constexpr bool K_TAIL = C.k_tail, K_ORDER_IN = C.k_order_in, K_ORDER_OUT = C.k_order_out;
  constexpr int ACT = C.epilogue.act, BIAS = C.epilogue.bias;
  constexpr bool GATHER = C.epilogue.gather, ROUTER_WEIGHT = C.epilogue.router_weight, OUT_F32 = C.epilogue.out_f32;
  using L = WsLayout<BM, CWG>;
  using R = WsRegs<CWG>;
  static_assert(CWG == 2 || CWG == 4, "two or four consumer warpgroups");
  constexpr int BN = L::kBn, BK = L::kBk;
  static_assert(BM == 32 || BM == 64 || BM == 128 || BM == 192, "BM: 32, 64, 128 or 192 routed rows");
  static_assert(STAGES >= 2, "a ring of at least two slices");
  static_assert(!(OUT_F32 && ACT != kActNone), "gated activations write bf16");

  extern __shared__ __align__(128) u8 smem_raw[];
  const u32 base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const u32 x_ring = base;                               // STAGES * kXBytes (1024-byte aligned slots)
  const u32 w_ring = x_ring + STAGES * L::kXBytes;       // STAGES * kWBytes
  const u32 s_ring = w_ring + STAGES * L::kWBytes;       // STAGES * kSBytes
  const u32 full_bar = s_ring + STAGES * L::kSBytes;     // STAGES mbarriers: slice landed
  const u32 empty_bar = full_bar + STAGES * 8;           // STAGES mbarriers: slot free
  // Router weights of the routed rows of the last two work items (down), by item parity.
  float* s_gamma = (float*)(smem_raw + (empty_bar + STAGES * 8 - smem_addr(smem_raw)));
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_bar + 8 * s, 128);  // every producer thread
      mbar_init(empty_bar + 8 * s, 4 * CWG);  // every consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the TMA unit
  }
  __syncthreads();
  pdl_wait();  // tile lists, X or H come from earlier launches
  pdl_launch_dependents();

  const int N = p.n, K = p.k;
  const int NB = (N + BN - 1) / BN;
  const int KT = (K + BK - 1) / BK;
  const int items = *p.num_tiles * NB;
  const int s_row_bytes = K / 32;
  // Logical weight row of ring row rr of block n0 -> physical row (gated activations interleave gate and up).
  auto ring_row_phys = [&](int expert, int n0, int rr) {
    return (i64)expert * N + physical_row<ACT>(group_row<ACT>(n0 + (rr & ~15), rr & 15), N);
  };

  if (warp < 4) {
    // ---------------- producer ----------------
    setmaxnreg_dec<R::kProducer>();
    if (tid == 0) tma_prefetch(&w_map);
    constexpr int X_ROWS = BM / 16;  // rows per thread per slice: unit tid % 8 of rows tid / 8 + 16 j
    const int unit = tid & 7, row0 = tid >> 3;
    const i64 scale_total = (i64)p.num_experts * N * s_row_bytes;  // bytes of w_scales
    int it = 0;
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
      const int tile = item / NB, n0 = (item - tile * NB) * BN;
      const int expert = p.tile_expert[tile], row_begin = p.tile_row_begin[tile], row_end = p.tile_row_end[tile];
      int xrow[X_ROWS];  // source row of X (gate_up: the token) or H, -1 past the tile's rows
#pragma unroll
      for (int j = 0; j < X_ROWS; ++j) {
        const int r = row_begin + row0 + 16 * j;
        xrow[j] = r < row_end ? (GATHER ? p.sorted_route[r] / p.top_k : r) : -1;
      }
      // Scales: ring rows tid + 128 j.
      i64 s_start[CWG / 2];
#pragma unroll
      for (int j = 0; j < CWG / 2; ++j) {
        const int rr = tid + 128 * j;
        s_start[j] = n0 + (rr & ~15) < N ? ring_row_phys(expert, n0, rr) * s_row_bytes : -1;
      }
      for (int kt = 0; kt < KT; ++kt, ++it) {
        const int slot = it % STAGES;
        mbar_wait(empty_bar + 8 * slot, ((it / STAGES) & 1) ^ 1);
        const int k0 = kt * BK;
        const u32 xs = x_ring + slot * L::kXBytes;
#pragma unroll
        for (int j = 0; j < X_ROWS; ++j) {
          const int r = row0 + 16 * j;
          const bool live = xrow[j] >= 0 && (!K_TAIL || k0 + unit * 8 < K);
          const u16* src = p.a + (i64)(live ? xrow[j] : 0) * p.a_row_stride + (live ? k0 + unit * 8 : 0);
          cp_async_16(xs + r * 128 + ((unit ^ (r & 7)) << 4), src, live ? 16u : 0u);
        }
        if (tid == 0) {  // the block's packed weights: one TMA box, ring row rr at rr * 32 (zeros past K and N)
          mbar_expect_tx(full_bar + 8 * slot, L::kWBytes);
          tma_load_5d(w_ring + slot * L::kWBytes, &w_map, full_bar + 8 * slot, k0 / 2, 0, 0, n0 / 16, expert);
        }
        // The row's scales of this slice (bytes s_start + 2 kt, + 1) lie in
        // the two aligned words from (s_start + 2 kt) & ~3.
#pragma unroll
        for (int j = 0; j < CWG; ++j) {
          const i64 start = s_start[j >> 1];
          const i64 word = start < 0 ? -1 : ((start + 2 * kt) & ~(i64)3) + 4 * (j & 1);
          const i64 left = word < 0 ? 0 : scale_total - word;
          const u32 bytes = left <= 0 ? 0u : left >= 4 ? 4u : (u32)left;
          cp_async_4z(s_ring + slot * L::kSBytes + (tid + 128 * (j >> 1)) * 8 + 4 * (j & 1),
                      bytes ? (const void*)(p.w_scales + word) : (const void*)p.w_scales, bytes);
        }
        cp_async_mbar_arrive(full_bar + 8 * slot);
      }
    }
    cp_async_wait_n<0>();
    return;
  }

  // ---------------- consumers ----------------
  setmaxnreg_inc<R::kConsumer>();
  const int cw = warp - 4;  // consumer warp 0 .. 4 CWG - 1: ring rows 16 cw .. 16 cw + 15
  const int g = lane >> 2, q = lane & 3;
  const u32 sel = (u32)q | ((u32)(4 + q) << 8);
  int it = 0, item_parity = 0;
  const int ct = tid - 128;  // consumer thread 0 .. 128 CWG - 1
  int pending = -1;  // slot whose last wgmma group is still in flight
  auto release = [&](int slot) {
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_bar + 8 * slot);
  };
  float acc[BM / 2];
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const int tile = item / NB, n0 = (item - tile * NB) * BN;
    const int expert = p.tile_expert[tile], row_begin = p.tile_row_begin[tile], row_end = p.tile_row_end[tile];
    const int L0 = n0 + 16 * cw;
    const bool grp_ok = L0 < N;
    float my_gamma = 1.f;  // router weight of routed row row_begin + ct (ct < BM)
    if (ROUTER_WEIGHT && ct < BM && row_begin + ct < row_end) my_gamma = p.gamma[p.sorted_route[row_begin + ct]];
    // Byte of this slice's first scale inside the slot's two words, per fragment row (g, g + 8).
    int s_phase[2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
      s_phase[h] = grp_ok ? (int)((ring_row_phys(expert, n0, 16 * cw + g + 8 * h) * s_row_bytes) & 3) : 0;
#pragma unroll
    for (int i = 0; i < BM / 2; ++i) acc[i] = 0.f;

    // A fragments of half c (k 32 c .. 32 c + 31) of slice kt in `slot`:
    // a[4 s + j] for k16 step s, j as in wgmma_m64k16_rs.
    auto build_half = [&](int slot, int kt, int c, u32 (&a)[8]) {
      const u32 wq = w_ring + slot * L::kWBytes + (16 * cw + g) * 32 + 16 * c;
      u32 sb[2], f1[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const u32 at = s_ring + slot * L::kSBytes + (16 * cw + g + 8 * h) * 8 + ((s_phase[h] + 2 * kt) & 3) + c;
        // K_TAIL: no scale for the zero half past K (a stray 0xFF would make NaN).
        sb[h] = (K_TAIL && 2 * kt + c >= s_row_bytes) || !grp_ok ? 127u : lds8(at);
        f1[h] = e8m0_small_factor(min(sb[h], 128u));
      }
      if constexpr (K_ORDER_IN) {
        // Word q of the row's 16 bytes: its pairs {i, i + 4} are fragment k
        // {2q, 2q + 1} (i = 0), {2q + 8, 2q + 9} (1) of k16 step 0 and the same
        // of step 1 (i = 2, 3) in the activations' fragment k order.
        u32 pr[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          e2m1x8_to_bf16x2x4_scaled(lds32(wq + h * 8 * 32 + 4 * q), pr[h]);
#pragma unroll
          for (int i = 0; i < 4; ++i) pr[h][i] = mul_bf16x2(pr[h][i], f1[h]);
        }
#pragma unroll
        for (int s = 0; s < 2; ++s)
#pragma unroll
          for (int j = 0; j < 4; ++j) a[4 * s + j] = pr[j & 1][2 * s + (j >> 1)];
      } else {
        u32 w[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) lds128(wq + h * 8 * 32, w[h][0], w[h][1], w[h][2], w[h][3]);
#pragma unroll
        for (int s = 0; s < 2; ++s)
#pragma unroll
          for (int j = 0; j < 4; ++j) a[4 * s + j] = ws_e2m1_byte_to_bf16x2(w[j & 1][2 * s + (j >> 1)], sel, f1[j & 1]);
      }
      // The second factor (E8M0 above 128, or NaN) only when some lane of the warp needs it.
      if (__any_sync(0xffffffffu, e8m0_big_bit(sb[0]) | e8m0_big_bit(sb[1]))) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          u32 f1b, f2;
          bool big;
          e8m0_to_e2m1_factors(sb[h], f1b, f2, big);
          if (big) {
#pragma unroll
            for (int i = h; i < 8; i += 2) a[i] = mul_bf16x2(a[i], f2);
          }
        }
      }
    };
    auto mma_half = [&](int slot, int c, const u32 (&a)[8]) {
      ws_wgmma_fence();
      const u64 desc = ws_desc_sw128(x_ring + slot * L::kXBytes);
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const u32 as[4] = {a[4 * s], a[4 * s + 1], a[4 * s + 2], a[4 * s + 3]};
        wgmma_m64k16_rs<BM>(acc, as, desc + 2 * (2 * c + s));
      }
      ws_wgmma_commit();
      ws_wgmma_wait<1>();  // retires the group before this one
    };

    u32 a_lo[8], a_hi[8];
    for (int kt = 0; kt < KT; ++kt, ++it) {
      const int slot = it % STAGES;
      mbar_wait(full_bar + 8 * slot, (it / STAGES) & 1);

      build_half(slot, kt, 0, a_lo);
      mma_half(slot, 0, a_lo);
      if (pending >= 0) release(pending);  // its second half just retired
      build_half(slot, kt, 1, a_hi);
      mma_half(slot, 1, a_hi);
      pending = slot;
    }
    ws_wgmma_wait<0>();
    if (pending >= 0) release(pending);
    pending = -1;
    // The epilogue's router weights: loaded (two dependent loads) before the
    // K loop, written to shared memory after it, so their latency hides under
    // the loop. The named barrier of the consumers also tells that every
    // consumer is done with the buffer of two items ago.
    float* gam = s_gamma + item_parity * BM;
    if constexpr (ROUTER_WEIGHT) {
      if (ct < BM) gam[ct] = my_gamma;
      asm volatile("bar.sync 1, %0;\n" ::"n"(128 * CWG) : "memory");
    }
    item_parity ^= 1;

    // Epilogue: acc[4i .. 4i + 3] is the m16n8 C fragment of the warp's 16
    // output columns and routed rows row_begin + 8 i ...
    if (!grp_ok) continue;
    float bias2[2];
    swapab_bias_pair<ACT, BIAS>(p, N, expert, L0, g, true, bias2);
#pragma unroll
    for (int i = 0; i < BM / 8; ++i) {
      const int rows = row_begin + 8 * i;
      if (rows >= row_end) break;  // warp-uniform
      float gamma2[2];
#pragma unroll
      for (int t = 0; t < 2; ++t) gamma2[t] = ROUTER_WEIGHT ? gam[8 * i + 2 * q + t] : 1.f;
      const float v[4] = {acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]};
      // Gated: one output per routed row and column pair (gate, up); K_ORDER_OUT
      // without activation: one store per value at its column's position.
      if constexpr (ACT != kActNone || K_ORDER_OUT) {
        swapab_epilogue_values<ACT, BIAS, OUT_F32, K_ORDER_OUT>(p, L0, rows, row_end, v, bias2, gamma2, g, q);
      } else {
      // No activation: lanes g and g ^ 1 trade values so that each stores two
      // adjacent columns of one routed row (even g: row 2q, columns g, g + 1
      // and + 8; odd g: row 2q + 1, columns g - 1, g and + 8).
      float y[4];
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          float val = v[2 * half + t];
          if (BIAS != kBiasNone) val += bias2[half];
          y[2 * half + t] = val * gamma2[t];
        }
      const bool odd = g & 1;
      const float x0 = __shfl_xor_sync(0xffffffffu, odd ? y[0] : y[1], 4);
      const float x1 = __shfl_xor_sync(0xffffffffu, odd ? y[2] : y[3], 4);
      const int r = rows + 2 * q + (odd ? 1 : 0);
      const int n = L0 + (g & ~1);
      const float lo0 = odd ? x0 : y[0], hi0 = odd ? y[1] : x0;
      const float lo1 = odd ? x1 : y[2], hi1 = odd ? y[3] : x1;
      if (r >= row_end) {
      } else if (OUT_F32) {
        float* o = (float*)p.out + (i64)r * p.out_row_stride + n;
        o[0] = lo0;
        o[1] = hi0;
        o[8] = lo1;
        o[9] = hi1;
      } else {
        u16* o = (u16*)p.out + (i64)r * p.out_row_stride + n;
        *(u32*)o = pack_bf16x2(lo0, hi0);
        *(u32*)(o + 8) = pack_bf16x2(lo1, hi1);
      }
      }
    }
  }
}

}  // namespace moejit
