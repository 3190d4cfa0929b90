// MoE weight gradient for few routed rows per expert (moe_wgrad_sm90.cuh serves
// the rest; src/ops/wgrad.cpp picks), a K-grouped GEMM over expert-sorted routed rows:
//   dW[e][n][k] = sum over rows r of expert e of grad[r][n] * X[src(r)][k]
//   db[e][n]    = sum over rows r of expert e of grad[r][n]         (optional)
// grad bf16 [rows, N] (expert-sorted rows, e.g. of the gate_up / down outputs),
// X bf16: gathered by token (src(r) = sorted_route[r] / top_k, gate_up's input)
// or by routed row (src(r) = r, down's input H); fp32 accumulation on bf16 tensor
// cores (mma.sync m16n8k16) with the routed rows as the reduction dimension.
//
// Deterministic: each CTA owns one [BN, BK] tile of one expert and walks that
// expert's rows in ascending order; no atomics, no split of the reduction, so the
// result is bit-reproducible and independent of other experts' rows. An expert
// with no rows gets its dW (and db) written as exact zeros. 64-bit offsets.
//
// ---- Tunable parameters (mirrored in src/ops/wgrad.cpp) -----------------------
//   kWgMmaThreads : 256 = 8 warps as 2 (along N) x 4 (along K)
//   kWgBN      : 128 output channels (N) per CTA (warp: 64 = 4 m16 tiles)
//   kWgBK      : 128 input features (K) per CTA (warp: 32 = 4 n8 tiles)
//   kWgBR      : 32 routed rows per pipeline stage (two k16 MMA steps)
//   kWgStages  : 4 cp.async stages; shared memory kWgStages * 2 * kWgBR * 256 B = 64 KB
// Requirements: N % 8 == 0, K % 8 == 0, row strides multiples of 8 elements,
// grad / X 16-byte aligned. Grid: (ceil(K / kWgBK), ceil(N / kWgBN), E).
// Why ldmatrix.trans: both operands are stored row-major by routed row ([r][n]
// and [r][k]) while the MMA wants pairs of consecutive r per register; the
// transposing load gives exactly that, and the XOR swizzle of 16-byte chunks by
// (row & 7) keeps its eight row reads on distinct banks.

