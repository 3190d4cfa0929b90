// MoE weight gradient, a K-grouped GEMM over expert-sorted routed rows, sm_90a:
//   dW[e][n][k] = sum over rows r of expert e of grad[r][n] * X[src(r)][k]
//   db[e][n]    = sum over rows r of expert e of grad[r][n]         (optional)
// grad bf16 [rows, N] (expert-sorted rows, e.g. of the gate_up / down outputs),
// X bf16: gathered by token (p.gather = 1: src(r) = sorted_route[r] / top_k, gate_up's
// input) or by routed row (src(r) = r, down's input H; p.gather = 0). The routed rows are the
// reduction dimension: the kernel computes dW^T tiles, wgmma m64nBNk16 with X^T as A
// (M = 64 input features) and grad as B (N = BN output channels), both read by
// descriptor in their stored orientation (M-/N-major, the transposed operand
// forms), fp32 accumulation in registers.
//
// Work item: one [BN, 128] tile of dW of one expert (BN output channels x 128
// input features), its reduction over the expert's rows in stages of 64 rows.
// CTAs run in clusters of CLUSTER (1 or 2): a cluster takes a unit of CLUSTER
// items of one expert and channel block, adjacent feature blocks, CTA rank r
// the feature block CLUSTER u + r (past K: it takes part in the copies and
// computes nothing). Units are (expert, channel block, feature-block group),
// the group fastest, walked by every cluster with stride the number of
// clusters (a persistent grid of at most one CTA per SM): the CTAs running
// together work on one expert, whose grad and X rows stay in L2. The CTAs of a
// cluster share the grad tiles: each stage's grad boxes are split between them
// and multicast to both (half the L2 reads of the larger operand).
// Roles (384 threads, one CTA per SM):
//   warpgroup 0, the producer: for every stage of every item the CTA owns,
//     waits for a ring slot (empty mbarrier: released by the consumers of
//     every CTA of the cluster, since a multicast writes the slot in each);
//     the stage's 64 grad rows x BN channels (the larger operand) come by TMA
//     (grad_map: BN / 64 boxes of 64 channels x 64 rows; box c issued by
//     thread 0 of CTA rank c % CLUSTER, multicast to the cluster, each CTA's
//     full mbarrier expecting all of them) when all 64 rows belong to the
//     expert, else by 16-byte cp.async that zero-fills the rows past the
//     expert's last row (a TMA box would read the next expert's rows, and a
//     NaN there must stay there); the 64 X rows
//     x 128 features by 16-byte cp.async (two threads per row, alternate
//     16-byte chunks; rows gathered through sorted_route), zero-filled past
//     the expert's rows and past K. Each thread then arrives on the slot's
//     full mbarrier with cp.async.mbarrier.arrive.noinc.
//   warpgroups 1 and 2, the consumers: warpgroup w owns features
//     [64 w, 64 w + 64) of the item; per stage four wgmma (16 rows each) on the
//     slot, one group in flight, the slot released once its group retired.
//     The first stage's first wgmma writes D (scale-d = 0), so an item starts
//     without zeroing its accumulators. db (feature block 0 only): consumer
//     thread c sums channel c over each stage's 64 rows from shared memory
//     while the stage's wgmma run.
//     Epilogue: in passes of 32 channels, the warpgroup writes its fragments
//     into a 128-byte-swizzled staging box in shared memory (two per
//     warpgroup, alternating) and its thread 0 stores the box to dW by TMA
//     (dw_map), which clips channels past N and features past K; the
//     warpgroup goes on to the next item without waiting for the writes,
//     while the producer already fills that item's stages.
// Shared-memory tiles: 128-byte rows of 64 bf16 (channels or features), one
// 8 KB region per 64 of them, 16-byte chunks XOR-swizzled by (row & 7): the
// 128-byte swizzle that TMA writes and the M-/N-major descriptors
// (ws_desc_sw128_mn) read.
//
// Deterministic: each output element is one CTA's fixed-order sum over its
// expert's rows (stages in row order, within a stage the wgmma's order); no
// atomics, no split of the reduction, so the result is bit-reproducible and
// independent of other experts' rows. An expert with no rows gets dW (and
// db) written as exact zeros. 64-bit offsets.
//
// ---- Tunable parameters (WgradKernel, kernels/kernel_configs.cuh: the fields in
// lower case; chosen in src/ops/wgrad.cpp) ----
//   BN      : output channels per item, 192 or 256 (accumulators: BN / 2 per consumer thread)
//   STAGES  : ring depth (>= 2)
//   CLUSTER : CTAs per cluster sharing the grad tiles, 1 or 2 (the launch's cluster size)
// Shared memory (bytes): 1024 (alignment) + STAGES * (BN * 128 + 16384)
// + 4 * 8192 (epilogue staging) + STAGES * 16 (mbarriers).
// Requirements: N % 8 == 0, K % 8 == 0, row strides multiples of 8 elements,
// grad / X / dW 16-byte aligned; grad_map: grad as a 2D bf16 map {N, rows},
// box {64, 64}, 128-byte swizzle (src/ops/tensor_map.cpp, rows_map); dw_map:
// dW as a 3D map {K, N, E}, box {128 bytes of K, 32, 1}, 128-byte swizzle
// (expert_output_map).

