// The FP8 grouped GEMMs (mxfp8, fp8_per_token) on their own against the float64
// reference over the same quantized operands: real model shapes and odd ones,
// zero-row experts, one expert with all rows, E = 256 with rows only on expert
// 255, E8M0 edge codes (2^-127 and NaN) inside real blocks.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "driver/cuda_api.hpp"
#include "gpu/fp8_fixture.hpp"
#include "gpu/gpu_runtime.hpp"
#include "moejit/bucketing.hpp"
#include "ops/fp8_gemm_config.hpp"
#include "ops/fp8_grouped_gemm.hpp"
#include "ops/moe_keys.hpp"

using namespace moejit;
using namespace moejit::testing;

namespace {

const std::uint16_t kDummy = 0;  // stands in for the weights of the GEMM not under test

struct GemmResult {
  double err = 0;              // relative Frobenius error over entries finite in both
  std::size_t nan_mismatch = 0;  // entries NaN in exactly one of GPU / reference
  std::size_t nan_ref = 0;
  std::vector<double> ref;     // sampled rows
  std::vector<double> got;
  std::vector<std::uint64_t> rows;
  std::uint32_t cols = 0;
};

void compare(GemmResult& res) {
  long double num = 0, den = 0;
  for (std::size_t i = 0; i < res.ref.size(); ++i) {
    const bool rn = std::isnan(res.ref[i]), gn = std::isnan(res.got[i]);
    res.nan_ref += rn;
    if (rn != gn) ++res.nan_mismatch;
    if (rn || gn) continue;
    if (!std::isfinite(res.got[i])) {
      num = INFINITY;
      continue;
    }
    num += (long double)(res.got[i] - res.ref[i]) * (res.got[i] - res.ref[i]);
    den += (long double)res.ref[i] * res.ref[i];
  }
  res.err = den == 0 ? (num == 0 ? 0.0 : INFINITY) : static_cast<double>(std::sqrt(num / den));
}

struct Problem {
  OpKind op = OpKind::gate_up;
  QuantMode q = QuantMode::mxfp8;
  WeightScale ws = WeightScale::e8m0_block32;
  MoeLayerShape shape;
  std::uint32_t T = 1;
  Routing how = Routing::uniform;
  std::uint32_t sample_rows = 48;
  // Elements past each output row (out_row_stride = columns + out_pad): an
  // odd stride leaves rows that are not 16-byte aligned, so the kernels must
  // take their store path for unaligned outputs.
  std::uint32_t out_pad = 0;
  // down only: write Y in f32 (the kernels' other Y dtype) instead of the
  // layer's bf16.
  bool out_f32 = false;
  // Hooks to plant edge codes before upload.
  std::function<void(Fp8Acts&, Fp8Weights&, const HostRouting&)> edit;
};

// Weights are large: one set per (name, mode, op).
Fp8Weights& weights_for(const std::string& name, const Problem& p, std::uint32_t n, std::uint32_t k, bool fresh) {
  static std::map<std::string, std::unique_ptr<Fp8Weights>> cache;
  const std::string id = name + "/" + std::string(to_string(p.q)) + "/" + std::string(to_string(p.ws)) + "/" +
                         std::string(to_string(p.op));
  auto& slot = cache[id];
  if (!slot || fresh) {
    slot = std::make_unique<Fp8Weights>(random_fp8_weights(p.q, p.ws, p.shape.experts, n, k,
                                                           ref::process_seed() ^ std::hash<std::string>{}(id)));
    if (!p.edit) slot->upload();
  }
  return *slot;
}

GemmResult run_problem(const std::string& name, const Problem& p) {
  const MoeLayerShape& s = p.shape;
  SpecKey key = ops::gemm_key(p.op, s, p.q, p.ws, round_up_tokens(p.T), Target{});
  if (p.out_f32) {
    REQUIRE(p.op == OpKind::down);
    key.out_dtype = DType::f32;
  }
  const auto cfg = ops::choose_fp8_config(key);
  const bool gate_up = p.op == OpKind::gate_up;
  const std::uint32_t N = key.n, K = key.k;
  const std::uint32_t n_out = gate_up && s.act != Activation::none ? N / 2 : N;
  ref::TestRng rng(p.T * 31 + K);
  const auto ids = random_ids(p.T, s.top_k, s.experts, p.how, rng);
  HostRouting hr(ids, p.T, s.top_k, s.experts, cfg.bm());
  const std::uint64_t R = hr.routing.rows();

  Fp8Weights& w = weights_for(name, p, N, K, static_cast<bool>(p.edit));
  const std::uint32_t a_rows = gate_up ? p.T : static_cast<std::uint32_t>(R);
  const auto a_bf16 = ref::random_bf16(std::size_t(a_rows) * K, rng, 1.0);
  Fp8Acts acts = Fp8Acts::quantize(p.q, a_bf16.data(), a_rows, K);
  if (p.edit) {
    p.edit(acts, w, hr);
    w.upload();
  }
  acts.upload();

  const BiasKind bk = gate_up ? s.gate_up_bias : s.down_bias;
  std::vector<std::uint16_t> b16;
  std::vector<float> b32;
  driver::DeviceBuffer dbias;
  if (bk == BiasKind::bf16) {
    b16 = ref::random_bf16(std::size_t(s.experts) * N, rng, 0.5);
    dbias = driver::DeviceBuffer(b16.size() * 2);
    dbias.upload(b16.data(), b16.size() * 2);
  } else if (bk == BiasKind::f32) {
    b32 = ref::random_f32(std::size_t(s.experts) * N, rng, 0.5);
    dbias = driver::DeviceBuffer(b32.size() * 4);
    dbias.upload(b32.data(), b32.size() * 4);
  }
  std::vector<float> gamma(std::size_t(p.T) * s.top_k);
  for (auto& g : gamma) g = static_cast<float>(rng.uniform(0.05, 1.0));
  driver::DeviceBuffer dgamma(std::max<std::size_t>(16, gamma.size() * 4));
  dgamma.upload(gamma.data(), gamma.size() * 4);
  const std::size_t out_elem = key.out_dtype == DType::f32 ? 4 : 2;
  const std::size_t out_stride = n_out + p.out_pad;
  driver::DeviceBuffer dout(std::max<std::size_t>(16, R * out_stride * out_elem));
  dout.fill_bytes(0xFF);

  ops::Fp8GemmArgs a;
  a.a = acts.d_codes.get();
  a.a_row_stride = K;
  a.a_scales = acts.d_scales.get();
  a.w = w.d_data.get();
  a.w_scales = w.d_scales.get();
  a.bias = dbias.get();
  a.gamma = gate_up ? 0 : dgamma.get();
  a.out = dout.get();
  a.out_row_stride = static_cast<std::int64_t>(out_stride);
  a.sorted_route = hr.d_sorted.get();
  a.tile_expert = hr.d_te.get();
  a.tile_row_begin = hr.d_tb.get();
  a.tile_row_end = hr.d_tend.get();
  a.num_tiles = hr.d_nt.get();
  a.expert_offsets = hr.d_offsets.get();
  a.max_tiles = hr.max_tiles;
  const KernelRef k = gpu_runtime().get(key);
  ops::launch_fp8_grouped_gemm(k, key, ops::choose_fp8_config(key), a, nullptr);
  MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());

