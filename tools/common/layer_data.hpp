#pragma once
// Random data for running one MoE layer on the GPU from the tools and the
// benchmarks: expert weights (bf16, MXFP4, MXFP8 or FP8 per token) and
// per-call inputs on the device. Not a test fixture: it holds no reference and
// checks nothing.
//
// Weights are scaled so that products with N(0,1) activations stay O(1..10):
// MXFP4: uniform random e2m1 bytes, E8M0 scales in {2^-7, 2^-6, 2^-5} (2^-5..2^-3
// for K < 2048); bf16: uniform in +-2/sqrt(K); e4m3 (MXFP8, FP8 per token):
// random sign and mantissa, exponents 2^-2..2^1 (magnitudes 0.25..3.75, never
// NaN), times 2^e with e = round(-log2(1.6 sqrt(K))) (MXFP8: the E8M0 code of
// 2^e or 2^(e+1), per block of 32; per token: an fp32 2^e x [1, 1.25) per
// expert or per output channel).
// Inputs: x ~ uniform(-1.7, 1.7) (unit variance), distinct experts per token,
// router weights in [0.05, 1).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "moejit/device.hpp"
#include "moejit/formats.hpp"
#include "moejit/moe_layer.hpp"

namespace moejit::tools {

inline std::uint64_t splitmix64(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) from 24 random bits.
inline float unit_float(std::uint64_t& s) {
  return static_cast<float>(splitmix64(s) >> 40) / static_cast<float>(1 << 24);
}

// Calls fn(begin, end, chunk_seed) over [0, n) in parallel chunks; the result
// depends on the seed only (not on the thread count's timing).
template <class Fn>
void parallel_fill(std::size_t n, std::uint64_t seed, Fn fn) {
  const std::size_t threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  const std::size_t chunk = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t b = t * chunk, e = std::min(n, b + chunk);
    if (b >= e) break;
    pool.emplace_back([=] { fn(b, e, seed ^ (0xA5A5A5A5ull * (t + 1))); });
  }
  for (auto& th : pool) th.join();
}

// Columns of gate_up's output: 2 * intermediate for gated activations.
inline std::uint32_t gate_up_cols(const MoeLayerShape& s) {
  return s.act == Activation::none ? s.intermediate : 2 * s.intermediate;
}

// One grouped GEMM's expert weights [E, N, K] on the device.
struct DeviceExpertWeights {
  device::Buffer w, scales;

  // Bytes of one expert's weights and scales (what a GEMM must read per expert hit).
  static double bytes_per_expert(QuantMode q, WeightScale ws, std::uint32_t N, std::uint32_t K) {
    const double nk = double(N) * K;
    switch (q) {
      case QuantMode::bf16: return 2 * nk;
      case QuantMode::w4a16_mxfp4: return nk * (0.5 + 1.0 / 32);
      case QuantMode::mxfp8: return nk * (1.0 + 1.0 / 32);
      case QuantMode::fp8_per_token: return nk + (ws == WeightScale::per_channel ? 4.0 * N : 4.0);
    }
    return 0;
  }

