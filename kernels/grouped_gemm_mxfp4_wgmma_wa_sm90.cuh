// MXFP4 grouped GEMM for prefill on Hopper tensor cores, weights as the A
// operand ("WA"): out^T = W X^T with the dequantized weights in registers
// (wgmma register-A form) and the routed activation rows as B in shared memory.
// Same semantics and parameters as grouped_gemm_mxfp4_wgmma_sm90.cuh
// (GroupedGemmParams, the same tile list: TH * 64 routed rows per tile):
//   gate_up: H[r] = act(X[t(r)] @ W1[e]^T + b1[e]);  down: Y[r] = gamma[r] * (H[r] @ W2[e]^T + b2[e]).
//
// Per CTA (256 threads, two warpgroups): 128 weight rows (64 per warpgroup,
// 16 per warp) times the tile's TH * 64 routed rows, K in 64-wide slices:
//   1. cp.async ring (STAGES deep, prefetch distance STAGES - 2): the slice's
//      activation rows, gathered by token, 128-byte swizzled, and its packed
//      e2m1 weights; the tile's E8M0 scales once, up front.
//   2. Each thread builds its own wgmma A fragments straight from the packed
//      weights (byte q of each word: lane (g, q) holds k pairs {2q, 2q+1} and
//      {2q+8, 2q+9} of rows g and g + 8 of every k16 step), in registers, half
//      a slice (32 k, one E8M0 scale) at a time: no dequantized shared tile,
//      one CTA barrier per slice.
//   3. Each warpgroup issues TH wgmma.m64n64k16 per k16 step (A in registers,
//      B = 64 activation rows from shared memory) and commits each half slice
//      as a group, which runs while the next half is built. wgmma_wait<1>
//      retires the half before, freeing its A registers (two sets of 8,
//      halves alternate); a slice's ring slot is free once both halves retired.
// Why the weights as A: the dequantized weights never touch shared memory
// (the SS kernel writes and re-reads every slice there: shared-memory traffic,
// not the tensor cores, bounded it), and each warp dequantizes only its rows.
// Bits: every output element is a fixed-order sum over its own weight row and
// routed row of m64n64k16 steps; tiles of 64 and 128 routed rows issue the
// same instruction per 64 rows, so the tail tiles (TH = 1) give the same bits
// as the main tiles (TH = 2), and padding rows cannot change a real row's bits.
//
// ---- Tunable parameters (Mxfp4WgmmaWaKernel, kernels/kernel_configs.cuh: the
// fields in lower case; chosen in src/ops/grouped_gemm_config.cpp) ----
//   TH     : 64-row halves of the routed-row tile, 1 or 2 (accumulators: 32 * TH per thread)
//   STAGES : cp.async ring depth (>= 3; prefetch distance STAGES - 2)
//   BN = 128 weight rows, BK = 64: two warpgroups of m64, the 128-byte swizzle.
// Shared memory (bytes): 1024 (alignment) + STAGES * (TH * 64 * 128 + 128 * 32)
//   + 128 * scale_row_pitch(K) + TH * 64 * 4 (router weights). K % 32 == 0; K % 64 == 32 zero-fills the last
//   slice (K_TAIL). N % 16 == 0 (a warp's 16 rows are all in or all out).