  GemmResult res;
  res.cols = n_out;
  // Sampled rows: spread over [0, R), always first and last.
  for (auto r : sample_tokens(static_cast<std::uint32_t>(R), p.sample_rows)) res.rows.push_back(r);
  if (res.rows.empty()) return res;
  ref::MoeReferenceArgs ra;
  ra.tokens = p.T, ra.experts = s.experts, ra.top_k = s.top_k;
  ra.topk_ids = ids.data();
  ra.topk_weights = gamma.data();
  ra.act = gate_up ? s.act : Activation::none;
  ra.act_alpha = s.act_alpha, ra.act_limit = s.act_limit;
  ra.act_quant = p.q == QuantMode::mxfp8 ? ref::ActQuant::mxfp8 : ref::ActQuant::fp8_per_token;
  ra.h_rounding = ref::HRounding::bf16;
  const ref::BiasView bias = bk == BiasKind::bf16 ? ref::BiasView::of_bf16(b16.data())
                             : bk == BiasKind::f32 ? ref::BiasView::of_f32(b32.data())
                                                   : ref::BiasView{};
  if (gate_up) {
    ra.hidden = K, ra.intermediate = n_out;
    ra.x = a_bf16.data();
    ra.w1 = w.view();
    ra.b1 = bias;
    ra.w2 = ref::WeightsView::of_bf16(&kDummy, s.experts, K, n_out);
    if (p.edit) {
      // Planted scale codes live in the quantized X: let the reference read
      // exactly those (dequantized), not a fresh quantization of X.
      ra.act_quant = ref::ActQuant::none;
      std::vector<double> xd(std::size_t(p.T) * K);
      for (std::uint32_t t = 0; t < p.T; ++t) {
        const auto row = acts.dequantized_row(t);
        std::copy(row.begin(), row.end(), xd.begin() + std::size_t(t) * K);
      }
      // gate_up_reference reads bf16 X; the edge test uses act none and a
      // direct loop instead.
      for (auto r : res.rows) {
        const std::uint32_t t = hr.routing.row_token[r], e = hr.routing.row_expert[r];
        std::vector<float> wf;
        ra.w1.dequantize_expert(e, wf);
        for (std::uint32_t n = 0; n < N; ++n) {
          double acc = 0;
          for (std::uint32_t kk = 0; kk < K; ++kk) acc += double(wf[std::size_t(n) * K + kk]) * xd[std::size_t(t) * K + kk];
          res.ref.push_back(ref::round_bf16(acc));
        }
      }
    } else {
      res.ref = ref::gate_up_reference(ra, hr.routing, res.rows);
    }
    std::vector<std::uint16_t> row(n_out);
    for (auto r : res.rows) {
      dout.download(row.data(), n_out * 2, r * out_stride * 2);
      for (auto v : row) res.got.push_back(bf16_to_float(v));
    }
  } else {
    ra.hidden = N, ra.intermediate = K;
    ra.w1 = ref::WeightsView::of_bf16(&kDummy, s.experts, s.act == Activation::none ? K : 2 * K, N);
    ra.act = s.act;
    ra.w2 = w.view();
    ra.b2 = bias;
    ra.x = a_bf16.data();  // unused by down_reference
    std::vector<double> hq;
    for (auto r : res.rows) {
      const auto row = acts.dequantized_row(static_cast<std::uint32_t>(r));
      hq.insert(hq.end(), row.begin(), row.end());
    }
    res.ref = ref::down_reference(ra, hr.routing, res.rows, hq.data());
    if (key.out_dtype == DType::f32) {
      std::vector<float> row(N);
      for (auto r : res.rows) {
        dout.download(row.data(), N * 4, r * out_stride * 4);
        for (auto v : row) res.got.push_back(v);
      }
    } else {
      std::vector<std::uint16_t> row(N);
      for (auto r : res.rows) {
        dout.download(row.data(), N * 2, r * out_stride * 2);
        for (auto v : row) res.got.push_back(bf16_to_float(v));
      }
    }
  }
  compare(res);
  return res;
}