  static DeviceExpertWeights random(QuantMode q, std::uint32_t E, std::uint32_t N, std::uint32_t K,
                                    std::uint64_t seed, WeightScale ws = WeightScale::per_expert) {
    DeviceExpertWeights d;
    const std::size_t elems = std::size_t(E) * N * K;
    if (q == QuantMode::mxfp8 || q == QuantMode::fp8_per_token) {
      std::vector<std::uint8_t> data(elems);
      parallel_fill(data.size(), seed, [&](std::size_t b, std::size_t e, std::uint64_t s) {
        for (std::size_t i = b; i < e; ++i) {
          const std::uint64_t r = splitmix64(s);
          // sign | exponent field 5..8 | mantissa
          data[i] = static_cast<std::uint8_t>((r & 0x80u) | ((5u + (r >> 8) % 4u) << 3) | ((r >> 16) & 7u));
        }
      });
      d.w = device::Buffer(data.size());
      d.w.upload(data.data(), data.size());
      const int e = static_cast<int>(std::lround(-std::log2(1.6 * std::sqrt(double(K)))));
      if (q == QuantMode::mxfp8) {
        std::vector<std::uint8_t> sc(elems / 32);
        parallel_fill(sc.size(), seed + 1, [&](std::size_t b, std::size_t e2, std::uint64_t s) {
          for (std::size_t i = b; i < e2; ++i) sc[i] = static_cast<std::uint8_t>(127 + e + int(splitmix64(s) % 2));
        });
        d.scales = device::Buffer(sc.size());
        d.scales.upload(sc.data(), sc.size());
      } else {
        std::vector<float> sc(ws == WeightScale::per_channel ? std::size_t(E) * N : E);
        std::uint64_t st = seed + 1;
        for (auto& v : sc) v = std::ldexp(1.0f + 0.25f * unit_float(st), e);
        d.scales = device::Buffer(sc.size() * 4);
        d.scales.upload(sc.data(), sc.size() * 4);
      }
      return d;
    }
    if (q == QuantMode::w4a16_mxfp4) {
      std::vector<std::uint8_t> data(elems / 2), sc(elems / 32);
      parallel_fill(data.size(), seed, [&](std::size_t b, std::size_t e, std::uint64_t s) {
        for (std::size_t i = b; i < e; ++i) data[i] = static_cast<std::uint8_t>(splitmix64(s));
      });
      const int base = K >= 2048 ? 120 : 122;
      parallel_fill(sc.size(), seed + 1, [&](std::size_t b, std::size_t e, std::uint64_t s) {
        for (std::size_t i = b; i < e; ++i) sc[i] = static_cast<std::uint8_t>(base + splitmix64(s) % 3);
      });
      d.w = device::Buffer(data.size());
      d.w.upload(data.data(), data.size());
      d.scales = device::Buffer(sc.size());
      d.scales.upload(sc.data(), sc.size());
    } else {
      std::vector<std::uint16_t> h(elems);
      const float amp = 2.0f / std::sqrt(static_cast<float>(K));
      parallel_fill(h.size(), seed, [&](std::size_t b, std::size_t e, std::uint64_t s) {
        for (std::size_t i = b; i < e; ++i) h[i] = float_to_bf16(amp * (2.f * unit_float(s) - 1.f));
      });
      d.w = device::Buffer(h.size() * 2);
      d.w.upload(h.data(), h.size() * 2);
    }
    return d;
  }
};

// Both GEMMs' weights and biases of one layer on the device; ws: the
// fp8_per_token weight-scale layout (per_expert or per_channel).
struct DeviceLayerWeights {
  DeviceExpertWeights w1, w2;
  device::Buffer b1, b2;

  static DeviceLayerWeights random(const MoeLayerShape& s, QuantMode q, std::uint64_t seed,
                                   WeightScale ws = WeightScale::per_expert) {
    DeviceLayerWeights l;
    l.w1 = DeviceExpertWeights::random(q, s.experts, gate_up_cols(s), s.hidden, seed, ws);
    l.w2 = DeviceExpertWeights::random(q, s.experts, s.hidden, s.intermediate, seed + 7, ws);
    auto bias = [&](BiasKind kind, std::size_t n, std::uint64_t bseed) {
      std::uint64_t st = bseed;
      if (kind == BiasKind::bf16) {
        std::vector<std::uint16_t> b(n);
        for (auto& v : b) v = float_to_bf16(unit_float(st) - 0.5f);
        device::Buffer d(n * 2);
        d.upload(b.data(), n * 2);
        return d;
      }
      if (kind == BiasKind::f32) {
        std::vector<float> b(n);
        for (auto& v : b) v = unit_float(st) - 0.5f;
        device::Buffer d(n * 4);
        d.upload(b.data(), n * 4);
        return d;
      }
      return device::Buffer();
    };
    l.b1 = bias(s.gate_up_bias, std::size_t(s.experts) * gate_up_cols(s), seed + 11);
    l.b2 = bias(s.down_bias, std::size_t(s.experts) * s.hidden, seed + 13);
    return l;
  }

