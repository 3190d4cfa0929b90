#pragma once
// Float64 CPU reference of one MoE layer, the contract the GPU tests check:
//
//   routing:  routed rows sorted by expert; within an expert by flat slot
//             index t * top_k + j ascending; topk_ids == -1 drops the slot.
//   gate_up:  Z[r] = X[t(r)] @ W1[e]^T + b1[e]          (N1 columns)
//             H[r] = act(Z[r])                           (h_cols columns)
//               none:        H = Z, h_cols = N1
//               silu_gated:  H[i] = silu(Z[i]) * Z[N1/2 + i], h_cols = N1/2
//               swiglu_oai:  g = min(Z[2i], limit), l = clamp(Z[2i+1], -limit, limit),
//                            H[i] = g * sigmoid(alpha g) * (l + 1), h_cols = N1/2
//             optionally H rounded to bf16 (what the GPU stores between the GEMMs).
//   down:     Y[r] = gamma[r] * (H[r] @ W2[e]^T + b2[e])   (D columns)
//   combine:  out[t] = sum over slots j = 0..top_k-1 (in that order, dropped
//             slots skipped) of Y[row(t, j)].
//
// Operands are the dequantized weights (exact: e2m1 x E8M0, e4m3 x E8M0 and
// bf16 are exact in fp32 for every finite weight a quantizer produces from finite
// fp32; per-token FP8 weight scales multiply the double dot product), X in bf16,
// router weights and bias as given; all products and sums in double.
// FP8 modes (MoeReferenceArgs::act_quant): the activations the kernels see are
// quantized too, and that quantization is part of the op: X rows (and H rows
// before down) go through the CPU quantizer (quantize_fp8_per_token_cpu /
// quantize_mxfp8_cpu, bit-identical to the GPU quantizers) and are dequantized
// exactly in double.
// Errors (bad shapes, expert ids out of [-1, E)) throw std::invalid_argument.
//
// Cost: each expert hit is dequantized once per call (N*K), then one dot
// product of length K per output element. For big shapes pass a sample of
// tokens; the work is spread over std::thread::hardware_concurrency() threads.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "moejit/formats.hpp"
#include "moejit/key.hpp"
#include "moejit/quant.hpp"
#include "moejit/types.hpp"
#include "reference/tensors.hpp"

namespace moejit::ref {

// ------------------------------------------------------------- operands ----

// Weights of one grouped GEMM, [E, N, K], in host memory.
struct WeightsView {
  QuantMode format = QuantMode::bf16;   // bf16, w4a16_mxfp4, mxfp8 or fp8_per_token
  std::uint32_t experts = 0, n = 0, k = 0;
  const std::uint16_t* bf16 = nullptr;   // bf16:        [E, N, K]
  const std::uint8_t* data = nullptr;    // w4a16_mxfp4: [E, N, K/2]; mxfp8, fp8_per_token: e4m3 [E, N, K]
  const std::uint8_t* scales = nullptr;  // w4a16_mxfp4, mxfp8: E8M0 [E, N, K/32]
  const float* f32_scales = nullptr;     // fp8_per_token: [E] (per_expert) or [E, N] (per_channel)
  WeightScale wscale = WeightScale::none;

  static WeightsView of_bf16(const std::uint16_t* w, std::uint32_t e, std::uint32_t n, std::uint32_t k) {
    WeightsView v;
    v.format = QuantMode::bf16;
    v.experts = e, v.n = n, v.k = k, v.bf16 = w;
    return v;
  }
  static WeightsView of_mxfp4(const std::uint8_t* data, const std::uint8_t* scales, std::uint32_t e,
                              std::uint32_t n, std::uint32_t k) {
    WeightsView v;
    v.format = QuantMode::w4a16_mxfp4;
    v.experts = e, v.n = n, v.k = k, v.data = data, v.scales = scales;
    return v;
  }
  static WeightsView of_mxfp4(const Mxfp4Weights& w) {
    return of_mxfp4(w.data.data(), w.scales.data(), w.experts, w.n, w.k);
  }
  static WeightsView of_mxfp8(const std::uint8_t* data, const std::uint8_t* scales, std::uint32_t e,
                              std::uint32_t n, std::uint32_t k) {
    WeightsView v;
    v.format = QuantMode::mxfp8;
    v.wscale = WeightScale::e8m0_block32;
    v.experts = e, v.n = n, v.k = k, v.data = data, v.scales = scales;
    return v;
  }
  static WeightsView of_fp8_per_token(const std::uint8_t* data, const float* scales, WeightScale ws,
                                      std::uint32_t e, std::uint32_t n, std::uint32_t k) {
    WeightsView v;
    v.format = QuantMode::fp8_per_token;
    v.wscale = ws;
    v.experts = e, v.n = n, v.k = k, v.data = data, v.f32_scales = scales;
    return v;
  }