void check_problem(const std::string& name, const Problem& p) {
  INFO(name << " " << to_string(p.op) << " " << to_string(p.q) << " " << to_string(p.ws) << " T=" << p.T);
  const GemmResult r = run_problem(name, p);
  std::printf("  %-22s %-7s %-13s %-12s T=%-5u out=%-4s rows=%-4zu rel.err=%.2e nan_mismatch=%zu\n", name.c_str(),
              std::string(to_string(p.op)).c_str(), std::string(to_string(p.q)).c_str(),
              std::string(to_string(p.ws)).c_str(), p.T, p.op == OpKind::down && p.out_f32 ? "f32" : "bf16",
              r.rows.size(), r.err, r.nan_mismatch);
  CHECK(r.nan_mismatch == 0);
  CHECK(r.nan_ref == 0);
  CHECK(r.err < 1e-2);
}

MoeLayerShape deepseek_e256() {
  MoeLayerShape s;
  s.hidden = 7168, s.intermediate = 2048, s.experts = 256, s.top_k = 8;
  s.act = Activation::silu_gated;
  return s;
}
MoeLayerShape odd_shape() {  // K = 32 for gate_up, N = 768 (act none)
  MoeLayerShape s;
  s.hidden = 32, s.intermediate = 768, s.experts = 8, s.top_k = 2;
  s.act = Activation::none;
  s.gate_up_bias = BiasKind::f32;
  return s;
}

}  // namespace

