// Grouped GEMM for prefill with bf16 or e4m3 operands, sm_90a: persistent,
// warp-specialized, TMA weight tiles, wgmma with both operands in shared
// memory ("TMA WS"). One mainloop for the bf16 layer and both FP8 layers:
//   gate_up: H[r] = act(s(r) * (X[t(r)] @ W1[e]^T) + b1[e]);  down: Y[r] = gamma[r] * (s(r) * (H[r] @ W2[e]^T) + b2[e])
// with s(r) = 1 for bf16 and sa(row) * sw(e, column) for FP8 per-token
// (SCALE: the activation row's fp32 scale a_scales[t(r)] or a_scales[r],
// times the weight scale per expert w_scales[e] or per output channel
// w_scales[e, physical row]), applied once to the fp32 accumulator in the
// epilogue: v = (acc * sa) * sw. MXFP8 (SCALE = kTmaWsScaleBlock): the E8M0
// scales of both operands, per row and 32-K block (a_scales [rows of a, K/32]
// with row stride a_scale_row_stride, w_scales [E, N, K/32]), on every 32-K
// partial sum in the K loop (TmaWsMxLoop), none in the epilogue.
// A work item is a 128-row m-tile of one expert (two consumer warpgroups of
// 64 routed rows: the wgmma M dimension) times BN weight rows (the wgmma N
// dimension, 128 or 256), K in slices of 128 bytes (64 bf16 or 128 e4m3). Same
// parameters and tile lists as the other grouped GEMMs (GroupedGemmParams;
// m-tiles of 128 rows).
//
// Roles (384 threads, one CTA per SM; the grid is 132 CTAs at most, an H200's
// SMs: on a GPU with fewer SMs the rest queue, correct but a slower tail):
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
//     swizzled. MXFP8: each thread also stores the slice's E8M0 scales of one
//     activation row and one weight ring row as fp32 and arrives a second
//     time (a release arrival: 256 arrivals per phase).
//   warpgroups 1 and 2, the consumers: wait on the full mbarrier, issue four
//     wgmma per slice (m64nBNk16 bf16 or m64nBNk32 e4m3) with both operands
//     read by descriptor; each keeps one slice's wgmma group in flight and
//     releases a slot on its empty mbarrier once the group that read it
//     retired (FP8 per token as well: its promotions alternate between two
//     partial sums, below; MXFP8 waits for every 32-K block). A
//     consumer warpgroup whose 64 rows lie past the expert's last row issues
//     no wgmma (it only passes the slots back). While the item's first three
//     wgmma groups run, each warpgroup loads the item's biases and weight
//     scales into a column-operand table in shared memory and each warp its
//     rows' router weights and activation scales into its staging block (the
//     epilogue then reads no global memory but the output's addresses). The
//     epilogue (scales, bias, activation, router weight) writes each warp's
//     output through that block, 16 bytes per lane and whole 128-byte row
//     pieces per store
//     (MXFP8, and an output whose address or row stride is not a multiple
//     of 16 bytes: 4-byte stores of the fragments), while the producer already
//     fills the next item's slices.
// Work items: (m-tile, weight block) pairs in a fixed order. Each expert's
// m-tiles (consecutive in the tile list) are cut into chunks of at most
// kTmaWsGroup; a chunk's items are weight-block major (tma_ws_item). CTA b
// starts with item b; after that, with a counter (p.item_counter, zeroed by
// the routing kernel), each CTA takes the next unclaimed item when its
// producer has issued the last slice of the previous one (one atomicAdd by
// producer thread 0, passed to the consumers through shared memory); without
// one, CTA b walks items b, b + gridDim.x, ... The items that share a weight
// block are then in flight at the same time and its other reads hit L2. A
// static order does not keep them together: items whose second warpgroup
// has no rows take half the time, the CTAs drift apart, and each reads the
// block from DRAM again (DeepSeek-V3 bf16 gate_up at T = 16384, 4-5 m-tiles
// per expert: 77 GB read from DRAM for 15 GB of weights, L2 hit rate 29 %).
// The m-tile count comes from the routing kernel (device memory): no host
// synchronization, CUDA-graph capturable. Which CTA computes an item does not
// change its bits.
// Gated activations: the ring's first BN / 2 rows are the gate rows of BN / 2
// consecutive outputs, the last BN / 2 their up rows, so the gate and up
// accumulators of an output sit in the same thread (n8 blocks i and
// i + BN / 16).
// w_map, the weights [E, N, K] as a 4D tensor map (innermost first; box 128
// bytes of K x the rows of one copy; 128-byte swizzle; src/ops/tensor_map.cpp):
//   no activation : {K, N, 1, E},     box {KB, BN, 1, 1},     coordinates (k, n0, 0, e)
//   silu_gated    : {K, N / 2, 2, E}, box {KB, BN / 2, 1, 1}, gate (k, c0, 0, e), up (k, c0, 1, e)
//                   (gate rows [0, N / 2), up rows [N / 2, N))
//   swiglu_oai    : {K, 2, N / 2, E}, box {KB, 1, BN / 2, 1}, gate (k, 0, c0, e), up (k, 1, c0, e)
//                   (gate and up rows interleaved)
// (KB = 64 bf16 or 128 e4m3.) Rows past N and k past K arrive as zeros.
// Registers: the launch bound gives 168 per thread; ptxas allocates each
// role's code within its setmaxnreg budget. The consumers' 128 accumulators
// (BN = 256) and the epilogue spill within 168, so the producer, whose only
// per-thread copies are the activation rows, gives up 112 registers and the
// consumers take 224 (the pool: 128 * (168 - 56) = 256 * (224 - 168)).
// FP8 per token: the accumulator and two partial sums (192 registers) spill
// a few words around the epilogue at 224, so the consumers take 232 and the
// producer keeps 40 (128 * (168 - 40) = 256 * (232 - 168)).
// MXFP8: the producer holds the slice's scale codes and their row addresses
// (96 registers), the consumers the accumulator, one partial sum and the
// scales (200).
// FP8 accumulation: per token, the e4m3 wgmma of PROMOTE_SLICES consecutive
// slices accumulate a fresh partial sum that the consumer adds to its fp32
// accumulator (promotion every 128 * PROMOTE_SLICES K, in K order: the bits
// stay a fixed-order sum). Consecutive groups alternate between two partial
// sums, so a group's add runs while the next group's wgmma do and the
// tensor cores never wait for a promotion; MXFP8 scales and adds one every
// 32 K. With BN = 128 the three register sets (accumulator and two partial
// sums, 192 registers; MXFP8: two sets) fit the consumers' budget.
// Bits: each output element is a fixed-order sum over k of wgmma steps of its
// own routed row and weight row: padding rows cannot change a real row.
//
// ---- Tunable parameters (TmaWsKernel, kernels/kernel_configs.cuh: the fields
// in lower case; chosen in src/ops/grouped_gemm_config.cpp and
// src/ops/fp8_gemm_config.cpp) ----
//   BN     : weight rows per work item, 128 or 256 (accumulators: BN / 2 per consumer thread,
//            twice that for e4m3); e4m3 takes 128
//   STAGES : ring depth (>= 2)
//   PROMOTE_SLICES : e4m3 per token, slices per promotion (1: every 128 K, 2: every 256 K)
// Shared memory (bytes): 1024 (alignment) + STAGES * (128 * 128 + BN * 128) + STAGES * 16 (mbarriers)
// + 64 (the work-item slots: 4 mbarriers and 2 ids, kTmaWsItemSlotBytes on the host),
// plus STAGES * 4608 for MXFP8 (the scale tables, TmaWsLayout::kSBytes); other
// modes 128 (alignment) + 16384 (the epilogue staging, TmaWsLayout::kEpiBytes)
// + 32 * BN (the column-operand tables, TmaWsLayout::kColBytes).
// bf16: K % 32 == 0, K % 64 == 32 zero-fills the second half of the last
// slice (K_TAIL); e4m3: K % 16 == 0 (MXFP8: K % 32 == 0), K_TAIL when
// K % 128 != 0. N % 16 == 0.