namespace moejit {
namespace wg {

constexpr int kWgMmaThreads = 256;
constexpr int kWgBN = 128;
constexpr int kWgBK = 128;
constexpr int kWgBR = 32;
constexpr int kWgStages = 4;
constexpr int kWgTileBytes = kWgBR * 128 * 2;  // one operand tile of a stage (rows of 256 B)
constexpr int kWgStageBytes = 2 * kWgTileBytes;
constexpr int kWgSmemBytes = kWgStages * kWgStageBytes;


__device__ __forceinline__ void ldsm_x4_trans(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

template <bool OUT_BF16>
__global__ void __launch_bounds__(kWgMmaThreads) moe_wgrad_mma_kernel(const WgradParams p) {
  const int e = blockIdx.z;
  const int n0 = blockIdx.y * kWgBN, k0 = blockIdx.x * kWgBK;
  const int N = p.n, K = p.k;
  const int begin = p.expert_offsets[e], end = p.expert_offsets[e + 1];
  const int steps = end > begin ? (end - begin + kWgBR - 1) / kWgBR : 0;

  extern __shared__ __align__(128) u8 smem[];
  const u32 base = smem_addr(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_n = warp >> 2, warp_k = warp & 3;
  const int g = lane >> 2, q = lane & 3;
  const bool do_db = p.db != nullptr && blockIdx.x == 0;

  // Loader: 512 chunks of 16 B per operand tile, two per thread.
  auto load_stage = [&](int step, int slot) {
    const u32 sg = base + slot * kWgStageBytes;
    const u32 sx = sg + kWgTileBytes;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int idx = tid + i * kWgMmaThreads;
      const int row = idx >> 4, c = idx & 15;
      const int r = begin + step * kWgBR + row;
      const bool rok = r < end;
      const u32 off = row * 256 + ((c ^ (row & 7)) << 4);
      const bool gok = rok && n0 + c * 8 < N;
      const u16* gsrc = p.grad + (i64)r * p.grad_row_stride + n0 + c * 8;
      cp_async_16(sg + off, gok ? (const void*)gsrc : (const void*)p.grad, gok ? 16u : 0u);
      const bool xok = rok && k0 + c * 8 < K;
      i64 src = 0;
      if (xok) src = p.gather ? (i64)(p.sorted_route[r] / p.top_k) : (i64)r;
      const u16* xsrc = p.x + src * p.x_row_stride + k0 + c * 8;
      cp_async_16(sx + off, xok ? (const void*)xsrc : (const void*)p.x, xok ? 16u : 0u);
    }
  };

  float acc[4][4][4];
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.f;
  float db_acc = 0.f;

#pragma unroll
  for (int s = 0; s < kWgStages - 1; ++s) {
    if (s < steps) load_stage(s, s);
    cp_async_commit();
  }
  for (int step = 0; step < steps; ++step) {
    cp_async_wait<kWgStages - 2>();
    __syncthreads();
    const int next = step + kWgStages - 1;
    if (next < steps) load_stage(next, next % kWgStages);
    cp_async_commit();
    const u32 sg = base + (step % kWgStages) * kWgStageBytes;
    const u32 sx = sg + kWgTileBytes;
    const int l = lane & 7, mat = lane >> 3;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int m0 = s * 16;
      u32 af[4][4];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        const int m = m0 + l + 8 * (mat >> 1);
        const int n = warp_n * 64 + mi * 16 + 8 * (mat & 1);
        ldsm_x4_trans(sg + m * 256 + (((n >> 3) ^ (m & 7)) << 4), af[mi][0], af[mi][1], af[mi][2], af[mi][3]);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int m = m0 + l + 8 * (mat & 1);
        const int kf = warp_k * 32 + j * 16 + 8 * (mat >> 1);
        u32 b00, b01, b10, b11;
        ldsm_x4_trans(sx + m * 256 + (((kf >> 3) ^ (m & 7)) << 4), b00, b01, b10, b11);
#pragma unroll
        for (int mi = 0; mi < 4; ++mi) {
          mma_bf16_16816(acc[mi][2 * j], af[mi], b00, b01);
          mma_bf16_16816(acc[mi][2 * j + 1], af[mi], b10, b11);
        }
      }
    }
    if (do_db && tid < kWgBN) {
      // Fixed order over the stage's rows (zero-filled past the expert's end).
      const u8* tile = smem + (step % kWgStages) * kWgStageBytes;
#pragma unroll 8
      for (int row = 0; row < kWgBR; ++row) {
        const u16 v = *(const u16*)(tile + row * 256 + (((tid >> 3) ^ (row & 7)) << 4) + (tid & 7) * 2);
        db_acc += bf16_bits_to_f32(v);
      }
    }
  }
  cp_async_wait<0>();

  const i64 e_base = (i64)e * N;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int n = n0 + warp_n * 64 + mi * 16 + g + 8 * half;
      if (n >= N) continue;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int k = k0 + warp_k * 32 + ni * 8 + 2 * q;
        if (k >= K) continue;
        const float v0 = acc[mi][ni][2 * half], v1 = acc[mi][ni][2 * half + 1];
        const i64 at = (e_base + n) * K + k;
        if (OUT_BF16) {
          *(u32*)((u16*)p.dw + at) = pack_bf16x2(v0, v1);
        } else {
          float2 o;
          o.x = v0;
          o.y = v1;
          *(float2*)((float*)p.dw + at) = o;
        }
      }
    }
  }
  if (do_db && tid < kWgBN && n0 + tid < N) p.db[e_base + n0 + tid] = db_acc;
}

}  // namespace wg
}  // namespace moejit
