// moejit_bench: times moejit's MoE kernels on the GPU for real model shapes.
//
// For each model (gpt-oss-120b, qwen3-30b-a3b, deepseek-v3, mixtral-8x7b; shapes
// from the embedded configs via make_plan), each mode (w4a16_mxfp4, bf16, mxfp8,
// fp8_per_token) and each token count T: the whole layer (route + gate_up + down
// + combine), gate_up alone and down alone (each after route, and down after
// gate_up, of the same input set; FP8 modes include their activation
// quantizer), with CUDA events: 3 warm-up runs, median of --iters runs (10 when a
// run takes more than 5 ms), 3 input sets rotated (X, topk ids, router weights).
// Routing: uniform random (distinct experts per token); for gpt-oss-120b also a
// skewed routing (half of the routes to 4 hot experts). --wgrad adds the gate_up
// weight gradient (bf16 in, fp32 dW).
//
// Bytes that must move: the weights (+ scales + biases) of the experts hit,
// plus the activations: layer X [T, D] and out [T, D] bf16; gate_up X and
// H [T*top_k, I] bf16; down H and Y [T*top_k, D] as bf16. FLOPs: 2 * rows * N * K
// per GEMM. One JSON line per row on stdout (and appended to --json).
// --dump-dir writes the routing of input set 0 of every (model, routing, T) as
// raw little-endian int32 [T, top_k] to <dir>/<model>_<routing>_T<T>.i32, so
// that bench/peers.py times the same expert loads.
//
// Exit codes: 0 ok (rows that failed are JSON lines with "error"), 2 bad
// arguments, 77 no GPU.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "moejit/bucketing.hpp"
#include "codegen/kernel_source.hpp"
#include "moejit/moe_wgrad.hpp"
#include "moejit/version.hpp"

using namespace moejit;
using namespace moejit::bench;
using json = nlohmann::json;

namespace {

std::ofstream g_json;

void emit(const json& j) {
  const std::string line = j.dump();
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (g_json.is_open()) {
    g_json << line << '\n';
    g_json.flush();
  }
}

std::uint64_t name_seed(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// One input set of T tokens on the device.
struct InputSet {
  driver::DeviceBuffer x, ids, gamma;
  std::vector<std::int32_t> host_ids;
};

struct Config {
  std::vector<std::uint32_t> tokens{1, 8, 64, 512, 4096, 16384};
  std::vector<std::string> models{"gpt-oss-120b", "qwen3-30b-a3b", "deepseek-v3", "mixtral-8x7b"};
  std::vector<std::string> modes{"w4a16_mxfp4", "bf16", "mxfp8", "fp8_per_token"};
  int iters = 50;
  bool wgrad = false;
  DType wgrad_dw = DType::f32;  // dW dtype of the weight-gradient rows
  bool skew_all = false;
  std::string dump_dir;
  std::string gpu;
};

WeightScale wscale_of(QuantMode q) {
  return q == QuantMode::fp8_per_token ? WeightScale::per_channel : default_weight_scale(q);
}

std::vector<InputSet> make_inputs(const MoeLayerShape& s, std::uint32_t T, bool skewed, const std::string& model,
                                  int sets) {
  std::vector<InputSet> in(sets);
  for (int i = 0; i < sets; ++i) {
    const std::uint64_t seed = name_seed(model) ^ (std::uint64_t(T) << 20) ^ (std::uint64_t(i) << 8) ^ (skewed ? 7 : 0);
    in[i].host_ids = make_routing(T, s.top_k, s.experts, skewed, seed);
    in[i].x = random_device(Fill::bf16, s.hidden, std::size_t(T) * s.hidden * 2, seed + 1, 1.7f);
    in[i].ids = driver::DeviceBuffer(std::max<std::size_t>(256, in[i].host_ids.size() * 4));
    in[i].ids.upload(in[i].host_ids.data(), in[i].host_ids.size() * 4);
    in[i].gamma = random_device(Fill::f32_gamma, 0, std::size_t(T) * s.top_k * 4, seed + 2);
  }
  return in;
}

void dump_routing(const Config& cfg, const std::string& model, const std::string& routing, std::uint32_t T,
                  const std::vector<std::int32_t>& ids) {
  if (cfg.dump_dir.empty()) return;
  std::filesystem::create_directories(cfg.dump_dir);
  const auto path = std::filesystem::path(cfg.dump_dir) / (model + "_" + routing + "_T" + std::to_string(T) + ".i32");
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 4));
}

