// trace_replay: replays the steps of a continuous-batching serving engine with
// chunked prefill through one gpt-oss-120b MoE layer (MXFP4), three ways, and
// measures the JIT stalls each way leaves:
//   (a) exact   JIT on demand keyed by the exact token count T (an engine
//               without bucketing): the GEMM keys hold T itself and the
//               generator adds -DMOEJIT_EXACT_TOKENS=<T>, so every new T compiles
//               new gate_up / down kernels; in-memory cache only.
//   (b) bucket  bucketed keys (round_up_tokens), cold: a fresh temporary cache dir.
//   (c) sealed  bucketed keys after prewarm() of the plan (max_num_tokens) and seal().
//
// Trace (seeded): C requests in flight (closed loop: a finished request is
// replaced at once); input lengths uniform in [0.8 ISL, ISL], OSL output tokens
// each. Each step: every running request past its prefill contributes 1 decode
// token, then prefill chunks (oldest request first) fill the rest of the
// max_num_tokens budget; a request whose prefill completes emits its first
// token in that step. Default steady-state start: the C initial requests are
// at uniformly random points of their decode (--cold-start: all C arrive at
// step 0 with their whole prompt). At most --max-steps steps (default 300: a
// window of the serving run, short enough for cell (a) to finish in a few
// minutes on a 2-core machine).
//
// Per step the replay asks the Runtime for the step's keys (route, gate_up,
// down, combine) and times each lookup; a lookup that compiled is a stall. GPU
// time per step = --layers (default: the model's MoE layers, 36) times one
// layer (same kernels for every layer, so each compiles once): with a GPU, the
// real layer (random MXFP4 weights, uniform
// routing) runs every step and is synchronized (wall time); without one, a
// per-T layer time is interpolated (log-log, at the exact T: moejit launches on
// the real T rows, the bucket only selects the kernel) from moejit_bench JSON
// lines (--gpu-times FILE: rows model=gpt-oss-120b mode=w4a16_mxfp4 kind=layer
// routing=uniform) or from built-in estimates. The output says which.
//
// Padding overhead in rows: sum over steps of (bucket - T) * top_k, relative to
// sum of T * top_k: what an engine that pads to the bucket would compute (moejit
// does not pad: its grids come from the real T).
//
//   trace_replay [--cells 1024/1024/64,8192/1024/64,1024/1024/4] [--max-steps 300]
//                [--gpu-times moejit.jsonl] [--modes exact,bucket,sealed] [--md FILE] [--json FILE]
// Exit codes: 0 ok, 2 bad arguments, 3 error.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

#include "bench_util.hpp"
#include "trace_gen.hpp"
#include "codegen/kernel_source.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/prewarm.hpp"

using namespace moejit;
using namespace moejit::bench;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

// --------------------------------------------------------------- GPU time --

// Layer time in us as a function of T: log-log interpolation over points.
struct GpuTimes {
  std::vector<std::pair<double, double>> pts;  // (T, us), ascending T
  std::string source;
  double at(double T) const {
    if (pts.empty()) return 0;
    if (T <= pts.front().first) return pts.front().second;  // below the first point: its time
    for (std::size_t i = 1; i < pts.size(); ++i)
      if (T <= pts[i].first) {
        const double x0 = std::log(pts[i - 1].first), x1 = std::log(pts[i].first);
        const double y0 = std::log(pts[i - 1].second), y1 = std::log(pts[i].second);
        return std::exp(y0 + (y1 - y0) * (std::log(T) - x0) / (x1 - x0));
      }
    // Beyond the last point: linear in T (compute-bound).
    return pts.back().second * T / pts.back().first;
  }
};

GpuTimes builtin_gpu_times() {
  // H200 MXFP4 floors (4.23 TB/s, 782 TFLOP/s) divided by 0.7
  // (the peers reach at most ~70 % of copy bandwidth): estimates, not measurements.
  GpuTimes g;
  for (auto [T, floor_us] : std::vector<std::pair<double, double>>{
           {1, 12}, {8, 88}, {64, 342}, {512, 394}, {4096, 1043}, {16384, 4171}})
    g.pts.push_back({T, floor_us / 0.7});
  g.source = "built-in estimates (H200 MXFP4 bandwidth/compute floors / 0.7), not measured";
  return g;
}

