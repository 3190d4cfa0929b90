#pragma once
// Host-side test data: random bf16 / MXFP4 tensors, NaN poisoning,
// error metrics. Header-only.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "moejit/formats.hpp"
#include "moejit/quant.hpp"
#include "reference/rng.hpp"

namespace moejit::ref {

// A quiet-NaN bf16 with a recognisable payload (0x7FC1): what poisoned buffers hold.
inline constexpr std::uint16_t kPoisonBf16 = 0x7FC1;
// A quiet-NaN fp32 with payload 0x7FC00001.
inline constexpr std::uint32_t kPoisonF32Bits = 0x7FC00001u;

// n bf16 values, each bf16(normal(0, stddev)) (RNE).
inline std::vector<std::uint16_t> random_bf16(std::size_t n, TestRng& rng, double stddev = 1.0) {
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) x = float_to_bf16(static_cast<float>(rng.normal(0.0, stddev)));
  return v;
}

// n fp32 values from normal(0, stddev).
inline std::vector<float> random_f32(std::size_t n, TestRng& rng, double stddev = 1.0) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal(0.0, stddev));
  return v;
}

// MXFP4 weights [E, N, K] as the kernels read them.
struct Mxfp4Weights {
  std::uint32_t experts = 0, n = 0, k = 0;
  std::vector<std::uint8_t> data;    // [E, N, K/2]
  std::vector<std::uint8_t> scales;  // [E, N, K/32]
};

// Quantizes normal(0, stddev) fp32 weights [E, N, K] with quantize_mxfp4_cpu.
// K must be a multiple of 32 (InvalidArgument otherwise, from the quantizer).
// Generated expert by expert: no [E, N, K] fp32 buffer is ever held.
inline Mxfp4Weights random_mxfp4(std::uint32_t experts, std::uint32_t n, std::uint32_t k, TestRng& rng,
                                 double stddev = 1.0) {
  Mxfp4Weights w;
  w.experts = experts;
  w.n = n;
  w.k = k;
  const std::uint64_t per_expert = std::uint64_t{n} * k;
  w.data.resize(experts * per_expert / 2);
  w.scales.resize(experts * per_expert / 32);
  std::vector<float> tmp(per_expert);
  for (std::uint32_t e = 0; e < experts; ++e) {
    for (auto& x : tmp) x = static_cast<float>(rng.normal(0.0, stddev));
    quantize_mxfp4_cpu(tmp.data(), n, k, w.data.data() + e * per_expert / 2,
                       w.scales.data() + e * per_expert / 32);
  }
  return w;
}

// Fills a host buffer with the poison NaN.
inline void poison_nan(std::vector<std::uint16_t>& bf16) { std::fill(bf16.begin(), bf16.end(), kPoisonBf16); }
inline void poison_nan(std::vector<float>& f32) {
  std::fill(f32.begin(), f32.end(), std::bit_cast<float>(kPoisonF32Bits));
}
// Bytes to memset a device buffer with so that bf16 and fp32 views read NaN
// (0xFF bytes: bf16 0xFFFF and fp32 0xFFFFFFFF are both NaN).
inline constexpr unsigned char kPoisonByte = 0xFF;

// Number of non-finite values (NaN or Inf).
inline std::size_t count_nonfinite(const std::uint16_t* bf16, std::size_t n) {
  std::size_t c = 0;
  for (std::size_t i = 0; i < n; ++i) c += (bf16[i] & 0x7F80u) == 0x7F80u;
  return c;
}
inline std::size_t count_nonfinite(const float* v, std::size_t n) {
  std::size_t c = 0;
  for (std::size_t i = 0; i < n; ++i) c += !std::isfinite(v[i]);
  return c;
}
inline std::size_t count_nonfinite(const double* v, std::size_t n) {
  std::size_t c = 0;
  for (std::size_t i = 0; i < n; ++i) c += !std::isfinite(v[i]);
  return c;
}

inline double as_double(double v) { return v; }
inline double as_double(float v) { return v; }
inline double as_double(std::uint16_t bf16) { return bf16_to_float(bf16); }

// ||got - ref||_F / ||ref||_F over n values. `got` may be double, float or
// bf16 bits (uint16_t). Any non-finite value in got or ref gives +Inf (so
// `err < tol` fails); ref all zero gives 0 when got is all zero, else +Inf.
template <class T>
double relative_frobenius_error(const double* ref, const T* got, std::size_t n) {
  long double num = 0.0L, den = 0.0L;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = as_double(got[i]), r = ref[i];
    if (!std::isfinite(g) || !std::isfinite(r)) return std::numeric_limits<double>::infinity();
    num += static_cast<long double>(g - r) * (g - r);
    den += static_cast<long double>(r) * r;
  }
  if (den == 0.0L) return num == 0.0L ? 0.0 : std::numeric_limits<double>::infinity();
  return static_cast<double>(std::sqrt(num / den));
}
template <class T>
double relative_frobenius_error(const std::vector<double>& ref, const std::vector<T>& got) {
  if (ref.size() != got.size()) return std::numeric_limits<double>::infinity();
  return relative_frobenius_error(ref.data(), got.data(), ref.size());
}

}  // namespace moejit::ref