  // The factor that multiplies the dot product of weight row (e, col): the
  // per-token FP8 weight scale, 1 for every other format.
  double row_scale(std::uint64_t e, std::uint32_t col) const {
    if (format != QuantMode::fp8_per_token) return 1.0;
    return wscale == WeightScale::per_channel ? static_cast<double>(f32_scales[e * n + col])
                                              : static_cast<double>(f32_scales[e]);
  }

  void check(const char* name) const {
    const std::string p = std::string("moe reference: ") + name;
    if (format == QuantMode::bf16) {
      if (bf16 == nullptr) throw std::invalid_argument(p + ": bf16 weights are null");
    } else if (format == QuantMode::w4a16_mxfp4 || format == QuantMode::mxfp8) {
      if (data == nullptr || scales == nullptr) throw std::invalid_argument(p + ": MX data/scales are null");
      if (k % 32 != 0) throw std::invalid_argument(p + ": k = " + std::to_string(k) + " is not a multiple of 32");
    } else if (format == QuantMode::fp8_per_token) {
      if (data == nullptr || f32_scales == nullptr) throw std::invalid_argument(p + ": FP8 data/scales are null");
      if (wscale != WeightScale::per_expert && wscale != WeightScale::per_channel)
        throw std::invalid_argument(p + ": fp8_per_token needs wscale per_expert or per_channel");
    } else {
      throw std::invalid_argument(p + ": unknown weight format");
    }
  }

