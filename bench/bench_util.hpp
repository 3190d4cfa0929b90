#pragma once
// Shared code of the GPU benchmarks (moejit_bench, bench_launch, trace_replay):
// CUDA-event timing with a median, random device data drawn fast from a small
// host pool (the timing of the kernels does not depend on which random values
// they see, only on their format), model shapes, and routing generators.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "driver/cuda_api.hpp"
#include "driver/device_buffer.hpp"
#include "common/layer_data.hpp"
#include "moejit/error.hpp"
#include "moejit/formats.hpp"
#include "moejit/model.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/runtime.hpp"

namespace moejit::bench {

// ------------------------------------------------------------------ timing --

class EventTimer {
 public:
  EventTimer() {
    MOEJIT_CU_CHECK(driver::cuda().cuEventCreate(&e0_, 0));
    MOEJIT_CU_CHECK(driver::cuda().cuEventCreate(&e1_, 0));
  }
  ~EventTimer() {
    (void)driver::cuda().cuEventDestroy_v2(e0_);
    (void)driver::cuda().cuEventDestroy_v2(e1_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // pre(i) runs untimed (same stream, before the first event), then body(i)
  // between two events on the default stream; returns milliseconds.
  float once(const std::function<void(int)>& pre, const std::function<void(int)>& body, int i) {
    const auto& cu = driver::cuda();
    if (pre) pre(i);
    MOEJIT_CU_CHECK(cu.cuEventRecord(e0_, nullptr));
    body(i);
    MOEJIT_CU_CHECK(cu.cuEventRecord(e1_, nullptr));
    MOEJIT_CU_CHECK(cu.cuEventSynchronize(e1_));
    float ms = 0;
    MOEJIT_CU_CHECK(cu.cuEventElapsedTime_v2(&ms, e0_, e1_));
    return ms;
  }

 private:
  CUevent e0_ = nullptr, e1_ = nullptr;
};

inline double median_of(std::vector<float> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (double(v[n / 2 - 1]) + v[n / 2]);
}

struct Timing {
  double us = 0;   // median
  double min_us = 0;
  int iters = 0;
};

// Three warm-up runs, then `iters` timed runs (or `long_iters` when the warm-up
// median exceeds long_ms milliseconds); median of the timed runs.
inline Timing time_median(EventTimer& t, const std::function<void(int)>& pre, const std::function<void(int)>& body,
                          int iters, int long_iters = 10, double long_ms = 5.0) {
  std::vector<float> warm;
  for (int i = 0; i < 3; ++i) warm.push_back(t.once(pre, body, i));
  const int n = median_of(warm) > long_ms ? std::min(iters, long_iters) : iters;
  std::vector<float> ms;
  ms.reserve(n);
  for (int i = 0; i < n; ++i) ms.push_back(t.once(pre, body, i));
  Timing r;
  r.us = median_of(ms) * 1e3;
  r.min_us = *std::min_element(ms.begin(), ms.end()) * 1e3;
  r.iters = n;
  return r;
}

// ------------------------------------------------------------ device data --

enum class Fill : std::uint8_t {
  bf16,        // uniform in +-amp as bf16
  bytes,       // uniform random bytes (e2m1 pairs)
  e8m0_mxfp4,  // E8M0 scales of random MXFP4 weights (tools/common/layer_data.hpp)
  e4m3,        // e4m3 codes with magnitudes in [0.25, 3.75], never NaN
  e8m0_mxfp8,  // E8M0 scales around 2^-round(log2(1.5 sqrt(K)))
  f32_scale,   // fp32 around 2^-round(log2(1.5 sqrt(K)))
  f32_gamma,   // fp32 uniform in [0.05, 1)
};

// A host pool of `bytes` random bytes of the given format (parallel, deterministic).
inline std::vector<std::uint8_t> make_pool(Fill f, std::uint32_t K, std::size_t bytes, std::uint64_t seed,
                                           float amp = 0.f) {
  using tools::parallel_fill;
  using tools::splitmix64;
  bytes = std::max<std::size_t>(64, (bytes + 63) & ~std::size_t(63));
  std::vector<std::uint8_t> p(bytes);
  const int b = static_cast<int>(std::lround(std::log2(1.5 * std::sqrt(static_cast<double>(std::max(K, 1u))))));
  switch (f) {
    case Fill::bf16: {
      const float a = amp > 0 ? amp : 2.0f / std::sqrt(static_cast<float>(std::max(K, 1u)));
      auto* v = reinterpret_cast<std::uint16_t*>(p.data());
      parallel_fill(bytes / 2, seed, [&](std::size_t lo, std::size_t hi, std::uint64_t s) {
        for (std::size_t i = lo; i < hi; ++i) {
          const float u = static_cast<float>(splitmix64(s) >> 40) / static_cast<float>(1 << 24);
          v[i] = float_to_bf16(a * (2.f * u - 1.f));
        }
      });
      break;
    }
    case Fill::bytes:
      parallel_fill(bytes, seed, [&](std::size_t lo, std::size_t hi, std::uint64_t s) {
        for (std::size_t i = lo; i < hi; ++i) p[i] = static_cast<std::uint8_t>(splitmix64(s));
      });
      break;
    case Fill::e8m0_mxfp4: {
      const int base = K >= 2048 ? 120 : 122;
      parallel_fill(bytes, seed, [&](std::size_t lo, std::size_t hi, std::uint64_t s) {
        for (std::size_t i = lo; i < hi; ++i) p[i] = static_cast<std::uint8_t>(base + splitmix64(s) % 3);
      });
      break;
    }
    case Fill::e4m3:
      parallel_fill(bytes, seed, [&](std::size_t lo, std::size_t hi, std::uint64_t s) {
        for (std::size_t i = lo; i < hi; ++i) {
          const std::uint64_t r = splitmix64(s);
          const auto ef = static_cast<std::uint8_t>(5 + (r & 3));
          p[i] = static_cast<std::uint8_t>(((r >> 8) & 0x80) | (ef << 3) | ((r >> 16) & 7));
        }
      });
      break;
    case Fill::e8m0_mxfp8:
      parallel_fill(bytes, seed, [&](std::size_t lo, std::size_t hi, std::uint64_t s) {
        for (std::size_t i = lo; i < hi; ++i) p[i] = static_cast<std::uint8_t>(127 - b - 1 + splitmix64(s) % 3);
      });
      break;
    case Fill::f32_scale:
    case Fill::f32_gamma: {
      auto* v = reinterpret_cast<float*>(p.data());
      const bool gamma = f == Fill::f32_gamma;
      parallel_fill(bytes / 4, seed, [&](std::size_t lo, std::size_t hi, std::uint64_t s) {
        for (std::size_t i = lo; i < hi; ++i) {
          const float u = static_cast<float>(splitmix64(s) >> 40) / static_cast<float>(1 << 24);
          v[i] = gamma ? 0.05f + 0.95f * u : std::ldexp(1.0f + u, -b);
        }
      });
      break;
    }
  }
  return p;
}

// Fills `bytes` of device memory at dst from the pool, in chunks of at most half
// the pool taken at shifting 64-byte-aligned offsets (so experts do not all see
// the same bytes).
inline void fill_device(DevicePtr dst, std::size_t bytes, const std::vector<std::uint8_t>& pool) {
  const auto& cu = driver::cuda();
  const std::size_t half = pool.size() / 2;
  std::size_t off = 0, i = 0;
  while (off < bytes) {
    const std::size_t n = std::min(half > 0 ? half : pool.size(), bytes - off);
    const std::size_t room = pool.size() - n;
    const std::size_t shift = room ? ((i * 1048573ull) % (room + 1)) & ~std::size_t(63) : 0;
    MOEJIT_CU_CHECK(cu.cuMemcpyHtoD_v2(dst + off, pool.data() + shift, n));
    off += n;
    ++i;
  }
}

// A device buffer of `bytes` filled from a fresh pool of at most 64 MB.
inline driver::DeviceBuffer random_device(Fill f, std::uint32_t K, std::size_t bytes, std::uint64_t seed,
                                          float amp = 0.f) {
  driver::DeviceBuffer d(std::max<std::size_t>(bytes, 256));
  const auto pool = make_pool(f, K, std::min<std::size_t>(bytes, std::size_t(64) << 20), seed, amp);
  fill_device(d.get(), bytes, pool);
  return d;
}

// ----------------------------------------------------------------- weights --

// One MoE layer's expert weights on the device in a moejit mode, and the bytes
// that must move per expert hit (weights + scales + biases) for each GEMM.
struct BenchWeights {
  driver::DeviceBuffer w1, s1, b1, w2, s2, b2;
  double bytes_per_expert[2] = {0, 0};  // gate_up, down
  MoeWeights device() const {
    MoeWeights w;
    w.w1 = w1.get(), w.w1_scales = s1.get(), w.b1 = b1.get();
    w.w2 = w2.get(), w.w2_scales = s2.get(), w.b2 = b2.get();
    return w;
  }
};

inline std::uint32_t gate_up_columns(const MoeLayerShape& s) {
  return s.act == Activation::none ? s.intermediate : 2 * s.intermediate;
}

// Bytes per weight of a mode's weight data (not counting scales).
inline double weight_data_bytes(QuantMode q) {
  switch (q) {
    case QuantMode::bf16: return 2.0;
    case QuantMode::w4a16_mxfp4: return 0.5;
    default: return 1.0;
  }
}

inline std::unique_ptr<BenchWeights> make_bench_weights(const MoeLayerShape& s, QuantMode q, WeightScale ws,
                                                        std::uint64_t seed) {
  auto w = std::make_unique<BenchWeights>();
  const std::uint64_t E = s.experts, N1 = gate_up_columns(s), D = s.hidden, I = s.intermediate;
  struct Proj {
    std::uint64_t n, k;
    driver::DeviceBuffer *w, *s, *b;
    BiasKind bias;
  };
  Proj projs[2] = {{N1, D, &w->w1, &w->s1, &w->b1, s.gate_up_bias}, {D, I, &w->w2, &w->s2, &w->b2, s.down_bias}};
  for (int g = 0; g < 2; ++g) {
    const Proj& p = projs[g];
    const std::uint64_t elems = E * p.n * p.k;
    const std::uint64_t seed_g = seed + 101 * g;
    std::uint64_t wb = 0, sb = 0, bb = 0;
    switch (q) {
      case QuantMode::bf16:
        wb = elems * 2;
        *p.w = random_device(Fill::bf16, p.k, wb, seed_g);
        break;
      case QuantMode::w4a16_mxfp4:
        wb = elems / 2, sb = elems / 32;
        *p.w = random_device(Fill::bytes, p.k, wb, seed_g);
        *p.s = random_device(Fill::e8m0_mxfp4, p.k, sb, seed_g + 1);
        break;
      case QuantMode::mxfp8:
        wb = elems, sb = elems / 32;
        *p.w = random_device(Fill::e4m3, p.k, wb, seed_g);
        *p.s = random_device(Fill::e8m0_mxfp8, p.k, sb, seed_g + 1);
        break;
      case QuantMode::fp8_per_token:
        wb = elems;
        sb = 4 * (ws == WeightScale::per_channel ? E * p.n : E);
        *p.w = random_device(Fill::e4m3, p.k, wb, seed_g);
        *p.s = random_device(Fill::f32_scale, p.k, sb, seed_g + 1);
        break;
    }
    if (p.bias == BiasKind::bf16) bb = 2 * E * p.n;
    if (p.bias == BiasKind::f32) bb = 4 * E * p.n;
    if (bb) *p.b = random_device(p.bias == BiasKind::bf16 ? Fill::bf16 : Fill::f32_gamma, p.k, bb, seed_g + 2, 0.5f);
    w->bytes_per_expert[g] = double(wb + sb + bb) / double(E);
  }
  return w;
}

// ------------------------------------------------------------------ shapes --

// The MoE layer shape of an embedded model config for a quant mode (make_plan),
// or the published shape built in here when the config is absent.
inline MoeLayerShape model_shape(const std::string& name, QuantMode q) {
  try {
    PlanOptions po;
    po.quant = q;
    po.max_num_tokens = 16384;
    return make_plan(embedded_model(name), po).layers.at(0);
  } catch (const std::exception&) {
    MoeLayerShape s;
    if (name == "gpt-oss-120b") {
      s.hidden = 2880, s.intermediate = 2880, s.experts = 128, s.top_k = 4;
      s.act = Activation::swiglu_oai, s.act_alpha = 1.702f, s.act_limit = 7.0f;
      s.gate_up_bias = BiasKind::bf16, s.down_bias = BiasKind::bf16;
      return s;
    }
    if (name == "qwen3-30b-a3b") {
      s.hidden = 2048, s.intermediate = 768, s.experts = 128, s.top_k = 8, s.act = Activation::silu_gated;
      return s;
    }
    if (name == "mixtral-8x7b") {
      s.hidden = 4096, s.intermediate = 14336, s.experts = 8, s.top_k = 2, s.act = Activation::silu_gated;
      return s;
    }
    if (name == "deepseek-v3") {
      s.hidden = 7168, s.intermediate = 2048, s.experts = 256, s.top_k = 8, s.act = Activation::silu_gated;
      return s;
    }
    throw;
  }
}

// ----------------------------------------------------------------- routing --

// topk ids [T, top_k] with distinct experts per token. uniform: every expert
// equally likely. skewed: each route goes with probability 1/2 to one of the 4
// "hot" experts 0..3 (while the token has one left), else to a uniform cold one.
inline std::vector<std::int32_t> make_routing(std::uint32_t T, std::uint32_t top_k, std::uint32_t E, bool skewed,
                                              std::uint64_t seed) {
  using tools::splitmix64;
  std::vector<std::int32_t> ids(std::size_t(T) * top_k);
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345;
  const std::uint32_t hot = std::min<std::uint32_t>(4, E);
  std::vector<std::int32_t> chosen;
  for (std::uint32_t t = 0; t < T; ++t) {
    chosen.clear();
    auto used = [&](std::int32_t e) { return std::find(chosen.begin(), chosen.end(), e) != chosen.end(); };
    for (std::uint32_t j = 0; j < top_k; ++j) {
      std::int32_t e = -1;
      const bool want_hot = skewed && (splitmix64(s) & 1);
      if (want_hot) {
        std::uint32_t hot_left = 0;
        for (std::uint32_t h = 0; h < hot; ++h) hot_left += !used(static_cast<std::int32_t>(h));
        if (hot_left) {
          do e = static_cast<std::int32_t>(splitmix64(s) % hot);
          while (used(e));
        }
      }
      if (e < 0) {
        const std::uint32_t lo = skewed && E > top_k + hot ? hot : 0;
        do e = static_cast<std::int32_t>(lo + splitmix64(s) % (E - lo));
        while (used(e));
      }
      chosen.push_back(e);
      ids[std::size_t(t) * top_k + j] = e;
    }
  }
  return ids;
}

inline std::uint32_t experts_hit(const std::vector<std::int32_t>& ids) {
  std::set<std::int32_t> hit(ids.begin(), ids.end());
  hit.erase(-1);
  return static_cast<std::uint32_t>(hit.size());
}

// ----------------------------------------------------------------- compile --

// Compiles (or loads from disk) every key on `threads` threads; returns the
// first error message ("" when all succeeded).
inline std::string precompile(Runtime& rt, std::vector<SpecKey> keys, unsigned threads = 0) {
  std::vector<SpecKey> uniq;
  for (const auto& k : keys)
    if (std::find(uniq.begin(), uniq.end(), k) == uniq.end()) uniq.push_back(k);
  if (threads == 0) threads = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::atomic<std::size_t> next{0};
  std::string err;
  std::mutex mu;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < uniq.size(); i = next++) {
        try {
          (void)rt.compiled(uniq[i]);
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(mu);
          if (err.empty()) err = uniq[i].to_text() + ": " + e.what();
        }
      }
    });
  for (auto& th : pool) th.join();
  return err;
}

inline std::string gpu_name() {
  const auto& cu = driver::cuda();
  CUdevice dev = 0;
  char name[256] = {};
  if (cu.cuDeviceGet(&dev, 0) != CUDA_SUCCESS || cu.cuDeviceGetName(name, sizeof name, dev) != CUDA_SUCCESS)
    return "unknown";
  return name;
}

}  // namespace moejit::bench
