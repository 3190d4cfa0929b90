// MXFP4 grouped GEMM for prefill on Hopper tensor cores (wgmma), sm_90a: the
// dequantized-tile kernel. Prefill runs the weights-as-A kernel by default
// (grouped_gemm_mxfp4_wgmma_wa_sm90.cuh, which also uses this file's wgmma
// functions); this one runs with MOEJIT_GEMM_TUNE prefill.wa=0.
// Same semantics and parameters as grouped_gemm_sm90.cuh (GroupedGemmParams):
//   gate_up: H[r] = act(X[t(r)] @ W1[e]^T + b1[e]);  down: Y[r] = gamma[r] * (H[r] @ W2[e]^T + b2[e]).
//
// Per CTA: a tile of BM = 64 * WG routed rows of one expert (one warpgroup per
// 64 rows) times BN = 128 weight rows, K in 64-wide slices:
//   1. cp.async ring (STAGES deep, prefetch distance STAGES - 2): the slice's
//      activation rows, gathered by token, and its packed e2m1 weights; the
//      tile's E8M0 scales once, up front (as in grouped_gemm_sm90.cuh).
//   2. Every thread dequantizes half a weight row of the slice (32 values, one
//      E8M0 scale) to bf16 in natural k order into a double-buffered shared
//      tile, 128-byte swizzled like the activation tile.
//   3. Each warpgroup issues four wgmma.m64n128k16 (both operands from shared
//      memory) and commits them; they run while the threads dequantize the
//      next slice. wgmma_wait<1> retires the group before last, which frees
//      its shared buffers for the next prefetch and dequantization.
// Why shared-memory B instead of registers: the dequantized slice is reused by
// all WG warpgroups, and the activation tile keeps its natural k order, so it
// goes straight from global memory with cp.async.
// Every output element is a fixed-order sum over its own row: padding rows
// cannot change a real row's bits.
//
// ---- Tunable parameters (Mxfp4WgmmaKernel, kernels/kernel_configs.cuh: the
// fields in lower case; chosen in src/ops/grouped_gemm_config.cpp) ----
//   WG     : warpgroups, 1..3 (BM = 64 * WG routed rows; 128 * WG threads)
//   STAGES : cp.async ring depth (>= 3)
//   OVERLAP: MMAs of slice kt overlap the dequantization of kt + 1 (prefetch
//            distance STAGES - 2), or retire first (distance STAGES - 1)
//   BN = 128 weight rows, BK = 64: fixed by the wgmma shape and the 128-byte swizzle.
// Shared memory (bytes): 1024 (alignment) + STAGES * (BM * 128 + BN * 32)
//   + 2 * BN * 128 + BN * scale_row_pitch(K). K % 32 == 0; K % 64 == 32 zero-fills
//   the last slice (K_TAIL).

namespace moejit {

__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }

// Shared-memory matrix descriptor of a K-major tile with 128-byte rows, 128-byte
// swizzle, 8-row groups 1024 bytes apart (PTX ISA, "Matrix Descriptor Format").
// The tile must start 1024-byte aligned; advancing k by 16 adds 32 bytes.
__device__ __forceinline__ u64 smem_desc_sw128(u32 addr) {
  u64 d = (u64)((addr & 0x3FFFFu) >> 4);
  d |= (u64)1 << 16;            // leading byte offset (unused with this swizzle)
  d |= (u64)(1024 >> 4) << 32;  // stride byte offset: 8 rows * 128 bytes
  d |= (u64)1 << 62;            // 128-byte swizzle
  return d;
}