GpuTimes read_gpu_times(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw InvalidArgument("--gpu-times: cannot read '" + path + "'");
  std::map<double, double> m;
  std::string line;
  std::string gpu;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] != '{') continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const std::exception&) {
      continue;
    }
    if (j.value("model", "") == "gpt-oss-120b" && j.value("mode", "") == "w4a16_mxfp4" &&
        j.value("kind", "") == "layer" && j.value("routing", "uniform") == "uniform" && j.contains("us") &&
        j.contains("T")) {
      m[j["T"].get<double>()] = j["us"].get<double>();
      gpu = j.value("gpu", "");
    }
  }
  if (m.empty())
    throw InvalidArgument("--gpu-times: '" + path +
                          "' has no moejit_bench row with model=gpt-oss-120b mode=w4a16_mxfp4 kind=layer routing=uniform");
  GpuTimes g;
  for (auto& [T, us] : m) g.pts.push_back({T, us});
  std::ostringstream s;
  s << "moejit_bench measurements from " << path << (gpu.empty() ? "" : " (" + gpu + ")")
    << ", gpt-oss-120b w4a16_mxfp4 layer, uniform routing, at T =";
  for (auto& [T, us] : m) s << " " << T;
  s << "; interpolated log-log at each step's T";
  g.source = s.str();
  return g;
}

// ------------------------------------------------------------------ replay --

enum class Mode { exact, bucket, sealed };
const char* mode_name(Mode m) {
  return m == Mode::exact ? "(a) exact-T JIT" : m == Mode::bucket ? "(b) bucketed, cold cache" : "(c) bucketed, prewarm + seal";
}

struct Result {
  std::string cell, mode;
  std::size_t steps = 0, distinct_T = 0, distinct_buckets = 0;
  std::uint64_t tokens = 0, rows = 0, padded_rows = 0;
  std::uint64_t compiles = 0, disk_loads = 0, lookups = 0, failures = 0, misses_after_seal = 0;
  double stall_s = 0, disk_s = 0, lookup_s = 0, gpu_s = 0, total_s = 0;
  double setup_s = 0;  // prewarm (c) before the replay, not part of total
  std::string first_error;
};

// The keys of one step: route and combine by bucket always; gate_up / down by
// the exact T in mode (a), by the bucket otherwise.
std::vector<SpecKey> step_keys(const MoeLayerShape& s, QuantMode q, std::uint32_t T, bool exact) {
  const std::uint32_t b = round_up_tokens(T);
  std::vector<SpecKey> keys = moe_layer_keys(s, q, b, Target{});
  if (exact) {
    // The j-th gate_up (down) key of the bucket takes the j-th of the exact T:
    // the lists may differ in their other keys (k_order, a split tail).
    const auto ek = moe_layer_keys(s, q, T, Target{});
    for (OpKind op : {OpKind::gate_up, OpKind::down}) {
      std::size_t j = 0;
      for (SpecKey& k : keys) {
        if (k.op != op) continue;
        while (j < ek.size() && ek[j].op != op) ++j;
        if (j == ek.size()) break;
        k = ek[j++];
      }
    }
  }
  return keys;
}

// GPU side (only when a GPU is present).
struct GpuLayer {
  std::unique_ptr<BenchWeights> w;
  driver::DeviceBuffer x, ids, gamma, out, ws;
  std::uint32_t max_tokens = 0;
  void init(const MoeLayerShape& s, const MoeLayer& layer, std::uint32_t max_t) {
    max_tokens = max_t;
    w = make_bench_weights(s, QuantMode::w4a16_mxfp4, WeightScale::e8m0_block32, 7);
    const auto h = make_routing(max_t, s.top_k, s.experts, false, 11);
    x = random_device(Fill::bf16, s.hidden, std::size_t(max_t) * s.hidden * 2, 3, 1.7f);
    ids = driver::DeviceBuffer(h.size() * 4);
    ids.upload(h.data(), h.size() * 4);
    gamma = random_device(Fill::f32_gamma, 0, std::size_t(max_t) * s.top_k * 4, 5);
    out = driver::DeviceBuffer(std::size_t(max_t) * s.hidden * 2);
    ws = driver::DeviceBuffer(layer.workspace_size(max_t));
  }
  double run_us(const MoeLayer& layer, std::uint32_t T, std::uint32_t layers) {
    MoeLayerArgs a;
    a.num_tokens = T, a.x = x.get(), a.topk_ids = ids.get(), a.topk_weights = gamma.get(), a.out = out.get();
    a.workspace = ws.get(), a.workspace_bytes = ws.bytes();
    const auto t0 = Clock::now();
    for (std::uint32_t l = 0; l < layers; ++l) layer.run(w->device(), a, nullptr);
    MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }
};

