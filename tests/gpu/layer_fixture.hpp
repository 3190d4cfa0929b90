#pragma once
// Host data, device buffers and the float64 reference for the MoE layer tests
// (moejit-run draws its own, tools/common/layer_data.hpp). Weights are drawn fast (random MXFP4 bytes / uniform bf16)
// so real model shapes fit in a test run; the reference dequantizes them exactly.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "driver/cuda_api.hpp"
#include "driver/device_buffer.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/formats.hpp"
#include "moejit/moe_layer.hpp"
#include "reference/moe_reference.hpp"
#include "reference/rng.hpp"

namespace moejit::testing {

inline std::uint64_t splitmix64(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Fills [0, n) with fn(index_chunk_seed) in parallel chunks; deterministic per seed.
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

// Expert weights of one grouped GEMM in host memory: bf16 or MXFP4.
struct HostWeights {
  QuantMode format = QuantMode::bf16;
  std::uint32_t experts = 0, n = 0, k = 0;
  std::vector<std::uint16_t> bf16;   // [E, N, K]
  std::vector<std::uint8_t> data;    // [E, N, K/2]
  std::vector<std::uint8_t> scales;  // [E, N, K/32]
  ref::WeightsView view() const {
    return format == QuantMode::bf16 ? ref::WeightsView::of_bf16(bf16.data(), experts, n, k)
                                     : ref::WeightsView::of_mxfp4(data.data(), scales.data(), experts, n, k);
  }
};

// Random weights whose products with N(0,1) activations stay O(1..10):
// MXFP4: uniform random e2m1 bytes, E8M0 scales in {2^-7, 2^-6, 2^-5}; bf16:
// uniform in +-2/sqrt(K).
inline HostWeights random_weights(QuantMode q, std::uint32_t E, std::uint32_t N, std::uint32_t K,
                                  std::uint64_t seed) {
  HostWeights w;
  w.format = q, w.experts = E, w.n = N, w.k = K;
  const std::uint64_t elems = std::uint64_t(E) * N * K;
  if (q == QuantMode::w4a16_mxfp4) {
    w.data.resize(elems / 2);
    w.scales.resize(elems / 32);
    parallel_fill(w.data.size(), seed, [&](std::size_t b, std::size_t e, std::uint64_t s) {
      for (std::size_t i = b; i < e; ++i) w.data[i] = static_cast<std::uint8_t>(splitmix64(s));
    });
    const int base = K >= 2048 ? 120 : 122;
    parallel_fill(w.scales.size(), seed + 1, [&](std::size_t b, std::size_t e, std::uint64_t s) {
      for (std::size_t i = b; i < e; ++i) w.scales[i] = static_cast<std::uint8_t>(base + splitmix64(s) % 3);
    });
  } else {
    w.bf16.resize(elems);
    const float amp = 2.0f / std::sqrt(static_cast<float>(K));
    parallel_fill(w.bf16.size(), seed, [&](std::size_t b, std::size_t e, std::uint64_t s) {
      for (std::size_t i = b; i < e; ++i) {
        const float u = static_cast<float>(splitmix64(s) >> 40) / static_cast<float>(1 << 24);  // [0, 1)
        w.bf16[i] = float_to_bf16(amp * (2.f * u - 1.f));
      }
    });
  }
  return w;
}

struct DeviceWeights {
  driver::DeviceBuffer w, scales;
  void upload(const HostWeights& h) {
    if (h.format == QuantMode::bf16) {
      w = driver::DeviceBuffer(h.bf16.size() * 2);
      w.upload(h.bf16.data(), h.bf16.size() * 2);
    } else {
      w = driver::DeviceBuffer(h.data.size());
      w.upload(h.data.data(), h.data.size());
      scales = driver::DeviceBuffer(h.scales.size());
      scales.upload(h.scales.data(), h.scales.size());
    }
  }
};

// A model layer's weights, on the host and the device.
struct LayerWeights {
  MoeLayerShape shape;
  QuantMode quant = QuantMode::bf16;
  HostWeights w1, w2;
  std::vector<std::uint16_t> b1, b2;  // bf16 biases when the shape has them (bf16 kind)
  std::vector<float> b1f, b2f;        // f32 biases (f32 kind)
  DeviceWeights d1, d2;
  driver::DeviceBuffer db1, db2;

  std::uint32_t n1() const { return shape.act == Activation::none ? shape.intermediate : 2 * shape.intermediate; }

  static std::unique_ptr<LayerWeights> make(const MoeLayerShape& s, QuantMode q, std::uint64_t seed) {
    auto l = std::make_unique<LayerWeights>();
    l->shape = s;
    l->quant = q;
    l->w1 = random_weights(q, s.experts, l->n1(), s.hidden, seed);
    l->w2 = random_weights(q, s.experts, s.hidden, s.intermediate, seed + 7);
    ref::TestRng rng(seed);
    auto make_bias = [&](BiasKind kind, std::size_t n, std::vector<std::uint16_t>& b16, std::vector<float>& b32,
                         driver::DeviceBuffer& d) {
      if (kind == BiasKind::bf16) {
        b16 = ref::random_bf16(n, rng, 0.5);
        d = driver::DeviceBuffer(n * 2);
        d.upload(b16.data(), n * 2);
      } else if (kind == BiasKind::f32) {
        b32 = ref::random_f32(n, rng, 0.5);
        d = driver::DeviceBuffer(n * 4);
        d.upload(b32.data(), n * 4);
      }
    };
    make_bias(s.gate_up_bias, std::size_t(s.experts) * l->n1(), l->b1, l->b1f, l->db1);
    make_bias(s.down_bias, std::size_t(s.experts) * s.hidden, l->b2, l->b2f, l->db2);
    l->d1.upload(l->w1);
    l->d2.upload(l->w2);
    return l;
  }

  MoeWeights device() const {
    MoeWeights w;
    w.w1 = d1.w.get();
    w.w1_scales = d1.scales.get();
    w.w2 = d2.w.get();
    w.w2_scales = d2.scales.get();
    w.b1 = db1.get();
    w.b2 = db2.get();
    return w;
  }

  ref::BiasView bias_view(BiasKind k, const std::vector<std::uint16_t>& b16, const std::vector<float>& b32) const {
    if (k == BiasKind::bf16) return ref::BiasView::of_bf16(b16.data());
    if (k == BiasKind::f32) return ref::BiasView::of_f32(b32.data());
    return {};
  }
};

enum class Routing : std::uint8_t { uniform, one_expert, last_expert_only, with_drops };

// Per-call tensors of T tokens: x, topk ids (distinct experts per token for
// uniform routing), router weights.
struct LayerInputs {
  std::uint32_t tokens = 0;
  std::vector<std::uint16_t> x;
  std::vector<std::int32_t> ids;
  std::vector<float> gamma;

  static LayerInputs make(const MoeLayerShape& s, std::uint32_t T, Routing routing, ref::TestRng& rng) {
    LayerInputs in;
    in.tokens = T;
    in.x = ref::random_bf16(std::size_t(T) * s.hidden, rng, 1.0);
    in.ids.resize(std::size_t(T) * s.top_k);
    in.gamma.resize(in.ids.size());
    std::vector<std::int32_t> perm(s.experts);
    for (std::uint32_t t = 0; t < T; ++t) {
      for (std::uint32_t e = 0; e < s.experts; ++e) perm[e] = static_cast<std::int32_t>(e);
      for (std::uint32_t j = 0; j < s.top_k; ++j) {
        const auto pick = static_cast<std::uint32_t>(rng.integer(j, s.experts - 1));
        std::swap(perm[j], perm[pick]);
        std::int32_t e = perm[j];
        if (routing == Routing::one_expert) e = static_cast<std::int32_t>(s.experts / 3);
        if (routing == Routing::last_expert_only) e = static_cast<std::int32_t>(s.experts - 1);
        if (routing == Routing::with_drops && rng.integer(0, 3) == 0) e = -1;
        in.ids[std::size_t(t) * s.top_k + j] = e;
        in.gamma[std::size_t(t) * s.top_k + j] = static_cast<float>(rng.uniform(0.05, 1.0));
      }
    }
    return in;
  }
};

// The first T tokens alone and inside a batch padded to their bucket (3
// tokens more when T is its own bucket, so the batch lands in another one):
// the inputs of the padding-invariance tests.
inline std::pair<LayerInputs, LayerInputs> alone_and_padded(const MoeLayerShape& s, std::uint32_t T,
                                                            std::uint64_t seed) {
  const std::uint32_t B = round_up_tokens(T);
  ref::TestRng rng(seed);
  LayerInputs padded = LayerInputs::make(s, B + (B == T ? 3 : 0), Routing::uniform, rng);
  LayerInputs alone = padded;
  alone.tokens = T;
  alone.x.resize(std::size_t(T) * s.hidden);
  alone.ids.resize(std::size_t(T) * s.top_k);
  alone.gamma.resize(std::size_t(T) * s.top_k);
  return {std::move(alone), std::move(padded)};
}

// Device side of one call: inputs, output (poisoned), workspace (poisoned).
struct LayerRun {
  driver::DeviceBuffer x, ids, gamma, out, ws;
  MoeLayerArgs args;

  LayerRun(const MoeLayer& layer, const LayerInputs& in) {
    const auto& s = layer.shape();
    const std::uint32_t T = in.tokens;
    x = driver::DeviceBuffer(std::max<std::size_t>(16, in.x.size() * 2));
    ids = driver::DeviceBuffer(std::max<std::size_t>(16, in.ids.size() * 4));
    gamma = driver::DeviceBuffer(std::max<std::size_t>(16, in.gamma.size() * 4));
    out = driver::DeviceBuffer(std::max<std::size_t>(16, std::size_t(T) * s.hidden * 2));
    ws = driver::DeviceBuffer(std::max<std::size_t>(256, layer.workspace_size(T)));
    x.upload(in.x.data(), in.x.size() * 2);
    ids.upload(in.ids.data(), in.ids.size() * 4);
    gamma.upload(in.gamma.data(), in.gamma.size() * 4);
    poison();
    args.num_tokens = T;
    args.x = x.get();
    args.topk_ids = ids.get();
    args.topk_weights = gamma.get();
    args.out = out.get();
    args.workspace = ws.get();
    args.workspace_bytes = ws.bytes();
  }
  // 0xFF bytes: NaN in bf16 and fp32 views alike.
  void poison() {
    out.fill_bytes(0xFF);
    ws.fill_bytes(0xFF);
  }
  std::vector<std::uint16_t> download_out(const MoeLayerShape& s) const {
    std::vector<std::uint16_t> o(std::size_t(args.num_tokens) * s.hidden);
    out.download(o.data(), o.size() * 2);
    return o;
  }
};

// The layer's output from run(), then, on a second workspace, route() once
// and gate_up, down and combine `reps` times on that routing output (the
// output poisoned before each): [0] run()'s output, [1 + r] repetition r's.
inline std::vector<std::vector<std::uint16_t>> outputs_of_steps_after_one_route(const MoeLayer& layer,
                                                                                 const MoeWeights& w,
                                                                                 const LayerInputs& in, int reps) {
  const MoeLayerShape& s = layer.shape();
  LayerRun fused(layer, in), steps(layer, in);
  layer.run(w, fused.args, nullptr);
  MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
  std::vector<std::vector<std::uint16_t>> outs{fused.download_out(s)};
  layer.route(steps.args, nullptr);
  for (int rep = 0; rep < reps; ++rep) {
    steps.out.fill_bytes(0xFF);  // NaN: a skipped item would show
    layer.gate_up(w, steps.args, nullptr);
    layer.down(w, steps.args, nullptr);
    layer.combine(steps.args, nullptr);
    MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
    outs.push_back(steps.download_out(s));
  }
  return outs;
}

inline ref::MoeReferenceArgs reference_args(const LayerWeights& w, const LayerInputs& in) {
  ref::MoeReferenceArgs a;
  const auto& s = w.shape;
  a.tokens = in.tokens, a.hidden = s.hidden, a.intermediate = s.intermediate, a.experts = s.experts;
  a.top_k = s.top_k;
  a.x = in.x.data();
  a.topk_ids = in.ids.data();
  a.topk_weights = in.gamma.data();
  a.w1 = w.w1.view();
  a.w2 = w.w2.view();
  a.b1 = w.bias_view(s.gate_up_bias, w.b1, w.b1f);
  a.b2 = w.bias_view(s.down_bias, w.b2, w.b2f);
  a.act = s.act;
  a.act_alpha = s.act_alpha;
  a.act_limit = s.act_limit;
  a.h_rounding = ref::HRounding::bf16;
  a.gamma_at = ref::GammaAt::down;
  return a;
}

// Up to `count` tokens spread over [0, T), always including the first and last.
inline std::vector<std::uint32_t> sample_tokens(std::uint32_t T, std::uint32_t count) {
  std::vector<std::uint32_t> t;
  if (T <= count) {
    for (std::uint32_t i = 0; i < T; ++i) t.push_back(i);
    return t;
  }
  for (std::uint32_t i = 0; i < count; ++i) t.push_back(static_cast<std::uint32_t>((std::uint64_t(T - 1) * i) / (count - 1)));
  return t;
}

// Published model shapes (one GPU, no TP/EP).
inline MoeLayerShape gpt_oss_120b_shape() {
  MoeLayerShape s;
  s.hidden = 2880, s.intermediate = 2880, s.experts = 128, s.top_k = 4;
  s.act = Activation::swiglu_oai, s.act_alpha = 1.702f, s.act_limit = 7.0f;
  s.gate_up_bias = BiasKind::bf16, s.down_bias = BiasKind::bf16;
  return s;
}
inline MoeLayerShape qwen3_30b_shape() {
  MoeLayerShape s;
  s.hidden = 2048, s.intermediate = 768, s.experts = 128, s.top_k = 8;
  s.act = Activation::silu_gated;
  return s;
}
inline MoeLayerShape mixtral_shape() {
  MoeLayerShape s;
  s.hidden = 4096, s.intermediate = 14336, s.experts = 8, s.top_k = 2;
  s.act = Activation::silu_gated;
  return s;
}

}  // namespace moejit::testing
