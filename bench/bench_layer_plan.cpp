// Host cost of what MoeLayer::run derives per call without touching the GPU:
// the per-call derivation of keys and configurations that run() did before the
// layer plan (every step re-deriving the bucket's keys, configs and split tail)
// against the plan lookup it does now (MoeLayerPlans::get: one atomic load).
// CPU only; the whole launch path on a GPU is bench_launch's.
//   bench_layer_plan [--iters N]
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>

#include "moejit/bucketing.hpp"
#include "moejit/model.hpp"
#include "moejit/moe_layer.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/layer_plans.hpp"
#include "ops/moe_keys.hpp"

using namespace moejit;

namespace {

// The keys and configs the steps of run() derived per call when each step
// recomputed them: fused_route (2 keys + configs), route (route key, the view's
// 3 keys + configs, 2 tile heights, the split tail), gate_up and down (the
// view, the GEMM's key + config, the split tail), combine (the view, its key).
std::uint64_t per_call_derivation(const MoeLayerShape& s, QuantMode q, std::uint32_t T) {
  const Target t{};
  std::uint64_t sink = 0;
  auto kc = [&](OpKind op, std::uint32_t b) {
    const SpecKey k = ops::gemm_key(op, s, q, b, t);
    sink += static_cast<std::uint64_t>(ops::choose_config(k).bm()) + k.n;
  };
  auto view = [&](std::uint32_t b) {
    kc(OpKind::down, b);
    kc(OpKind::gate_up, b);
    kc(OpKind::down, b);
  };
  const std::uint32_t b = round_up_tokens(T);
  kc(OpKind::gate_up, b), kc(OpKind::down, b);                                   // fused_route
  sink += ops::route_key(s, b, t).experts, view(b), kc(OpKind::gate_up, b), kc(OpKind::down, b);
  sink += ops::split_tail_bucket(s, q, b, t);                                    // route
  view(b), kc(OpKind::gate_up, b), sink += ops::split_tail_bucket(s, q, b, t);  // gate_up
  view(b), kc(OpKind::down, b), sink += ops::split_tail_bucket(s, q, b, t);     // down
  view(b), sink += ops::combine_key(s, DType::bf16, b, t).n;                     // combine
  return sink;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_layer_plan: host cost of per-call key derivation vs the cached layer plan"};
  int iters = 20000;
  app.add_option("--iters", iters, "calls timed per row")->check(CLI::Range(100, 100000000));
  CLI11_PARSE(app, argc, argv);
  std::printf("| model | quant | T | per-call derivation ns | plan lookup ns |\n|---|---|---|---|---|\n");
  for (QuantMode q : {QuantMode::w4a16_mxfp4, QuantMode::bf16}) {
    PlanOptions po;
    po.quant = q;
    po.max_num_tokens = 16384;
    const MoeLayerShape s = make_plan(embedded_model("gpt-oss-120b"), po).layers.at(0);
    MoeLayerPlans plans(s, q, default_weight_scale(q), Target{}, GemmTuning{});
    for (std::uint32_t T : {1u, 8u, 64u, 512u, 4096u, 16384u}) {
      std::uint64_t sink = 0;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) sink += per_call_derivation(s, q, T);
      auto t1 = std::chrono::steady_clock::now();
      (void)plans.get(round_up_tokens(T));  // built once, outside the timing
      auto t2 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) sink += plans.get(round_up_tokens(T)).gate_up.bm;
      auto t3 = std::chrono::steady_clock::now();
      const double old_ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / iters;
      const double new_ns = std::chrono::duration<double, std::nano>(t3 - t2).count() / iters;
      std::printf("| gpt-oss-120b | %s | %u | %.0f | %.1f |%s\n", std::string(to_string(q)).c_str(), T, old_ns,
                  new_ns, sink == 42 ? " " : "");
    }
  }
  return 0;
}