Result replay(const std::string& cell_name, const std::vector<std::uint32_t>& steps, Mode mode, Runtime& rt,
              const MoeLayerShape& s, QuantMode q, const GpuTimes* table, GpuLayer* gpu, Runtime* exec_rt,
              std::uint32_t layers) {
  Result r;
  r.cell = cell_name;
  r.mode = mode_name(mode);
  std::set<std::uint32_t> ts, bs;
  std::unique_ptr<MoeLayer> exec;
  if (gpu) exec = std::make_unique<MoeLayer>(mode == Mode::exact ? *exec_rt : rt, s, q);
  const auto t_start = Clock::now();
  const auto st0 = rt.stats();
  for (std::uint32_t T : steps) {
    ++r.steps;
    ts.insert(T);
    const std::uint32_t b = round_up_tokens(T);
    bs.insert(b);
    r.tokens += T;
    r.rows += std::uint64_t(T) * s.top_k;
    r.padded_rows += std::uint64_t(b - T) * s.top_k;
    for (const SpecKey& key : step_keys(s, q, T, mode == Mode::exact)) {
      const auto t0 = Clock::now();
      try {
        const CompiledLookup lk = rt.lookup_compiled(key);
        const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
        ++r.lookups;
        r.lookup_s += dt;
        if (lk.origin == CompiledKernel::Origin::compiled) {
          ++r.compiles;
          r.stall_s += dt;
        } else if (lk.origin == CompiledKernel::Origin::disk) {
          ++r.disk_loads;
          r.disk_s += dt;
        }
      } catch (const std::exception& e) {
        const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
        ++r.failures;
        r.stall_s += dt;
        if (r.first_error.empty()) r.first_error = key.to_text() + ": " + e.what();
      }
    }
    if (gpu) {
      r.gpu_s += gpu->run_us(*exec, T, layers) * 1e-6;
    } else {
      r.gpu_s += table->at(T) * layers * 1e-6;
    }
  }
  const double wall = std::chrono::duration<double>(Clock::now() - t_start).count();
  // Without a GPU the step times are added to the measured host wall time.
  r.total_s = gpu ? wall : wall + r.gpu_s;
  r.distinct_T = ts.size();
  r.distinct_buckets = bs.size();
  r.misses_after_seal = rt.stats().misses_after_seal - st0.misses_after_seal;
  return r;
}