namespace moejit {
namespace wg {

constexpr int kWgThreads = 384;
constexpr int kWgRows = 64;   // routed rows per stage: four wgmma k16 steps
constexpr int kWgBk = 128;    // input features per item: two consumer warpgroups of 64
constexpr int kWgRegion = kWgRows * 128;  // 64 rows x 128 bytes: 64 channels or features
// setmaxnreg budgets per role (the launch bound gives 168): the consumers'
// BN / 2 accumulators and the epilogue within 216, the producer's copies (TMA
// or cp.async for grad, cp.async for X) within 64; 56 / 224 spills a word.
constexpr int kWgProducerRegs = 64, kWgConsumerRegs = 216;
static_assert(128 * (168 - kWgProducerRegs) >= 256 * (kWgConsumerRegs - 168), "the consumers take what the producer releases");

// Staged epilogue: one pass stores 32 channels x the warpgroup's 64 features
// through a 128-byte-swizzled staging buffer (fp32: two boxes of 32 features,
// bf16: one of 64), double-buffered per consumer warpgroup.
constexpr int kWgEpiChannels = 32, kWgEpiBytes = kWgEpiChannels * 64 * 4;

template <int BN>
struct WgradLayout {
  static constexpr int kGBytes = BN / 64 * kWgRegion;      // grad: BN channels
  static constexpr int kXBytes = kWgBk / 64 * kWgRegion;   // X: 128 features
  static constexpr int kStageBytes = kGBytes + kXBytes;
};

// Named barrier of consumer warpgroup w (ids 1 and 2, 128 threads; immediate ids
// so that ptxas reserves only those).
__device__ __forceinline__ void wg_bar_sync(int w) {
  if (w == 0) asm volatile("bar.sync 1, 128;\n" ::: "memory");
  else asm volatile("bar.sync 2, 128;\n" ::: "memory");
}

struct WgradItem {
  int expert, nt, kt, begin, end, steps;  // steps: stages of kWgRows rows
};
// Cluster unit `unit` (KG feature-block groups of `cluster` blocks per channel
// block) -> this CTA's item: the feature block of its rank in the unit's group.
__device__ __forceinline__ WgradItem wgrad_item(const WgradParams& p, int unit, int KG, int per_expert, int cluster,
                                                int rank) {
  WgradItem w;
  w.expert = unit / per_expert;
  const int rem = unit - w.expert * per_expert;
  w.nt = rem / KG;
  w.kt = (rem - w.nt * KG) * cluster + rank;
  w.begin = p.expert_offsets[w.expert];
  w.end = p.expert_offsets[w.expert + 1];
  w.steps = w.end > w.begin ? (w.end - w.begin + kWgRows - 1) / kWgRows : 0;
  return w;
}

template <WgradKernel C>
__global__ void __launch_bounds__(kWgThreads, 1)
    moe_wgrad_kernel(const WgradParams p, const __grid_constant__ TensorMap grad_map,
                     const __grid_constant__ TensorMap dw_map) {
  constexpr int BN = C.bn, STAGES = C.stages, CLUSTER = C.cluster;
  constexpr bool OUT_BF16 = C.out_bf16;
  static_assert(BN == 192 || BN == 256, "BN: 192 or 256 output channels");
  static_assert(STAGES >= 2, "a ring of at least two stages");
  static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of 1 or 2 CTAs");
  using L = WgradLayout<BN>;
  extern __shared__ __align__(128) u8 smem_raw[];
  const u32 base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const u32 ring = base;                                     // STAGES stages, 1024-byte aligned
  const u32 epi = ring + STAGES * L::kStageBytes;            // 2 x 2 epilogue staging buffers
  const u32 full_bar = epi + 4 * kWgEpiBytes;                // STAGES mbarriers: stage landed
  const u32 empty_bar = full_bar + STAGES * 8;               // STAGES mbarriers: slot free
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  if (tid == 0) {
    tma_prefetch(&grad_map);
    tma_prefetch(&dw_map);
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_bar + 8 * s, 128);  // every producer thread
      mbar_init(empty_bar + 8 * s, 8 * CLUSTER);  // every consumer warp of the cluster
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // The barriers initialized before any CTA of the cluster copies into or arrives on them.
  if (CLUSTER > 1) cluster_sync();
  else __syncthreads();

  const int N = p.n, K = p.k;
  const int NT = (N + BN - 1) / BN, KT = (K + kWgBk - 1) / kWgBk;
  const int KG = (KT + CLUSTER - 1) / CLUSTER;  // feature-block groups: one per cluster unit
  const int per_expert = NT * KG;
  const int units = p.experts * per_expert;
  // This CTA's rank, its cluster and the number of clusters: read where used
  // (special registers), not held across the mainloop.
  auto rank = [] { return CLUSTER > 1 ? (int)cluster_cta_rank() : 0; };
  auto first_unit = [] { return CLUSTER > 1 ? (int)cluster_index() : (int)blockIdx.x; };
  auto unit_stride = [] { return CLUSTER > 1 ? (int)cluster_count() : (int)gridDim.x; };

  if (warp < 4) {
    // ---------------- producer ----------------
    setmaxnreg_dec<kWgProducerRegs>();
    const int row = tid >> 1, half = tid & 1;  // this thread's row of a stage and half of it
    int it = 0;
    for (int unit = first_unit(); unit < units; unit += unit_stride()) {
      const WgradItem w = wgrad_item(p, unit, KG, per_expert, CLUSTER, rank());
      const int begin = w.begin, end = w.end, steps = w.steps;
      const int n0 = w.nt * BN, k0 = w.kt * kWgBk;
      // The route id (by token) or row (by row) of this thread's row in stage s,
      // -1 past the expert's rows; loaded two stages ahead, so that the gather's
      // dependent load never stalls a stage's copies.
      auto route_of = [&](int s) {
        const int r = begin + s * kWgRows + row;
        return s < steps && r < end ? (p.gather ? __ldg(p.sorted_route + r) : r) : -1;
      };
      int ahead0 = route_of(0), ahead1 = route_of(1);
      for (int s = 0; s < steps; ++s, ++it) {
        const int route = ahead0;
        ahead0 = ahead1;
        ahead1 = route_of(s + 2);
        const int slot = it % STAGES;
        const u32 full = full_bar + 8 * slot;
        mbar_wait(empty_bar + 8 * slot, ((it / STAGES) & 1) ^ 1);
        const u32 sg = ring + slot * L::kStageBytes, sx = sg + L::kGBytes;
        const int r0 = begin + s * kWgRows, r = r0 + row;
        const bool live = route >= 0;
        if (r0 + kWgRows <= end) {
          // grad: a whole stage of the expert's rows, BN / 64 TMA boxes (with a
          // cluster: this CTA's share of them, multicast to every CTA of it).
          if (tid == 0) {
            mbar_expect_tx(full, L::kGBytes);
#pragma unroll
            for (int c = 0; c < BN / 64; ++c) {
              if (CLUSTER == 1) tma_load_2d(sg + c * kWgRegion, &grad_map, full, n0 + 64 * c, r0);
              else if (c % CLUSTER == rank())
                tma_load_2d_multicast(sg + c * kWgRegion, &grad_map, full, n0 + 64 * c, r0, (1u << CLUSTER) - 1);
            }
          }
        } else {
          // grad, the expert's last stage: this thread's alternate 16-byte chunks
          // j = 2 jj + half of its row (chunk j in region j / 8), zero past the
          // expert's rows and past N.
          const u16* gsrc = p.grad + (live ? (i64)r * p.grad_row_stride + n0 : 0);
#pragma unroll
          for (int jj = 0; jj < BN / 16; ++jj) {
            const int j = 2 * jj + half;
            const bool ok = live && n0 + 8 * j < N;
            cp_async_16(sg + (j >> 3) * kWgRegion + row * 128 + (((j & 7) ^ (row & 7)) << 4),
                        ok ? (const void*)(gsrc + 8 * j) : (const void*)p.grad, ok ? 16u : 0u);
          }
        }
        // X: the row's 16-byte chunks j = 2 jj + half (chunk j in region j / 8):
        // every region offset is a constant of the unrolled loop.
        const i64 src = live ? (p.gather ? (i64)(route / p.top_k) : (i64)route) : 0;
        const u16* xsrc = p.x + src * p.x_row_stride + k0;
#pragma unroll
        for (int jj = 0; jj < kWgBk / 16; ++jj) {
          const int j = 2 * jj + half;
          const bool ok = live && k0 + 8 * j < K;
          cp_async_16(sx + (j >> 3) * kWgRegion + row * 128 + (((j & 7) ^ (row & 7)) << 4),
                      ok ? (const void*)(xsrc + 8 * j) : (const void*)p.x, ok ? 16u : 0u);
        }
        cp_async_mbar_arrive(full);
      }
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");  // no commit groups here: wait for every copy
    return;
  }

  // ---------------- consumers ----------------
  setmaxnreg_inc<kWgConsumerRegs>();
  const int wgi = (warp - 4) >> 2;          // features 64 wgi .. 64 wgi + 63 of the item
  const int ct = tid - 128;                 // consumer thread 0..255: db's channel
  const int wr16 = ((warp - 4) & 3) * 16;   // the warp's 16 features inside them
  const int g = lane >> 2, q = lane & 3;
  float acc[BN / 2];
  int it = 0;
  // A slot is free for the next multicast once the consumers of every CTA of the
  // cluster have read it: lane c of each warp arrives on CTA rank c's barrier.
  auto release = [&](int slot) {
    __syncwarp();
    if (CLUSTER == 1) {
      if (lane == 0) mbar_arrive(empty_bar + 8 * slot);
    } else if (lane < CLUSTER) {
      mbar_arrive_cluster(empty_bar + 8 * slot, lane);
    }
  };
  for (int unit = first_unit(); unit < units; unit += unit_stride()) {
    const WgradItem w = wgrad_item(p, unit, KG, per_expert, CLUSTER, rank());
    const int e = w.expert, steps = w.steps;
    const bool live = w.kt < KT;  // else a feature block past K: copies only
    const int n0 = w.nt * BN, k0 = w.kt * kWgBk + 64 * wgi;
    const bool do_db = p.db != nullptr && w.kt == 0 && ct < BN;  // warp-uniform
    float db_sum = 0.f;
    int pending = -1;
    for (int s = 0; s < steps; ++s, ++it) {
      const int slot = it % STAGES;
      mbar_wait(full_bar + 8 * slot, (it / STAGES) & 1);
      ws_fence_proxy_async();  // the cp.async (generic proxy) writes, before wgmma reads them
      const u32 sg = ring + slot * L::kStageBytes, sx = sg + L::kGBytes + wgi * kWgRegion;
      if (live) {
        ws_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)  // 16 rows per step: 2048 bytes
          wgmma_m64k16_ss_mn<BN>(acc, ws_desc_sw128_mn(sx + kk * 2048, kWgRegion),
                                 ws_desc_sw128_mn(sg + kk * 2048, kWgRegion), s > 0 || kk > 0);
        ws_wgmma_commit();
      }
      if (do_db) {
        // Channel ct over the stage's 64 rows, in row order (zero past the expert's rows).
        const u32 col = sg + (ct >> 6) * kWgRegion + (ct & 7) * 2;
#pragma unroll 8
        for (int r = 0; r < kWgRows; ++r) {
          u16 v;
          asm volatile("ld.shared.u16 %0, [%1];\n" : "=h"(v) : "r"(col + r * 128 + ((((ct & 63) >> 3) ^ (r & 7)) << 4)));
          db_sum += bf16_bits_to_f32(v);
        }
      }
      ws_wgmma_wait<1>();  // the previous stage's group retired: its slot is free
      if (pending >= 0) release(pending);
      pending = slot;
    }
    ws_wgmma_wait<0>();
    ws_fence_operands(acc);
    if (pending >= 0) release(pending);

    if (do_db && n0 + ct < N) p.db[(i64)e * N + n0 + ct] = db_sum;
    if (!live) continue;

    // Epilogue. Fragment block i holds features f = wr16 + g (+ 8) and channels
    // 8 i + 2 q (+ 1): acc[4 i + 2 h + c] is feature f + 8 h, channel 8 i + 2 q + c.
    // Per pass of 32 channels: the warpgroup's thread 0 waits until the
    // buffer's store from two passes ago has read it; every thread writes its
    // values into the staging box (row = channel, 128 bytes, 16-byte chunks
    // XOR (channel & 7): free of bank conflicts for the fragment's lanes);
    // then thread 0 stores the box by TMA (dw_map clips channels past N and
    // features past K) and goes on without waiting for the writes.
    const bool issuer = (tid & 127) == 0;
#pragma unroll
    for (int ps = 0; ps < BN / kWgEpiChannels; ++ps) {
      const u32 buf = epi + (2 * wgi + (ps & 1)) * kWgEpiBytes;
      if (issuer) bulk_wait_read<1>();
      wg_bar_sync(wgi);
#pragma unroll
      for (int ii = 0; ii < kWgEpiChannels / 8; ++ii) {
        const int i = ps * (kWgEpiChannels / 8) + ii;
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int cc = 0; cc < 2; ++cc) {
            const float v = steps ? acc[4 * i + 2 * h + cc] : 0.f;
            const int f = wr16 + g + 8 * h, c = 8 * ii + 2 * q + cc;
            if (OUT_BF16) {
              const u32 a = buf + c * 128 + (((f >> 3) ^ (c & 7)) << 4) + (f & 7) * 2;
              asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(a), "h"(f32_to_bf16_bits(v)) : "memory");
            } else {
              const int fl = f & 31;
              sts32(buf + (f >> 5) * 4096 + c * 128 + (((fl >> 2) ^ (c & 7)) << 4) + (fl & 3) * 4, __float_as_uint(v));
            }
          }
      }
      ws_fence_proxy_async();  // the generic writes, visible to the TMA store
      wg_bar_sync(wgi);
      if (issuer) {
        const int c1 = n0 + ps * kWgEpiChannels;
        tma_store_3d(&dw_map, buf, k0, c1, e);
        if (!OUT_BF16) tma_store_3d(&dw_map, buf + 4096, k0 + 32, c1, e);
        bulk_commit();
      }
    }
  }
  // A CTA leaves only once its TMA stores have read its shared memory, and, in a
  // cluster, once the other CTAs' consumers no longer arrive on its barriers.
  if ((tid & 127) == 0) bulk_wait_all<0>();
  if (CLUSTER > 1) cluster_sync();
}

}  // namespace wg
}  // namespace moejit
