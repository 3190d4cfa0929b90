// moejit-run: runs one MoE layer of a model on the GPU with random weights
// (bf16, W4A16 MXFP4, MXFP8 or FP8 per token: tools/common/layer_data.hpp),
// checks it, and times the layer per token count T (CUDA events, median),
// printing achieved weight bandwidth and TFLOP/s next to the floor.
//
// The check (--check-tokens N): every output is finite, and N sampled tokens
// run alone (T = 1: the decode kernels, another tile schedule and reduction)
// agree with their rows of the batch within a relative error of 1e-2 (bf16,
// w4a16_mxfp4) or 5e-2 (mxfp8, fp8_per_token: the layer quantizes H to e4m3,
// per row or per 32-block, whose steps are 6.7-12.5 % apart, from bf16 values
// that two kernels may round differently in the last bit, so a scale and the
// codes near a rounding boundary can move; the outputs then differ by a few
// 1e-3 where that happens, and by 0 where both runs take the same kernels). The
// float64 reference check of every kernel is the GPU test suite's
// (tests/gpu, scripts/gpu-suite.sh).
//
// Two timings of the whole layer, each a median of --iters synchronized runs:
//   time_us   : events recorded around MoeLayer::run on an idle GPU: includes
//               the host's latency to submit the first launch (~4 us on the
//               H200 machine; docs/results.md: cuLaunchKernel alone).
//   queued_us : the same with the stream held by a 100 us kernel first
//               (moejit/device.hpp StreamHold), so the layer's launches (four, or three where the
//               decode GEMMs route themselves) are queued before the
//               first event: the GPU's execution of the layer alone, what a
//               serving engine sees when it enqueues ahead.
//   graph_us  : events around one replay of the layer captured in a CUDA
//               graph (moejit/device.hpp Graph; three graphs, one per input
//               set, replayed in turn like the eager runs), on an idle GPU:
//               what an engine that captures its decode step sees.
// The bandwidth, TFLOP/s and floor columns use time_us.
//
// Exit codes (docs/exit-codes.md): 0 ok, 1 a check failed, 2 bad arguments,
// 3 no GPU / driver error. Errors are one line on stderr, "moejit-run: error: ...".
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/layer_data.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/device.hpp"
#include "moejit/error.hpp"
#include "moejit/model.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/runtime.hpp"
#include "../cli_usage.hpp"

using namespace moejit;
using namespace moejit::tools;