  // Expert e as fp32 [N, K] (exact for bf16; for MXFP4 / MXFP8 exact unless a
  // value leaves the fp32 range, which quantized finite fp32 weights never do
  // except at the FLT_MAX edge; for fp8_per_token the bare e4m3 values: the
  // scale is row_scale()).
  void dequantize_expert(std::uint32_t e, std::vector<float>& out) const {
    const std::uint64_t nk = std::uint64_t{n} * k;
    out.resize(nk);
    if (format == QuantMode::bf16) {
      const std::uint16_t* src = bf16 + e * nk;
      for (std::uint64_t i = 0; i < nk; ++i) out[i] = bf16_to_float(src[i]);
    } else if (format == QuantMode::w4a16_mxfp4) {
      dequantize_mxfp4_cpu(data + e * nk / 2, scales + e * nk / 32, n, k, out.data());
    } else if (format == QuantMode::mxfp8) {
      const std::uint8_t* d = data + e * nk;
      const std::uint8_t* sc = scales + e * nk / 32;
      for (std::uint64_t i = 0; i < nk; ++i) out[i] = e4m3_to_float(d[i]) * e8m0_to_float(sc[i / 32]);
    } else {
      const std::uint8_t* d = data + e * nk;
      for (std::uint64_t i = 0; i < nk; ++i) out[i] = e4m3_to_float(d[i]);
    }
  }
};

// Optional bias [E, N] (fp32 or bf16).
struct BiasView {
  BiasKind kind = BiasKind::none;
  const float* f32 = nullptr;
  const std::uint16_t* bf16 = nullptr;
  static BiasView of_f32(const float* b) { return BiasView{BiasKind::f32, b, nullptr}; }
  static BiasView of_bf16(const std::uint16_t* b) { return BiasView{BiasKind::bf16, nullptr, b}; }
  double at(std::uint64_t e, std::uint32_t col, std::uint32_t n) const {
    switch (kind) {
      case BiasKind::f32: return f32[e * n + col];
      case BiasKind::bf16: return bf16_to_float(bf16[e * n + col]);
      default: return 0.0;
    }
  }
  void check(const char* name) const {
    if ((kind == BiasKind::f32 && f32 == nullptr) || (kind == BiasKind::bf16 && bf16 == nullptr))
      throw std::invalid_argument(std::string("moe reference: ") + name + " bias pointer is null");
  }
};

// ------------------------------------------------------------- routing -----

struct Routing {
  std::uint32_t tokens = 0, top_k = 0, experts = 0;
  std::vector<std::uint64_t> expert_offsets;  // [E + 1]: rows of expert e are [off[e], off[e+1])
  std::vector<std::uint32_t> row_token;       // [rows] t(r)
  std::vector<std::uint32_t> row_slot;        // [rows] j(r)
  std::vector<std::uint32_t> row_expert;      // [rows] e(r)
  std::vector<std::int64_t> row_of_slot;      // [T * top_k] -> r, or -1 when dropped
  std::uint64_t rows() const { return row_token.size(); }
  std::uint64_t expert_rows(std::uint32_t e) const { return expert_offsets[e + 1] - expert_offsets[e]; }
};

// Expert-sorted routed rows from topk_ids [T, top_k] (-1 = dropped).
inline Routing route(const std::int32_t* topk_ids, std::uint32_t tokens, std::uint32_t top_k,
                     std::uint32_t experts) {
  if (experts == 0) throw std::invalid_argument("moe reference: experts = 0");
  if (top_k == 0) throw std::invalid_argument("moe reference: top_k = 0");
  if (tokens != 0 && topk_ids == nullptr) throw std::invalid_argument("moe reference: topk_ids is null");
  Routing r;
  r.tokens = tokens, r.top_k = top_k, r.experts = experts;
  const std::uint64_t slots = std::uint64_t{tokens} * top_k;
  std::vector<std::uint64_t> count(experts, 0);
  for (std::uint64_t s = 0; s < slots; ++s) {
    const std::int32_t e = topk_ids[s];
    if (e < -1 || e >= static_cast<std::int64_t>(experts))
      throw std::invalid_argument("moe reference: topk_ids[" + std::to_string(s) + "] = " + std::to_string(e) +
                                  " outside [-1, " + std::to_string(experts) + ")");
    if (e >= 0) ++count[static_cast<std::uint32_t>(e)];
  }
  r.expert_offsets.assign(experts + 1, 0);
  for (std::uint32_t e = 0; e < experts; ++e) r.expert_offsets[e + 1] = r.expert_offsets[e] + count[e];
  const std::uint64_t rows = r.expert_offsets[experts];
  r.row_token.resize(rows), r.row_slot.resize(rows), r.row_expert.resize(rows);
  r.row_of_slot.assign(slots, -1);
  std::vector<std::uint64_t> next(r.expert_offsets.begin(), r.expert_offsets.end() - 1);
  for (std::uint64_t s = 0; s < slots; ++s) {
    const std::int32_t e = topk_ids[s];
    if (e < 0) continue;
    const std::uint64_t row = next[static_cast<std::uint32_t>(e)]++;
    r.row_token[row] = static_cast<std::uint32_t>(s / top_k);
    r.row_slot[row] = static_cast<std::uint32_t>(s % top_k);
    r.row_expert[row] = static_cast<std::uint32_t>(e);
    r.row_of_slot[s] = static_cast<std::int64_t>(row);
  }
  return r;
}

// ---------------------------------------------------------- activations ----

inline double silu(double x) { return x / (1.0 + std::exp(-x)); }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
// gpt-oss SwiGLU of one (gate, linear) pair.
inline double swiglu_oai(double g, double l, double alpha, double limit) {
  g = std::min(g, limit);
  l = std::clamp(l, -limit, limit);
  return g * sigmoid(alpha * g) * (l + 1.0);
}

// double -> bf16 -> double (RNE through fp32: the double-to-fp32 step rounds
// first; the double rounding it can cause is far below any test tolerance).
inline double round_bf16(double v) { return bf16_to_float(float_to_bf16(static_cast<float>(v))); }

// ------------------------------------------------------------ the layer ----

enum class HRounding : std::uint8_t { none, bf16 };
// Quantization of the activations (X before gate_up, H before down) in the FP8 modes.
enum class ActQuant : std::uint8_t { none, fp8_per_token, mxfp8 };

// One row of activations as the FP8 kernels see it: quantized by the CPU
// quantizer (bf16 input when `bf16_exact`, else fp32) and dequantized exactly.
inline void quantize_dequantize_row(ActQuant q, const double* in, std::uint32_t cols, bool bf16_exact,
                                    double* out) {
  if (q == ActQuant::none) {
    std::copy(in, in + cols, out);
    return;
  }
  std::vector<std::uint16_t> b16(cols);
  std::vector<float> f32(cols);
  for (std::uint32_t i = 0; i < cols; ++i) {
    f32[i] = static_cast<float>(in[i]);
    b16[i] = float_to_bf16(f32[i]);
  }
  std::vector<std::uint8_t> codes(cols);
  if (q == ActQuant::fp8_per_token) {
    float scale = 0.f;
    if (bf16_exact) quantize_fp8_per_token_cpu(b16.data(), 1, cols, codes.data(), &scale);
    else quantize_fp8_per_token_cpu(f32.data(), 1, cols, codes.data(), &scale);
    dequantize_fp8_per_token_cpu(codes.data(), &scale, 1, cols, out);
  } else {
    std::vector<std::uint8_t> scales(cols / 32);
    if (bf16_exact) quantize_mxfp8_cpu(b16.data(), 1, cols, codes.data(), scales.data());
    else quantize_mxfp8_cpu(f32.data(), 1, cols, codes.data(), scales.data());
    dequantize_mxfp8_cpu(codes.data(), scales.data(), 1, cols, out);
  }
}
enum class GammaAt : std::uint8_t { down, combine };  // where the router weight multiplies

struct MoeReferenceArgs {
  std::uint32_t tokens = 0, hidden = 0, intermediate = 0, experts = 0, top_k = 0;
  const std::uint16_t* x = nullptr;          // bf16 [T, D]
  const std::int32_t* topk_ids = nullptr;    // [T, top_k], -1 = dropped
  const float* topk_weights = nullptr;       // [T, top_k]; null = all 1.0
  WeightsView w1;                            // [E, N1, D]; N1 = 2I (gated) or I (act none)
  BiasView b1;                               // [E, N1]
  WeightsView w2;                            // [E, D, I]
  BiasView b2;                               // [E, D]
  Activation act = Activation::silu_gated;
  double act_alpha = 1.702, act_limit = 7.0;  // swiglu_oai only
  HRounding h_rounding = HRounding::bf16;
  GammaAt gamma_at = GammaAt::down;
  ActQuant act_quant = ActQuant::none;        // FP8 modes: quantize X and H as the kernels do

