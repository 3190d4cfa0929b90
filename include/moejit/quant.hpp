#pragma once
// Quantizers from fp32 / bf16 to the weight and activation formats moejit's
// kernels read: MXFP4 (e2m1 + E8M0 per 32), MXFP8 (e4m3 + E8M0 per 32) and
// per-token FP8 (e4m3 + one fp32 scale per row). Scalar formats: formats.hpp.
// The exact rules are stated below and in docs/formats.md; the CPU MXFP4
// quantizer and the GPU one (kernels/quantize_mxfp4.cuh) agree bit for bit.
//
// Layout: a matrix [rows, cols], row-major, blocks of 32 consecutive elements
// along a row (for weights [E, N, K]: rows = E * N, cols = K).
//   MXFP4: data uint8 [rows, cols / 2] (element 2i in the low nibble of byte i),
//          scales uint8 [rows, cols / 32].
//   MXFP8: data uint8 (e4m3 codes) [rows, cols], scales uint8 [rows, cols / 32].
//   per-token FP8: data uint8 (e4m3 codes) [rows, cols], scales fp32 [rows].
//
// MX block rule (MXFP4 and MXFP8), for one block x[0..31] with element format
// maximum M (6 for e2m1, 448 for e4m3):
//   amax = max |x_i|.
//   - Some x_i is NaN or +-Inf: scale byte 0xFF (NaN) and every element code 0.
//     Decoding gives NaN for all 32 elements (a NaN scale makes the whole block
//     NaN, OCP MX v1.0 section 6.3); the non-finite input is never hidden.
//   - Otherwise s = the smallest integer with amax <= M * 2^s, clamped to
//     [-127, 127]. Computed exactly: amax = f * 2^e (frexp, f in [0.5, 1)),
//     s = e - 1 - emax_M, plus one if f * 2^(emax_M + 1) > M, where emax_M is
//     the exponent of M's binade (2 for e2m1, 8 for e4m3). Equivalently, from the
//     fp32 bits of amax (biased exponent B, mantissa field F, B > 0):
//     e2m1: s = B - 129 + (F > 0x400000);  e4m3: s = B - 135 + (F > 0x600000).
//     amax == 0 (or subnormal) lands on the clamp: s = -127, scale byte 0x00,
//     and every element encodes as (signed) zero.
//     Why "smallest s with amax <= M * 2^s" rather than the spec's example
//     floor(log2 amax) - emax_M: the spec's choice clips the top of the block
//     (up to 8 / 6 for e2m1); ours never saturates a finite element.
//   - scale byte = s + 127; element i = RNE(x_i / 2^s) in the element format,
//     saturating at +-M (it cannot saturate given the rule above, except when
//     clamping s at 127, which finite fp32 inputs never reach). x_i / 2^s is
//     exact (power-of-two scaling, computed in double), so there is exactly one
//     rounding. The sign of zero is kept: -0.0 and small negatives give code 0x8
//     (e2m1) / 0x80 (e4m3).
//   bf16 inputs are widened to fp32 exactly and follow the same rule.
//
// Per-token FP8 rule, row x[0..cols-1]:
//   - Some x_i NaN or +-Inf: scale NaN and all codes 0.
//   - amax == 0: scale 1.0f and all codes zero (sign kept).
//   - otherwise scale = max(fp32(amax / 448), 2^-149) (one IEEE division,
//     rounded to nearest; the floor only matters for a subnormal amax),
//     code_i = e4m3(fp32(x_i / scale)): an fp32 division rounded to nearest,
//     then RNE to e4m3 with saturation at +-448 (the scale is amax/448 rounded,
//     so |x_i / scale| may exceed 448 by an ulp: saturation covers it).
//   Dequantized value: e4m3_to_float(code) * scale.
#include <cstdint>

#include "moejit/formats.hpp"
#include "moejit/key.hpp"
#include "moejit/runtime.hpp"
#include "moejit/types.hpp"

