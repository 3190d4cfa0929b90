#pragma once
// FP8 test data (weights in e4m3 with E8M0 or fp32 scales, activations
// quantized by the CPU quantizers) and host-built routing metadata, for the FP8
// grouped GEMM, layer and wgrad GPU tests.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "driver/device_buffer.hpp"
#include "gpu/layer_fixture.hpp"
#include "moejit/formats.hpp"
#include "moejit/quant.hpp"
#include "reference/moe_reference.hpp"

namespace moejit::testing {

// e4m3 weights [E, N, K] + scales in host memory (and on the device).
struct Fp8Weights {
  QuantMode format = QuantMode::mxfp8;
  WeightScale wscale = WeightScale::e8m0_block32;
  std::uint32_t experts = 0, n = 0, k = 0;
  std::vector<std::uint8_t> data;    // e4m3 [E, N, K]
  std::vector<std::uint8_t> e8m0;    // mxfp8: [E, N, K/32]
  std::vector<float> f32;            // fp8_per_token: [E] or [E, N]
  driver::DeviceBuffer d_data, d_scales;

  ref::WeightsView view() const {
    return format == QuantMode::mxfp8
               ? ref::WeightsView::of_mxfp8(data.data(), e8m0.data(), experts, n, k)
               : ref::WeightsView::of_fp8_per_token(data.data(), f32.data(), wscale, experts, n, k);
  }
  void upload() {
    d_data = driver::DeviceBuffer(std::max<std::size_t>(16, data.size()));
    d_data.upload(data.data(), data.size());
    if (format == QuantMode::mxfp8) {
      d_scales = driver::DeviceBuffer(std::max<std::size_t>(16, e8m0.size()));
      d_scales.upload(e8m0.data(), e8m0.size());
    } else {
      d_scales = driver::DeviceBuffer(std::max<std::size_t>(16, f32.size() * 4));
      d_scales.upload(f32.data(), f32.size() * 4);
    }
  }
};

// Random e4m3 codes with magnitudes in [0.25, 3.75] (exponent fields 5..8, any
// mantissa, random sign; never NaN), scaled so that products with N(0,1)
// activations over K stay O(1): E8M0 in {2^-b-1, 2^-b, 2^-b+1} per block, or
// fp32 per expert / per channel around 2^-b, b = round(log2(1.5 sqrt(K))).
inline Fp8Weights random_fp8_weights(QuantMode q, WeightScale ws, std::uint32_t E, std::uint32_t N,
                                     std::uint32_t K, std::uint64_t seed) {
  Fp8Weights w;
  w.format = q, w.wscale = ws, w.experts = E, w.n = N, w.k = K;
  const std::uint64_t elems = std::uint64_t(E) * N * K;
  w.data.resize(elems);
  parallel_fill(elems, seed, [&](std::size_t b, std::size_t e, std::uint64_t s) {
    for (std::size_t i = b; i < e; ++i) {
      const std::uint64_t r = splitmix64(s);
      const std::uint8_t exp_field = static_cast<std::uint8_t>(5 + (r & 3));
      w.data[i] = static_cast<std::uint8_t>(((r >> 8) & 0x80) | (exp_field << 3) | ((r >> 16) & 7));
    }
  });
  const int b = static_cast<int>(std::lround(std::log2(1.5 * std::sqrt(static_cast<double>(K)))));
  if (q == QuantMode::mxfp8) {
    w.e8m0.resize(elems / 32);
    parallel_fill(w.e8m0.size(), seed + 1, [&](std::size_t lo, std::size_t hi, std::uint64_t s) {
      for (std::size_t i = lo; i < hi; ++i) w.e8m0[i] = static_cast<std::uint8_t>(127 - b - 1 + splitmix64(s) % 3);
    });
  } else {
    w.f32.resize(ws == WeightScale::per_channel ? std::size_t(E) * N : E);
    std::uint64_t s = seed + 2;
    for (auto& v : w.f32)
      v = std::ldexp(1.0f + static_cast<float>(splitmix64(s) % 1000) / 1000.0f, -b);
  }
  return w;
}

// Activations [rows, cols] as the FP8 kernels read them, from bf16 by the CPU quantizer.
struct Fp8Acts {
  QuantMode format = QuantMode::mxfp8;
  std::uint32_t rows = 0, cols = 0;
  std::vector<std::uint8_t> codes;  // [rows, cols]
  std::vector<std::uint8_t> e8m0;   // mxfp8 [rows, cols/32]
  std::vector<float> f32;           // fp8_per_token [rows]
  driver::DeviceBuffer d_codes, d_scales;

