// MXFP4 quantizer on the GPU: rows of fp32 or bf16 -> e2m1 codes packed two per
// byte (element 2i in the low nibble) + one E8M0 scale per 32 consecutive
// elements. NVRTC-clean: no includes; every type and function is defined here.
//
// The rule (moejit docs/formats.md, include/moejit/quant.hpp), per block x[0..31]:
//   amax = max |x_i|; a NaN or Inf anywhere -> scale 0xFF, all codes 0.
//   s = smallest integer with amax <= 6 * 2^s, clamped to [-127, 127];
//   scale byte = s + 127; code_i = RNE(x_i / 2^s) on the e2m1 grid, saturated at +-6,
//   sign of zero kept.
// Everything below is integer arithmetic on fp32 bit patterns: no division, no
// float rounding, no fast-math approximation, so the result is bit-identical
// to the CPU quantizer (quantize_mxfp4_cpu), which computes the same rule in
// double precision.
//
// The functions (namespace moejit::mxq) also compile as host C++ (the CPU tests
// include this file and run them against the CPU quantizer); the kernel itself
// exists only under a CUDA compiler.
//
// Kernel contract: quantize_mxfp4_kernel<kBlockThreads>(in, in_dtype, num_blocks,
// data, scales): one warp per 32-element block, kBlockThreads / 32 blocks per
// CTA per step, grid-stride over num_blocks = rows * cols / 32 (any grid size is
// correct). in_dtype: 0 = fp32, 1 = bf16 (raw bits). No alignment beyond the
// element size is required; no shared memory.
#ifndef MOEJIT_KERNELS_QUANTIZE_MXFP4_CUH
#define MOEJIT_KERNELS_QUANTIZE_MXFP4_CUH

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define MOEJIT_MXQ_GPU 1
#define MOEJIT_MXQ_FN __device__ __forceinline__
#else
#define MOEJIT_MXQ_FN inline
#endif