TEST_CASE("gpu: fp8_per_token grouped GEMM matches the float64 reference", "[gpu][fp8][fp8_per_token]") {
  const QuantMode q = QuantMode::fp8_per_token;
  for (WeightScale ws : {WeightScale::per_expert, WeightScale::per_channel}) {
    for (OpKind op : {OpKind::gate_up, OpKind::down}) {
      for (std::uint32_t T : {1u, 64u, 2049u}) {
        Problem p{op, q, ws, gpt_oss_120b_shape(), T};
        check_problem("gpt-oss-120b", p);
      }
      Problem pq{op, q, ws, qwen3_30b_shape(), 300};
      pq.shape.gate_up_bias = BiasKind::f32;
      check_problem("qwen3-30b-a3b", pq);
      Problem po{op, q, ws, odd_shape(), 300};
      check_problem("odd K=32/N=768", po);
    }
  }
  // Decode buckets (the decode kernel): K = 32 (one 64-k unit, half of it past
  // K), and one expert with 64 rows (eight 8-row tiles of one expert).
  for (std::uint32_t T : {1u, 8u}) {
    Problem pd{OpKind::gate_up, q, WeightScale::per_channel, odd_shape(), T};
    check_problem("odd K=32/N=768, decode", pd);
  }
  Problem one_dec{OpKind::down, q, WeightScale::per_expert, qwen3_30b_shape(), 8, Routing::one_expert};
  check_problem("one expert, 64 rows, decode", one_dec);
  // Routing edge cases.
  Problem z{OpKind::gate_up, q, WeightScale::per_channel, qwen3_30b_shape(), 3};  // 24 rows over 128 experts
  check_problem("zero-row experts", z);
  Problem one{OpKind::down, q, WeightScale::per_expert, qwen3_30b_shape(), 300, Routing::one_expert};
  check_problem("one expert, all rows", one);
  Problem last{OpKind::down, q, WeightScale::per_channel, deepseek_e256(), 33, Routing::last_expert_only, 40};
  check_problem("E=256 expert 255 only", last);
  // Output rows that are not 16-byte aligned (bf16 stride + 2, fp32 + 1),
  // past 24 rows per expert (the warp-specialized kernel) and at decode.
  for (OpKind op : {OpKind::gate_up, OpKind::down})
    for (std::uint32_t T : {8u, 2049u}) {
      Problem pu{op, q, WeightScale::per_channel, gpt_oss_120b_shape(), T};
      pu.out_pad = 2;
      check_problem("unaligned out rows", pu);
    }
  // f32 Y (the other dtype down writes) on each kernel: decode, the
  // mma.sync tiles, the warp-specialized one; aligned and unaligned rows.
  for (std::uint32_t T : {1u, 64u, 2049u})
    for (std::uint32_t pad : {0u, 1u}) {
      Problem pf{OpKind::down, q, WeightScale::per_expert, gpt_oss_120b_shape(), T};
      pf.out_f32 = true;
      pf.out_pad = pad;
      check_problem(pad ? "f32 Y, unaligned rows" : "f32 Y", pf);
    }
}