namespace moejit {

inline constexpr std::uint32_t kMxBlockSize = 32;

// Element formats of the MX block quantizers.
enum class MxElement : std::uint8_t { e2m1, e4m3 };

// E8M0 scale byte for a block with the given amax (>= 0 or NaN / Inf) per the MX
// block rule above. NaN or Inf -> 0xFF.
std::uint8_t mx_scale_byte(float amax, MxElement element) noexcept;

// One MXFP4 block: x[0..31] -> packed[0..15] (element 2i in the low nibble of
// packed[i]); returns the E8M0 scale byte.
std::uint8_t quantize_mxfp4_block(const float* x, std::uint8_t* packed) noexcept;

// One MXFP8 block: x[0..31] -> codes[0..31]; returns the E8M0 scale byte.
std::uint8_t quantize_mxfp8_block(const float* x, std::uint8_t* codes) noexcept;

// ---- MXFP4 ----------------------------------------------------------------
// w [rows, cols] fp32 (or bf16 bits) -> data [rows, cols/2], scales [rows, cols/32].
// Throws InvalidArgument when cols % 32 != 0 (the message names cols and its
// value) or when a pointer is null while rows * cols > 0. rows == 0 or
// cols == 0 writes nothing.
void quantize_mxfp4_cpu(const float* w, std::uint64_t rows, std::uint32_t cols,
                        std::uint8_t* data, std::uint8_t* scales);
void quantize_mxfp4_cpu(const std::uint16_t* w_bf16, std::uint64_t rows, std::uint32_t cols,
                        std::uint8_t* data, std::uint8_t* scales);

// data [rows, cols/2] + scales [rows, cols/32] -> out [rows, cols]: out = e2m1 * 2^(s-127).
// The double overload is exact. The float overload rounds once: it is exact
// except when the product leaves the fp32 range (a scale byte >= 0xFE with a
// large element overflows to Inf; tiny products become subnormal or zero).
// Scale 0xFF gives NaN for the whole block. Throws as quantize_mxfp4_cpu.
void dequantize_mxfp4_cpu(const std::uint8_t* data, const std::uint8_t* scales,
                          std::uint64_t rows, std::uint32_t cols, float* out);
void dequantize_mxfp4_cpu(const std::uint8_t* data, const std::uint8_t* scales,
                          std::uint64_t rows, std::uint32_t cols, double* out);

// ---- MXFP8 ----------------------------------------------------------------
// w [rows, cols] -> data (e4m3 codes) [rows, cols], scales [rows, cols/32].
// Errors as quantize_mxfp4_cpu.
void quantize_mxfp8_cpu(const float* w, std::uint64_t rows, std::uint32_t cols,
                        std::uint8_t* data, std::uint8_t* scales);
void quantize_mxfp8_cpu(const std::uint16_t* w_bf16, std::uint64_t rows, std::uint32_t cols,
                        std::uint8_t* data, std::uint8_t* scales);
void dequantize_mxfp8_cpu(const std::uint8_t* data, const std::uint8_t* scales,
                          std::uint64_t rows, std::uint32_t cols, double* out);

// ---- per-token FP8 ----------------------------------------------------------
// x [rows, cols] -> data (e4m3 codes) [rows, cols], scales fp32 [rows].
// Any cols >= 0 (no block constraint). Throws InvalidArgument for a null
// pointer while rows * cols > 0.
void quantize_fp8_per_token_cpu(const float* x, std::uint64_t rows, std::uint32_t cols,
                                std::uint8_t* data, float* scales);
void quantize_fp8_per_token_cpu(const std::uint16_t* x_bf16, std::uint64_t rows,
                                std::uint32_t cols, std::uint8_t* data, float* scales);
void dequantize_fp8_per_token_cpu(const std::uint8_t* data, const float* scales,
                                  std::uint64_t rows, std::uint32_t cols, double* out);

// ---- GPU MXFP4 quantizer ----------------------------------------------------
// The specialization key of the GPU MXFP4 quantizer for rows of `cols` elements:
// op=quantize quant=w4a16_mxfp4 token_bucket=1 n=cols k=0 weight_scale=e8m0_block32
// out_dtype=u8, everything else default. The input dtype (fp32 or bf16) is NOT
// part of the key (in_dtype = none): the one compiled kernel reads both and takes the dtype as a
// run-time argument (a grid-uniform branch; the kernel is memory-bound).
// Throws InvalidArgument when cols % 32 != 0.
SpecKey quantize_mxfp4_key(std::uint32_t cols, const Target& target = Target{});

// Quantizes in [rows, cols] (fp32 or bf16, per in_dtype) on the GPU into
// data [rows, cols/2] and scales [rows, cols/32], enqueued on `stream` in the
// calling thread's current CUDA context. Bit-identical to quantize_mxfp4_cpu.
// Asynchronous: returns after the launch. rows == 0 or cols == 0 launches nothing.
// Preconditions: the three device buffers do not overlap; `in` is 4-byte
// (fp32) or 2-byte (bf16) aligned. Throws InvalidArgument (in_dtype not f32/bf16,
// cols % 32 != 0, null pointer), plus whatever Runtime::get throws (CompileError,
// DriverError, SealedMiss) and DriverError when the launch fails.
// `target` must match the current device (the key's target); the default is sm_90a.
void quantize_mxfp4_gpu(Runtime& runtime, DevicePtr in, DType in_dtype, std::uint64_t rows,
                        std::uint32_t cols, DevicePtr data, DevicePtr scales, CUstream stream,
                        const Target& target = Target{});

// The same launch with a kernel the caller already holds (from Runtime::get of
// quantize_mxfp4_key(cols), or loaded from a cubin of generate_quantize's
// source). Throws InvalidArgument as above and when kernel.function is null or
// kernel.launch.block_threads is not a positive multiple of 32.
void quantize_mxfp4_gpu(const KernelRef& kernel, DevicePtr in, DType in_dtype, std::uint64_t rows,
                        std::uint32_t cols, DevicePtr data, DevicePtr scales, CUstream stream);

// ---- GPU activation quantizers (FP8 modes) ---------------------------------
// bf16 rows -> e4m3 codes + scales, bit-identical to quantize_fp8_per_token_cpu
// (mode fp8_per_token: scales fp32 [rows]) and quantize_mxfp8_cpu (mode mxfp8:
// scales E8M0 uint8 [rows, cols/32]); kernels/quantize_fp8.cuh. The MoE layer
// quantizes X and H with them in its FP8 modes.
//
// Key: op=quantize quant=<mode> token_bucket=1 n=cols k=0
// weight_scale=default_weight_scale(mode) (per_expert is a placeholder for
// per-token: the key grammar requires one) in_dtype=none out_dtype=e4m3. Throws
// InvalidArgument for another mode or cols not a multiple of 32 (mxfp8) / 8
// (fp8_per_token).
SpecKey quantize_fp8_key(QuantMode mode, std::uint32_t cols, const Target& target = Target{});

// Enqueues the quantization of in [rows, cols] (bf16, row stride in_row_stride
// elements: >= cols, a multiple of 8; in 16-byte aligned) into codes [rows,
// cols] (contiguous, 8-byte aligned) and scales (see above). Asynchronous.
// rows == 0 launches nothing. Throws InvalidArgument naming the argument
// (mode, cols, stride, null or misaligned pointer), DriverError.
// The kernel launches with programmatic stream serialization: it waits for the
// previous launch on the stream before it reads or writes, then at once allows
// the next launch to start early. A kernel launched after it with that
// attribute (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) must call
// griddepcontrol.wait (cudaGridDependencySynchronize) before it reads the
// codes or scales; launches without the attribute see ordinary stream order.
// Precondition of this overload: kernel is the one of quantize_fp8_key(mode,
// cols, target). The kernel is specialized on cols (the key's n) and quantizes
// that many columns of each row. A kernel of other cols writes other bytes:
// a KernelRef holds no key, so this overload cannot detect the mismatch.
void quantize_fp8_gpu(const KernelRef& kernel, QuantMode mode, DevicePtr in, std::int64_t in_row_stride,
                      std::uint64_t rows, std::uint32_t cols, DevicePtr codes, DevicePtr scales, CUstream stream);
// The same through the Runtime (kernel by quantize_fp8_key(mode, cols, target)).
void quantize_fp8_gpu(Runtime& runtime, QuantMode mode, DevicePtr in, std::int64_t in_row_stride,
                      std::uint64_t rows, std::uint32_t cols, DevicePtr codes, DevicePtr scales, CUstream stream,
                      const Target& target = Target{});

}  // namespace moejit