namespace {

struct Row {
  std::uint32_t T;
  double us, queued_us, weight_tbps, tflops, floor_us, err;
  std::uint32_t experts_hit;
  double step_us[4];  // route, gate_up, down, combine (medians, timed separately)
  double graph_us;    // one replay of the layer captured in a CUDA graph (median)
};

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Up to `count` tokens spread over [0, T), always including the first and last.
std::vector<std::uint32_t> sample_tokens(std::uint32_t T, std::uint32_t count) {
  std::vector<std::uint32_t> t;
  if (T <= count) {
    for (std::uint32_t i = 0; i < T; ++i) t.push_back(i);
    return t;
  }
  for (std::uint32_t i = 0; i < count; ++i)
    t.push_back(static_cast<std::uint32_t>((std::uint64_t(T - 1) * i) / (count > 1 ? count - 1 : 1)));
  return t;
}

std::size_t count_nonfinite(const std::vector<std::uint16_t>& v) {
  std::size_t n = 0;
  for (std::uint16_t b : v) n += !std::isfinite(bf16_to_float(b));
  return n;
}

// ||a - b|| / ||a|| over bf16 values (a NaN anywhere makes it NaN).
double relative_error(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = bf16_to_float(a[i]), y = bf16_to_float(b[i]);
    num += (x - y) * (x - y);
    den += x * x;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"moejit-run: time and check one MoE layer on the GPU (moejit " MOEJIT_VERSION ")", "moejit-run"};
  app.set_version_flag("--version", MOEJIT_VERSION);
  std::string model = "gpt-oss-120b", quant_text, cache_dir, json_path;
  std::vector<std::uint32_t> tokens{1, 8, 64, 512, 4096};
  int iters = 50, sample = 8;
  std::string weight_scale_text;
  double copy_tbps = 4.23, bf16_tflops = 782.0, fp8_tflops = 1430.0;
  app.add_option("--model", model, "embedded model config (moejit-prewarm --help lists them)");
  app.add_option("--quant", quant_text,
                 "bf16 | w4a16_mxfp4 | mxfp8 | fp8_per_token (default: the checkpoint's, else bf16)");
  app.add_option("--weight-scale", weight_scale_text,
                 "fp8_per_token weight scales: per_expert (default) | per_channel");
  app.add_option("--tokens", tokens, "token counts T to run")->delimiter(',');
  app.add_option("--iters", iters, "timed runs per T (median reported)")->check(CLI::Range(5, 100000));
  app.add_option("--check-tokens", sample, "tokens per T run alone (T = 1) and compared with the batch")->check(CLI::Range(0, 4096));
  app.add_option("--cache-dir", cache_dir, "kernel cache directory");
  app.add_option("--json", json_path, "also append one JSON object per T to this file");
  // The floor's rates: finite and positive (CLI11's range check lets NaN through).
  const CLI::Validator positive_rate(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(v) || !(v > 0))
          return "must be a positive number (got " + text + ")";
        return {};
      },
      "RATE");
  // Defaults: the rates bench/run.sh measured on an H200 (copy: read + write).
  app.add_option("--copy-tbps", copy_tbps, "measured device copy bandwidth for the floor (TB/s)")->check(positive_rate);
  app.add_option("--bf16-tflops", bf16_tflops, "measured bf16 tensor rate for the floor (TFLOP/s)")
      ->check(positive_rate);
  app.add_option("--fp8-tflops", fp8_tflops, "measured fp8 tensor rate for the floor of the FP8 modes (TFLOP/s)")
      ->check(positive_rate);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "moejit-run: error: %s\n", moejit::tools::usage_error_text(app, e).c_str());
    return 2;
  }
  auto usage = [](const std::string& what) {
    std::fprintf(stderr, "moejit-run: error: %s\n", what.c_str());
    return 2;
  };
  // Named as typed: the library would report max_num_tokens.
  for (std::uint32_t t : tokens)
    if (t < 1 || t > kMaxBucketedTokens)
      return usage("--tokens: each token count must be in [1, " + std::to_string(kMaxBucketedTokens) + "] (got " +
                   std::to_string(t) + ")");
  try {
    const ModelSpec spec = embedded_model(model);
    PlanOptions po;
    if (!quant_text.empty()) {
      try {
        po.quant = parse_quant_mode(quant_text);
      } catch (const InvalidArgument& e) {
        return usage(std::string("--quant: ") + e.what());
      }
    } else if (!spec.checkpoint_quant) {
      if (!spec.checkpoint_quant_method.empty())
        return usage("--model " + model + ": its checkpoint quantization '" + spec.checkpoint_quant_method +
                     "' is not supported; choose a quant mode with --quant (bf16, w4a16_mxfp4, mxfp8, fp8_per_token)");
      po.quant = QuantMode::bf16;
    }
    po.max_num_tokens = *std::max_element(tokens.begin(), tokens.end());
    const PrewarmPlan plan = make_plan(spec, po);
    const MoeLayerShape shape = plan.layers.at(0);
    const QuantMode quant = plan.quant_modes.at(0);
    WeightScale wscale = default_weight_scale(quant);
    if (!weight_scale_text.empty()) {
      if (quant != QuantMode::fp8_per_token)
        return usage("--weight-scale " + weight_scale_text + ": --quant " + std::string(to_string(quant)) +
                     " has fixed weight scales (" + std::string(to_string(wscale)) +
                     "); only fp8_per_token takes per_expert or per_channel");
      if (weight_scale_text != "per_expert" && weight_scale_text != "per_channel")
        return usage("--weight-scale " + weight_scale_text + ": fp8_per_token takes per_expert or per_channel");
      wscale = parse_weight_scale(weight_scale_text);
    }
    const bool fp8 = quant == QuantMode::mxfp8 || quant == QuantMode::fp8_per_token;
    if (!device::available()) {
      std::fprintf(stderr, "moejit-run: error: no usable GPU (libcuda.so.1 / device)\n");
      return 3;
    }
    device::make_current(0);
    const std::string gpu_name = device::device_info(0).name;
    char run_date[32] = {};
    const std::time_t now = std::time(nullptr);
    std::strftime(run_date, sizeof run_date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    RuntimeOptions ro;
    if (!cache_dir.empty()) ro.cache_dir = cache_dir;
    Runtime rt(ro);
    std::printf("model %s: %s, quant %s\n", model.c_str(), shape.to_string().c_str(),
                std::string(to_string(quant)).c_str());
    const std::uint64_t seed = 0x5EEDull;
    const DeviceLayerWeights dw = DeviceLayerWeights::random(shape, quant, seed, wscale);
    const MoeWeights weights = dw.view();
    MoeLayer layer(rt, shape, quant, wscale);
    const double n1 = gate_up_cols(shape);
    const double w1_bytes_per_expert =
        DeviceExpertWeights::bytes_per_expert(quant, wscale, gate_up_cols(shape), shape.hidden);
    const double w2_bytes_per_expert =
        DeviceExpertWeights::bytes_per_expert(quant, wscale, shape.hidden, shape.intermediate);
    const double tensor_tflops = fp8 ? fp8_tflops : bf16_tflops;
    const double tolerance = fp8 ? 5e-2 : 1e-2;
    std::vector<Row> rows;
    bool ok = true;
    device::Event ev0, ev1;
    const device::StreamHold hold;
    constexpr std::chrono::nanoseconds kHold{100000};  // the host enqueues the layer in ~16 us
    for (std::uint32_t T : tokens) {
      // Three input sets, rotated, so activations are not served from L2.
      std::vector<HostLayerInputs> ins;
      std::vector<std::unique_ptr<DeviceLayerCall>> runs;
      for (int i = 0; i < 3; ++i) {
        ins.push_back(HostLayerInputs::random(shape, T, seed + T * 3 + i));
        runs.push_back(std::make_unique<DeviceLayerCall>(layer, ins.back()));
      }
      double err = 0;
      if (sample > 0) {
        layer.run(weights, runs[0]->args, nullptr);
        device::synchronize();
        const auto out = runs[0]->download_out(shape);
        const std::size_t bad = count_nonfinite(out);
        std::vector<std::uint16_t> alone, batch;
        for (std::uint32_t t : sample_tokens(T, sample)) {
          const DeviceLayerCall one(layer, ins[0].token(shape, t));
          layer.run(weights, one.args, nullptr);
          device::synchronize();
          const auto row = one.download_out(shape);
          alone.insert(alone.end(), row.begin(), row.end());
          batch.insert(batch.end(), out.begin() + std::size_t(t) * shape.hidden,
                       out.begin() + std::size_t(t + 1) * shape.hidden);
        }
        err = relative_error(alone, batch);
        if (bad != 0 || !(err < tolerance)) {
          std::fprintf(stderr, "moejit-run: CHECK FAILED at T=%u: rel.err %.3e, %zu non-finite outputs\n", T, err, bad);
          ok = false;
        }
      }
      for (int i = 0; i < 5; ++i) layer.run(weights, runs[i % 3]->args, nullptr);
      // The layer between two events, `iters` times (ms each); queued: behind
      // the stream-holding kernel (see queued_us at the top).
      auto time_layer = [&](bool queued) {
        std::vector<float> out;
        for (int i = 0; i < iters; ++i) {
          if (queued) hold.launch(nullptr, kHold);
          ev0.record(nullptr);
          layer.run(weights, runs[i % 3]->args, nullptr);
          ev1.record(nullptr);
          out.push_back(device::Event::elapsed_ms(ev0, ev1));
        }
        return out;
      };
      const std::vector<float> ms = time_layer(false);
      const std::vector<float> qms = time_layer(true);
      // Replays of the layer captured in a graph, one graph per input set.
      std::vector<float> gms;
      {
        device::Stream gs;
        std::vector<device::Graph> graphs;
        for (int i = 0; i < 3; ++i)
          graphs.push_back(device::Graph::capture(gs.get(), [&] { layer.run(weights, runs[i]->args, gs.get()); }));
        for (int i = 0; i < 3; ++i) graphs[i].launch(gs.get());
        device::synchronize(gs.get());
        for (int i = 0; i < iters; ++i) {
          ev0.record(gs.get());
          graphs[i % 3].launch(gs.get());
          ev1.record(gs.get());
          gms.push_back(device::Event::elapsed_ms(ev0, ev1));
        }
      }
      // Per-step medians: each step timed alone between events.
      double step_us[4];
      for (int step = 0; step < 4; ++step) {
        std::vector<float> sm;
        for (int i = 0; i < iters; ++i) {
          const auto& a = runs[i % 3]->args;
          layer.route(a, nullptr);
          if (step >= 2) layer.gate_up(weights, a, nullptr);
          if (step >= 3) layer.down(weights, a, nullptr);
          ev0.record(nullptr);
          if (step == 0) layer.route(a, nullptr);
          if (step == 1) layer.gate_up(weights, a, nullptr);
          if (step == 2) layer.down(weights, a, nullptr);
          if (step == 3) layer.combine(a, nullptr);
          ev1.record(nullptr);
          sm.push_back(device::Event::elapsed_ms(ev0, ev1));
        }
        step_us[step] = median(sm) * 1e3;
      }
      std::set<int> hit(ins[0].ids.begin(), ins[0].ids.end());
      hit.erase(-1);
      const double us = median(ms) * 1e3;
      const double wbytes = hit.size() * (w1_bytes_per_expert + w2_bytes_per_expert);
      const double rows_ = double(T) * shape.top_k;
      const double flops = 2.0 * rows_ * (n1 * shape.hidden + double(shape.hidden) * shape.intermediate);
      const double floor_us = std::max(wbytes / (copy_tbps * 1e12), flops / (tensor_tflops * 1e12)) * 1e6;
      rows.push_back({T, us, median(qms) * 1e3, wbytes / (us * 1e-6) / 1e12, flops / (us * 1e-6) / 1e12, floor_us, err,
                      static_cast<std::uint32_t>(hit.size()), {step_us[0], step_us[1], step_us[2], step_us[3]},
                      median(gms) * 1e3});
    }
    std::printf("\n%7s %8s %11s %12s %10s %10s %9s %10s %11s %10s\n", "T", "experts", "time_us", "weight_TB/s", "TFLOP/s",
                "floor_us", "of_floor", "rel_err", "queued_us", "graph_us");
    for (const auto& r : rows)
      std::printf("%7u %8u %11.1f %12.2f %10.1f %10.1f %8.0f%% %10.2e %11.1f %10.1f\n", r.T, r.experts_hit, r.us,
                  r.weight_tbps, r.tflops, r.floor_us, 100.0 * r.floor_us / r.us, r.err, r.queued_us, r.graph_us);
    if (!json_path.empty()) {
      std::ofstream jf(json_path, std::ios::app);
      const std::string tune = to_string(rt.gemm_tuning());
      for (const auto& r : rows) {
        nlohmann::json j{{"tool", "moejit-run"}, {"model", model}, {"quant", std::string(to_string(quant))},
                         {"weight_scale", std::string(to_string(wscale))}, {"gpu", gpu_name}, {"date", run_date},
                         {"iters", iters}, {"check_tokens", sample}, {"tolerance", tolerance},
                         {"copy_tbps", copy_tbps}, {"tensor_tflops", tensor_tflops},
                         {"T", r.T}, {"experts_hit", r.experts_hit}, {"time_us", r.us}, {"queued_us", r.queued_us},
                         {"graph_us", r.graph_us},
                         {"weight_tbps", r.weight_tbps}, {"tflops", r.tflops}, {"floor_us", r.floor_us},
                         {"rel_err", r.err}, {"route_us", r.step_us[0]}, {"gate_up_us", r.step_us[1]},
                         {"down_us", r.step_us[2]}, {"combine_us", r.step_us[3]}, {"tune", tune}};
        jf << j.dump() << "\n";
      }
      if (!jf) throw moejit::Error("--json " + json_path + ": cannot write");
    }
    std::printf("\n%7s %9s %10s %10s %10s   (each step timed alone, median us)\n", "T", "route", "gate_up",
                "down", "combine");
    for (const auto& r : rows)
      std::printf("%7u %9.1f %10.1f %10.1f %10.1f\n", r.T, r.step_us[0], r.step_us[1], r.step_us[2], r.step_us[3]);
    std::printf("\nkernels (ptxas report):\n");
    for (std::uint32_t T : tokens) {
      for (const SpecKey& key : moe_layer_keys(shape, quant, wscale, round_up_tokens(T), Target{}, rt.gemm_tuning())) {
        const auto ck = rt.compiled(key);
        const std::string cfg = rt.source(key).config_text;
        std::printf("  T=%-5u %-8s regs=%-4d spill_st=%-3d spill_ld=%-3d stack=%-4d smem_dyn=%-6u threads=%-4u %s\n", T,
                    std::string(to_string(key.op)).c_str(), ck->resources.registers, ck->resources.spill_store_bytes,
                    ck->resources.spill_load_bytes, ck->resources.stack_frame_bytes, ck->launch.dynamic_smem_bytes,
                    ck->launch.block_threads, cfg.c_str());
      }
    }
    const auto st = rt.stats();
    std::printf("\nkernels: %llu compiled, %llu disk hits, %llu memory hits\n", (unsigned long long)st.compiles,
                (unsigned long long)st.disk_hits, (unsigned long long)st.memory_hits);
    return ok ? 0 : 1;
  } catch (const InvalidArgument& e) {
    return usage(e.what());
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (char& c : msg)
      if (c == '\n') c = ' ';
    std::fprintf(stderr, "moejit-run: error: %s\n", msg.c_str());
    return 3;
  }
}
