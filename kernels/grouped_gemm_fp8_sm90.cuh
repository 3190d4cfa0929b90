// FP8 grouped GEMM over expert-sorted routed rows (MoE gate_up and down), e4m3
// tensor cores (mma.sync m16n8k32 e4m3.e4m3 -> f32), fp32 accumulation, sm_90a.
//
//   gate_up: H[r] = act(sa(t(r)) * sw * (Xq[t(r)] @ W1q[e]^T) + b1[e])  (Xq gathered by token)
//   down:    Y[r] = gamma[r] * (sa(r) * sw * (Hq[r] @ W2q[e]^T) + b2[e])
//
// Two scale granularities (QUANT):
//   kF8PerToken: activations e4m3 [rows, K] + fp32 scale per row; weights e4m3
//                [E, N, K] + fp32 scale per expert [E] (WSCALE kWsExpert) or per
//                output channel [E, N] (kWsChannel). Both scales multiply the
//                fp32 accumulator once, in the epilogue: v = (acc * sa) * sw.
//   kF8Mx      : MXFP8. activations e4m3 [rows, K] + E8M0 [rows, K/32]; weights
//                e4m3 [E, N, K] + E8M0 [E, N, K/32]. sm_90 has no block-scaled
//                MMA: one k32 MMA is exactly one 32-block, its product goes to a
//                zeroed fp32 temporary, then acc = fma(temp * sa, sw, acc) on
//                the CUDA cores. E8M0 0x00 = 2^-127, 0xFF = NaN (a NaN scale
//                makes exactly the outputs that use that block NaN).
// Both modes move every k32 partial product into the fp32 accumulator
// (promotion every 32 K), so K = 7168 loses nothing to the tensor core's
// internal accumulation width.
//
// ---- Tunable parameters (Fp8MmaKernel, kernels/kernel_configs.cuh: the
// fields in lower case; the host heuristic in src/ops/fp8_gemm_config.cpp
// chooses them from the specialization key) ----
//   WARPS_M, WARPS_N : warp grid of the CTA (THREADS = 32 * WARPS_M * WARPS_N)
//   MI, NI           : m16 tiles and n8 tiles per warp
//                      BM = 16 * MI * WARPS_M rows, BN = 8 * NI * WARPS_N columns
//   STAGES           : cp.async pipeline depth (shared memory ring of k-slices)
//   BK               : 128 e4m3 = 128 bytes (fixed): one k-slice = four 32-blocks.
//                      K % 16 == 0 (per-token) / K % 32 == 0 (MX) is required; a
//                      partial last slice is zero-filled when K_TAIL.
// Shared memory per stage: A BM*128 B + B BN*128 B (+ (BM+BN)*4 B E8M0, MX only,
// rounded up to 16 B).
//
// Why this K order inside a 32-block: the MMA's lane q (= lane % 4) owns logical
// k {4q..4q+3} (registers a0/a1, b0) and {16+4q..16+4q+3} (a2/a3, b1). We feed it
// physical bytes [8q, 8q+8) of the block instead (one 64-bit shared load per row)
// for A and B alike; the same permutation on both operands of a sum is exact,
// and it never leaves the 32-block, so one MMA still covers exactly one MX block.
// Rows never mix: every output is a fixed-order sum over its own row, so padding
// rows cannot change a real row's bits.