namespace moejit {

enum { kTmaWsBf16 = 0, kTmaWsE4m3 = 1 };                          // ELEM: operand type
// SCALE: FP8 per-token (sa * sw in the epilogue) or MXFP8 (E8M0 block scales of
// both operands on every 32-K partial sum).
enum { kTmaWsScaleNone = 0, kTmaWsScaleExpert = 1, kTmaWsScaleChannel = 2, kTmaWsScaleBlock = 3 };

// Register budgets per role (setmaxnreg; the CTA's pool: the consumers take
// at most what the producer gives up).
// MXFP8: the producer holds the slice's scale codes and their row addresses
// (fewer than 96 spill); the consumers fit in 200. FP8 per token (PROMOTE):
// the consumers' three register sets of the promotion pairs need 232.
template <bool MX, bool PROMOTE = false>
struct TmaWsRegs {
  static constexpr int kLaunch = 168, kProducer = MX ? 96 : PROMOTE ? 40 : 56,
                       kConsumer = MX ? 200 : PROMOTE ? 232 : 224;
  static_assert(128 * (kLaunch - kProducer) >= 256 * (kConsumer - kLaunch), "the consumers take what the producer releases");
};

template <int BN, bool MX = false>
struct TmaWsLayout {
  static constexpr int kBm = 128;
  static constexpr int kXBytes = kBm * 128;  // activation rows of a slice, 128-byte swizzled
  static constexpr int kWBytes = BN * 128;   // weight rows of a slice, 128-byte swizzled
  // MXFP8: a slice's four 32-blocks of E8M0 scales as fp32, activation rows
  // [row][block] (2048 bytes), then weight rows [block][half][q][20] (2560
  // bytes; see the consumer: 16 used, 4 of padding that spread the four q
  // across the shared-memory banks).
  static constexpr int kSaBytes = MX ? kBm * 4 * 4 : 0;
  static constexpr int kSwQStride = 20;  // floats
  static constexpr int kSBytes = MX ? kSaBytes + 4 * 2 * 4 * kSwQStride * 4 : 0;
  static constexpr int kStageBytes = kXBytes + kWBytes + kSBytes;
  static constexpr int kThreads = 384;
  // Epilogue staging, one 2 KB block per consumer warp: 16 rows x 128 bytes
  // of output (64 bf16 or 32 fp32 columns per pass), 16-byte chunks XOR-
  // swizzled by row; between the first slice and the epilogue its first 128
  // bytes hold the warp's 16 router weights and activation scales.
  // Not MXFP8, whose scale tables take that shared memory.
  static constexpr int kEpiWarpBytes = 2048;
  static constexpr int kEpiBytes = MX ? 0 : 8 * kEpiWarpBytes;
  // Column-operand tables (not MXFP8): per consumer warpgroup and per parity
  // of its active items, the item's BN biases and BN per-channel weight
  // scales as fp32, in ring-row order (gate rows then up rows for silu_gated,
  // interleaved for swiglu_oai): loaded during the item's K loop, read by the
  // epilogue from shared memory instead of global memory.
  static constexpr int kColSetBytes = MX ? 0 : 2 * BN * 4;
  static constexpr int kColBytes = 4 * kColSetBytes;
};

// Work item -> m-tile `tile` (its expert and rows) and weight block nb.
// Chunk [a, a + size) of an expert's m-tiles owns items [a NB, (a + size) NB),
// so item / NB is a tile of the item's chunk; inside the chunk, item
// a NB + nb size + m is m-tile a + m of weight block nb. An expert's tiles
// are BM rows apart from its first row (the routing kernel's tile list).
constexpr int kTmaWsGroup = 8;
struct TmaWsItem {
  int tile, nb, expert, row_begin, row_end;
};
template <int BM>
__device__ __forceinline__ TmaWsItem tma_ws_item(const GroupedGemmParams& p, int item, int NB) {
  const int j = item / NB;
  TmaWsItem w;
  w.expert = p.tile_expert[j];
  w.row_end = p.tile_row_end[j];
  const int start = p.expert_offsets[w.expert];
  const int lj = (p.tile_row_begin[j] - start) / BM;  // j's index among its expert's tiles
  const int ne = (w.row_end - start + BM - 1) / BM;    // the expert's tiles
  const int c = lj / kTmaWsGroup;
  const int a = j - lj + c * kTmaWsGroup;
  const int size = min(kTmaWsGroup, ne - c * kTmaWsGroup);
  const int local = item - a * NB;
  w.nb = local / size;
  w.tile = a + (local - w.nb * size);
  w.row_begin = start + (w.tile - (j - lj)) * BM;
  return w;
}

// XOR key of staging row r's 16-byte chunks: a permutation of 0..7 whose
// rows 0-3 (and 4-7) have keys of one parity, so the fp32 writes (two
// adjacent chunks per row pair of lanes q >> 1) of a half-warp's four rows
// fall on eight distinct chunks: no bank conflicts for the bf16 writes, the
// fp32 writes or the 16-byte reads.
__device__ __forceinline__ int tma_ws_stage_key(int r) { return ((r << 1) | ((r >> 2) & 1)) & 7; }

template <int BIAS>
__device__ __forceinline__ float tma_ws_bias(const void* bias, i64 i) {
  if (BIAS == kBiasF32) return ((const float*)bias)[i];
  if (BIAS == kBiasBf16) return bf16_bits_to_f32(((const u16*)bias)[i]);
  return 0.f;
}
// MXFP8 K loop of one work item for an active consumer warpgroup (BN = 128):
// for every 32-block j of K, one wgmma m64n128k32 into a fresh partial sum
// (part: columns 0-63 in part[0..31], 64-127 in part[32..63]), then acc = fma(part * sa(row, j),
// sw(column, j), acc) in K order. The first half's weight scales are read from
// shared memory while the block's wgmma runs; the two consumer warpgroups overlap
// each other's tensor-core and CUDA-core work. `it` is the ring position of
// the item's first slice; each slot is released once its last block retired.
// row = the thread's first accumulator row in its warpgroup (the second is
// row + 8), q = lane % 4.
template <int BN, int STAGES>
struct TmaWsMxLoop {
  static_assert(BN == 128, "MXFP8: 128 weight rows per work item");
  using L = TmaWsLayout<BN, true>;
  float (&acc)[BN / 2];
  float (&part)[BN / 2];
  u32 x_ring, w_ring, s_ring, full_bar, empty_bar;
  int it, wg, row, q, lane;

