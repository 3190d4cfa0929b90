// MXFP4 weights as the A operand of mma.sync m16n8k16 ("swap AB": out^T = W X^T):
// the fragment-building functions of the MXFP4 decode kernel.
//
// The k order. A thread (g = lane / 4, q = lane % 4) of m16n8k16 holds, per MMA,
// the logical k {2q, 2q+1} (registers a0/a1, b0) and {2q+8, 2q+9} (a2/a3, b1)
// of A rows g and g+8 and of B column g. The reduction is a sum, so any
// bijection between logical and physical k applied to both operands is exact.
// Ours: lane q owns 32 consecutive physical k of a "chunk" (16 bytes of one
// packed weight row, one E8M0 scale). Word j (8 e2m1 codes, k 8j..8j+7) feeds
// two MMAs: h = 0 takes the pairs {8j+0, 8j+4} (logical 2q, 2q+1) and
// {8j+1, 8j+5} (2q+8, 2q+9); h = 1 takes {8j+2, 8j+6} and {8j+3, 8j+7}. These
// are exactly the pairs e2m1x8_to_bf16x2x4_scaled produces (one multiply per
// pair), and the activations (the B operand) are permuted to match with byte
// permutes (x_pairs). Rows never mix: each output is a fixed-order sum over its
// own row and column, so padding rows cannot change a real row's bits.

namespace moejit {

// 16-byte read-only global load of streamed weights: no L1 allocation, and an
// L2 prefetch of the L2_PREFETCH-byte block around it (128 or 256; the warp
// reads the rest of the row's block next). Why not always 256: the block is
// read from DRAM more than once when the warp's own loads of its other bytes
// reach L2 before it lands; docs/kernels.md ("Weight loads and the L2
// prefetch size") has the DRAM bytes and times of both sizes per kernel.
template <int L2_PREFETCH>
__device__ __forceinline__ void ldg_stream_v4(const void* ptr, u32 (&r)[4]) {
  static_assert(L2_PREFETCH == 128 || L2_PREFETCH == 256, "L2 prefetch size: 128 or 256 bytes");
  if constexpr (L2_PREFETCH == 256)
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "l"(ptr));
  else
    asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "l"(ptr));
}
// 16-byte read-only global load through L1 (activations, re-read by other
// warps). Not volatile: the compiler may hoist it as far as registers allow.
__device__ __forceinline__ void ldg_v4(const void* ptr, u32 (&r)[4]) {
  asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "l"(ptr));
}
__device__ __forceinline__ u32 ldg_u8(const u8* ptr) {
  u16 v;
  asm volatile("ld.global.nc.L2::256B.u8 %0, [%1];" : "=h"(v) : "l"(ptr));
  return v;
}

// Eight bf16 activations x0..x7 (four words, low half first) -> the B pairs of
// one weight word: b[0] = {x0, x4}, b[1] = {x1, x5}, b[2] = {x2, x6}, b[3] = {x3, x7}.
__device__ __forceinline__ void x_pairs(const u32 (&x)[4], u32 (&b)[4]) {
  b[0] = prmt(x[0], x[2], 0x5410);
  b[1] = prmt(x[0], x[2], 0x7632);
  b[2] = prmt(x[1], x[3], 0x5410);
  b[3] = prmt(x[1], x[3], 0x7632);
}

// E8M0 byte s <= 128 -> the bf16x2 factor 2^(s-1) in both halves (one IMAD:
// s << 7 and s << 23 do not overlap, and (s + 126) << 7 < 0x8000). Times the
// output of e2m1x8_to_bf16x2x4_scaled it gives value * 2^(s-127); s = 0 (2^-127)
// included. Larger s needs e8m0_to_e2m1_factors' second factor.
__device__ __forceinline__ u32 e8m0_small_factor(u32 s) { return s * 0x00800080u + 0x3F003F00u; }

// Nonzero iff one of the E8M0 bytes s_i (< 256) is above 128: s + 127 then has bit 8 set.
__device__ __forceinline__ u32 e8m0_big_bit(u32 s) { return (s + 127u) & 0x100u; }

// One weight word -> its four bf16x2 pairs {i, i+4} times the factor f1
// (e8m0_small_factor, or e8m0_to_e2m1_factors' first factor). The rare second
// factor (E8M0 above 128, or NaN) is applied by scale_big.
__device__ __forceinline__ void dequant_word(u32 w, u32 f1, u32 (&a)[4]) {
  e2m1x8_to_bf16x2x4_scaled(w, a);
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = mul_bf16x2(a[i], f1);
}
__device__ __forceinline__ void scale_big(u32 f2, u32 (&a)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = mul_bf16x2(a[i], f2);
}

// The two MMAs of one weight word: rows g (lo) and g+8 (hi) dequantized pairs,
// and the B pairs of the same physical k (x_pairs).
__device__ __forceinline__ void mma_word(float (&acc)[4], const u32 (&lo)[4], const u32 (&hi)[4], const u32 (&b)[4]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const u32 a[4] = {lo[2 * h], hi[2 * h], lo[2 * h + 1], hi[2 * h + 1]};
    mma_bf16_16816(acc, a, b[2 * h], b[2 * h + 1]);
  }
}