namespace moejit {
namespace f8 {

enum { kF8PerToken = 0, kF8Mx = 1 };
enum { kWsExpert = 0, kWsChannel = 1, kWsBlock = 2 };
enum { kActNone = 0, kActSiluGated = 1, kActSwigluOai = 2 };
enum { kBiasNone = 0, kBiasF32 = 1, kBiasBf16 = 2 };

// Fp8GemmParams (the launch parameters): kernel_params.cuh.

template <int WARPS_M, int WARPS_N, int MI, int NI, int STAGES, int QUANT>
struct Fp8GemmTraits {
  static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
  static constexpr int kBM = 16 * MI * WARPS_M;
  static constexpr int kBN = 8 * NI * WARPS_N;
  static constexpr int kBK = 128;
  static constexpr int kABytes = kBM * kBK;
  static constexpr int kBBytes = kBN * kBK;
  static constexpr int kSBytes = QUANT == kF8Mx ? (kBM + kBN) * (kBK / 32) : 0;
  static constexpr int kStageBytes = kABytes + kBBytes + ((kSBytes + 15) / 16) * 16;
  static constexpr int kSmemBytes = STAGES * kStageBytes;
};

// Logical output column -> physical weight row (silu_gated: gate rows [0, N/2),
// up rows [N/2, N), interleaved so both halves of one output meet in one thread).
template <int ACT>
__device__ __forceinline__ int f8_physical_row(int n, int N) {
  if (ACT == kActSiluGated) return (n & 1) ? (N >> 1) + (n >> 1) : (n >> 1);
  return n;
}

template <Fp8MmaKernel C>
__global__ void __launch_bounds__(32 * C.warps_m * C.warps_n)
grouped_gemm_fp8_kernel(const Fp8GemmParams p) {
  constexpr int WARPS_M = C.warps_m, WARPS_N = C.warps_n, MI = C.mi, NI = C.ni, STAGES = C.stages, QUANT = C.quant;
  constexpr int WSCALE = C.wscale, ACT = C.epilogue.act, BIAS = C.epilogue.bias;
  constexpr bool GATHER = C.epilogue.gather, ROUTER_WEIGHT = C.epilogue.router_weight, OUT_F32 = C.epilogue.out_f32;
  constexpr bool K_TAIL = C.k_tail;
  using Tr = Fp8GemmTraits<WARPS_M, WARPS_N, MI, NI, STAGES, QUANT>;
  constexpr int THREADS = Tr::kThreads, BM = Tr::kBM, BN = Tr::kBN, BK = Tr::kBK;
  static_assert((BM * 8) % THREADS == 0, "A loader: BM*8 must be a multiple of THREADS");
  static_assert(QUANT != kF8Mx || WSCALE == kWsBlock, "MX weights carry E8M0 block scales");
  constexpr int A_ITERS = BM * 8 / THREADS;
  constexpr int B_CHUNKS = BN * 8;
  constexpr int B_ITERS = (B_CHUNKS + THREADS - 1) / THREADS;
  constexpr int S_BYTES = Tr::kSBytes;
  constexpr int S_ITERS = (S_BYTES + THREADS - 1) / THREADS;

  const int tile = blockIdx.y;
  if (tile >= *p.num_tiles) return;
  const int expert = p.tile_expert[tile];
  if (expert < 0) return;
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
  const u8* a_src[A_ITERS];
  bool a_ok[A_ITERS];
  const int a_chunk = tid & 7;
#pragma unroll
  for (int i = 0; i < A_ITERS; ++i) {
    const int row = (tid >> 3) + i * (THREADS / 8);
    const int r = row_begin + row;
    a_ok[i] = r < row_end;
    i64 src_row = 0;
    if (a_ok[i]) src_row = GATHER ? (i64)(p.sorted_route[r] / p.top_k) : (i64)r;
    a_src[i] = p.a + src_row * p.a_row_stride + a_chunk * 16;
  }

  const i64 w_row_bytes = (i64)K;
  const u8* w_expert = p.w + (i64)expert * N * w_row_bytes;
  const int KB = K / 32;  // E8M0 bytes per row (MX)
  const int KT = (K + BK - 1) / BK;

  // MX scale sources: entries [0, BM*4) are A rows (4 blocks per slice), then
  // BN*4 B rows. Out-of-range entries read as 127 (1.0): their data is zero-filled,
  // so they add exact zeros (a NaN default would poison real rows).
  const u8* s_src[S_ITERS > 0 ? S_ITERS : 1];
  bool s_ok[S_ITERS > 0 ? S_ITERS : 1];
  if (QUANT == kF8Mx) {
#pragma unroll
    for (int i = 0; i < S_ITERS; ++i) {
      const int idx = tid + i * THREADS;
      s_ok[i] = false;
      s_src[i] = (const u8*)p.w_scales;
      if (idx < BM * 4) {
        const int row = idx >> 2, j = idx & 3;
        const int r = row_begin + row;
        if (r < row_end) {
          const i64 src_row = GATHER ? (i64)(p.sorted_route[r] / p.top_k) : (i64)r;
          s_src[i] = (const u8*)p.a_scales + src_row * p.a_scale_row_stride + j;
          s_ok[i] = true;
        }
      } else if (idx < S_BYTES) {
        const int row = (idx - BM * 4) >> 2, j = idx & 3;
        const int n = n0 + row;
        if (n < N) {
          s_src[i] = (const u8*)p.w_scales + ((i64)expert * N + f8_physical_row<ACT>(n, N)) * KB + j;
          s_ok[i] = true;
        }
      }
    }
  }

  auto load_stage = [&](int kt, int slot) {
    const int k0 = kt * BK;
    const u32 sa = smem_base + slot * Tr::kStageBytes;
    const u32 sb = sa + Tr::kABytes;
#pragma unroll
    for (int i = 0; i < A_ITERS; ++i) {
      const int row = (tid >> 3) + i * (THREADS / 8);
      const bool ok = a_ok[i] && (!K_TAIL || k0 + a_chunk * 16 < K);
      const u32 dst = sa + row * 128 + ((a_chunk ^ (row & 7)) << 4);
      cp_async_16(dst, ok ? (const void*)(a_src[i] + k0) : (const void*)p.a, ok ? 16u : 0u);
    }
#pragma unroll
    for (int i = 0; i < B_ITERS; ++i) {
      const int idx = tid + i * THREADS;
      if (B_CHUNKS % THREADS == 0 || idx < B_CHUNKS) {
        const int row = idx >> 3, c = idx & 7;
        const int n = n0 + row;
        const bool ok = n < N && (!K_TAIL || k0 + c * 16 < K);
        const u8* src = w_expert + (i64)f8_physical_row<ACT>(n, N) * w_row_bytes + k0 + c * 16;
        cp_async_16(sb + row * 128 + ((c ^ (row & 7)) << 4), ok ? (const void*)src : (const void*)p.w,
                    ok ? 16u : 0u);
      }
    }
  };
  // E8M0 scales: row strides of K/32 bytes are not 4-byte aligned, so the bytes
  // travel through registers: loaded one iteration ahead, stored after compute.
  u32 s_reg[S_ITERS > 0 ? S_ITERS : 1];
  auto load_scales = [&](int kt) {
    if (QUANT != kF8Mx) return;
#pragma unroll
    for (int i = 0; i < S_ITERS; ++i) {
      s_reg[i] = 127u;
      const int kb = kt * 4 + ((tid + i * THREADS) & 3);
      if (s_ok[i] && kb < KB) s_reg[i] = __ldg(s_src[i] + kt * 4);
    }
  };
  auto store_scales = [&](int slot) {
    if (QUANT != kF8Mx) return;
    u8* ss = smem + slot * Tr::kStageBytes + Tr::kABytes + Tr::kBBytes;
#pragma unroll
    for (int i = 0; i < S_ITERS; ++i) {
      const int idx = tid + i * THREADS;
      if (idx < S_BYTES) ss[idx] = (u8)s_reg[i];
    }
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[mi][ni][c] = 0.f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) {
      load_stage(s, s);
      load_scales(s);
      store_scales(s);
    }
    cp_async_commit();
  }

  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = kt + STAGES - 1;
    const int next_slot = next % STAGES;
    if (next < KT) {
      load_stage(next, next_slot);
      load_scales(next);
    }
    cp_async_commit();