namespace moejit {
namespace mxq {

// Why our own typedefs inside the namespace: NVRTC is given no headers, and
// global typedefs could clash with another kernel file in the same unit.
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

// Launch traits, read by the host side (src/codegen/quantize_family.cpp).
struct QuantizeTraits {
  static constexpr int kBlockThreads = 256;  // 8 warps = 8 MX blocks per CTA step
  static constexpr int kMxBlock = 32;
};

enum InputDType { kInputF32 = 0, kInputBf16 = 1 };

// A narrow binary float format: `kMantBits` explicit mantissa bits, minimum
// normal exponent kMinExp, largest finite code kMaxCode (sign excluded).
// kMaxBinade / kMaxFracField: the largest finite value is (1 + kMaxFracField /
// 2^23) * 2^kMaxBinade, in fp32 terms (for the scale rule).
// kNanCode / kNanSigned: the code of a NaN input, and whether the input's sign
// bit is kept on it. Same choice as the scalar encoders of formats.hpp:
//   e4m3fn has a NaN, S.1111.111 (OCP OFP8): NaN -> 0x7F, or 0xFF when negative;
//   e2m1 has none: NaN -> +6 (0x7), sign dropped (float_to_e2m1).
struct E2m1 {
  static constexpr int kMantBits = 1, kMinExp = 0;
  static constexpr uint32_t kMaxCode = 0x7, kSignBit = 0x8;
  static constexpr int kMaxBinade = 2;                    // 6 = 1.5 * 2^2
  static constexpr uint32_t kMaxFracField = 0x400000u;    // 0.5 * 2^23
  static constexpr uint32_t kNanCode = 0x7;               // no NaN: +max
  static constexpr bool kNanSigned = false;
};
struct E4m3 {
  static constexpr int kMantBits = 3, kMinExp = -6;
  static constexpr uint32_t kMaxCode = 0x7E, kSignBit = 0x80;  // 0x7F is NaN
  static constexpr int kMaxBinade = 8;                    // 448 = 1.75 * 2^8
  static constexpr uint32_t kMaxFracField = 0x600000u;    // 0.75 * 2^23
  static constexpr uint32_t kNanCode = 0x7F;
  static constexpr bool kNanSigned = true;
};

MOEJIT_MXQ_FN int leading_zeros(uint32_t v) {
#if defined(MOEJIT_MXQ_GPU)
  return __clz(static_cast<int>(v));
#else
  return v == 0 ? 32 : __builtin_clz(v);
#endif
}

// E8M0 scale byte for a block whose largest |x| has fp32 bits `amax_bits`
// (sign cleared). NaN or Inf -> 0xFF. Zero and subnormal amax -> 0x00 (s = -127).
// A finite amax never gives 0xFF: s is clamped to 127 (byte 0xFE, 2^127), and
// finite fp32 never even reaches the clamp (FLT_MAX gives s = 126 for e2m1,
// 120 for e4m3).
template <class Fmt>
MOEJIT_MXQ_FN uint32_t mx_scale_byte(uint32_t amax_bits) {
  if (amax_bits >= 0x7F800000u) return 0xFFu;
  const int biased = static_cast<int>(amax_bits >> 23);
  if (biased == 0) return 0u;
  // amax = (1 + F/2^23) * 2^(biased-127); the smallest s with amax <= max * 2^s:
  int s = biased - 127 - Fmt::kMaxBinade + ((amax_bits & 0x7FFFFFu) > Fmt::kMaxFracField ? 1 : 0);
  if (s < -127) s = -127;
  if (s > 127) s = 127;
  return static_cast<uint32_t>(s + 127);
}

// Code of x / 2^s (x given by its fp32 bits), RNE, saturating at
// Fmt::kMaxCode, sign kept (also for zero). For any s: +-Inf gives +-kMaxCode
// (Inf / 2^s is Inf) and NaN gives Fmt::kNanCode (see the format structs).
// With s = 0 this is float_to_e2m1 / float_to_e4m3 of formats.hpp, bit for bit,
// for every fp32 input. The MX kernel below never passes NaN or Inf (such a
// block gets scale 0xFF and codes 0); the special branch keeps the host-side
// contract total. (Without it, Inf read as 2^128 would encode as 2^(128-s),
// e.g. 2.0 at s = 127, and NaN as a saturated finite.)
template <class Fmt>
MOEJIT_MXQ_FN uint32_t encode_scaled(uint32_t x_bits, int s) {
  const uint32_t sign = (x_bits & 0x80000000u) ? Fmt::kSignBit : 0u;
  const uint32_t a = x_bits & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) {
    if (a == 0x7F800000u) return sign | Fmt::kMaxCode;
    return Fmt::kNanSigned ? (sign | Fmt::kNanCode) : Fmt::kNanCode;
  }
  if (a == 0u) return sign;
  const int biased = static_cast<int>(a >> 23);
  // |x| = sig * 2^ex with sig an integer < 2^24.
  const uint32_t sig = biased == 0 ? (a & 0x7FFFFFu) : ((a & 0x7FFFFFu) | 0x800000u);
  const int ex = (biased == 0 ? 1 : biased) - 150;
  const int msb = 31 - leading_zeros(sig);
  const int t = ex - s + msb;  // floor(log2(|x| / 2^s))
  // Quantum of the target binade (fixed below the minimum normal exponent).
  const int qe = (t > Fmt::kMinExp ? t : Fmt::kMinExp) - Fmt::kMantBits;
  // n = RNE(|x| / 2^s / 2^qe) = RNE(sig * 2^-(qe - ex + s)).
  const int r = qe - ex + s;
  uint32_t n;
  if (r <= 0) {
    n = sig << (-r);  // exact; only for subnormal x, |r| <= kMantBits
  } else if (r >= 25) {
    n = 0u;  // sig < 2^24 <= half of the quantum
  } else {
    n = sig >> r;
    const uint32_t rem = sig & ((1u << r) - 1u);
    const uint32_t half = 1u << (r - 1);
    if (rem > half || (rem == half && (n & 1u))) ++n;
  }
  // Normal: code = ((t - kMinExp + 1) << m) | (n - 2^m) = ((t - kMinExp) << m) + n,
  // where n == 2^(m+1) (rounded up out of the binade) carries into the exponent.
  // Subnormal: code = n (n == 2^m is the smallest normal, same code).
  uint32_t code = t < Fmt::kMinExp ? n
                                   : (static_cast<uint32_t>(t - Fmt::kMinExp) << Fmt::kMantBits) + n;
  // Finite x: t <= 127 - s <= 254, so the shift above cannot overflow.
  if (code > Fmt::kMaxCode) code = Fmt::kMaxCode;
  return sign | code;
}

#if defined(MOEJIT_MXQ_GPU)

template <int kInput>
MOEJIT_MXQ_FN uint32_t load_bits(const void* in, uint64_t i) {
  if (kInput == kInputBf16) return static_cast<uint32_t>(static_cast<const uint16_t*>(in)[i]) << 16;
  return static_cast<const uint32_t*>(in)[i];
}

template <int kInput, int kBlockThreads>
MOEJIT_MXQ_FN void quantize_mxfp4_blocks(const void* in, uint64_t num_blocks, uint8_t* data,
                                         uint8_t* scales) {
  constexpr int kWarps = kBlockThreads / 32;
  const uint32_t lane = threadIdx.x & 31u;
  const uint64_t warp = threadIdx.x >> 5;
  const uint64_t step = static_cast<uint64_t>(gridDim.x) * kWarps;
  // The loop bound depends on the warp only: every lane of a warp runs the same
  // iterations, so full-mask shuffles are safe.
  for (uint64_t b = static_cast<uint64_t>(blockIdx.x) * kWarps + warp; b < num_blocks; b += step) {
    const uint32_t bits = load_bits<kInput>(in, b * 32u + lane);
    uint32_t amax = bits & 0x7FFFFFFFu;  // |x| ordered as an unsigned integer; NaN > Inf > finite
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const uint32_t other = __shfl_xor_sync(0xFFFFFFFFu, amax, offset);
      amax = other > amax ? other : amax;
    }
    const uint32_t scale = mx_scale_byte<E2m1>(amax);
    const uint32_t code = scale == 0xFFu ? 0u : encode_scaled<E2m1>(bits, static_cast<int>(scale) - 127);
    const uint32_t odd = __shfl_down_sync(0xFFFFFFFFu, code, 1);
    if ((lane & 1u) == 0u) data[b * 16u + (lane >> 1)] = static_cast<uint8_t>(code | (odd << 4));
    if (lane == 0u) scales[b] = static_cast<uint8_t>(scale);
  }
}

template <int kBlockThreads>
__global__ void __launch_bounds__(kBlockThreads)
quantize_mxfp4_kernel(const void* in, int in_dtype, uint64_t num_blocks, uint8_t* data, uint8_t* scales) {
  // Why a run-time dtype: the key carries no input dtype, and this grid-uniform
  // branch costs nothing next to the memory traffic.
  if (in_dtype == kInputBf16)
    quantize_mxfp4_blocks<kInputBf16, kBlockThreads>(in, num_blocks, data, scales);
  else
    quantize_mxfp4_blocks<kInputF32, kBlockThreads>(in, num_blocks, data, scales);
}

#endif  // MOEJIT_MXQ_GPU

}  // namespace mxq
}  // namespace moejit

#endif  // MOEJIT_KERNELS_QUANTIZE_MXFP4_CUH
