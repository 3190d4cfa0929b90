// moejit device prelude: the few types and PTX wrappers the kernels use.
// NVRTC-clean: no includes, no toolkit headers (compiled with NVRTC only).

namespace moejit {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

// ---- bf16 as raw bits ------------------------------------------------------
// Round-to-nearest-even float -> bf16 bits; NaN stays a quiet NaN.
__device__ __forceinline__ u16 f32_to_bf16_bits(float f) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
__device__ __forceinline__ float bf16_bits_to_f32(u16 h) {
  return __uint_as_float(((u32)h) << 16);
}
// Two floats -> packed bf16x2 (lo in the low half), round-to-nearest-even.
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// Element-wise bf16x2 multiply (exact for power-of-two scales, subnormals kept).
__device__ __forceinline__ u32 mul_bf16x2(u32 a, u32 b) {
  u32 r;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// ---- E8M0 / e2m1 (OCP Microscaling Formats v1.0) ---------------------------
// E8M0 byte -> bf16 bits of 2^(byte-127): 0x01..0xFE are normal bf16 (byte << 7);
// 0x00 is 2^-127, a bf16 subnormal (0x0040); 0xFF is NaN. A bare shift is wrong
// at both ends.
__device__ __forceinline__ u32 e8m0_to_bf16_bits(u32 byte) {
  u32 b = byte << 7;
  b = byte == 0u ? 0x0040u : b;
  b = byte == 0xFFu ? 0x7FC0u : b;
  return b;
}
__device__ __forceinline__ float e8m0_to_f32(u32 byte) {
  u32 b = byte << 23;
  b = byte == 0u ? 0x00400000u : b;
  b = byte == 0xFFu ? 0x7FC00000u : b;
  return __uint_as_float(b);
}

// Four e2m1 codes (16 bits: element i in bits [4i, 4i+4)) -> two bf16x2 words:
// out0 = {e0, e1}, out1 = {e2, e3} (low half first). Why prmt: the 8 magnitudes
// have 8 distinct bf16 bit patterns, so two byte-permutes over an 8-byte table
// (low bytes, high bytes) decode four values at once; the sign bit is moved
// into place with shifts and masks. Exact: every e2m1 value is a bf16.
__device__ __forceinline__ void e2m1x4_to_bf16x2x2(u32 x, u32& out0, u32& out1) {
  // bf16 of magnitude code m (0, .5, 1, 1.5, 2, 3, 4, 6): low and high bytes.
  const u32 lo_tab0 = 0xC0800000u, lo_tab1 = 0xC0804000u;
  const u32 hi_tab0 = 0x3F3F3F00u, hi_tab1 = 0x40404040u;
  u32 sel = x & 0x7777u;
  u32 lo, hi;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(lo) : "r"(lo_tab0), "r"(lo_tab1), "r"(sel));
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(hi) : "r"(hi_tab0), "r"(hi_tab1), "r"(sel));
  u32 v0, v1;
  asm("prmt.b32 %0, %1, %2, 0x5140;" : "=r"(v0) : "r"(lo), "r"(hi));
  asm("prmt.b32 %0, %1, %2, 0x7362;" : "=r"(v1) : "r"(lo), "r"(hi));
  // signs: code bit 3 -> bit 15, bit 7 -> bit 31, bit 11 -> bit 15, bit 15 -> bit 31
  out0 = v0 | ((x << 12) & 0x8000u) | ((x << 24) & 0x80000000u);
  out1 = v1 | ((x << 4) & 0x8000u) | ((x << 16) & 0x80000000u);
}

// Eight e2m1 codes of one 32-bit word (element i in bits [4i, 4i+4)) -> four
// bf16x2 words, each holding the pair {e_i, e_{i+4}} (low half first), scaled
// by 2^-126: the sign goes to bit 15/31, the three magnitude bits to the bf16
// exponent/mantissa bits 8..6, so code m reads as its e2m1 value times 2^-126
// (code 1, the e2m1 subnormal 0.5, becomes the bf16 subnormal 2^-127). Exact;
// the 2^126 comes back in the scale multiply. Why pairs {i, i+4}: both codes of
// a pair sit 16 bits apart (in w for i = 0, 1, in w >> 8 for i = 2, 3), so one
// multiply by 2^6 + 2^12 (2^2 + 2^8 for odd i) makes two copies that do not
// overlap (the product is their OR): the magnitude lands on bits 6..8 from the
// first and the sign on bit 15 from the second, and one mask keeps them.
// 13 instructions per 8 values (mask, IMAD, mask per pair, one shift); shift
// and mask pairs take 16, byte permutes 30.
__device__ __forceinline__ void e2m1x8_to_bf16x2x4_scaled(u32 w, u32 (&p)[4]) {
  const u32 w2 = w >> 8;
  p[0] = ((w & 0x000F000Fu) * 0x1040u) & 0x81C081C0u;
  p[1] = ((w & 0x00F000F0u) * 0x104u) & 0x81C081C0u;
  p[2] = ((w2 & 0x000F000Fu) * 0x1040u) & 0x81C081C0u;
  p[3] = ((w2 & 0x00F000F0u) * 0x104u) & 0x81C081C0u;
}