    const int slot = kt % STAGES;
    const u32 sa = smem_base + slot * Tr::kStageBytes;
    const u32 sb = sa + Tr::kABytes;
    const u32 ss = sb + Tr::kBBytes;

    // MX: the four block scales of this slice, one 32-bit word per row / column.
    u32 sa_word[MI][2], sw_word[NI][2];
    if (QUANT == kF8Mx) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) sa_word[mi][h] = lds32(ss + (warp_m * MI * 16 + mi * 16 + g + 8 * h) * 4);
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int c = 0; c < 2; ++c) sw_word[ni][c] = lds32(ss + BM * 4 + (warp_n * NI * 8 + ni * 8 + 2 * q + c) * 4);
    }

#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int chunk = 2 * s + (q >> 1);
      u32 af[MI][4];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const int row = warp_m * MI * 16 + mi * 16 + g;
        const u32 off = ((chunk ^ (row & 7)) << 4) + (q & 1) * 8;
        lds64(sa + row * 128 + off, af[mi][0], af[mi][2]);
        lds64(sa + (row + 8) * 128 + off, af[mi][1], af[mi][3]);
      }
      float sav[MI][2], swv[NI][2];
      if (QUANT == kF8Mx) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int h = 0; h < 2; ++h) sav[mi][h] = e8m0_to_f32((sa_word[mi][h] >> (8 * s)) & 0xFFu);
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
          for (int c = 0; c < 2; ++c) swv[ni][c] = e8m0_to_f32((sw_word[ni][c] >> (8 * s)) & 0xFFu);
      }
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int nl = warp_n * NI * 8 + ni * 8 + g;
        u32 b0, b1;
        lds64(sb + nl * 128 + ((chunk ^ (nl & 7)) << 4) + (q & 1) * 8, b0, b1);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          float t[4];
          mma_e4m3_16832_zero(t, af[mi][0], af[mi][1], af[mi][2], af[mi][3], b0, b1);
          if (QUANT == kF8Mx) {
            // d0,d1: row g, cols 2q, 2q+1; d2,d3: row g+8.
            acc[mi][ni][0] = fmaf(t[0] * sav[mi][0], swv[ni][0], acc[mi][ni][0]);
            acc[mi][ni][1] = fmaf(t[1] * sav[mi][0], swv[ni][1], acc[mi][ni][1]);
            acc[mi][ni][2] = fmaf(t[2] * sav[mi][1], swv[ni][0], acc[mi][ni][2]);
            acc[mi][ni][3] = fmaf(t[3] * sav[mi][1], swv[ni][1], acc[mi][ni][3]);
          } else {
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[mi][ni][c] += t[c];
          }
        }
      }
    }
    if (next < KT) store_scales(next_slot);
  }
  cp_async_wait<0>();

  // Epilogue: per-token scales, bias, activation / router weight, store.
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = row_begin + warp_m * MI * 16 + mi * 16 + g + half * 8;
      if (r >= row_end) continue;
      float gamma = 1.f;
      if (ROUTER_WEIGHT) gamma = p.gamma[p.sorted_route[r]];
      float a_scale = 1.f;
      if (QUANT == kF8PerToken) {
        const i64 src_row = GATHER ? (i64)(p.sorted_route[r] / p.top_k) : (i64)r;
        a_scale = ((const float*)p.a_scales)[src_row];
      }
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int n = n0 + warp_n * NI * 8 + ni * 8 + 2 * q;
        if (n >= N) continue;
        float v0 = acc[mi][ni][half * 2 + 0];
        float v1 = acc[mi][ni][half * 2 + 1];
        const i64 p0 = (i64)expert * N + f8_physical_row<ACT>(n, N);
        const i64 p1 = (i64)expert * N + f8_physical_row<ACT>(n + 1, N);
        if (QUANT == kF8PerToken) {
          const float* ws = (const float*)p.w_scales;
          const float w0 = WSCALE == kWsChannel ? ws[p0] : ws[expert];
          const float w1 = WSCALE == kWsChannel ? ws[p1] : ws[expert];
          v0 = (v0 * a_scale) * w0;
          v1 = (v1 * a_scale) * w1;
        }
        if (BIAS == kBiasF32) {
          v0 += ((const float*)p.bias)[p0];
          v1 += ((const float*)p.bias)[p1];
        } else if (BIAS == kBiasBf16) {
          v0 += bf16_bits_to_f32(((const u16*)p.bias)[p0]);
          v1 += bf16_bits_to_f32(((const u16*)p.bias)[p1]);
        }
        if (OUT_F32) {
          float* o = (float*)p.out + (i64)r * p.out_row_stride + n;
          o[0] = v0 * gamma;
          o[1] = v1 * gamma;
        } else if (ACT == kActNone) {
          u16* o = (u16*)p.out + (i64)r * p.out_row_stride + n;
          *(u32*)o = pack_bf16x2(v0 * gamma, v1 * gamma);
        } else {
          float h;
          if (ACT == kActSiluGated) {
            h = v0 * sigmoidf_(v0) * v1;
          } else {
            // Why not fminf: it drops a NaN operand; a NaN block must stay NaN.
            const float gt = v0 > p.act_limit ? p.act_limit : v0;
            const float lin = v1 > p.act_limit ? p.act_limit : (v1 < -p.act_limit ? -p.act_limit : v1);
            h = gt * sigmoidf_(p.act_alpha * gt) * (lin + 1.f);
          }
          u16* o = (u16*)p.out + (i64)r * p.out_row_stride + (n >> 1);
          *o = f32_to_bf16_bits(h * gamma);
        }
      }
    }
  }
}

}  // namespace f8
}  // namespace moejit
