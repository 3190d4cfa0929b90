// FP8 MoE kernels on the GPU: per-step times (CUDA events, median) and TFLOP/s of
// the mxfp8 / fp8_per_token gate_up and down GEMMs (each including its activation
// quantizer), the whole FP8 layer, and the weight gradient (bf16, gate_up's dW),
// on gpt-oss-120b and DeepSeek-V3 shapes, uniform routing.
//   bench_fp8 [--tokens 4096] [--iters 20] [--models gpt-oss-120b,deepseek-v3]
// Prints one JSON line per (model, kernel). Exits 77 without a GPU.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "driver/cuda_api.hpp"
#include "gpu/fp8_fixture.hpp"
#include "moejit/moe_wgrad.hpp"
#include "moejit/runtime.hpp"

using namespace moejit;
using namespace moejit::testing;

namespace {

double median_ms(int iters, const std::function<void()>& fn) {
  const auto& cu = driver::cuda();
  CUevent e0, e1;
  MOEJIT_CU_CHECK(cu.cuEventCreate(&e0, 0));
  MOEJIT_CU_CHECK(cu.cuEventCreate(&e1, 0));
  for (int i = 0; i < 3; ++i) fn();
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    MOEJIT_CU_CHECK(cu.cuEventRecord(e0, nullptr));
    fn();
    MOEJIT_CU_CHECK(cu.cuEventRecord(e1, nullptr));
    MOEJIT_CU_CHECK(cu.cuEventSynchronize(e1));
    float t = 0;
    MOEJIT_CU_CHECK(cu.cuEventElapsedTime_v2(&t, e0, e1));
    ms.push_back(t);
  }
  (void)cu.cuEventDestroy_v2(e0);
  (void)cu.cuEventDestroy_v2(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void line(const std::string& model, const std::string& kernel, std::uint32_t T, double ms, double flops) {
  std::printf("{\"model\":\"%s\",\"kernel\":\"%s\",\"tokens\":%u,\"us\":%.1f,\"tflops\":%.1f}\n", model.c_str(),
              kernel.c_str(), T, ms * 1e3, flops / (ms * 1e-3) / 1e12);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"FP8 MoE kernel timings"};
  std::uint32_t T = 4096;
  int iters = 20;
  std::vector<std::string> models{"gpt-oss-120b", "deepseek-v3"};
  app.add_option("--tokens", T, "tokens per layer call");
  app.add_option("--iters", iters, "timed iterations (median)");
  app.add_option("--models", models, "gpt-oss-120b, deepseek-v3")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  if (!driver::gpu_available()) {
    std::printf("SKIPPED: bench_fp8: no usable GPU\n");
    return 77;
  }
  driver::ensure_context(0);
  Runtime rt;
  for (const auto& m : models) {
    MoeLayerShape s;
    if (m == "gpt-oss-120b") {
      s = gpt_oss_120b_shape();
    } else if (m == "deepseek-v3") {
      s.hidden = 7168, s.intermediate = 2048, s.experts = 256, s.top_k = 8, s.act = Activation::silu_gated;
    } else {
      std::fprintf(stderr, "bench_fp8: unknown model %s\n", m.c_str());
      return 2;
    }
    const double R = double(T) * s.top_k;
    const double n1 = s.act == Activation::none ? s.intermediate : 2.0 * s.intermediate;
    const double f_gate_up = 2 * R * n1 * s.hidden, f_down = 2 * R * s.hidden * s.intermediate;
    ref::TestRng rng(T);
    const auto in = LayerInputs::make(s, T, Routing::uniform, rng);
    for (auto [q, ws] : {std::pair{QuantMode::mxfp8, WeightScale::e8m0_block32},
                         std::pair{QuantMode::fp8_per_token, WeightScale::per_channel}}) {
      const auto w = Fp8LayerWeights::make(s, q, ws, 1234);
      MoeLayer layer(rt, s, q, ws);
      LayerRun run(layer, in);
      const MoeWeights dw = w->device();
      layer.route(run.args, nullptr);
      const std::string mode(to_string(q));
      line(m, mode + " gate_up (incl. X quantize)", T, median_ms(iters, [&] { layer.gate_up(dw, run.args, nullptr); }),
           f_gate_up);
      line(m, mode + " down (incl. H quantize)", T, median_ms(iters, [&] { layer.down(dw, run.args, nullptr); }), f_down);
      const MoeWorkspaceView v = layer.workspace_view(run.args);
      line(m, mode + " quantize X", T,
           median_ms(iters, [&] {
             quantize_fp8_gpu(rt, q, run.args.x, s.hidden, T, s.hidden, v.xq, v.xs, nullptr);
           }),
           0);
      line(m, mode + " layer", T, median_ms(iters, [&] { layer.run(dw, run.args, nullptr); }), f_gate_up + f_down);
    }
    {
      // Weight gradient of gate_up: dW [E, 2I, D] fp32 from grad [R, 2I] and X [T, D].
      MoeLayer layer(rt, s, QuantMode::mxfp8);
      LayerRun run(layer, in);
      layer.route(run.args, nullptr);
      const MoeWorkspaceView v = layer.workspace_view(run.args);
      const auto grad = ref::random_bf16(std::size_t(R) * std::size_t(n1), rng, 1.0);
      driver::DeviceBuffer dgrad(grad.size() * 2), ddw(std::size_t(s.experts) * std::size_t(n1) * s.hidden * 4),
          ddb(std::size_t(s.experts) * std::size_t(n1) * 4);
      dgrad.upload(grad.data(), grad.size() * 2);
      MoeWgrad op(rt, MoeWgradShape{s.experts, s.top_k, static_cast<std::uint32_t>(n1), s.hidden, DType::f32});
      MoeWgradArgs a;
      a.num_tokens = T;
      a.grad = dgrad.get();
      a.x = run.args.x;
      a.gather = WgradGather::by_token;
      a.expert_offsets = v.expert_offsets;
      a.sorted_route = v.sorted_route;
      a.dw = ddw.get();
      a.db = ddb.get();
      line(m, "wgrad gate_up (bf16, fp32 dW)", T, median_ms(iters, [&] { op.run(a, nullptr); }), f_gate_up);
    }
  }
  return 0;
}