// D(64x128, f32) += A(64x16, bf16, shared memory) * B(16x128, bf16, shared memory):
// one warpgroup, both operands K-major and 128-byte swizzled (smem_desc_sw128).
// The accumulators are read and written asynchronously: touch d only after
// wgmma_wait<0> (or a wait that retires this group).
__device__ __forceinline__ void wgmma_m64n128k16_bf16_ss(float (&d)[64], u64 desc_a, u64 desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

// The CTA's tile (blockIdx.y of the tile list) of a prefill kernel. The tile
// schedule and the activations come from earlier launches: wait for them
// first, except in the split-tail launch (p.wait_at_exit), whose inputs were
// complete before the launch it follows (the GEMM's main tiles) passed its own
// wait. That one waits before it exits instead, every CTA, so its completion,
// which the next launch waits for, implies the main tiles' too; meanwhile it
// runs beside their last wave. False for a CTA past the list (it has waited
// where it must and returns).
struct WgmmaTile {
  int expert, row_begin, row_end;
  bool wait_at_exit;  // wait before exit (the split-tail launch)
};
__device__ __forceinline__ bool wgmma_tile_begin(const GroupedGemmParams& p, WgmmaTile& t) {
  t.wait_at_exit = p.wait_at_exit != 0;
  if (!t.wait_at_exit) pdl_wait();
  pdl_launch_dependents();
  const int tile = blockIdx.y;
  if (tile >= *p.num_tiles) {
    if (t.wait_at_exit) pdl_wait();
    return false;
  }
  t.expert = p.tile_expert[tile];
  t.row_begin = p.tile_row_begin[tile];
  t.row_end = p.tile_row_end[tile];
  return true;
}

// A tile's activation rows, gathered by token (GATHER) or in sorted order:
// thread tid copies 16-byte chunk tid % 8 of rows tid / 8 + i * THREADS / 8
// (i < ITERS) of each 64-k slice into a 128-byte-swizzled tile (the K-major
// wgmma operand layout). Rows past the tile read nothing (source size 0) and
// land as zeros; so does a K tail past K.
template <int ITERS, int THREADS, bool GATHER, bool K_TAIL>
struct GatheredRows {
  const u16* src[ITERS];  // row start + the thread's chunk; row 0 of X past the tile
  bool ok[ITERS];
  int chunk;
  __device__ __forceinline__ GatheredRows(const GroupedGemmParams& p, int row_begin, int row_end, int tid) {
    chunk = tid & 7;
#pragma unroll
    for (int i = 0; i < ITERS; ++i) {
      const int r = row_begin + (tid >> 3) + i * (THREADS / 8);
      ok[i] = r < row_end;
      i64 src_row = 0;
      if (ok[i]) src_row = GATHER ? (i64)(p.sorted_route[r] / p.top_k) : (i64)r;
      src[i] = p.a + src_row * p.a_row_stride + chunk * 8;
    }
  }
  __device__ __forceinline__ void copy(const GroupedGemmParams& p, u32 tile, int k0, int K, int tid) const {
#pragma unroll
    for (int i = 0; i < ITERS; ++i) {
      const int row = (tid >> 3) + i * (THREADS / 8);
      const bool live = ok[i] && (!K_TAIL || k0 + chunk * 8 < K);
      cp_async_16(tile + row * 128 + ((chunk ^ (row & 7)) << 4),
                  !K_TAIL || live ? (const void*)(src[i] + k0) : (const void*)p.a, live ? 16u : 0u);
    }
  }
};

template <int WG, int STAGES>
struct WgmmaGemmTraits {
  static constexpr int kThreads = 128 * WG;
  static constexpr int kBM = 64 * WG;
  static constexpr int kBN = 128;
  static constexpr int kXBytes = kBM * 128;   // activation slice, bf16
  static constexpr int kWqBytes = kBN * 32;   // packed e2m1 slice
  static constexpr int kWBytes = kBN * 128;   // dequantized slice, bf16
};

template <Mxfp4WgmmaKernel C>
__global__ void __launch_bounds__(128 * C.wg, C.wg <= 2 ? 2 : 1) grouped_gemm_mxfp4_wgmma_kernel(const GroupedGemmParams p) {
  constexpr int WG = C.wg, STAGES = C.stages;
  constexpr bool OVERLAP = C.overlap, K_TAIL = C.k_tail;
  constexpr int ACT = C.epilogue.act, BIAS = C.epilogue.bias;
  constexpr bool GATHER = C.epilogue.gather, ROUTER_WEIGHT = C.epilogue.router_weight, OUT_F32 = C.epilogue.out_f32;
  using Tr = WgmmaGemmTraits<WG, STAGES>;
  constexpr int THREADS = Tr::kThreads, BM = Tr::kBM, BN = Tr::kBN, BK = 64;
  static_assert(STAGES >= 3, "prefetch distance must be >= 1");
  // OVERLAP: slice kt's MMAs run while slice kt + 1 is dequantized, so the ring
  // slot they read is refilled one slice later (distance STAGES - 2). Otherwise
  // each slice's MMAs retire before the next slice starts (distance STAGES - 1;
  // the other CTA on the SM keeps the tensor cores busy meanwhile).
  constexpr int DIST = OVERLAP ? STAGES - 2 : STAGES - 1;
  constexpr int X_ITERS = BM * 8 / THREADS;
  constexpr int W_CHUNKS = BN * 2;  // half weight rows (16 bytes packed) per slice
  constexpr int W_ITERS = (W_CHUNKS + THREADS - 1) / THREADS;
  static_assert(BM * 8 % THREADS == 0, "loader shape");

  WgmmaTile t;
  if (!wgmma_tile_begin(p, t)) return;
  const int expert = t.expert, row_begin = t.row_begin, row_end = t.row_end;
  const int N = p.n, K = p.k;
  const int n0 = blockIdx.x * BN;
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int wg = warp >> 2, wq = warp & 3;  // warpgroup, warp inside it
  const int g = lane >> 2, q = lane & 3;

  extern __shared__ __align__(128) u8 smem_raw[];
  const u32 base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const u32 x_ring = base;                                  // STAGES * kXBytes
  const u32 w_tile = x_ring + STAGES * Tr::kXBytes;         // 2 * kWBytes (bf16, dequantized)
  const u32 wq_ring = w_tile + 2 * Tr::kWBytes;             // STAGES * kWqBytes
  const u32 s_table = wq_ring + STAGES * Tr::kWqBytes;      // BN * scale_row_pitch(K)

  const GatheredRows<X_ITERS, THREADS, GATHER, K_TAIL> x_rows(p, row_begin, row_end, tid);
  // Weight loader and dequantizer: W_ITERS 16-byte chunks (half a row's slice:
  // 32 values, one E8M0 scale) per thread; chunk index idx = tid + i * THREADS.
  const i64 w_row_bytes = K / 2;
  const int s_row_bytes = K / 32;
  const u8* w_src[W_ITERS];
  bool w_ok[W_ITERS];
#pragma unroll
  for (int i = 0; i < W_ITERS; ++i) {
    const int idx = tid + i * THREADS, row = (idx < W_CHUNKS ? idx : 0) >> 1;
    w_ok[i] = idx < W_CHUNKS && n0 + row < N;
    w_src[i] = p.w + ((i64)expert * N + physical_row<ACT>(w_ok[i] ? n0 + row : 0, N)) * w_row_bytes + (idx & 1) * 16;
  }

  const int KT = (K + BK - 1) / BK;
  auto load_slice = [&](int kt) {
    const int slot = kt % STAGES;
    const int k0 = kt * BK;
    x_rows.copy(p, x_ring + slot * Tr::kXBytes, k0, K, tid);
#pragma unroll
    for (int i = 0; i < W_ITERS; ++i) {
      const int idx = tid + i * THREADS;
      if (W_CHUNKS % THREADS != 0 && idx >= W_CHUNKS) continue;
      const bool ok = w_ok[i] && (!K_TAIL || k0 + (idx & 1) * 32 < K);
      cp_async_16(wq_ring + slot * Tr::kWqBytes + idx * 16, ok ? (const void*)(w_src[i] + k0 / 2) : (const void*)p.w,
                  ok ? 16u : 0u);
    }
  };

  // E8M0 scales of the tile's BN rows, all of K, behind the ring.
  const int s_pitch = scale_row_pitch(K);
  for (int row = warp; row < BN; row += THREADS / 32) {
    const int n = n0 + row;
    if (n >= N) continue;
    const i64 start = ((i64)expert * N + physical_row<ACT>(n, N)) * s_row_bytes;
    const i64 astart = start & ~(i64)3;
    const int chunks = (int)(((start + s_row_bytes + 3) & ~(i64)3) - astart) / 4;
    for (int c = lane; c < chunks; c += 32) cp_async_4(s_table + row * s_pitch + c * 4, p.w_scales + astart + c * 4);
  }
  int s_off[W_ITERS];
#pragma unroll
  for (int i = 0; i < W_ITERS; ++i) {
    const int row = ((tid + i * THREADS) % W_CHUNKS) >> 1;
    s_off[i] = row * s_pitch +
               (int)((((i64)expert * N + physical_row<ACT>(w_ok[i] ? n0 + row : 0, N)) * s_row_bytes) & 3);
  }

#pragma unroll
  for (int s = 0; s < DIST; ++s) {
    if (s < KT) load_slice(s);
    cp_async_commit();  // the scale sweep joins the first group
  }

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;

  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<DIST - 1>();
    fence_proxy_async();
    __syncthreads();  // slice kt landed for all; wgmma(kt - 2) retired by every warpgroup
    if (kt + DIST < KT) load_slice(kt + DIST);
    cp_async_commit();

    // Dequantize half weight rows (32 values, one scale each) into the bf16 tile.
#pragma unroll
    for (int it = 0; it < W_ITERS; ++it) {
      const int idx = tid + it * THREADS, w_row = idx >> 1, w_half = idx & 1;
      if (W_CHUNKS % THREADS != 0 && idx >= W_CHUNKS) continue;
      u32 wv[4];
      lds128(wq_ring + (kt % STAGES) * Tr::kWqBytes + idx * 16, wv[0], wv[1], wv[2], wv[3]);
      const int sj = kt * 2 + w_half;
      // K_TAIL: no scale for the zero half past K (a stray 0xFF would make NaN).
      const u32 sbyte = (K_TAIL && sj >= s_row_bytes) || !w_ok[it] ? 127u : lds8(s_table + s_off[it] + sj);
      u32 f1, f2;
      bool big;
      e8m0_to_e2m1_factors(sbyte, f1, f2, big);
      // The second factor only when some lane of the warp needs it (rare): a
      // warp-uniform branch, not four predicated multiplies per word (measured
      // 3227 -> 3054 us per gpt-oss-120b layer at T = 4096).
      const bool warp_big = __any_sync(0xffffffffu, big);
      const u32 wt = w_tile + (kt & 1) * Tr::kWBytes + w_row * 128;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        u32 pr[4];
        e2m1x8_to_bf16x2x4_scaled(wv[i], pr);
#pragma unroll
        for (int j = 0; j < 4; ++j) pr[j] = mul_bf16x2(pr[j], f1);
        if (warp_big) {
#pragma unroll
          for (int j = 0; j < 4; ++j) pr[j] = big ? mul_bf16x2(pr[j], f2) : pr[j];
        }
        // pairs {e_j, e_j+4} -> natural order {e0,e1}, {e2,e3}, {e4,e5}, {e6,e7}
        const u32 n0w = prmt(pr[0], pr[1], 0x5410), n1w = prmt(pr[2], pr[3], 0x5410);
        const u32 n2w = prmt(pr[0], pr[1], 0x7632), n3w = prmt(pr[2], pr[3], 0x7632);
        const int chunk = w_half * 4 + i;
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(wt + ((chunk ^ (w_row & 7)) << 4)),
                     "r"(n0w), "r"(n1w), "r"(n2w), "r"(n3w));
      }
    }
    fence_proxy_async();
    __syncthreads();  // the dequantized slice is complete

    // Issued unconditionally: a wgmma under a branch makes ptxas serialize every
    // wgmma of the kernel (warning C7510). A warpgroup whose rows are all
    // padding multiplies zero-filled activations.
    wgmma_fence();
    {
      const u32 xa = x_ring + (kt % STAGES) * Tr::kXBytes + wg * 64 * 128;
      const u32 wb = w_tile + (kt & 1) * Tr::kWBytes;
      const u64 da = smem_desc_sw128(xa), db = smem_desc_sw128(wb);
#pragma unroll
      for (int s = 0; s < 4; ++s) wgmma_m64n128k16_bf16_ss(acc, da + 2 * s, db + 2 * s);
    }
    wgmma_commit();
    if (OVERLAP)
      wgmma_wait<1>();
    else
      wgmma_wait<0>();
  }
  wgmma_wait<0>();
  cp_async_wait<0>();

  // Epilogue. Warp wq of warpgroup wg holds rows 64 wg + 16 wq + g (+ 8); for
  // each n8 block i: acc[4i], acc[4i+1] at columns 8i + 2q, 2q + 1 of row g,
  // acc[4i+2], acc[4i+3] of row g + 8.
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = row_begin + 64 * wg + 16 * wq + g + 8 * half;
    if (r >= row_end) continue;
    const float gamma = ROUTER_WEIGHT ? p.gamma[p.sorted_route[r]] : 1.f;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int n = n0 + 8 * i + 2 * q;
      if (n >= N) continue;
      store_column_pair<ACT, BIAS, OUT_F32>(p, expert, r, n, acc[4 * i + 2 * half], acc[4 * i + 2 * half + 1], gamma,
                                            true, 0);
    }
  }
  if (t.wait_at_exit) pdl_wait();
}

}  // namespace moejit