namespace moejit {

// D(64 x 64, f32) += A(64 x 16, bf16, registers) * B(16 x 64, bf16, shared
// memory, K-major, smem_desc_sw128). A: the m16n8k16 A fragment of warp w's
// rows 16 w .. 16 w + 15 (a[0]: row g, k 2q..2q+1; a[1]: row g + 8; a[2], a[3]:
// k + 8). D: per n8 block i, d[4i..4i+3] as the m16n8 C fragment. Asynchronous:
// touch d or a only after a wgmma_wait that retires this group.
__device__ __forceinline__ void wgmma_m64n64k16_bf16_rs(float (&d)[32], const u32 (&a)[4], u64 desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// Byte q of the packed word x (two e2m1 codes: k even in the low nibble) ->
// bf16x2 {even, odd} in e2m1x8_to_bf16x2x4_scaled's scaled form (times f1,
// and f2 when `big`, gives value * 2^(E8M0 - 127)). sel = q | (4 + q) << 8.
__device__ __forceinline__ u32 e2m1_byte_to_bf16x2(u32 x, u32 sel, u32 f1) {
  const u32 t = prmt(x, x >> 4, sel) & 0x000F000Fu;
  return mul_bf16x2((t * 0x1040u) & 0x81C081C0u, f1);
}

template <Mxfp4WgmmaWaKernel C>
__global__ void __launch_bounds__(256, 2) grouped_gemm_mxfp4_wgmma_wa_kernel(const GroupedGemmParams p) {
  constexpr int TH = C.th, STAGES = C.stages;
  constexpr bool K_TAIL = C.k_tail;
  constexpr int ACT = C.epilogue.act, BIAS = C.epilogue.bias;
  constexpr bool GATHER = C.epilogue.gather, ROUTER_WEIGHT = C.epilogue.router_weight, OUT_F32 = C.epilogue.out_f32;
  constexpr int THREADS = 256, BM = 64 * TH, BN = 128, BK = 64;
  constexpr int X_BYTES = BM * 128, WQ_BYTES = BN * 32;
  static_assert(TH == 1 || TH == 2, "TH: 64 or 128 routed rows");
  static_assert(STAGES >= 3, "prefetch distance must be >= 1");
  // swapab_epilogue_values stores gated outputs as bf16 (gate_up writes bf16: why_not_implementable).
  static_assert(!(OUT_F32 && ACT != kActNone), "gated activations write bf16");
  constexpr int DIST = STAGES - 2;  // the slot of slice kt - 1 may still be read by its wgmmas
  constexpr int X_ITERS = BM * 8 / THREADS;

  // Wait first, except in the split-tail launch, which waits before it exits
  // (every CTA): wgmma_tile_begin.
  WgmmaTile t;
  if (!wgmma_tile_begin(p, t)) return;
  const int expert = t.expert, row_begin = t.row_begin, row_end = t.row_end;
  const int N = p.n, K = p.k;
  const int n0 = blockIdx.x * BN;
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, q = lane & 3;
  // Warp `warp` owns logical output columns L0 .. L0 + 15 (fragment rows in
  // group_row order: gated activations meet gate and up in one thread).
  const int L0 = n0 + 16 * warp;
  const bool grp_ok = L0 < N;

  extern __shared__ __align__(128) u8 smem_raw[];
  const u32 base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const u32 x_ring = base;                      // STAGES * X_BYTES
  const u32 wq_ring = x_ring + STAGES * X_BYTES;  // STAGES * WQ_BYTES: ring row 16 w + fr = fragment row fr of warp w
  const u32 s_table = wq_ring + STAGES * WQ_BYTES;  // BN * scale_row_pitch(K), ring-row order
  // The tile's router weights (BM floats after the scale table): the epilogue
  // needs one per routed row and n8 block, two dependent global loads each.
  float* s_gamma = (float*)(smem_raw + (s_table - smem_addr(smem_raw)) + BN * scale_row_pitch(K));
  if (ROUTER_WEIGHT)
    for (int i = tid; i < BM; i += THREADS) {
      const int r = row_begin + i;
      s_gamma[i] = r < row_end ? p.gamma[p.sorted_route[r]] : 1.f;  // visible after the loop's first barrier
    }

  // Activation loader (the B operand): X_ITERS 16-byte chunks per thread per
  // slice, gathered once (64-bit row pointers: per-slice address arithmetic on
  // 32-bit row indices cost ~60 instructions per slice).
  const GatheredRows<X_ITERS, THREADS, GATHER, K_TAIL> x_rows(p, row_begin, row_end, tid);
  // Weight loader: one 16-byte chunk (half of ring row tid / 2's slice) per thread.
  const i64 w_row_bytes = K / 2;
  const int s_row_bytes = K / 32;
  auto ring_row_global = [&](int rr) {  // physical weight row of ring row rr (its group must be < N)
    return (i64)expert * N + physical_row<ACT>(group_row<ACT>(n0 + (rr & ~15), rr & 15), N);
  };
  const int w_rr = tid >> 1, w_half = tid & 1;
  const bool w_ok = n0 + (w_rr & ~15) < N;
  const u8* w_src = p.w + (w_ok ? ring_row_global(w_rr) : 0) * w_row_bytes + w_half * 16;

  const int KT = (K + BK - 1) / BK;
  auto load_slice = [&](int kt) {
    const int slot = kt % STAGES;
    const int k0 = kt * BK;
    x_rows.copy(p, x_ring + slot * X_BYTES, k0, K, tid);
    const bool ok = w_ok && (!K_TAIL || k0 + w_half * 32 < K);
    cp_async_16(wq_ring + slot * WQ_BYTES + tid * 16, ok ? (const void*)(w_src + k0 / 2) : (const void*)p.w,
                ok ? 16u : 0u);
  };

  // E8M0 scales of the tile's 128 ring rows, all of K, behind the ring.
  const int s_pitch = scale_row_pitch(K);
  for (int rr = warp; rr < BN; rr += THREADS / 32) {
    if (n0 + (rr & ~15) >= N) continue;
    const i64 start = ring_row_global(rr) * s_row_bytes;
    const i64 astart = start & ~(i64)3;
    const int chunks = (int)(((start + s_row_bytes + 3) & ~(i64)3) - astart) / 4;
    for (int c = lane; c < chunks; c += 32) cp_async_4(s_table + rr * s_pitch + c * 4, p.w_scales + astart + c * 4);
  }
  // This thread's two fragment rows (g, g + 8): ring rows, scale offsets.
  int s_off[2];
  u32 wq_off[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int rr = 16 * warp + g + 8 * h;
    wq_off[h] = rr * 32;
    s_off[h] = rr * s_pitch + (grp_ok ? (int)((ring_row_global(rr) * s_row_bytes) & 3) : 0);
  }
  const u32 sel = (u32)q | ((u32)(4 + q) << 8);

#pragma unroll
  for (int s = 0; s < DIST; ++s) {
    if (s < KT) load_slice(s);
    cp_async_commit();  // the scale sweep joins the first group
  }

  float acc[TH][32];
#pragma unroll
  for (int h = 0; h < TH; ++h)
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[h][i] = 0.f;

  // A fragments of half c of slice kt (k 32 c .. 32 c + 31, one E8M0 scale per
  // row): a[4 s + j] for its k16 step s (0, 1), j as in wgmma_m64n64k16_bf16_rs.
  auto build_half = [&](int kt, int c, u32 (&a)[8]) {
    const u32 wq = wq_ring + (kt % STAGES) * WQ_BYTES + 16 * c;
    u32 w[2][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) lds128(wq + wq_off[h], w[h][0], w[h][1], w[h][2], w[h][3]);
    const int sj = kt * 2 + c;
    u32 sb[2], f1[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // K_TAIL: no scale for the zero half past K (a stray 0xFF would make NaN).
      sb[h] = (K_TAIL && sj >= s_row_bytes) || !grp_ok ? 127u : lds8(s_table + s_off[h] + sj);
      f1[h] = e8m0_small_factor(min(sb[h], 128u));  // 2^(min(s, 128) - 1), as e8m0_to_e2m1_factors' f1
    }
    // Step s: words 2 s (k 16 s .. 16 s + 7) and 2 s + 1 (k + 8) of row g (j
    // even) and row g + 8 (j odd).
#pragma unroll
    for (int s = 0; s < 2; ++s)
#pragma unroll
      for (int j = 0; j < 4; ++j) a[4 * s + j] = e2m1_byte_to_bf16x2(w[j & 1][2 * s + (j >> 1)], sel, f1[j & 1]);
    // The second factor (E8M0 above 128, or NaN) only when some lane of the
    // warp needs it (rare): a warp-uniform branch, as in the SS kernel.
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
  // Each half slice is its own wgmma group; wgmma_wait<1> after it retires the
  // half before, whose A registers the next build_half overwrites.
  auto mma_half = [&](int kt, int c, const u32 (&a)[8]) {
    wgmma_fence();  // the A registers were just written
    const u32 xa = x_ring + (kt % STAGES) * X_BYTES;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const u32 as[4] = {a[4 * s], a[4 * s + 1], a[4 * s + 2], a[4 * s + 3]};
#pragma unroll
      for (int h = 0; h < TH; ++h)
        wgmma_m64n64k16_bf16_rs(acc[h], as, smem_desc_sw128(xa + h * 64 * 128) + 2 * (2 * c + s));
    }
    wgmma_commit();
    wgmma_wait<1>();
  };

  u32 a_lo[8], a_hi[8];
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<DIST - 1>();
    fence_proxy_async();
    // Slice kt landed for all. Slice kt - 2 is retired by every warpgroup (the
    // second half of kt - 1 may still run until mma_half(kt, 0) waits): the
    // refill below targets kt - 2's slot, so DIST must stay STAGES - 2.
    __syncthreads();
    if (kt + DIST < KT) load_slice(kt + DIST);
    cp_async_commit();
    build_half(kt, 0, a_lo);
    mma_half(kt, 0, a_lo);
    build_half(kt, 1, a_hi);
    mma_half(kt, 1, a_hi);
  }
  wgmma_wait<0>();
  cp_async_wait<0>();

  // Epilogue: per token half h and n8 block i, acc[h][4i..4i+3] is the m16n8 C
  // fragment of the warp's 16 output columns and routed rows 64 h + 8 i ...
  if (grp_ok) {
    float bias2[2];
    swapab_bias_pair<ACT, BIAS>(p, N, expert, L0, g, true, bias2);
#pragma unroll
    for (int h = 0; h < TH; ++h)
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int rows = row_begin + 64 * h + 8 * i;
        if (rows >= row_end) continue;  // warp-uniform
        float gamma2[2];
#pragma unroll
        for (int t = 0; t < 2; ++t) gamma2[t] = ROUTER_WEIGHT ? s_gamma[64 * h + 8 * i + 2 * q + t] : 1.f;
        const float v[4] = {acc[h][4 * i], acc[h][4 * i + 1], acc[h][4 * i + 2], acc[h][4 * i + 3]};
        if (ACT != kActNone) {  // one output per routed row and column pair (gate, up): one bf16 store
          swapab_epilogue_values<ACT, BIAS, OUT_F32>(p, L0, rows, row_end, v, bias2, gamma2, g, q);
          continue;
        }
        // No activation: y[2 half + t] is output column L0 + g + 8 half of
        // routed row rows + 2q + t (the operations of swapab_epilogue_values,
        // in its order). Lanes g and g ^ 1 trade values so that each stores
        // two adjacent columns of one routed row: even g row 2q, columns
        // g, g + 1 (and + 8); odd g row 2q + 1, columns g - 1, g (and + 8).
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
        if (r >= row_end) continue;
        const int n = L0 + (g & ~1);
        const float lo0 = odd ? x0 : y[0], hi0 = odd ? y[1] : x0;
        const float lo1 = odd ? x1 : y[2], hi1 = odd ? y[3] : x1;
        if (OUT_F32) {
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
  if (t.wait_at_exit) pdl_wait();
}

}  // namespace moejit