  static Fp8Acts quantize(QuantMode q, const std::uint16_t* bf16, std::uint32_t rows, std::uint32_t cols) {
    Fp8Acts a;
    a.format = q, a.rows = rows, a.cols = cols;
    a.codes.resize(std::size_t(rows) * cols);
    if (q == QuantMode::mxfp8) {
      a.e8m0.resize(std::size_t(rows) * cols / 32);
      quantize_mxfp8_cpu(bf16, rows, cols, a.codes.data(), a.e8m0.data());
    } else {
      a.f32.resize(rows);
      quantize_fp8_per_token_cpu(bf16, rows, cols, a.codes.data(), a.f32.data());
    }
    return a;
  }
  void upload() {
    d_codes = driver::DeviceBuffer(std::max<std::size_t>(16, codes.size()));
    d_codes.upload(codes.data(), codes.size());
    if (format == QuantMode::mxfp8) {
      d_scales = driver::DeviceBuffer(std::max<std::size_t>(16, e8m0.size()));
      d_scales.upload(e8m0.data(), e8m0.size());
    } else {
      d_scales = driver::DeviceBuffer(std::max<std::size_t>(16, f32.size() * 4));
      d_scales.upload(f32.data(), f32.size() * 4);
    }
  }
  // Row r dequantized exactly.
  std::vector<double> dequantized_row(std::uint32_t r) const {
    std::vector<double> out(cols);
    if (format == QuantMode::mxfp8)
      dequantize_mxfp8_cpu(codes.data() + std::size_t(r) * cols, e8m0.data() + std::size_t(r) * cols / 32, 1, cols,
                           out.data());
    else
      dequantize_fp8_per_token_cpu(codes.data() + std::size_t(r) * cols, &f32[r], 1, cols, out.data());
    return out;
  }
};

// Routing metadata of the reference routing (rows sorted by expert, slot order
// within an expert), and the m-tile list for tile height bm, on the device.
struct HostRouting {
  ref::Routing routing;
  std::vector<std::int32_t> sorted_route, tile_expert, tile_begin, tile_end, expert_offsets;
  std::int32_t num_tiles = 0;
  std::uint32_t max_tiles = 0;
  driver::DeviceBuffer d_sorted, d_te, d_tb, d_tend, d_nt, d_offsets;

  HostRouting(const std::vector<std::int32_t>& ids, std::uint32_t T, std::uint32_t top_k, std::uint32_t E, int bm)
      : routing(ref::route(ids.data(), T, top_k, E)) {
    const std::uint64_t R = routing.rows();
    for (std::uint64_t r = 0; r < R; ++r)
      sorted_route.push_back(static_cast<std::int32_t>(routing.row_token[r] * top_k + routing.row_slot[r]));
    for (std::uint32_t e = 0; e < E; ++e) {
      const std::uint64_t b = routing.expert_offsets[e], end = routing.expert_offsets[e + 1];
      for (std::uint64_t r = b; r < end; r += bm) {
        tile_expert.push_back(static_cast<std::int32_t>(e));
        tile_begin.push_back(static_cast<std::int32_t>(r));
        tile_end.push_back(static_cast<std::int32_t>(end));
      }
    }
    num_tiles = static_cast<std::int32_t>(tile_expert.size());
    // The launch bound the layer uses (more than the tiles that exist: the rest exit).
    max_tiles = static_cast<std::uint32_t>(R / bm + std::min<std::uint64_t>(R, E));
    max_tiles = std::max<std::uint32_t>(max_tiles, static_cast<std::uint32_t>(num_tiles));
    auto up = [](driver::DeviceBuffer& d, const std::vector<std::int32_t>& v) {
      d = driver::DeviceBuffer(std::max<std::size_t>(16, v.size() * 4));
      d.fill_bytes(0xFF);
      d.upload(v.data(), v.size() * 4);
    };
    up(d_sorted, sorted_route);
    up(d_te, tile_expert);
    up(d_tb, tile_begin);
    up(d_tend, tile_end);
    up(d_nt, {num_tiles});
    for (std::uint32_t e = 0; e <= E; ++e) expert_offsets.push_back(static_cast<std::int32_t>(routing.expert_offsets[e]));
    up(d_offsets, expert_offsets);
  }
};

// topk ids [T, top_k]: distinct experts per token (uniform), all on one expert,
// or all on the last expert.
inline std::vector<std::int32_t> random_ids(std::uint32_t T, std::uint32_t top_k, std::uint32_t E, Routing how,
                                            ref::TestRng& rng) {
  std::vector<std::int32_t> ids(std::size_t(T) * top_k);
  std::vector<std::int32_t> perm(E);
  for (std::uint32_t t = 0; t < T; ++t) {
    for (std::uint32_t e = 0; e < E; ++e) perm[e] = static_cast<std::int32_t>(e);
    for (std::uint32_t j = 0; j < top_k; ++j) {
      const auto pick = static_cast<std::uint32_t>(rng.integer(j, E - 1));
      std::swap(perm[j], perm[pick]);
      std::int32_t e = perm[j];
      if (how == Routing::one_expert) e = static_cast<std::int32_t>(E / 3);
      if (how == Routing::last_expert_only) e = static_cast<std::int32_t>(E - 1);
      if (how == Routing::with_drops && rng.integer(0, 3) == 0) e = -1;
      ids[std::size_t(t) * top_k + j] = e;
    }
  }
  return ids;
}

}  // namespace moejit::testing