  MoeWeights view() const {
    MoeWeights w;
    w.w1 = w1.w.get();
    w.w1_scales = w1.scales.get();
    w.w2 = w2.w.get();
    w.w2_scales = w2.scales.get();
    w.b1 = b1.get();
    w.b2 = b2.get();
    return w;
  }
};

// The host tensors of one call with T tokens.
struct HostLayerInputs {
  std::uint32_t tokens = 0;
  std::vector<std::uint16_t> x;     // [T, hidden] bf16
  std::vector<std::int32_t> ids;    // [T, top_k], distinct experts per token
  std::vector<float> gamma;         // [T, top_k]

  static HostLayerInputs random(const MoeLayerShape& s, std::uint32_t T, std::uint64_t seed) {
    HostLayerInputs in;
    in.tokens = T;
    std::uint64_t st = seed;
    in.x.resize(std::size_t(T) * s.hidden);
    for (auto& v : in.x) v = float_to_bf16(1.7320508f * (2.f * unit_float(st) - 1.f));
    in.ids.resize(std::size_t(T) * s.top_k);
    in.gamma.resize(in.ids.size());
    std::vector<std::int32_t> perm(s.experts);
    for (std::uint32_t t = 0; t < T; ++t) {
      for (std::uint32_t e = 0; e < s.experts; ++e) perm[e] = static_cast<std::int32_t>(e);
      for (std::uint32_t j = 0; j < s.top_k; ++j) {
        const std::uint32_t pick = j + static_cast<std::uint32_t>(splitmix64(st) % (s.experts - j));
        std::swap(perm[j], perm[pick]);
        in.ids[std::size_t(t) * s.top_k + j] = perm[j];
        in.gamma[std::size_t(t) * s.top_k + j] = 0.05f + 0.95f * unit_float(st);
      }
    }
    return in;
  }

  // The tensors of token t alone (a one-token call).
  HostLayerInputs token(const MoeLayerShape& s, std::uint32_t t) const {
    HostLayerInputs one;
    one.tokens = 1;
    one.x.assign(x.begin() + std::size_t(t) * s.hidden, x.begin() + std::size_t(t + 1) * s.hidden);
    one.ids.assign(ids.begin() + std::size_t(t) * s.top_k, ids.begin() + std::size_t(t + 1) * s.top_k);
    one.gamma.assign(gamma.begin() + std::size_t(t) * s.top_k, gamma.begin() + std::size_t(t + 1) * s.top_k);
    return one;
  }
};

// The device side of one call: inputs, output and workspace (both filled with
// 0xFF bytes, NaN in bf16 and fp32, so a row the layer fails to write shows).
struct DeviceLayerCall {
  device::Buffer x, ids, gamma, out, ws;
  MoeLayerArgs args;

  DeviceLayerCall(const MoeLayer& layer, const HostLayerInputs& in) {
    const auto& s = layer.shape();
    const std::uint32_t T = in.tokens;
    x = device::Buffer(std::max<std::size_t>(16, in.x.size() * 2));
    ids = device::Buffer(std::max<std::size_t>(16, in.ids.size() * 4));
    gamma = device::Buffer(std::max<std::size_t>(16, in.gamma.size() * 4));
    out = device::Buffer(std::max<std::size_t>(16, std::size_t(T) * s.hidden * 2));
    ws = device::Buffer(std::max<std::size_t>(256, layer.workspace_size(T)));
    x.upload(in.x.data(), in.x.size() * 2);
    ids.upload(in.ids.data(), in.ids.size() * 4);
    gamma.upload(in.gamma.data(), in.gamma.size() * 4);
    out.fill_bytes(0xFF);
    ws.fill_bytes(0xFF);
    args.num_tokens = T;
    args.x = x.get();
    args.topk_ids = ids.get();
    args.topk_weights = gamma.get();
    args.out = out.get();
    args.workspace = ws.get();
    args.workspace_bytes = ws.bytes();
  }

  std::vector<std::uint16_t> download_out(const MoeLayerShape& s) const {
    std::vector<std::uint16_t> o(std::size_t(args.num_tokens) * s.hidden);
    out.download(o.data(), o.size() * 2);
    return o;
  }
};

}  // namespace moejit::tools