  std::uint32_t n1() const { return act == Activation::none ? intermediate : 2 * intermediate; }
  std::uint32_t h_cols() const { return intermediate; }

  void check() const {
    auto bad = [](const std::string& what) { throw std::invalid_argument("moe reference: " + what); };
    if (hidden == 0 || intermediate == 0 || experts == 0 || top_k == 0) bad("hidden/intermediate/experts/top_k must be > 0");
    if (tokens != 0 && (x == nullptr || topk_ids == nullptr)) bad("x or topk_ids is null");
    if (act != Activation::none && act != Activation::silu_gated && act != Activation::swiglu_oai) bad("unknown act");
    w1.check("w1");
    w2.check("w2");
    b1.check("b1");
    b2.check("b2");
    if (w1.experts != experts || w1.n != n1() || w1.k != hidden)
      bad("w1 is [" + std::to_string(w1.experts) + ", " + std::to_string(w1.n) + ", " + std::to_string(w1.k) +
          "], expected [" + std::to_string(experts) + ", " + std::to_string(n1()) + ", " + std::to_string(hidden) + "]");
    if (w2.experts != experts || w2.n != hidden || w2.k != h_cols())
      bad("w2 is [" + std::to_string(w2.experts) + ", " + std::to_string(w2.n) + ", " + std::to_string(w2.k) +
          "], expected [" + std::to_string(experts) + ", " + std::to_string(hidden) + ", " + std::to_string(h_cols()) + "]");
  }
  double gamma(std::uint32_t t, std::uint32_t j) const {
    return topk_weights == nullptr ? 1.0 : static_cast<double>(topk_weights[std::uint64_t{t} * top_k + j]);
  }
};

namespace detail {

// Runs fn(group_index, scratch) for every group on a few threads.
template <class Fn>
void parallel_groups(std::size_t groups, Fn fn) {
  const std::size_t hw = std::max<std::size_t>(1, std::thread::hardware_concurrency());
  const std::size_t nthreads = std::min(groups, hw);
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    std::vector<float> scratch;
    for (std::size_t g; (g = next.fetch_add(1)) < groups;) fn(g, scratch);
  };
  if (nthreads <= 1) {
    worker();
    return;
  }
  std::vector<std::thread> pool;
  for (std::size_t i = 0; i < nthreads; ++i) pool.emplace_back(worker);
  for (auto& th : pool) th.join();
}

// Splits ascending routed rows into runs of one expert: [begin, end) index pairs.
inline std::vector<std::pair<std::size_t, std::size_t>> expert_runs(const Routing& routing,
                                                                     const std::vector<std::uint64_t>& rows) {
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  for (std::size_t i = 0; i < rows.size();) {
    std::size_t j = i + 1;
    while (j < rows.size() && routing.row_expert[rows[j]] == routing.row_expert[rows[i]]) ++j;
    runs.emplace_back(i, j);
    i = j;
  }
  return runs;
}

inline double dot(const float* w, const double* x, std::uint32_t k) {
  double acc = 0.0;
  for (std::uint32_t i = 0; i < k; ++i) acc += static_cast<double>(w[i]) * x[i];
  return acc;
}

}  // namespace detail