namespace moejit::testing {

// An FP8 layer's weights (e4m3 + scales) and biases, on the host and the device.
struct Fp8LayerWeights {
  MoeLayerShape shape;
  QuantMode quant = QuantMode::mxfp8;
  WeightScale wscale = WeightScale::e8m0_block32;
  Fp8Weights w1, w2;
  std::vector<std::uint16_t> b1, b2;
  std::vector<float> b1f, b2f;
  driver::DeviceBuffer db1, db2;

  std::uint32_t n1() const { return shape.act == Activation::none ? shape.intermediate : 2 * shape.intermediate; }

  static std::unique_ptr<Fp8LayerWeights> make(const MoeLayerShape& s, QuantMode q, WeightScale ws, std::uint64_t seed) {
    auto l = std::make_unique<Fp8LayerWeights>();
    l->shape = s, l->quant = q, l->wscale = ws;
    l->w1 = random_fp8_weights(q, ws, s.experts, l->n1(), s.hidden, seed);
    l->w2 = random_fp8_weights(q, ws, s.experts, s.hidden, s.intermediate, seed + 7);
    l->w1.upload();
    l->w2.upload();
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
    return l;
  }

  MoeWeights device() const {
    MoeWeights w;
    w.w1 = w1.d_data.get();
    w.w1_scales = w1.d_scales.get();
    w.w2 = w2.d_data.get();
    w.w2_scales = w2.d_scales.get();
    w.b1 = db1.get();
    w.b2 = db2.get();
    return w;
  }

  ref::MoeReferenceArgs reference_args(const LayerInputs& in) const {
    ref::MoeReferenceArgs a;
    const auto& s = shape;
    a.tokens = in.tokens, a.hidden = s.hidden, a.intermediate = s.intermediate, a.experts = s.experts;
    a.top_k = s.top_k;
    a.x = in.x.data();
    a.topk_ids = in.ids.data();
    a.topk_weights = in.gamma.data();
    a.w1 = w1.view();
    a.w2 = w2.view();
    auto bias = [](BiasKind k, const std::vector<std::uint16_t>& b16, const std::vector<float>& b32) {
      if (k == BiasKind::bf16) return ref::BiasView::of_bf16(b16.data());
      if (k == BiasKind::f32) return ref::BiasView::of_f32(b32.data());
      return ref::BiasView{};
    };
    a.b1 = bias(s.gate_up_bias, b1, b1f);
    a.b2 = bias(s.down_bias, b2, b2f);
    a.act = s.act;
    a.act_alpha = s.act_alpha;
    a.act_limit = s.act_limit;
    a.h_rounding = ref::HRounding::bf16;
    a.gamma_at = ref::GammaAt::down;
    a.act_quant = quant == QuantMode::mxfp8 ? ref::ActQuant::mxfp8 : ref::ActQuant::fp8_per_token;
    return a;
  }
};

}  // namespace moejit::testing
