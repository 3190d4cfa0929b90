// The MoE layer on the GPU against the float64 CPU reference: real model shapes,
// routing edge cases, per-GEMM intermediates, NaN-poisoned outputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "driver/cuda_api.hpp"
#include "gpu/gpu_runtime.hpp"
#include "gpu/layer_fixture.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"

using namespace moejit;
using namespace moejit::testing;

namespace {

struct Errors {
  double out = 0, h = 0, y = 0;
  std::size_t nonfinite_out = 0;
};

void device_sync() { MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize()); }

// Runs the layer on `in`, checks every output element is finite and compares
// sampled tokens (out, and their rows of H and Y) with the reference.
Errors run_and_check(const LayerWeights& w, const LayerInputs& in, std::uint32_t sample = 8,
                     Runtime* runtime = nullptr) {
  MoeLayer layer(runtime ? *runtime : gpu_runtime(), w.shape, w.quant);
  LayerRun run(layer, in);
  layer.run(w.device(), run.args, nullptr);
  device_sync();
  const auto& s = w.shape;
  Errors err;
  const auto out = run.download_out(s);
  err.nonfinite_out = ref::count_nonfinite(out.data(), out.size());

  const auto tokens = sample_tokens(in.tokens, sample);
  const auto res = ref::moe_reference(reference_args(w, in), tokens);
  std::vector<std::uint16_t> got_out;
  for (auto t : res.tokens)
    got_out.insert(got_out.end(), out.begin() + std::size_t(t) * s.hidden, out.begin() + std::size_t(t + 1) * s.hidden);
  err.out = ref::relative_frobenius_error(res.out, got_out);

  // Intermediates: map each reference row (t, j) to the GPU's sorted row.
  const MoeWorkspaceView v = layer.workspace_view(run.args);
  const std::size_t routes = std::size_t(in.tokens) * s.top_k;
  std::vector<std::int32_t> route_row(routes);
  MOEJIT_CU_CHECK(driver::cuda().cuMemcpyDtoH_v2(route_row.data(), v.route_row, routes * 4));
  std::vector<double> ref_h, ref_y;
  std::vector<std::uint16_t> got_h;
  std::vector<float> got_y;
  std::vector<std::uint16_t> hrow(s.intermediate);
  std::vector<float> yrow(s.hidden);
  for (std::size_t i = 0; i < res.rows.size(); ++i) {
    const auto r = res.rows[i];
    const std::size_t route = std::size_t(res.routing.row_token[r]) * s.top_k + res.routing.row_slot[r];
    const std::int32_t gr = route_row[route];
    REQUIRE(gr >= 0);
    MOEJIT_CU_CHECK(driver::cuda().cuMemcpyDtoH_v2(hrow.data(), v.h + std::size_t(gr) * s.intermediate * 2,
                                                   hrow.size() * 2));
    // Y is the sum of the down projection's split-K partials (fp32), or one
    // bf16 row when the down projection does not split K (v.y_dtype).
    std::fill(yrow.begin(), yrow.end(), 0.f);
    if (v.y_dtype == DType::bf16) {
      REQUIRE(v.y_splits == 1);
      std::vector<std::uint16_t> row16(s.hidden);
      MOEJIT_CU_CHECK(driver::cuda().cuMemcpyDtoH_v2(row16.data(), v.y + std::size_t(gr) * s.hidden * 2,
                                                     row16.size() * 2));
      for (std::uint32_t d = 0; d < s.hidden; ++d) yrow[d] = bf16_to_float(row16[d]);
    } else {
      REQUIRE(v.y_dtype == DType::f32);
      std::vector<float> part(s.hidden);
      for (std::uint32_t z = 0; z < v.y_splits; ++z) {
        MOEJIT_CU_CHECK(driver::cuda().cuMemcpyDtoH_v2(
            part.data(), v.y + (z * v.y_split_stride + std::size_t(gr) * s.hidden) * 4, part.size() * 4));
        for (std::uint32_t d = 0; d < s.hidden; ++d) yrow[d] += part[d];
      }
    }
    // H in the warp-specialized kernels' fragment k order: back to column order.
    for (std::uint32_t c = 0; c < s.intermediate; ++c)
      got_h.push_back(hrow[v.h_fragment_order ? h_column_position(c) : c]);
    got_y.insert(got_y.end(), yrow.begin(), yrow.end());
    ref_h.insert(ref_h.end(), res.h.begin() + i * s.intermediate, res.h.begin() + (i + 1) * s.intermediate);
    ref_y.insert(ref_y.end(), res.y.begin() + i * s.hidden, res.y.begin() + (i + 1) * s.hidden);
  }
  err.h = ref::relative_frobenius_error(ref_h, got_h);
  err.y = ref::relative_frobenius_error(ref_y, got_y);
  return err;
}