json base_row(const Config& cfg, const std::string& model, const std::string& mode, const std::string& routing,
              std::uint32_t T, const std::string& kind) {
  return json{{"bench", "moejit"}, {"gpu", cfg.gpu}, {"model", model}, {"mode", mode}, {"routing", routing},
              {"T", T},          {"kind", kind}};
}

void add_timing(json& row, const Timing& t, double bytes, double flops) {
  row["us"] = t.us;
  row["min_us"] = t.min_us;
  row["iters"] = t.iters;
  row["bytes"] = bytes;
  row["flops"] = flops;
  row["tbps"] = bytes / (t.us * 1e-6) / 1e12;
  row["tflops"] = flops / (t.us * 1e-6) / 1e12;
}

// All rows of one (model, mode).
void bench_mode(Runtime& rt, const Config& cfg, const std::string& model, const std::string& mode_text) {
  const QuantMode q = parse_quant_mode(mode_text);
  const WeightScale ws = wscale_of(q);
  const MoeLayerShape s = model_shape(model, q);
  MoeLayer layer(rt, s, q, ws);

  // Compile every kernel up front, in parallel (cached on disk for later runs).
  std::vector<SpecKey> keys;
  for (std::uint32_t T : cfg.tokens) {
    const auto k = moe_layer_keys(s, q, ws, round_up_tokens(T), Target{});
    keys.insert(keys.end(), k.begin(), k.end());
  }
  const auto c0 = std::chrono::steady_clock::now();
  const auto st0 = rt.stats();
  const std::string cerr = precompile(rt, keys);
  const auto st1 = rt.stats();
  emit(json{{"bench", "moejit"}, {"kind", "compile"}, {"model", model}, {"mode", mode_text}, {"keys", keys.size()},
            {"compiles", st1.compiles - st0.compiles}, {"disk_hits", st1.disk_hits - st0.disk_hits},
            {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count()},
            {"error", cerr}});

  const auto g0 = std::chrono::steady_clock::now();
  const auto w = make_bench_weights(s, q, ws, name_seed(model + mode_text));
  const MoeWeights dw = w->device();
  emit(json{{"bench", "moejit"}, {"kind", "weights"}, {"model", model}, {"mode", mode_text}, {"shape", s.to_string()},
            {"bytes_per_expert_gate_up", w->bytes_per_expert[0]}, {"bytes_per_expert_down", w->bytes_per_expert[1]},
            {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count()}});

  const double D = s.hidden, I = s.intermediate, N1 = gate_up_columns(s);
  std::vector<std::string> routings{"uniform"};
  if (model == "gpt-oss-120b" || cfg.skew_all) routings.push_back("skewed");
  EventTimer timer;
  for (const auto& routing : routings) {
    for (std::uint32_t T : cfg.tokens) {
      try {
        const auto in = make_inputs(s, T, routing == "skewed", model, 3);
        dump_routing(cfg, model, routing, T, in[0].host_ids);
        driver::DeviceBuffer out(std::max<std::size_t>(256, std::size_t(T) * s.hidden * 2));
        driver::DeviceBuffer wsb(std::max<std::size_t>(256, layer.workspace_size(T)));
        std::vector<MoeLayerArgs> args(3);
        for (int i = 0; i < 3; ++i) {
          args[i].num_tokens = T;
          args[i].x = in[i].x.get();
          args[i].topk_ids = in[i].ids.get();
          args[i].topk_weights = in[i].gamma.get();
          args[i].out = out.get();
          args[i].workspace = wsb.get();
          args[i].workspace_bytes = wsb.bytes();
        }
        const std::uint32_t hit = experts_hit(in[0].host_ids);
        const double R = double(T) * s.top_k;
        // Y as the down projection stores it: bf16, or fp32 split-K partials.
        const MoeWorkspaceView yv = layer.workspace_view(args[0]);
        const double x_bytes = double(T) * D * 2, h_bytes = R * I * 2,
                     y_bytes = R * D * double(dtype_size(yv.y_dtype)) * yv.y_splits;
        const double f_gu = 2 * R * N1 * D, f_dn = 2 * R * D * I;
        const double wb_gu = hit * w->bytes_per_expert[0], wb_dn = hit * w->bytes_per_expert[1];

        // Whole layer.
        const Timing tl = time_median(timer, nullptr, [&](int i) { layer.run(dw, args[i % 3], nullptr); }, cfg.iters);
        // Sanity: non-finite outputs of set 0.
        layer.run(dw, args[0], nullptr);
        MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
        std::vector<std::uint16_t> o(std::size_t(T) * s.hidden);
        out.download(o.data(), o.size() * 2);
        std::size_t bad = 0;
        for (auto v : o) bad += (v & 0x7F80) == 0x7F80;
        json row = base_row(cfg, model, mode_text, routing, T, "layer");
        row["experts_hit"] = hit;
        row["nonfinite_out"] = bad;
        if (routing == "skewed") {
          std::size_t hot = 0;
          for (auto e : in[0].host_ids) hot += e >= 0 && e < 4;
          row["hot_route_share"] = double(hot) / double(in[0].host_ids.size());
        }
        add_timing(row, tl, wb_gu + wb_dn + 2 * x_bytes, f_gu + f_dn);
        emit(row);

        const Timing tg = time_median(
            timer, [&](int i) { layer.route(args[i % 3], nullptr); },
            [&](int i) { layer.gate_up(dw, args[i % 3], nullptr); }, cfg.iters);
        row = base_row(cfg, model, mode_text, routing, T, "gate_up");
        row["experts_hit"] = hit;
        add_timing(row, tg, wb_gu + x_bytes + h_bytes, f_gu);
        emit(row);

        const Timing td = time_median(
            timer,
            [&](int i) {
              layer.route(args[i % 3], nullptr);
              layer.gate_up(dw, args[i % 3], nullptr);
            },
            [&](int i) { layer.down(dw, args[i % 3], nullptr); }, cfg.iters);
        row = base_row(cfg, model, mode_text, routing, T, "down");
        row["experts_hit"] = hit;
        add_timing(row, td, wb_dn + h_bytes + y_bytes, f_dn);
        emit(row);
      } catch (const std::exception& e) {
        json row = base_row(cfg, model, mode_text, routing, T, "layer");
        row["error"] = e.what();
        emit(row);
      }
    }
  }
}