// E8M0 byte s -> the bf16x2 factors that turn e2m1x8_to_bf16x2x4_scaled's output
// into value * 2^(s-127): f1 = 2^(min(s,128)-1) always (a normal bf16; s = 0, the
// 2^-127 code, gives 2^-1), f2 = 2^(s-128) only when s > 128 (f2_needed);
// s = 0xFF (NaN) yields f2 = NaN.
__device__ __forceinline__ void e8m0_to_e2m1_factors(u32 s, u32& f1, u32& f2, bool& f2_needed) {
  const u32 a = s > 128u ? 128u : s;
  const u32 e1 = (a + 126u) << 7;  // bf16 bits of 2^(a-1)
  f1 = e1 | (e1 << 16);
  f2_needed = s > 128u;
  const u32 e2 = s == 0xFFu ? 0x7FC0u : ((s - 1u) << 7);  // 2^(s-128)
  f2 = e2 | (e2 << 16);
}

__device__ __forceinline__ void lds128(u32 addr, u32& a, u32& b, u32& c, u32& d) {
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(addr));
}
__device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 sel) {
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

// ---- async copies, shared memory, MMA ----------------------------------------
__device__ __forceinline__ u32 smem_addr(const void* p) {
  return (u32)__cvta_generic_to_shared(p);
}
// 16-byte global -> shared copy; src_bytes < 16 zero-fills the rest (0 = all zeros).
__device__ __forceinline__ void cp_async_16(u32 dst, const void* src, u32 src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
// 4-byte global -> shared copy (both addresses 4-byte aligned).
__device__ __forceinline__ void cp_async_4(u32 dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void lds64(u32 addr, u32& a, u32& b) {
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(a), "=r"(b) : "r"(addr));
}
__device__ __forceinline__ u32 lds32(u32 addr) {
  u32 a;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(a) : "r"(addr));
  return a;
}
__device__ __forceinline__ void sts128(u32 addr, u32 a, u32 b, u32 c, u32 d) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
__device__ __forceinline__ void sts64(u32 addr, u32 a, u32 b) {
  asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(addr), "r"(a), "r"(b) : "memory");
}
// 16-byte global store (addr 16-byte aligned).
__device__ __forceinline__ void stg128(void* addr, u32 a, u32 b, u32 c, u32 d) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
__device__ __forceinline__ void sts32(u32 addr, u32 a) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(a) : "memory");
}
__device__ __forceinline__ u32 lds8(u32 addr) {
  u16 a;
  asm volatile("ld.shared.u8 %0, [%1];" : "=h"(a) : "r"(addr));
  return a;
}

// D = A(16x16 bf16, row) * B(16x8 bf16, col) + D, fp32 accumulate.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// D = A(16x32 e4m3, row) * B(32x8 e4m3, col), fp32, C = 0 (a fresh partial sum).
__device__ __forceinline__ void mma_e4m3_16832_zero(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0,
                                                    u32 b1) {
  const float z = 0.f;
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(z));
}

// 1 / (1 + e^-x) with the approximate division (__fdividef: within 2 ulp; 0
// where 1 + e^-x exceeds 2^126, where the IEEE quotient is below 2^-126): two
// instructions where the IEEE division takes a Newton sequence and a
// slow-path branch. NaN stays NaN.
__device__ __forceinline__ float sigmoidf_(float x) { return __fdividef(1.0f, 1.0f + __expf(-x)); }

// ---- Programmatic dependent launch (sm_90) ------------------------------------
// The MoE layer launches route -> gate_up -> down -> combine (gate_up -> down ->
// combine where the decode GEMMs route topk_ids themselves; route -> k_order ->
// gate_up -> ... where the MXFP4 warp-specialized GEMMs run) with programmatic
// stream serialization: a kernel may start while the one before it finishes.
// Every such kernel calls pdl_wait() before its first read of memory that an
// earlier launch on the stream writes (and before any write), and
// pdl_launch_dependents() once it no longer needs to hold the next kernel back.
// One exception, the wgmma split-tail launch (p.wait_at_exit): everything it
// reads and writes was settled before the launch it follows passed its own
// wait, so it waits only before it exits (see src/ops/moe_layer.cpp). And the
// MXFP4 decode kernel with p.tiles_ready (down inside MoeLayer::run): its tile
// lists (or topk_ids), weights and bias predate the launch before it, so only
// its activation loads (and, with FR, its router weights) wait; a CTA with no
// tile waits before it exits.
// Both are no-ops for a launch without the attribute.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

}  // namespace moejit