void report(const char* what, std::uint32_t T, const Errors& e) {
  std::printf("  %-28s T=%-5u rel.err out=%.2e H=%.2e Y=%.2e nonfinite=%zu\n", what, T, e.out, e.h, e.y,
              e.nonfinite_out);
  CHECK(e.nonfinite_out == 0);
  CHECK(e.out < 1e-2);
  CHECK(e.h < 1e-2);
  CHECK(e.y < 1e-2);
}

// Weights are large; build each (shape, quant) once per process.
const LayerWeights& weights(const std::string& name, const MoeLayerShape& s, QuantMode q) {
  static std::map<std::string, std::unique_ptr<LayerWeights>> cache;
  auto& slot = cache[name + "/" + std::string(to_string(q))];
  if (!slot) slot = LayerWeights::make(s, q, ref::process_seed() ^ std::hash<std::string>{}(name));
  return *slot;
}

}  // namespace

TEST_CASE("gpu: MoE layer matches the float64 reference on real model shapes", "[gpu][layer]") {
  const std::tuple<const char*, MoeLayerShape, QuantMode> models[] = {
      {"gpt-oss-120b", gpt_oss_120b_shape(), QuantMode::w4a16_mxfp4},
      {"gpt-oss-120b", gpt_oss_120b_shape(), QuantMode::bf16},
      {"qwen3-30b-a3b", qwen3_30b_shape(), QuantMode::bf16},
      {"qwen3-30b-a3b", qwen3_30b_shape(), QuantMode::w4a16_mxfp4},
      {"mixtral-8x7b", mixtral_shape(), QuantMode::bf16},
  };
  for (const auto& [name, shape, quant] : models) {
    const LayerWeights& w = weights(name, shape, quant);
    std::printf("%s %s\n", name, std::string(to_string(quant)).c_str());
    for (std::uint32_t T : {1u, 7u, 64u, 300u, 2049u}) {
      ref::TestRng rng(T);
      const auto in = LayerInputs::make(shape, T, Routing::uniform, rng);
      INFO(name << " " << to_string(quant) << " T=" << T << " seed=" << rng.seed());
      report(name, T, run_and_check(w, in));
    }
  }
}