  // The 16 weight-row scales of block b and half h this thread's columns use
  // (8 i + 2 q + t of the half: sw[2 i + t]).
  __device__ __forceinline__ void load_sw(u32 ss, int b, int h, float (&sw)[16], int v0 = 0, int v1 = 4) const {
    const u32 addr = ss + L::kSaBytes + ((b * 2 + h) * 4 + q) * L::kSwQStride * 4;
#pragma unroll
    for (int v = v0; v < v1; ++v) {
      u32 x0, x1, x2, x3;
      lds128(addr + 16 * v, x0, x1, x2, x3);
      sw[4 * v] = __uint_as_float(x0);
      sw[4 * v + 1] = __uint_as_float(x1);
      sw[4 * v + 2] = __uint_as_float(x2);
      sw[4 * v + 3] = __uint_as_float(x3);
    }
  }
  // acc[32 h + 4 i + 2 hh + t] (n8 block i of half h, row row + 8 hh, column
  // 8 i + 2 q + t) += part[same] * sa[hh] * sw[2 i + t].
  __device__ __forceinline__ void scale(int h, const float (&sw)[16], float sa_lo, float sa_hi) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          float& a = acc[32 * h + 4 * i + 2 * hh + t];
          a = fmaf(part[32 * h + 4 * i + 2 * hh + t] * (hh ? sa_hi : sa_lo), sw[2 * i + t], a);
        }
  }
  __device__ __forceinline__ void run(int KT) {
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
    for (int kt = 0; kt < KT; ++kt) {
      const int slot = (it + kt) % STAGES;
      const u32 ss = s_ring + slot * L::kSBytes;
      const u64 da = ws_desc_sw128(x_ring + slot * L::kXBytes + wg * 64 * 128);
      const u64 db = ws_desc_sw128(w_ring + slot * L::kWBytes);
      mbar_wait(full_bar + 8 * slot, ((it + kt) / STAGES) & 1);
      u32 a0, a1, a2, a3, b0, b1, b2, b3;
      lds128(ss + (wg * 64 + row) * 16, a0, a1, a2, a3);
      lds128(ss + (wg * 64 + row + 8) * 16, b0, b1, b2, b3);
      const float sa_lo[4] = {__uint_as_float(a0), __uint_as_float(a1), __uint_as_float(a2), __uint_as_float(a3)};
      const float sa_hi[4] = {__uint_as_float(b0), __uint_as_float(b1), __uint_as_float(b2), __uint_as_float(b3)};
#pragma unroll
      for (int b = 0; b < 4; ++b) {  // 32 bytes of K per block: descriptor address + 2
        ws_wgmma_fence();
        wgmma_m64n128k32_e4m3_ss(part, da + 2 * b, db + 2 * b, 0);  // a fresh partial sum
        ws_wgmma_commit();
        float sw[16];
        load_sw(ss, b, 0, sw, 0, 2);  // half of them while the wgmma runs (all: they spill)
        ws_wgmma_wait<0>();
        ws_fence_operands(part);
        load_sw(ss, b, 0, sw, 2, 4);
        scale(0, sw, sa_lo[b], sa_hi[b]);
        load_sw(ss, b, 1, sw);  // (the registers of both halves' scales would spill)
        scale(1, sw, sa_lo[b], sa_hi[b]);
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(empty_bar + 8 * slot);
    }
  }
};