// gate_up of the given routed rows (ascending row indices of `routing`):
// h = [rows.size(), args.h_cols()], rounded per args.h_rounding.
inline std::vector<double> gate_up_reference(const MoeReferenceArgs& args, const Routing& routing,
                                             const std::vector<std::uint64_t>& rows) {
  args.check();
  const std::uint32_t D = args.hidden, N1 = args.n1(), HC = args.h_cols();
  std::vector<double> h(rows.size() * std::uint64_t{HC});
  const auto runs = detail::expert_runs(routing, rows);
  detail::parallel_groups(runs.size(), [&](std::size_t g, std::vector<float>& w) {
    const std::uint32_t e = routing.row_expert[rows[runs[g].first]];
    args.w1.dequantize_expert(e, w);
    std::vector<double> x(D), z(N1);
    for (std::size_t i = runs[g].first; i < runs[g].second; ++i) {
      const std::uint32_t t = routing.row_token[rows[i]];
      for (std::uint32_t d = 0; d < D; ++d) x[d] = bf16_to_float(args.x[std::uint64_t{t} * D + d]);
      if (args.act_quant != ActQuant::none) quantize_dequantize_row(args.act_quant, x.data(), D, true, x.data());
      for (std::uint32_t n = 0; n < N1; ++n)
        z[n] = detail::dot(w.data() + std::uint64_t{n} * D, x.data(), D) * args.w1.row_scale(e, n) +
               args.b1.at(e, n, N1);
      double* out = h.data() + i * std::uint64_t{HC};
      for (std::uint32_t c = 0; c < HC; ++c) {
        double v;
        switch (args.act) {
          case Activation::silu_gated: v = silu(z[c]) * z[HC + c]; break;
          case Activation::swiglu_oai: v = swiglu_oai(z[2 * c], z[2 * c + 1], args.act_alpha, args.act_limit); break;
          default: v = z[c]; break;
        }
        out[c] = args.h_rounding == HRounding::bf16 ? round_bf16(v) : v;
      }
    }
  });
  return h;
}

// down of the given routed rows from h [rows.size(), h_cols] (any source: the
// reference's own H or the GPU's H converted to double): y = [rows.size(), D],
// multiplied by the router weight when args.gamma_at == GammaAt::down. h is
// used as given: in the FP8 modes pass the quantized-dequantized H
// (quantize_dequantize_row; moe_reference does).
inline std::vector<double> down_reference(const MoeReferenceArgs& args, const Routing& routing,
                                          const std::vector<std::uint64_t>& rows, const double* h) {
  args.check();
  const std::uint32_t D = args.hidden, HC = args.h_cols();
  std::vector<double> y(rows.size() * std::uint64_t{D});
  const auto runs = detail::expert_runs(routing, rows);
  detail::parallel_groups(runs.size(), [&](std::size_t g, std::vector<float>& w) {
    const std::uint32_t e = routing.row_expert[rows[runs[g].first]];
    args.w2.dequantize_expert(e, w);
    for (std::size_t i = runs[g].first; i < runs[g].second; ++i) {
      const std::uint64_t r = rows[i];
      const double gamma = args.gamma_at == GammaAt::down ? args.gamma(routing.row_token[r], routing.row_slot[r]) : 1.0;
      const double* hr = h + i * std::uint64_t{HC};
      for (std::uint32_t d = 0; d < D; ++d)
        y[i * std::uint64_t{D} + d] =
            gamma * (detail::dot(w.data() + std::uint64_t{d} * HC, hr, HC) * args.w2.row_scale(e, d) +
                     args.b2.at(e, d, D));
    }
  });
  return y;
}