TEST_CASE("gpu: every MXFP4 GEMM kernel variant family, K tails included, matches the reference", "[gpu][layer]") {
  // Token counts chosen to land on each kernel of src/ops/grouped_gemm_config.cpp:
  // gpt-oss T = 200 (6.25 rows per expert: decode), T = 512 (16: the
  // warp-specialized kernel on 32-row tiles, X and H in its fragment k order)
  // and T = 800 (25: wgmma with one warpgroup); Qwen3 T = 100 (6.25: decode).
  // A shape with K % 64 = 32 in both GEMMs (hidden 2080, intermediate
  // 800) runs the decode kernel's partial super-step (T = 3), the
  // warp-specialized kernel's K tail on 32-row tiles (T = 100: 12.5 rows per
  // expert) and the wgmma kernel's K tail with two warpgroups and a split tail
  // (T = 600: 75). 144 experts with K tails (hidden 1056, intermediate 544),
  // T = 800 (11.1 rows per expert hit): the warp-specialized kernel, and under
  // MOEJIT_GEMM_TUNE prefill.ws=0 the activations-as-A kernel.
  MoeLayerShape tail;
  tail.hidden = 2080, tail.intermediate = 800, tail.experts = 16, tail.top_k = 2;
  tail.act = Activation::silu_gated;
  tail.gate_up_bias = tail.down_bias = BiasKind::f32;
  MoeLayerShape wide = tail;
  wide.hidden = 1056, wide.intermediate = 544, wide.experts = 144;
  wide.act = Activation::swiglu_oai, wide.act_alpha = 1.702f, wide.act_limit = 7.f;
  wide.gate_up_bias = wide.down_bias = BiasKind::bf16;
  const std::tuple<const char*, MoeLayerShape, std::vector<std::uint32_t>> cases[] = {
      {"gpt-oss-120b", gpt_oss_120b_shape(), {200u, 512u, 800u}},
      {"qwen3-30b-a3b", qwen3_30b_shape(), {100u}},
      {"k-tail 2080x800", tail, {3u, 100u, 600u}},
      {"k-tail 1056x544 E=144", wide, {800u}},
  };
  for (const auto& [name, shape, tokens] : cases) {
    const LayerWeights& w = weights(name, shape, QuantMode::w4a16_mxfp4);
    for (std::uint32_t T : tokens) {
      ref::TestRng rng(T + 77);
      const auto in = LayerInputs::make(shape, T, Routing::uniform, rng);
      INFO(name << " T=" << T << " seed=" << rng.seed());
      report(name, T, run_and_check(w, in));
    }
  }
  {
    GemmTuning t;
    t.prefill.ws = false;
    Runtime rt(tuned_runtime_options(t));
    const LayerWeights& w = weights("k-tail 1056x544 E=144", wide, QuantMode::w4a16_mxfp4);
    ref::TestRng rng(877);
    const auto in = LayerInputs::make(wide, 800, Routing::uniform, rng);
    report("k-tail 1056x544 E=144, prefill.ws=0", 800, run_and_check(w, in, 8, &rt));
  }
}

TEST_CASE("gpu: bf16 warp-specialized GEMM: K and N tails, both gate/up layouts, one expert, E = 256 on expert 255",
          "[gpu][layer]") {
  // Every case runs the TMA warp-specialized kernel (the buckets have more
  // than 24 rows per expert hit under the heuristic's uniform assumption). The tail shapes have K % 64 = 32 in both GEMMs (hidden 2080,
  // intermediate 800: K_TAIL) and outputs that end inside a work item (800
  // gated outputs over 128-wide items, 2080 columns over 256-wide items): TMA
  // zero-fills the last slice and rows, the epilogue masks the columns.
  MoeLayerShape halves;
  halves.hidden = 2080, halves.intermediate = 800, halves.experts = 16, halves.top_k = 2;
  halves.act = Activation::silu_gated;
  halves.gate_up_bias = halves.down_bias = BiasKind::f32;
  MoeLayerShape interleaved = halves;
  interleaved.act = Activation::swiglu_oai;
  interleaved.act_alpha = 1.702f, interleaved.act_limit = 7.f;
  interleaved.gate_up_bias = interleaved.down_bias = BiasKind::bf16;
  MoeLayerShape e256;
  e256.hidden = 1024, e256.intermediate = 512, e256.experts = 256, e256.top_k = 8;
  e256.act = Activation::silu_gated;
  const std::tuple<const char*, MoeLayerShape, std::uint32_t, Routing> cases[] = {
      {"bf16 tails, silu gate|up halves, f32 bias", halves, 600u, Routing::uniform},
      {"bf16 tails, swiglu interleaved, bf16 bias", interleaved, 600u, Routing::uniform},
      // One expert: 38 m-tiles of one expert, 127 zero-row experts.
      {"qwen3-30b-a3b one expert", qwen3_30b_shape(), 600u, Routing::one_expert},
      // 8000 rows on expert 255: the last m-tile holds 64 rows (its second
      // consumer warpgroup issues no wgmma).
      {"bf16 E=256 expert 255", e256, 1000u, Routing::last_expert_only},
  };
  for (const auto& [name, shape, T, how] : cases) {
    const LayerWeights& w = weights(name, shape, QuantMode::bf16);
    ref::TestRng rng(T + 5);
    const auto in = LayerInputs::make(shape, T, how, rng);
    INFO(name << " T=" << T << " seed=" << rng.seed());
    report(name, T, run_and_check(w, in));
  }
}