template <TmaWsKernel C>
__global__ void __launch_bounds__(384, 1) grouped_gemm_tma_ws_kernel(const GroupedGemmParams p, const __grid_constant__ TensorMap w_map) {
  constexpr int ELEM = C.elem, SCALE = C.scale, BN = C.bn, STAGES = C.stages, PROMOTE_SLICES = C.promote_slices;
  constexpr bool K_TAIL = C.k_tail;
  constexpr int ACT = C.epilogue.act, BIAS = C.epilogue.bias;
  constexpr bool GATHER = C.epilogue.gather, ROUTER_WEIGHT = C.epilogue.router_weight, OUT_F32 = C.epilogue.out_f32;
  constexpr bool MX = SCALE == kTmaWsScaleBlock;
  constexpr bool PROMOTE = ELEM == kTmaWsE4m3 && !MX;  // FP8 per token: partial sums promoted on the CUDA cores
  using L = TmaWsLayout<BN, MX>;
  static_assert(BN == 128 || BN == 256, "BN: 128 or 256 weight rows");
  static_assert(STAGES >= 2, "a ring of at least two slices");
  static_assert(PROMOTE_SLICES >= 1, "a promotion covers at least one slice");
  static_assert(!(OUT_F32 && ACT != kActNone), "gated activations write bf16");
  static_assert(ELEM == kTmaWsBf16 || ELEM == kTmaWsE4m3, "bf16 or e4m3 operands");
  static_assert(ELEM == kTmaWsE4m3 || SCALE == kTmaWsScaleNone, "bf16 has no scales");
  static_assert(ELEM == kTmaWsBf16 || BN == 128, "e4m3: BN = 128 (the accumulator and the partial sum: 2 x 64 registers)");
  constexpr int BM = L::kBm;
  constexpr int EB = ELEM == kTmaWsBf16 ? 2 : 1;  // bytes per element
  constexpr int BK = 128 / EB;                     // elements per slice
  constexpr bool GATED = ACT != kActNone;
  constexpr int NC = GATED ? BN / 2 : BN;  // output columns per item

  extern __shared__ __align__(128) u8 smem_raw[];
  const u32 base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const u32 x_ring = base;                          // STAGES * kXBytes (1024-byte aligned slots)
  const u32 w_ring = x_ring + STAGES * L::kXBytes;  // STAGES * kWBytes
  const u32 s_ring = w_ring + STAGES * L::kWBytes;    // STAGES * kSBytes (MXFP8 scales)
  const u32 full_bar = s_ring + STAGES * L::kSBytes;  // STAGES mbarriers: slice landed
  const u32 empty_bar = full_bar + STAGES * 8;        // STAGES mbarriers: slot free
  const u32 item_full = empty_bar + STAGES * 8;       // 2 mbarriers: next work item id written (dynamic order)
  const u32 item_empty = item_full + 16;              // 2 mbarriers: id read by every consumer warp
  const u32 item_ids = item_empty + 16;               // 2 ints: the next work item ids
  const u32 epi_ring = (item_ids + 8 + 127u) & ~127u;  // kEpiBytes: epilogue staging
  const u32 col_tab = epi_ring + L::kEpiBytes;                     // kColBytes: column-operand tables
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_bar + 8 * s, MX ? 256 : 128);  // every producer thread (MXFP8: twice, below)
      mbar_init(empty_bar + 8 * s, 8);   // every consumer warp
    }
    for (int s = 0; s < 2; ++s) {
      mbar_init(item_full + 8 * s, 1);   // producer thread 0
      mbar_init(item_empty + 8 * s, 8);  // every consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the TMA unit
  }
  __syncthreads();
  pdl_wait();  // tile lists, X or H (and their scales) come from earlier launches
  pdl_launch_dependents();

  const int N = p.n, K = p.k;
  const int NOUT = GATED ? N / 2 : N;
  const int NB = (NOUT + NC - 1) / NC;
  const int KT = (K + BK - 1) / BK;
  const int items = *p.num_tiles * NB;

  if (warp < 4) {
    // ---------------- producer ----------------
    setmaxnreg_dec<TmaWsRegs<MX, PROMOTE>::kProducer>();
    if (tid == 0) tma_prefetch(&w_map);
    const int unit = tid & 7, row0 = tid >> 3;  // 16-byte unit of a 128-byte row; rows row0 + 16 j
    int it = 0;
    // The work item after the n-th: with a counter, thread 0 takes it once
    // the producer issued the n-th's last slice and passes it to the other
    // producer threads (named barrier 3) and to the consumers (slot n % 2).
    auto next_item = [&](int item, int n) {
      if (!p.item_counter) return item + (int)gridDim.x;
      const int s = n & 1;
      if (tid == 0) {
        const int next = (int)gridDim.x + atomicAdd(p.item_counter, 1);
        mbar_wait(item_empty + 8 * s, ((n >> 1) & 1) ^ 1);  // every consumer warp read the id this slot held
        sts32(item_ids + 4 * s, (u32)next);
        mbar_arrive(item_full + 8 * s);
      }
      asm volatile("bar.sync 3, 128;\n" ::: "memory");
      return (int)lds32(item_ids + 4 * s);
    };
    for (int item = blockIdx.x, n = 0; item < items; item = next_item(item, n++)) {
      const TmaWsItem w = tma_ws_item<BM>(p, item, NB);
      const int c0 = w.nb * NC, expert = w.expert, row_begin = w.row_begin, row_end = w.row_end;
      int xrow[BM / 16];  // source row of X (gate_up: the token) or H, -1 past the tile's rows
#pragma unroll
      for (int j = 0; j < BM / 16; ++j) {
        const int r = row_begin + row0 + 16 * j;
        xrow[j] = r < row_end ? (GATHER ? p.sorted_route[r] / p.top_k : r) : -1;
      }
      // MXFP8: this thread copies the E8M0 scales of activation row `tid` and
      // weight ring row `tid` (null: out of range, its data is zero: scale 1).
      const u8* sa_src = nullptr;
      const u8* sw_src = nullptr;
      if constexpr (MX) {
        const int r = row_begin + tid;
        if (r < row_end)
          sa_src = (const u8*)p.a_scales + (i64)(GATHER ? p.sorted_route[r] / p.top_k : r) * p.a_scale_row_stride;
        int phys = -1;
        if constexpr (GATED) {
          const int h = tid / (BN / 2), c = c0 + tid % (BN / 2);
          if (c < NOUT) phys = ACT == kActSiluGated ? (h ? (N >> 1) + c : c) : 2 * c + h;
        } else if (c0 + tid < N) {
          phys = c0 + tid;
        }
        if (phys >= 0) sw_src = p.w_scales + ((i64)expert * N + phys) * (K / 32);
      }
      // MXFP8: the four E8M0 codes of both rows for slice kt, loaded one
      // slice ahead (their latency overlaps the previous slice's copies).
      u32 ea[4], ew[4];
      auto load_codes = [&](int kt) {
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          const int kb = kt * 4 + b;
          ea[b] = sa_src && kb < K / 32 ? (u32)__ldg(sa_src + kb) : 127u;
          ew[b] = sw_src && kb < K / 32 ? (u32)__ldg(sw_src + kb) : 127u;
        }
      };
      if constexpr (MX) load_codes(0);
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
        const int kb = kt * 128 + unit * 16;  // byte of K of this thread's 16-byte chunk
        const bool k_ok = !K_TAIL || kb < K * EB;
        const u32 xs = x_ring + slot * L::kXBytes;
#pragma unroll
        for (int j = 0; j < BM / 16; ++j) {
          const int r = row0 + 16 * j;
          const bool live = xrow[j] >= 0 && k_ok;
          const u8* src = (const u8*)p.a + (live ? (i64)xrow[j] * p.a_row_stride * EB + kb : 0);
          cp_async_16(xs + r * 128 + ((unit ^ (r & 7)) << 4), src, live ? 16u : 0u);
        }
        cp_async_mbar_arrive(full_bar + 8 * slot);
        if constexpr (MX) {
          // Stored through registers (scale rows of K / 32 bytes are not
          // 4-byte aligned for cp.async); the release arrive publishes them.
          const u32 ss = s_ring + slot * L::kSBytes;
          sts128(ss + tid * 16, __float_as_uint(e8m0_to_f32(ea[0])), __float_as_uint(e8m0_to_f32(ea[1])),
                 __float_as_uint(e8m0_to_f32(ea[2])), __float_as_uint(e8m0_to_f32(ea[3])));
          const int h = tid >> 6, i = (tid >> 3) & 7, q = (tid >> 1) & 3, t = tid & 1;
#pragma unroll
          for (int b = 0; b < 4; ++b)
            sts32(ss + L::kSaBytes + ((((b * 2 + h) * 4 + q) * L::kSwQStride) + 2 * i + t) * 4,
                  __float_as_uint(e8m0_to_f32(ew[b])));
          mbar_arrive(full);
          if (kt + 1 < KT) load_codes(kt + 1);
        }
      }
    }
    // With a counter, the last CTA past its final claim re-arms it (every
    // CTA's claims come before its count here), so the GEMM can run again on
    // the same routing output: gate_up or down launched twice after one route.
    if (p.item_counter && tid == 0) {
      __threadfence();
      if (atomicAdd(p.item_counter + 2, 1) == (int)gridDim.x - 1) {
        p.item_counter[0] = 0;
        p.item_counter[2] = 0;
      }
    }
    cp_async_wait_n<0>();
    return;
  }

  // ---------------- consumers ----------------
  setmaxnreg_inc<TmaWsRegs<MX, PROMOTE>::kConsumer>();
  const int wg = (warp - 4) >> 2;        // consumer warpgroup: tile rows 64 wg .. 64 wg + 63
  const int wr16 = ((warp - 4) & 3) * 16;  // the warp's 16 rows inside them
  const int g = lane >> 2, q = lane & 3;
  int it = 0;
  auto release = [&](int slot) {
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_bar + 8 * slot);
  };
  // e4m3: the wgmma accumulates in reduced precision, so each promotion
  // group's partial product (128 * PROMOTE_SLICES K) lands in `part` (a fresh
  // sum) and is added to the fp32 accumulator on the CUDA cores. Without it
  // the float64 reference measured relative errors of 1.2e-2 on gpt-oss-120b
  // (K = 2880) and Mixtral (K = 14336) down projections; bf16 accumulates in place.
  float acc[BN / 2];
  // MXFP8: each 32-block's product is a fresh partial sum in `part` too,
  // scaled on the CUDA cores by the block's activation-row and weight-row
  // scales into acc: acc = fma(part * sa, sw, acc), in K order (TmaWsMxLoop).
  float part[PROMOTE || MX ? BN / 2 : 1];
  float part_b[PROMOTE ? BN / 2 : 1];  // FP8 per token: the other promotion group's partial sum
  int n_active = 0;  // items this warpgroup computed: the parity of its column-operand table
  // The work item after the n-th: the producer's (slot n % 2), or the static order.
  auto next_item = [&](int item, int n) {
    if (!p.item_counter) return item + (int)gridDim.x;
    const int s = n & 1;
    mbar_wait(item_full + 8 * s, (n >> 1) & 1);
    const int next = (int)lds32(item_ids + 4 * s);
    __syncwarp();
    if (lane == 0) mbar_arrive(item_empty + 8 * s);
    return next;
  };
  for (int item = blockIdx.x, n = 0; item < items; item = next_item(item, n++)) {
    const TmaWsItem w = tma_ws_item<BM>(p, item, NB);
    const int c0 = w.nb * NC, expert = w.expert, row_begin = w.row_begin, row_end = w.row_end;
    const bool active = row_begin + 64 * wg < row_end;  // warpgroup-uniform
    const u32 stg = epi_ring + (warp - 4) * L::kEpiWarpBytes;  // this warp's staging block
    // The epilogue's operands are loaded while the item's first wgmma groups
    // run, in three steps after the first three slices' wgmma issue (the rest
    // after the K loop when K has fewer slices), so that no consumer waits on
    // a global load while it could issue wgmma and the epilogue reads shared
    // memory only (MXFP8 has no staging block: its scale tables take that
    // shared memory; it loads them in the epilogue):
    //   step 0: each thread loads its entries of the column-operand table
    //           (bias and per-channel weight scale of ring rows wt and
    //           wt + 128 of the warpgroup's thread wt) and, for the row
    //           stash, the sorted rows' route ids;
    //   step 1: it stores its table entries, and (lanes q == 0) loads the
    //           router weight and the FP8 per-token activation scale of its
    //           two rows through the route ids;
    //   step 2: it stores those into the first 128 bytes of its warp's
    //           staging block ([row][2] floats; in registers across the K
    //           loop they would spill next to the accumulators).
    // Constant operands (gate_up has no router weight, bf16 no activation
    // scale) are neither loaded nor stashed.
    constexpr bool STASH_GAMMA = ROUTER_WEIGHT && !MX;
    constexpr bool STASH_SA = (SCALE == kTmaWsScaleExpert || SCALE == kTmaWsScaleChannel);
    constexpr bool STASH = STASH_GAMMA || STASH_SA;
    constexpr bool COLTAB = !MX && (BIAS != kBiasNone || STASH_SA);
    const int wt = tid - 128 * (1 + wg);  // thread of its warpgroup
    const u32 tab = col_tab + (wg * 2 + (n_active & 1)) * L::kColSetBytes;  // bias[BN] f32, then scale[BN] f32
    // Physical weight row of ring row e of the item (the row the bias and the
    // per-channel scale are indexed by), or -1 past the item's columns.
    auto ring_row_phys = [&](int e) {
      if constexpr (ACT == kActNone) {
        return c0 + e < N ? c0 + e : -1;
      } else if constexpr (ACT == kActSiluGated) {
        const int c = c0 + (e < NC ? e : e - NC);
        return c < NOUT ? (e < NC ? c : (N >> 1) + c) : -1;
      } else {
        return c0 + (e >> 1) < NOUT ? 2 * c0 + e : -1;
      }
    };
    constexpr int TAB_PER_THREAD = BN / 128;
    float tab_bias[TAB_PER_THREAD], tab_scale[TAB_PER_THREAD];
    int route_id[2] = {0, 0};
    float row_gm[2] = {1.f, 1.f}, row_sa[2] = {1.f, 1.f};
    auto prefetch = [&](int step) {
      if (step == 0) {
        if constexpr (COLTAB) {
#pragma unroll
          for (int j = 0; j < TAB_PER_THREAD; ++j) {
            const int phys = ring_row_phys(wt + 128 * j);
            const i64 at = (i64)expert * N + (phys >= 0 ? phys : 0);
            tab_bias[j] = phys >= 0 ? tma_ws_bias<BIAS>(p.bias, at) : 0.f;
            // Per expert: every entry holds the expert's scale.
            tab_scale[j] = SCALE == kTmaWsScaleExpert    ? ((const float*)p.w_scales)[expert]
                           : SCALE == kTmaWsScaleChannel && phys >= 0 ? ((const float*)p.w_scales)[at]
                                                                      : 0.f;
          }
        }
        if constexpr (STASH) {
          if (q == 0)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int r = row_begin + 64 * wg + wr16 + g + 8 * h;
              if (r < row_end && (STASH_GAMMA || GATHER)) route_id[h] = p.sorted_route[r];
            }
        }
      } else if (step == 1) {
        if constexpr (COLTAB) {
#pragma unroll
          for (int j = 0; j < TAB_PER_THREAD; ++j) {
            sts32(tab + (wt + 128 * j) * 4, __float_as_uint(tab_bias[j]));
            if (STASH_SA) sts32(tab + (BN + wt + 128 * j) * 4, __float_as_uint(tab_scale[j]));
          }
        }
        if constexpr (STASH) {
          if (q == 0)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int r = row_begin + 64 * wg + wr16 + g + 8 * h;
              if (r < row_end) {
                if (STASH_GAMMA) row_gm[h] = p.gamma[route_id[h]];
                if (STASH_SA) row_sa[h] = ((const float*)p.a_scales)[GATHER ? route_id[h] / p.top_k : r];
              }
            }
        }
      } else {
        if constexpr (STASH) {
          if (q == 0)
#pragma unroll
            for (int h = 0; h < 2; ++h)
              sts64(stg + (g + 8 * h) * 8, __float_as_uint(row_gm[h]), __float_as_uint(row_sa[h]));
        }
      }
    };
    // MXFP8: the router weight of the thread's two rows, loaded in the epilogue.
    auto row_gamma = [&](int h) {
      const int r = row_begin + 64 * wg + wr16 + g + 8 * h;
      return ROUTER_WEIGHT && r < row_end ? p.gamma[p.sorted_route[r]] : 1.f;
    };
    if constexpr (MX) {
      if (active) {
        TmaWsMxLoop<BN, STAGES>{acc, part, x_ring, w_ring, s_ring, full_bar, empty_bar, it, wg, wr16 + g, q, lane}
            .run(KT);
        it += KT;
      }
    }
    // The ring position `it` as slot and round parity, advanced per slice
    // (no division in the loop), and slot 0's descriptors: a slot's are
    // slot 0's plus the slot's offset in the address field (16-byte units).
    int slot = it % STAGES;
    u32 phase = (u32)(it / STAGES) & 1u;
    const u64 da0 = ws_desc_sw128(x_ring + wg * 64 * 128), db0 = ws_desc_sw128(w_ring);
    int pending = -1;  // slot whose wgmma group is still in flight
    if constexpr (PROMOTE) {
      if (active) {
        // e4m3 per token: a promotion group is PROMOTE_SLICES consecutive
        // slices whose wgmma accumulate a fresh partial sum, added to acc
        // (which starts at zero) once the group retired, in K order. The K
        // loop runs in pairs of groups, the first into `part`, the second
        // into `part_b`: the second group's first slice is issued before the
        // first group's sum is added, so the tensor cores run it while the
        // CUDA cores add (with PROMOTE_SLICES = 1 that slice ends the pair and
        // is waited for first), and the warpgroup drains its wgmma queue once
        // per pair instead of once per group. A pair is straight-line code with
        // nothing in flight at its end: ptxas serializes every wgmma of the
        // kernel when it cannot prove that an accumulator read happens after
        // the group that wrote it retired, which it cannot across a loop's
        // back edge or a conditional commit. The slices past the last whole
        // pair run a group at a time.
        // (Zeroing the partial sums too tells the compiler that their last
        // item's values are dead: a wgmma reads its accumulator operand even
        // when it starts a fresh sum, so they would stay live, and spill,
        // across the epilogue.)
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = part[i] = part_b[i] = 0.f;
        // One slice: its four wgmma into dst (a fresh sum at a group's first
        // slice), then, at the second group's first slice, `other` (the first
        // group, retired by the wait) added to acc.
        auto slice = [&](int kt, float (&dst)[BN / 2], float (&other)[BN / 2], bool group_start, bool add_other,
                         bool keep_one) {
          mbar_wait(full_bar + 8 * slot, phase);
          const int cur = slot;
          if (++slot == STAGES) slot = 0, phase ^= 1u;
          const u64 da = da0 + (u64)(cur * (L::kXBytes >> 4));
          const u64 db = db0 + (u64)(cur * (L::kWBytes >> 4));
          ws_wgmma_fence();
#pragma unroll
          for (int s = 0; s < 4; ++s) wgmma_m64k32_e4m3_ss<BN>(dst, da + 2 * s, db + 2 * s, !group_start || s > 0);
          ws_wgmma_commit();
          if (kt < 3) prefetch(kt);
          if (keep_one) {
            ws_wgmma_wait<1>();  // retires the previous slice
            if (pending >= 0) release(pending);
            pending = cur;
          } else {
            ws_wgmma_wait<0>();
            if (pending >= 0) release(pending);
            release(cur);
            pending = -1;
          }
          if (add_other) {
            ws_fence_operands(other);
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) acc[i] += other[i];
          }
        };
        // (Runs of four groups spill, so a run is a pair.)
        constexpr int PAIR = 2 * PROMOTE_SLICES;  // slices of a pair of groups
        const int kt_pairs = KT / PAIR * PAIR;
        for (int kt0 = 0; kt0 < kt_pairs; kt0 += PAIR) {
#pragma unroll
          for (int s = 0; s < PAIR; ++s) {
            const bool first = s % PROMOTE_SLICES == 0;
            if (s < PROMOTE_SLICES) slice(kt0 + s, part, part_b, first, false, true);
            else slice(kt0 + s, part_b, part, first, first, s + 1 < PAIR);
          }
          ws_fence_operands(part_b);
#pragma unroll
          for (int i = 0; i < BN / 2; ++i) acc[i] += part_b[i];
        }
        for (int kt = kt_pairs; kt < KT; ++kt) {  // the last groups, one at a time
          const bool group_end = (kt - kt_pairs) % PROMOTE_SLICES == PROMOTE_SLICES - 1 || kt == KT - 1;
          slice(kt, part, part_b, (kt - kt_pairs) % PROMOTE_SLICES == 0, false, !group_end);
          if (group_end) {
            ws_fence_operands(part);
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) acc[i] += part[i];
          }
        }
        it += KT;
      }
    }
    for (int kt = 0; kt < KT && !((MX || PROMOTE) && active); ++kt, ++it) {
      mbar_wait(full_bar + 8 * slot, phase);
      const int cur = slot;
      if (++slot == STAGES) slot = 0, phase ^= 1u;
      if constexpr (ELEM == kTmaWsBf16) {
        if (active) {
          const u64 da = da0 + (u64)(cur * (L::kXBytes >> 4));
          const u64 db = db0 + (u64)(cur * (L::kWBytes >> 4));
          ws_wgmma_fence();
#pragma unroll
          for (int s = 0; s < 4; ++s)  // 32 bytes of K per step: descriptor address + 2
            wgmma_m64k16_ss<BN>(acc, da + 2 * s, db + 2 * s, kt > 0 || s > 0);
          ws_wgmma_commit();
          if (kt < 3) prefetch(kt);
          ws_wgmma_wait<1>();  // retires the group before this one
          if (pending >= 0) release(pending);
          pending = cur;
          continue;
        }
      }
      release(cur);  // an inactive warpgroup passes the slot back (an active e4m3 one ran its K loop above)
    }
    ws_wgmma_wait<0>();
    if (pending >= 0) release(pending);
    if (!active) continue;
    ++n_active;
    if constexpr (!MX)
      for (int step = KT; step < 3; ++step) prefetch(step);  // K of fewer than three slices
    float gam_lo = 1.f, gam_hi = 1.f, sa_lo = 1.f, sa_hi = 1.f;
    if constexpr (MX) {
      gam_lo = row_gamma(0);
      gam_hi = row_gamma(1);
    } else if constexpr (STASH) {
      __syncwarp();
      u32 a, b;
      lds64(stg + g * 8, a, b);
      gam_lo = __uint_as_float(a), sa_lo = __uint_as_float(b);
      lds64(stg + (g + 8) * 8, a, b);
      gam_hi = __uint_as_float(a), sa_hi = __uint_as_float(b);
      __syncwarp();  // the staging passes below overwrite the stash
    }
    // Every thread of the warpgroup wrote part of the column-operand table.
    // (Named barriers 1 and 2, immediate ids: ptxas reserves all 16 for a register id.)
    if constexpr (COLTAB) {
      if (wg == 0) asm volatile("bar.sync 1, 128;\n" ::: "memory");
      else asm volatile("bar.sync 2, 128;\n" ::: "memory");
    }

    // Epilogue: acc[4i .. 4i + 3] is the m16n8 C fragment of n8 block i: rows
    // r_lo (elements 0, 1) and r_hi (2, 3), ring columns 8 i + 2 q, + 1.
    const i64 bias_row = (i64)expert * N;
    // Output n8 block i holds output columns c0 + 8 i + 2 q + t (t = 0, 1);
    // gated, its gate and up accumulators are n8 blocks i and i + BN / 16.
    // Physical weight rows (bias and per-channel scale index) of column c:
    auto gate_row = [&](int c) { return ACT == kActSiluGated ? c : GATED ? 2 * c : c; };
    auto up_row = [&](int c) { return ACT == kActSiluGated ? (N >> 1) + c : 2 * c + 1; };
    // The epilogue operands of one column: bias and weight scale of its gate
    // (or only) row and of its up row.
    struct ColumnOps {
      float bg, bu, wg, wu;
    };
    // Ring rows of column c's gate (or only) row and of its up row: the
    // column-operand table's entries.
    auto gate_entry = [&](int c) { return ACT == kActSwigluOai ? 2 * (c - c0) : c - c0; };
    auto up_entry = [&](int c) { return ACT == kActSwigluOai ? 2 * (c - c0) + 1 : NC + (c - c0); };
    auto column_ops = [&](int c) {
      ColumnOps o{0.f, 0.f, 1.f, 1.f};
      if constexpr (MX) {
        if (BIAS != kBiasNone) {
          o.bg = tma_ws_bias<BIAS>(p.bias, bias_row + gate_row(c));
          if (GATED) o.bu = tma_ws_bias<BIAS>(p.bias, bias_row + up_row(c));
        }
      } else {
        if (BIAS != kBiasNone) {
          o.bg = __uint_as_float(lds32(tab + gate_entry(c) * 4));
          if (GATED) o.bu = __uint_as_float(lds32(tab + up_entry(c) * 4));
        }
        if constexpr (STASH_SA) {  // per expert or per channel
          o.wg = __uint_as_float(lds32(tab + (BN + gate_entry(c)) * 4));
          if (GATED) o.wu = __uint_as_float(lds32(tab + (BN + up_entry(c)) * 4));
        }
      }
      return o;
    };
    // The output value of n8 block i, row h (r_lo / r_hi), column t.
    auto out_value = [&](int i, int h, int t, const ColumnOps& o) {
      const float sa = h ? sa_hi : sa_lo, gm = h ? gam_hi : gam_lo;
      auto scaled = [&](float v, float w) {
        if constexpr (SCALE == kTmaWsScaleExpert || SCALE == kTmaWsScaleChannel) return (v * sa) * w;
        return v;
      };
      if constexpr (GATED) {
        const float gate = scaled(acc[4 * i + 2 * h + t], o.wg) + o.bg;
        const float up = scaled(acc[4 * (i + BN / 16) + 2 * h + t], o.wu) + o.bu;
        return gm * gated_act<ACT>(gate, up, p.act_alpha, p.act_limit);
      }
      return (scaled(acc[4 * i + 2 * h + t], o.wg) + o.bg) * gm;
    };
    constexpr int EOB = OUT_F32 ? 4 : 2;           // bytes per output element
    constexpr int NOB = GATED ? BN / 16 : BN / 8;  // output n8 blocks of the item
    const bool vec =
        !MX && ((reinterpret_cast<unsigned long long>(p.out) | (unsigned long long)p.out_row_stride * EOB) & 15) == 0;
    const int row0 = row_begin + 64 * wg + wr16;  // the warp's first row (r_lo = row0 + g)
    if (vec) {
      // Each warp writes its 16 rows x 128 bytes of output per pass into its
      // staging block (C-fragment order, 16-byte chunks XOR-swizzled by row
      // with tma_ws_stage_key: the bf16 and fp32 writes and the 16-byte reads
      // are free of bank conflicts), then every lane stores
      // 16 contiguous bytes of one row: eight lanes cover a row's 128 bytes,
      // so a store instruction writes four 128-byte row pieces instead of
      // 16-byte pieces of eight rows. The pass's epilogue operands load
      // together first (a column at or past NOUT reads column NOUT - 1 and is
      // never stored), and the pass is straight-line code.
      constexpr int PASS_BLOCKS = 128 / EOB / 8;  // n8 blocks per pass (8 bf16, 4 fp32)
      const int key_g = tma_ws_stage_key(g);
      static_assert(NOB % PASS_BLOCKS == 0, "whole passes");
#pragma unroll
      for (int pass = 0; pass < NOB / PASS_BLOCKS; ++pass) {
        if (c0 + pass * PASS_BLOCKS * 8 >= NOUT) break;
        ColumnOps ops[PASS_BLOCKS][2];
#pragma unroll
        for (int ib = 0; ib < PASS_BLOCKS; ++ib)
#pragma unroll
          for (int t = 0; t < 2; ++t) ops[ib][t] = column_ops(min(c0 + 8 * (pass * PASS_BLOCKS + ib) + 2 * q + t, NOUT - 1));
#pragma unroll
        for (int ib = 0; ib < PASS_BLOCKS; ++ib) {
          const int i = pass * PASS_BLOCKS + ib;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float v0 = out_value(i, h, 0, ops[ib][0]), v1 = out_value(i, h, 1, ops[ib][1]);
            const u32 row_at = stg + (g + 8 * h) * 128;  // staging row g + 8 h (its key: that of row g)
            if (OUT_F32)
              sts64(row_at + (((2 * ib + (q >> 1)) ^ key_g) << 4) + (q & 1) * 8, __float_as_uint(v0),
                    __float_as_uint(v1));
            else
              sts32(row_at + ((ib ^ key_g) << 4) + q * 4, pack_bf16x2(v0, v1));
          }
        }
        __syncwarp();
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int sr = 4 * j + (lane >> 3), ch = lane & 7;
          const int r = row0 + sr, col = c0 + pass * PASS_BLOCKS * 8 + ch * (16 / EOB);
          u32 a, b, c, d;
          lds128(stg + sr * 128 + ((ch ^ tma_ws_stage_key(sr)) << 4), a, b, c, d);
          if (r < row_end && col < NOUT) stg128((u8*)p.out + ((i64)r * p.out_row_stride + col) * EOB, a, b, c, d);
        }
        __syncwarp();  // the next pass overwrites the block
      }
    } else {
      // MXFP8 (no staging block), or out / its row stride not 16-byte
      // aligned: each thread stores its column pairs.
#pragma unroll
      for (int i = 0; i < NOB; ++i) {
        const int col = c0 + 8 * i + 2 * q;
        if (col >= NOUT) break;
        const ColumnOps o0 = column_ops(col), o1 = column_ops(col + 1);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = row0 + g + 8 * h;
          if (r >= row_end) continue;
          const float v0 = out_value(i, h, 0, o0), v1 = out_value(i, h, 1, o1);
          const i64 at = (i64)r * p.out_row_stride + col;
          if (OUT_F32) {
            ((float*)p.out)[at] = v0;
            ((float*)p.out)[at + 1] = v1;
          } else {
            *(u32*)((u16*)p.out + at) = pack_bf16x2(v0, v1);
          }
        }
      }
    }
  }
}

}  // namespace moejit