TEST_CASE("gpu: mxfp8 grouped GEMM matches the float64 reference", "[gpu][fp8][mxfp8]") {
  const QuantMode q = QuantMode::mxfp8;
  const WeightScale ws = WeightScale::e8m0_block32;
  for (OpKind op : {OpKind::gate_up, OpKind::down}) {
    for (std::uint32_t T : {1u, 64u, 2049u}) check_problem("gpt-oss-120b", Problem{op, q, ws, gpt_oss_120b_shape(), T});
    check_problem("qwen3-30b-a3b", Problem{op, q, ws, qwen3_30b_shape(), 300});
    check_problem("odd K=32/N=768", Problem{op, q, ws, odd_shape(), 300});
  }
  // Past 24 rows per expert (the warp-specialized kernel): silu_gated with
  // an f32 bias, and one expert holding every row.
  for (OpKind op : {OpKind::gate_up, OpKind::down}) {
    Problem pq{op, q, ws, qwen3_30b_shape(), 2049};
    pq.shape.gate_up_bias = BiasKind::f32;
    check_problem("qwen3-30b-a3b, f32 bias", pq);
  }
  check_problem("one expert, 16392 rows", Problem{OpKind::down, q, ws, qwen3_30b_shape(), 2049, Routing::one_expert});
  for (std::uint32_t T : {64u, 2049u}) {  // f32 Y on the mma.sync and warp-specialized kernels
    Problem pf{OpKind::down, q, ws, gpt_oss_120b_shape(), T};
    pf.out_f32 = true;
    check_problem("f32 Y", pf);
  }
  check_problem("zero-row experts", Problem{OpKind::down, q, ws, qwen3_30b_shape(), 3});
  check_problem("one expert, all rows", Problem{OpKind::gate_up, q, ws, qwen3_30b_shape(), 300, Routing::one_expert});
  check_problem("E=256 expert 255 only",
                Problem{OpKind::gate_up, q, ws, deepseek_e256(), 33, Routing::last_expert_only, 40});
}

TEST_CASE("gpu: mxfp8 E8M0 edge codes inside real blocks (2^-127, NaN)", "[gpu][fp8][mxfp8][e8m0]") {
  MoeLayerShape s;
  s.hidden = 256, s.intermediate = 256, s.experts = 4, s.top_k = 2;
  s.act = Activation::none;
  // 2 rows per expert and 20 (the mma.sync kernel), 200 (the warp-specialized
  // one).
  const std::uint32_t T = GENERATE(4u, 40u, 400u);
  INFO("T = " << T);
  Problem p{OpKind::gate_up, QuantMode::mxfp8, WeightScale::e8m0_block32, s, T, Routing::uniform, 2 * T};  // every row
  std::uint32_t tiny_token = T > 5 ? 5 : 1, nan_token = T > 9 ? 9 : 2, nan_expert = 2, nan_col = 77;
  p.edit = [&](Fp8Acts& a, Fp8Weights& w, const HostRouting&) {
    const std::uint32_t kb = a.cols / 32;
    for (std::uint32_t b = 0; b < kb; ++b) a.e8m0[tiny_token * kb + b] = 0x00;  // whole row scaled by 2^-127
    a.e8m0[3 * kb + 2] = 0x00;                                                   // one block of token 3
    a.e8m0[nan_token * kb + 1] = 0xFF;                                           // NaN block: row all NaN
    w.e8m0[(std::size_t(nan_expert) * w.n + nan_col) * kb + 3] = 0xFF;          // NaN block: one column
  };
  const GemmResult r = run_problem("e8m0 edges", p);
  INFO("rel.err " << r.err << " nan_mismatch " << r.nan_mismatch << " nan_ref " << r.nan_ref);
  CHECK(r.nan_mismatch == 0);
  CHECK(r.nan_ref > 0);
  CHECK(r.err < 1e-2);
  // The 2^-127 row: tiny but exact relative to itself (a decoder mapping 0x00
  // to 0 gives zeros; one mapping it to 1 gives huge values).
  bool saw_tiny = false;
  GemmResult tiny;
  // Find rows of tiny_token among the sampled rows via reference magnitudes.
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    double mx = 0;
    for (std::uint32_t c = 0; c < r.cols; ++c) mx = std::max(mx, std::fabs(r.ref[i * r.cols + c]));
    if (mx > 0 && mx < 1e-30) {
      saw_tiny = true;
      tiny.ref.insert(tiny.ref.end(), r.ref.begin() + i * r.cols, r.ref.begin() + (i + 1) * r.cols);
      tiny.got.insert(tiny.got.end(), r.got.begin() + i * r.cols, r.got.begin() + (i + 1) * r.cols);
    }
  }
  CHECK(saw_tiny);
  compare(tiny);
  std::printf("  e8m0 edges: rel.err=%.2e (2^-127 row %.2e), NaN outputs %zu, mismatches %zu\n", r.err, tiny.err,
              r.nan_ref, r.nan_mismatch);
  CHECK(tiny.err < 1e-2);
}