TEST_CASE("gpu: routing edge cases (one expert, dropped routes, zero-row experts, T = 0)", "[gpu][layer]") {
  const MoeLayerShape s = qwen3_30b_shape();
  const LayerWeights& w = weights("qwen3-30b-a3b", s, QuantMode::w4a16_mxfp4);
  ref::TestRng rng(11);
  {
    const auto in = LayerInputs::make(s, 300, Routing::one_expert, rng);
    report("all rows on one expert", 300, run_and_check(w, in));
  }
  {
    const auto in = LayerInputs::make(s, 64, Routing::with_drops, rng);
    report("-1 routes dropped", 64, run_and_check(w, in));
  }
  {
    const auto in = LayerInputs::make(s, 3, Routing::uniform, rng);  // 24 routes over 128 experts
    report("zero-row experts", 3, run_and_check(w, in));
  }
  {
    // 32 routes, some dropped: the decode kernels route topk_ids themselves.
    const auto in = LayerInputs::make(s, 4, Routing::with_drops, rng);
    report("-1 routes dropped, routed in the GEMMs", 4, run_and_check(w, in));
  }
  {
    MoeLayer layer(gpu_runtime(), s, w.quant);
    const auto in = LayerInputs::make(s, 1, Routing::uniform, rng);
    LayerRun run(layer, in);
    run.args.num_tokens = 0;
    const auto before = gpu_runtime().stats();
    layer.run(w.device(), run.args, nullptr);
    device_sync();
    CHECK(gpu_runtime().stats().compiles == before.compiles);
    std::vector<std::uint16_t> o(s.hidden);
    run.out.download(o.data(), o.size() * 2);
    CHECK(ref::count_nonfinite(o.data(), o.size()) == o.size());  // untouched: still poisoned
  }
}

TEST_CASE("gpu: E = 256 with N*K > 8M and tokens only on expert 255 (64-bit offsets)", "[gpu][layer]") {
  MoeLayerShape s;
  s.hidden = 7168, s.intermediate = 2048, s.experts = 256, s.top_k = 8;  // DeepSeek-V3 shape
  s.act = Activation::silu_gated;
  REQUIRE(std::uint64_t(2 * s.intermediate) * s.hidden > 8'000'000);
  const LayerWeights& w = weights("e256", s, QuantMode::w4a16_mxfp4);
  ref::TestRng rng(256);
  const auto in = LayerInputs::make(s, 33, Routing::last_expert_only, rng);
  report("E=256 expert 255 only", 33, run_and_check(w, in, 33));
}

TEST_CASE("gpu: bad arguments are rejected with the parameter named", "[gpu][layer]") {
  const MoeLayerShape s = qwen3_30b_shape();
  const LayerWeights& w = weights("qwen3-30b-a3b", s, QuantMode::w4a16_mxfp4);
  MoeLayer layer(gpu_runtime(), s, w.quant);
  ref::TestRng rng(5);
  const auto in = LayerInputs::make(s, 4, Routing::uniform, rng);
  LayerRun run(layer, in);
  auto args = run.args;
  args.workspace_bytes = 16;
  CHECK_THROWS_WITH(layer.run(w.device(), args, nullptr), Catch::Contains("workspace_bytes"));
  args = run.args;
  args.x_row_stride = 7;
  CHECK_THROWS_WITH(layer.run(w.device(), args, nullptr), Catch::Contains("x_row_stride"));
  MoeWeights dw = w.device();
  dw.w1_scales = 0;
  CHECK_THROWS_WITH(layer.run(dw, run.args, nullptr), Catch::Contains("w1_scales"));
  dw = w.device();
  dw.w2_scales += 2;  // the prefill kernels copy scale tables in 4-byte words
  CHECK_THROWS_WITH(layer.run(dw, run.args, nullptr), Catch::Contains("w2_scales"));
}

// The gpt-oss-120b MXFP4 layer of the tests below (members in this order).
struct GptOssMxfp4Layer {
  MoeLayerShape s = gpt_oss_120b_shape();
  const LayerWeights& w = weights("gpt-oss-120b", s, QuantMode::w4a16_mxfp4);
  MoeLayer layer{gpu_runtime(), s, w.quant};
};