// gate_up weight gradient: dW [E, N1, D] fp32 from grad [T*top_k, N1] bf16 and X.
void bench_wgrad(Runtime& rt, const Config& cfg, const std::string& model) {
  const MoeLayerShape s = model_shape(model, QuantMode::bf16);
  const std::uint32_t N1 = gate_up_columns(s);
  MoeLayer layer(rt, s, QuantMode::bf16);
  MoeWgradShape wsh{s.experts, s.top_k, N1, s.hidden, cfg.wgrad_dw};
  const double dw_bytes = cfg.wgrad_dw == DType::bf16 ? 2 : 4;
  MoeWgrad op(rt, wsh);
  std::vector<SpecKey> keys;
  for (std::uint32_t T : cfg.tokens) keys.push_back(moe_wgrad_key(wsh, round_up_tokens(T)));
  const std::string cerr = precompile(rt, keys);
  if (!cerr.empty()) emit(json{{"bench", "moejit"}, {"kind", "compile"}, {"model", model}, {"mode", "wgrad"}, {"error", cerr}});
  driver::DeviceBuffer dwb(std::size_t(s.experts) * N1 * s.hidden * std::size_t(dw_bytes));
  EventTimer timer;
  for (std::uint32_t T : cfg.tokens) {
    try {
      const auto in = make_inputs(s, T, false, model, 3);
      const double R = double(T) * s.top_k;
      driver::DeviceBuffer grad = random_device(Fill::bf16, 0, std::size_t(R) * N1 * 2, T + 99, 1.0f);
      driver::DeviceBuffer wsb(std::max<std::size_t>(256, layer.workspace_size(T)));
      std::vector<MoeLayerArgs> la(3);
      std::vector<MoeWgradArgs> wa(3);
      for (int i = 0; i < 3; ++i) {
        la[i].num_tokens = T;
        la[i].x = in[i].x.get();
        la[i].topk_ids = in[i].ids.get();
        la[i].topk_weights = in[i].gamma.get();
        la[i].out = grad.get();  // unused by route
        la[i].workspace = wsb.get();
        la[i].workspace_bytes = wsb.bytes();
        const MoeWorkspaceView v = layer.workspace_view(la[i]);
        wa[i].num_tokens = T;
        wa[i].grad = grad.get();
        wa[i].x = in[i].x.get();
        wa[i].gather = WgradGather::by_token;
        wa[i].expert_offsets = v.expert_offsets;
        wa[i].sorted_route = v.sorted_route;
        wa[i].dw = dwb.get();
      }
      const Timing t = time_median(
          timer, [&](int i) { layer.route(la[i % 3], nullptr); }, [&](int i) { op.run(wa[i % 3], nullptr); },
          cfg.iters);
      json row = base_row(cfg, model, "bf16", "uniform", T, "wgrad_gate_up");
      row["experts_hit"] = experts_hit(in[0].host_ids);
      row["dw_dtype"] = std::string(to_string(cfg.wgrad_dw));
      // dW of every expert written, grad and X read once.
      add_timing(row, t, double(s.experts) * N1 * s.hidden * dw_bytes + R * N1 * 2 + double(T) * s.hidden * 2,
                 2 * R * N1 * s.hidden);
      emit(row);
    } catch (const std::exception& e) {
      json row = base_row(cfg, model, "bf16", "uniform", T, "wgrad_gate_up");
      row["error"] = e.what();
      emit(row);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"moejit_bench: MoE layer and grouped-GEMM timings on the GPU (JSON lines)"};
  Config cfg;
  std::string json_path, cache_dir;
  app.add_option("--tokens", cfg.tokens, "token counts T")->delimiter(',');
  app.add_option("--models", cfg.models, "gpt-oss-120b,qwen3-30b-a3b,deepseek-v3,mixtral-8x7b")->delimiter(',');
  app.add_option("--modes", cfg.modes, "w4a16_mxfp4,bf16,mxfp8,fp8_per_token")->delimiter(',');
  app.add_option("--iters", cfg.iters, "timed runs per row (10 when a run exceeds 5 ms)")->check(CLI::Range(5, 100000));
  app.add_flag("--wgrad", cfg.wgrad, "also time the gate_up weight gradient (bf16, fp32 dW)");
  bool wgrad_only = false;
  app.add_flag("--wgrad-only", wgrad_only, "time only the gate_up weight gradient (no layers)");
  std::string wgrad_dw = "f32";
  app.add_option("--wgrad-dw", wgrad_dw, "dW dtype of the weight gradient: f32 or bf16")->check(CLI::IsMember({"f32", "bf16"}));
  app.add_flag("--skew-all", cfg.skew_all, "skewed routing for every model (default: gpt-oss-120b only)");
  app.add_option("--json", json_path, "also append the JSON lines to this file");
  app.add_option("--dump-dir", cfg.dump_dir, "write routings (int32 [T, top_k]) here for bench/peers.py");
  app.add_option("--cache-dir", cache_dir, "kernel cache directory");
  bool check_keys = false;
  app.add_flag("--check-keys", check_keys, "no GPU: generate the source of every key (codegen only) and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  cfg.wgrad_dw = wgrad_dw == "bf16" ? DType::bf16 : DType::f32;
  if (wgrad_only) {
    cfg.wgrad = true;
    cfg.modes.clear();
  }
  if (!json_path.empty()) g_json.open(json_path, std::ios::app);
  try {
    for (const auto& m : cfg.modes) (void)parse_quant_mode(m);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moejit_bench: error: %s\n", e.what());
    return 2;
  }
  if (check_keys) {
    int bad = 0, n = 0;
    for (const auto& model : cfg.models)
      for (const auto& mode : cfg.modes) {
        const QuantMode q = parse_quant_mode(mode);
        try {
          const MoeLayerShape s = model_shape(model, q);
          std::vector<SpecKey> keys;
          for (std::uint32_t T : cfg.tokens) {
            const auto k = moe_layer_keys(s, q, wscale_of(q), round_up_tokens(T), Target{});
            keys.insert(keys.end(), k.begin(), k.end());
            if (cfg.wgrad)
              keys.push_back(moe_wgrad_key({s.experts, s.top_k, gate_up_columns(s), s.hidden, cfg.wgrad_dw},
                                           round_up_tokens(T)));
          }
          for (const auto& k : keys) {
            ++n;
            try {
              (void)codegen::generate(k);
            } catch (const std::exception& e) {
              ++bad;
              std::printf("%s %s: %s: %s\n", model.c_str(), mode.c_str(), k.to_text().c_str(), e.what());
            }
          }
        } catch (const std::exception& e) {
          ++bad;
          std::printf("%s %s: %s\n", model.c_str(), mode.c_str(), e.what());
        }
      }
    std::printf("check-keys: %d keys, %d failed\n", n, bad);
    return bad ? 1 : 0;
  }
  if (!driver::gpu_available()) {
    std::printf("SKIPPED: moejit_bench: no usable GPU\n");
    return 77;
  }
  try {
    driver::ensure_context(0);
    RuntimeOptions ro;
    if (!cache_dir.empty()) ro.cache_dir = cache_dir;
    Runtime rt(ro);
    cfg.gpu = gpu_name();
    const auto t0 = std::chrono::steady_clock::now();
    // date and moejit_version: which run and build a results page shows.
    const std::time_t now = std::time(nullptr);
    char date[32] = "";
    std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    emit(json{{"bench", "moejit"}, {"kind", "env"}, {"gpu", cfg.gpu}, {"driver", driver::cuda().driver_version},
              {"tokens", cfg.tokens}, {"models", cfg.models}, {"modes", cfg.modes}, {"iters", cfg.iters},
              {"date", date}, {"moejit_version", std::string(moejit::version())}});
    for (const auto& model : cfg.models) {
      for (const auto& mode : cfg.modes) {
        try {
          bench_mode(rt, cfg, model, mode);
        } catch (const std::exception& e) {
          emit(json{{"bench", "moejit"}, {"model", model}, {"mode", mode}, {"kind", "layer"}, {"error", e.what()}});
        }
      }
      if (cfg.wgrad) {
        try {
          bench_wgrad(rt, cfg, model);
        } catch (const std::exception& e) {
          emit(json{{"bench", "moejit"}, {"model", model}, {"mode", "bf16"}, {"kind", "wgrad_gate_up"}, {"error", e.what()}});
        }
      }
    }
    const auto st = rt.stats();
    emit(json{{"bench", "moejit"}, {"kind", "done"},
              {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
              {"compiles", st.compiles}, {"disk_hits", st.disk_hits}, {"compile_ms_total", st.compile_ms_total}});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moejit_bench: error: %s\n", e.what());
    emit(json{{"bench", "moejit"}, {"kind", "fatal"}, {"error", e.what()}});
    return 3;
  }
  return 0;
}