// The fragment k order (kernels/grouped_gemm_mxfp4_ws_sm90.cuh, K_ORDER_IN /
// K_ORDER_OUT): inside each block of 32 columns, column c = 8q + 2s + t + 4e
// (q 0..3; s, t, e 0..1) is stored at position 16s + 8t + 2q + e. Read in that
// order, the bf16 activations of wgmma's k16 steps s (fragment k 2q + e and
// 2q + 8 + e, t = 0 and 1) meet the e2m1 codes of packed weight word q: its
// nibbles i and i + 4 are columns 8q + i and 8q + i + 4, the pair that
// e2m1x8_to_bf16x2x4_scaled turns into one bf16x2 with one multiply. The public
// twin is moejit::h_column_position (include/moejit/moe_layer.hpp).
__device__ __forceinline__ int fragment_k_position(int c) {
  return (c & ~31) | ((c >> 1) & 1) << 4 | (c & 1) << 3 | ((c >> 3) & 3) << 1 | ((c >> 2) & 1);
}

// Logical row of fragment row fr (0..15) of the 16-row group starting at L0.
// Gated activations put gate (logical 2j) in fragment row j and up (2j + 1) in
// row j + 8, so both halves of output column L0/2 + j meet in one thread.
template <int ACT>
__device__ __forceinline__ int group_row(int L0, int fr) {
  if (ACT == kActNone) return L0 + fr;
  return L0 + 2 * (fr & 7) + (fr >> 3);
}

// Epilogue of one 16-row group and one n8 token tile, given the bias of the
// thread's two fragment rows (g: bias2[0], g + 8: bias2[1]; for gated
// activations the gate and up columns of output column L0/2 + g) and the router
// weights of its two token columns (rows + 2q + t: gamma2[t], 1 without).
// v: the thread's four accumulators (v0, v1: fragment row g, tokens 2q, 2q+1;
// v2, v3: row g+8). rows: first sorted row of the token tile; row_end: end of
// the expert's rows.
// K_ORDER_OUT: columns stored in the fragment k order (fragment_k_position).
template <int ACT, int BIAS, bool OUT_F32, bool K_ORDER_OUT = false>
__device__ __forceinline__ void swapab_epilogue_values(const GroupedGemmParams& p, int L0, int rows, int row_end,
                                                       const float (&v)[4], const float (&bias2)[2],
                                                       const float (&gamma2)[2], int g, int q) {
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    const int r = rows + 2 * q + t;
    if (r >= row_end) continue;
    if (ACT == kActNone) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int n = K_ORDER_OUT ? fragment_k_position(L0 + g + 8 * half) : L0 + g + 8 * half;
        float val = v[2 * half + t];
        if (BIAS != kBiasNone) val += bias2[half];
        if (OUT_F32)
          ((float*)p.out)[(i64)r * p.out_row_stride + n] = val * gamma2[t];
        else
          ((u16*)p.out)[(i64)r * p.out_row_stride + n] = f32_to_bf16_bits(val * gamma2[t]);
      }
    } else {
      const int n = L0 + 2 * g;  // gate; n + 1 is up
      float gate = v[t], up = v[2 + t];
      if (BIAS != kBiasNone) {
        gate += bias2[0];
        up += bias2[1];
      }
      const float h = gated_act<ACT>(gate, up, p.act_alpha, p.act_limit);
      const int c = K_ORDER_OUT ? fragment_k_position(n >> 1) : n >> 1;
      ((u16*)p.out)[(i64)r * p.out_row_stride + c] = f32_to_bf16_bits(h * gamma2[t]);
    }
  }
}

// swapab_epilogue_values' operands: the bias of the thread's two fragment rows
// of the group at L0 of expert `expert` (0 without bias, or when !ok) ...
template <int ACT, int BIAS>
__device__ __forceinline__ void swapab_bias_pair(const GroupedGemmParams& p, int N, int expert, int L0, int g,
                                                 bool ok, float (&bias2)[2]) {
#pragma unroll
  for (int half = 0; half < 2; ++half)
    bias2[half] =
        BIAS != kBiasNone && ok ? bias_at<BIAS, ACT>(p.bias, expert, group_row<ACT>(L0, g + 8 * half), N) : 0.f;
}
// ... and the router weights of its two token columns rows + 2q + t (1 without,
// and for columns past the expert's rows).
template <bool ROUTER_WEIGHT>
__device__ __forceinline__ void swapab_gamma_pair(const GroupedGemmParams& p, int rows, int row_end, int q,
                                                  float (&gamma2)[2]) {
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    const int r = rows + 2 * q + t;
    gamma2[t] = ROUTER_WEIGHT && r < row_end ? p.gamma[p.sorted_route[r]] : 1.f;
  }
}

// The same, loading the bias of expert `expert` and the router weights itself.
template <int ACT, int BIAS, bool ROUTER_WEIGHT, bool OUT_F32>
__device__ __forceinline__ void swapab_epilogue(const GroupedGemmParams& p, int expert, int L0, int rows,
                                                int row_end, const float (&v)[4], int g, int q) {
  float bias2[2], gamma2[2];
  swapab_bias_pair<ACT, BIAS>(p, p.n, expert, L0, g, true, bias2);
  swapab_gamma_pair<ROUTER_WEIGHT>(p, rows, row_end, q, gamma2);
  swapab_epilogue_values<ACT, BIAS, OUT_F32>(p, L0, rows, row_end, v, bias2, gamma2, g, q);
}

}  // namespace moejit