// At <= 32 routes the MXFP4 decode GEMMs route topk_ids themselves (config fr)
// and run() launches no routing kernel; the steps called one by one run the
// routing kernel first and then the same GEMMs, which rewrite its outputs in
// route order. Both must give the same bits, including dropped routes.
TEST_CASE("gpu: run() at <= 32 routes (routing in the GEMMs) equals the steps one by one", "[gpu][layer]") {
  const GptOssMxfp4Layer g;
  const MoeLayerShape& s = g.s;
  const LayerWeights& w = g.w;
  const MoeLayer& layer = g.layer;
  ref::TestRng rng(23);
  for (std::uint32_t T : {1u, 3u, 8u}) {
    for (Routing routing : {Routing::uniform, Routing::with_drops}) {
      const auto in = LayerInputs::make(s, T, routing, rng);
      LayerRun fused(layer, in), steps(layer, in);
      layer.run(w.device(), fused.args, nullptr);
      layer.route(steps.args, nullptr);
      layer.gate_up(w.device(), steps.args, nullptr);
      layer.down(w.device(), steps.args, nullptr);
      layer.combine(steps.args, nullptr);
      device_sync();
      const auto a = fused.download_out(s), b = steps.download_out(s);
      INFO("T=" << T << " routing=" << int(routing));
      CHECK(ref::count_nonfinite(a.data(), a.size()) == 0);
      CHECK(std::memcmp(a.data(), b.data(), a.size() * 2) == 0);
    }
  }
}

// Every route dropped (common under expert parallelism at T = 1) on a
// workspace that a call with live routes left behind: no tile anywhere, and
// every token's output is +0 (stale routing metadata must not leak into it).
TEST_CASE("gpu: all routes dropped after a call with live routes writes zeros", "[gpu][layer]") {
  const GptOssMxfp4Layer g;
  const MoeLayerShape& s = g.s;
  const LayerWeights& w = g.w;
  const MoeLayer& layer = g.layer;
  ref::TestRng rng(29);
  for (std::uint32_t T : {1u, 8u, 64u}) {
    const auto in = LayerInputs::make(s, T, Routing::uniform, rng);
    LayerRun run(layer, in);
    layer.run(w.device(), run.args, nullptr);
    device_sync();
    const std::vector<std::int32_t> dropped(std::size_t(T) * s.top_k, -1);
    run.ids.upload(dropped.data(), dropped.size() * 4);
    run.out.fill_bytes(0xFF);
    layer.run(w.device(), run.args, nullptr);
    device_sync();
    const auto o = run.download_out(s);
    INFO("T=" << T);
    CHECK(std::all_of(o.begin(), o.end(), [](std::uint16_t v) { return v == 0; }));
  }
}

// The persistent grouped GEMMs take work items from counters that route()
// zeroes and each GEMM zeroes again when it ends: a GEMM step run twice on
// one routing output (timing a step, a graph of the GEMMs alone) computes
// every item both times. bf16 at gpt-oss-120b T = 2048 (64 routed rows per
// expert: the warp-specialized kernel; FP8: test_fp8_layer_gpu.cpp).
TEST_CASE("gpu: gate_up and down run twice after one route() give the bits of run()", "[gpu][layer]") {
  const MoeLayerShape s = gpt_oss_120b_shape();
  ref::TestRng rng(31);
  for (QuantMode q : {QuantMode::bf16}) {
    const LayerWeights& w = weights("gpt-oss-120b", s, q);
    const MoeLayer layer{gpu_runtime(), s, w.quant};
    const auto in = LayerInputs::make(s, 2048, Routing::uniform, rng);
    const auto outs = outputs_of_steps_after_one_route(layer, w.device(), in, 2);
    for (std::size_t rep = 1; rep < outs.size(); ++rep) {
      const auto &a = outs[0], &b = outs[rep];
      INFO(to_string(q) << " repetition " << rep - 1);
      CHECK(ref::count_nonfinite(b.data(), b.size()) == 0);
      CHECK(std::memcmp(a.data(), b.data(), a.size() * 2) == 0);
    }
  }
}