fs::path temp_dir(const std::string& tag) {
  const fs::path p = fs::temp_directory_path() /
                     ("moejit-trace-" + tag + "-" + std::to_string(::getpid()) + "-" +
                      std::to_string(Clock::now().time_since_epoch().count() % 1000000));
  fs::create_directories(p);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"trace_replay: JIT stalls of a serving trace, exact-T JIT vs bucketed vs prewarmed+sealed"};
  std::vector<std::string> cells_text{"1024/1024/64", "8192/1024/64", "1024/1024/4"};
  std::vector<std::string> modes_text{"exact", "bucket", "sealed"};
  TraceOptions to;
  std::string gpu_times_path, md_path, json_path;
  int jobs = 0;
  std::uint32_t layers = 0;
  bool no_gpu = false, print_trace = false;
  app.add_option("--cells", cells_text, "ISL/OSL/C cells")->delimiter(',');
  app.add_option("--modes", modes_text, "exact,bucket,sealed")->delimiter(',');
  app.add_option("--max-steps", to.max_steps, "steps per cell (a window of the serving run)")->check(CLI::Range(1, 10000000));
  app.add_option("--max-num-tokens", to.max_num_tokens, "per-step token budget")->check(CLI::Range(1, 1 << 20));
  app.add_option("--seed", to.seed, "trace seed");
  app.add_flag("--cold-start", to.cold_start, "all C requests arrive at step 0 (default: steady state)");
  app.add_option("--gpu-times", gpu_times_path, "moejit_bench JSON lines for the per-step layer time (no GPU)");
  app.add_flag("--no-gpu", no_gpu, "use the time table even when a GPU is present");
  app.add_option("--layers", layers, "MoE layers per step (0 = the model's, 36 for gpt-oss-120b); GPU time per step = layers x one layer")
      ->check(CLI::Range(0, 1000));
  app.add_option("--jobs", jobs, "prewarm compile threads (0 = all cores)");
  app.add_option("--md", md_path, "write the Markdown table here too");
  app.add_option("--json", json_path, "append one JSON line per (cell, mode)");
  app.add_flag("--print-trace", print_trace, "print each cell's step token counts");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    std::vector<Cell> cells;
    for (const auto& t : cells_text) {
      Cell c;
      char s1 = 0, s2 = 0;
      std::istringstream is(t);
      if (!(is >> c.isl >> s1 >> c.osl >> s2 >> c.concurrency) || s1 != '/' || s2 != '/' || c.isl == 0 || c.osl == 0 ||
          c.concurrency == 0)
        throw InvalidArgument("--cells: '" + t + "' is not ISL/OSL/C with positive integers");
      cells.push_back(c);
    }
    std::vector<Mode> modes;
    for (const auto& m : modes_text) {
      if (m == "exact") modes.push_back(Mode::exact);
      else if (m == "bucket") modes.push_back(Mode::bucket);
      else if (m == "sealed") modes.push_back(Mode::sealed);
      else throw InvalidArgument("--modes: '" + m + "' (accepted: exact, bucket, sealed)");
    }
    const bool have_gpu = !no_gpu && driver::gpu_available();
    GpuTimes table;
    if (!have_gpu) table = gpu_times_path.empty() ? builtin_gpu_times() : read_gpu_times(gpu_times_path);
    const QuantMode q = QuantMode::w4a16_mxfp4;
    const MoeLayerShape s = model_shape("gpt-oss-120b", q);
    PlanOptions po;
    po.quant = q;
    po.max_num_tokens = to.max_num_tokens;
    const ModelSpec spec = embedded_model("gpt-oss-120b");
    const PrewarmPlan plan = make_plan(spec, po);
    if (layers == 0) layers = std::max<std::uint32_t>(1, spec.layers_moe);

    std::unique_ptr<GpuLayer> gpu;
    if (have_gpu) driver::ensure_context(0);

    // One prewarm for all cells (c): its kernels are compiled into a fresh cache
    // dir once; each cell's sealed runtime then prewarms from that dir (disk
    // hits) and seals.
    const fs::path prewarm_dir = temp_dir("prewarm");
    double prewarm_s = 0;
    PrewarmReport pre_report;
    {
      RuntimeOptions ro;
      ro.cache_dir = prewarm_dir;
      Runtime rt(ro);
      PrewarmOptions popt;
      popt.jobs = jobs;
      const auto t0 = Clock::now();
      pre_report = prewarm(rt, plan, popt);
      prewarm_s = std::chrono::duration<double>(Clock::now() - t0).count();
      std::fprintf(stderr, "trace_replay: prewarm of %s (max_num_tokens %llu): %zu buckets, %zu keys, %zu kernels compiled, %zu failed, %.1f s\n",
                   plan.model_name.c_str(), (unsigned long long)plan.max_num_tokens, pre_report.buckets, pre_report.keys,
                   pre_report.compiled, pre_report.failed, prewarm_s);
    }
    std::unique_ptr<Runtime> exec_rt;
    if (have_gpu) {
      RuntimeOptions ro;
      ro.cache_dir = prewarm_dir;
      exec_rt = std::make_unique<Runtime>(ro);
      gpu = std::make_unique<GpuLayer>();
      MoeLayer probe(*exec_rt, s, q);
      gpu->init(s, probe, to.max_num_tokens + 1024);
    }

    std::vector<Result> results;
    std::ofstream jf;
    if (!json_path.empty()) jf.open(json_path, std::ios::app);
    for (const Cell& c : cells) {
      const auto steps = make_trace(c, to);
      if (print_trace) {
        std::fprintf(stderr, "%s:", c.name().c_str());
        for (auto T : steps) std::fprintf(stderr, " %u", T);
        std::fprintf(stderr, "\n");
      }
      for (Mode m : modes) {
        RuntimeOptions ro;
        fs::path tmp;
        if (m == Mode::exact) {
          ro.use_disk_cache = false;
          ro.generator = [](const SpecKey& key) {
            KernelSource src = codegen::generate(key);
            if (key.op == OpKind::gate_up || key.op == OpKind::down)
              src.options.push_back("-DMOEJIT_EXACT_TOKENS=" + std::to_string(key.token_bucket));
            return src;
          };
        } else if (m == Mode::bucket) {
          tmp = temp_dir("cold");
          ro.cache_dir = tmp;
        } else {
          ro.cache_dir = prewarm_dir;
          ro.seal_policy = SealPolicy::warn;
        }
        Runtime rt(ro);
        double setup = 0;
        if (m == Mode::sealed) {
          const auto t0 = Clock::now();
          PrewarmOptions popt;
          popt.jobs = jobs;
          popt.load_on_gpu = have_gpu;
          (void)prewarm(rt, plan, popt);
          rt.seal();
          setup = std::chrono::duration<double>(Clock::now() - t0).count();
        }
        std::fprintf(stderr, "trace_replay: %s %s: %zu steps...\n", c.name().c_str(), mode_name(m), steps.size());
        Result r = replay(c.name(), steps, m, rt, s, q, have_gpu ? nullptr : &table, gpu.get(), exec_rt.get(), layers);
        r.setup_s = setup;
        std::fprintf(stderr, "trace_replay:   %llu compiles, %.2f s stalled of %.2f s\n", (unsigned long long)r.compiles,
                     r.stall_s, r.total_s);
        results.push_back(r);
        if (jf.is_open()) {
          jf << json{{"bench", "trace_replay"}, {"cell", r.cell}, {"mode", r.mode}, {"steps", r.steps},
                     {"tokens", r.tokens}, {"distinct_T", r.distinct_T}, {"distinct_buckets", r.distinct_buckets},
                     {"compiles", r.compiles}, {"disk_loads", r.disk_loads}, {"stall_s", r.stall_s},
                     {"disk_s", r.disk_s}, {"gpu_s", r.gpu_s}, {"total_s", r.total_s},
                     {"padded_rows", r.padded_rows}, {"rows", r.rows}, {"failures", r.failures},
                     {"misses_after_seal", r.misses_after_seal}, {"setup_s", r.setup_s},
                     {"gpu_time_source", have_gpu ? "real layer on the GPU" : table.source}}
                    .dump()
             << '\n';
        }
        if (!tmp.empty()) {
          std::error_code ec;
          fs::remove_all(tmp, ec);
        }
      }
    }
    {
      std::error_code ec;
      fs::remove_all(prewarm_dir, ec);
    }

    std::ostringstream md;
    md << "### Serving-trace replay: gpt-oss-120b MoE layer (w4a16_mxfp4), JIT stalls\n\n";
    md << "Trace: continuous batching with chunked prefill, max_num_tokens " << to.max_num_tokens
       << ", input lengths uniform in [0.8 ISL, ISL], " << (to.cold_start ? "cold start (all requests at step 0)" : "steady-state start (requests at random points of their decode)")
       << ", first " << to.max_steps << " steps, seed " << to.seed << ".\n";
    md << "GPU time per step: " << layers << " MoE layers (the model's; same kernels, compiled once; attention and the rest of the model not counted) x "
       << (have_gpu ? "the real layer on the GPU (" + gpu_name() + "), synchronized, wall time" : table.source) << ".\n";
    md << "Compile stalls: measured wall time of Runtime lookups that ran NVRTC, on this host (" << std::thread::hardware_concurrency()
       << " hardware threads); a compile is one distinct kernel. Prewarm before (c): " << pre_report.compiled
       << " kernels for " << pre_report.buckets << " buckets (" << pre_report.keys << " keys) in "
       << std::fixed << std::setprecision(1) << prewarm_s << " s, done once before traffic (not in the totals).\n";
    md << "Padding: rows an engine padding to the bucket would add, (bucket - T) * top_k over T * top_k (moejit itself computes only the T rows).\n\n";
    md << "| cell ISL/OSL C | mode | steps | tokens | distinct T | buckets | compiles | stalled s | stall share | padding rows | GPU s | total s |\n";
    md << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& r : results) {
      md << "| " << r.cell << " | " << r.mode << " | " << r.steps << " | " << r.tokens << " | " << r.distinct_T << " | "
         << r.distinct_buckets << " | " << r.compiles << (r.failures ? " (+" + std::to_string(r.failures) + " failed)" : "")
         << " | " << std::setprecision(2) << r.stall_s << " | " << std::setprecision(1)
         << (r.total_s > 0 ? 100.0 * r.stall_s / r.total_s : 0.0) << " % | " << std::setprecision(2)
         << (r.rows ? 100.0 * double(r.padded_rows) / double(r.rows) : 0.0) << " % | " << std::setprecision(3) << r.gpu_s
         << " | " << std::setprecision(2) << r.total_s << " |\n";
    }
    for (const auto& r : results)
      if (!r.first_error.empty()) md << "\nfirst failure in " << r.cell << " " << r.mode << ": " << r.first_error << "\n";
    std::printf("%s", md.str().c_str());
    if (!md_path.empty()) {
      std::ofstream f(md_path);
      f << md.str();
      f.flush();
      if (!f) throw moejit::Error("--md " + md_path + ": cannot write");
    }
    return 0;
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "trace_replay: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_replay: error: %s\n", e.what());
    return 3;
  }
}