struct MoeReferenceResult {
  Routing routing;
  std::vector<std::uint32_t> tokens;  // tokens computed, ascending
  std::vector<std::uint64_t> rows;    // their routed rows, ascending
  std::uint32_t h_cols = 0, hidden = 0;
  std::vector<double> h;    // [rows.size(), h_cols] (after h_rounding; before FP8 quantization)
  std::vector<double> y;    // [rows.size(), hidden]
  std::vector<double> out;  // [tokens.size(), hidden]

  // Position of routed row r in `rows`, or -1.
  std::int64_t index_of_row(std::uint64_t r) const {
    const auto it = std::lower_bound(rows.begin(), rows.end(), r);
    return it != rows.end() && *it == r ? it - rows.begin() : -1;
  }
  // Position of token t in `tokens`, or -1.
  std::int64_t index_of_token(std::uint32_t t) const {
    const auto it = std::lower_bound(tokens.begin(), tokens.end(), t);
    return it != tokens.end() && *it == t ? it - tokens.begin() : -1;
  }
};

// The whole layer for `tokens` (empty = all tokens; otherwise any subset,
// duplicates ignored). Tokens whose slots are all dropped get out = 0.
inline MoeReferenceResult moe_reference(const MoeReferenceArgs& args, std::vector<std::uint32_t> tokens = {}) {
  args.check();
  MoeReferenceResult res;
  res.routing = route(args.topk_ids, args.tokens, args.top_k, args.experts);
  if (tokens.empty()) {
    tokens.resize(args.tokens);
    for (std::uint32_t t = 0; t < args.tokens; ++t) tokens[t] = t;
  }
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  for (std::uint32_t t : tokens)
    if (t >= args.tokens)
      throw std::invalid_argument("moe reference: token " + std::to_string(t) + " >= tokens " + std::to_string(args.tokens));
  res.tokens = tokens;
  for (std::uint32_t t : tokens)
    for (std::uint32_t j = 0; j < args.top_k; ++j) {
      const std::int64_t r = res.routing.row_of_slot[std::uint64_t{t} * args.top_k + j];
      if (r >= 0) res.rows.push_back(static_cast<std::uint64_t>(r));
    }
  std::sort(res.rows.begin(), res.rows.end());
  res.h_cols = args.h_cols();
  res.hidden = args.hidden;
  res.h = gate_up_reference(args, res.routing, res.rows);
  if (args.act_quant == ActQuant::none) {
    res.y = down_reference(args, res.routing, res.rows, res.h.data());
  } else {
    std::vector<double> hq(res.h.size());
    for (std::size_t i = 0; i < res.rows.size(); ++i)
      quantize_dequantize_row(args.act_quant, res.h.data() + i * res.h_cols, res.h_cols,
                              args.h_rounding == HRounding::bf16, hq.data() + i * res.h_cols);
    res.y = down_reference(args, res.routing, res.rows, hq.data());
  }
  const std::uint32_t D = args.hidden;
  res.out.assign(tokens.size() * std::uint64_t{D}, 0.0);
  for (std::size_t ti = 0; ti < tokens.size(); ++ti) {
    double* o = res.out.data() + ti * std::uint64_t{D};
    for (std::uint32_t j = 0; j < args.top_k; ++j) {  // slot order
      const std::int64_t r = res.routing.row_of_slot[std::uint64_t{tokens[ti]} * args.top_k + j];
      if (r < 0) continue;
      const double gamma = args.gamma_at == GammaAt::combine ? args.gamma(tokens[ti], j) : 1.0;
      const double* y = res.y.data() + res.index_of_row(static_cast<std::uint64_t>(r)) * std::uint64_t{D};
      for (std::uint32_t d = 0; d < D; ++d) o[d] += gamma * y[d];
    }
  }
  return res;
}

}  // namespace moejit::ref
