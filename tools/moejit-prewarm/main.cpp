// moejit-prewarm: compile, before traffic, every kernel a model can launch.
//
//   moejit-prewarm --model gpt-oss-120b --max-num-tokens 20000 -j2 --json report.json
//
// Exit codes (docs/exit-codes.md): 0 ok, 1 some kernels failed (or the seal
// check found misses, or --check found kernels missing), 2 bad arguments / bad
// input file, 3 environment (NVRTC missing, cache directory unusable), 4 the
// kernels were built but some could not be written to the cache directory.
// Errors are one line on stderr.
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "../cli_usage.hpp"
#include "arch.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/prewarm.hpp"
#include "moejit/runtime.hpp"
#include "plan_input.hpp"
#include "moejit/aot_pack.hpp"
#include "common/tool_support.hpp"
#include "progress.hpp"
#include "summary.hpp"
#include <ctime>
#include <nlohmann/json.hpp>

namespace moejit::tools {
namespace {

constexpr const char* kTool = "moejit-prewarm";

struct Args {
  std::string hf_config, model, arch, quant, json_path, pack;
  std::vector<std::string> weight_scales;
  std::filesystem::path cache_dir;
  long long max_num_tokens = 8192;
  int tp = 1, ep = 1, jobs = 0;
  bool list_keys = false, seal_check = false, load = false, check = false;
};

// Why before any work: a prewarm takes minutes; an output it cannot write must
// fail at once (exit 2), and --pack never creates folders.
void check_output_path(const char* flag, const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty() || path == "-") return;
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) throw UsageError(std::string(flag) + ": '" + path + "' is a directory");
  const fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::exists(parent, ec))
    throw UsageError(std::string(flag) + ": folder '" + parent.string() + "' of '" + path + "' does not exist");
  if (!fs::is_directory(parent, ec))
    throw UsageError(std::string(flag) + ": '" + parent.string() + "' of '" + path + "' is not a directory");
  if (fs::exists(p, ec) ? ::access(p.c_str(), W_OK) != 0 && std::strcmp(flag, "--pack") != 0
                        : ::access(parent.c_str(), W_OK) != 0)
    throw UsageError(std::string(flag) + ": cannot write '" + path + "': " + std::strerror(errno));
}

void write_file(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw UsageError("--json: cannot open '" + path + "' for writing");
  f << text;
  if (!f.flush()) throw UsageError("--json: cannot write '" + path + "'");
}

PlanRequest to_request(const Args& a) {
  if (a.hf_config.empty() == a.model.empty())
    throw UsageError("give exactly one of --hf-config PATH or --model NAME");
  if (a.max_num_tokens < 1)
    throw UsageError("--max-num-tokens must be >= 1 (got " + std::to_string(a.max_num_tokens) + ")");
  if (static_cast<std::uint64_t>(a.max_num_tokens) > kMaxBucketedTokens)
    throw UsageError("--max-num-tokens must be <= " + std::to_string(kMaxBucketedTokens) + " (got " +
                     std::to_string(a.max_num_tokens) + ")");
  if (a.tp < 1) throw UsageError("--tp must be >= 1 (got " + std::to_string(a.tp) + ")");
  if (a.ep < 1) throw UsageError("--ep must be >= 1 (got " + std::to_string(a.ep) + ")");
  PlanRequest r;
  if (!a.hf_config.empty()) r.hf_config = a.hf_config;
  if (!a.model.empty()) r.model = a.model;
  r.tp = a.tp;
  r.ep = a.ep;
  if (!a.quant.empty()) {
    try {
      r.quant = parse_quant_mode(a.quant);
    } catch (const InvalidArgument& e) {
      throw UsageError(std::string("--quant: ") + e.what());
    }
  }
  for (const std::string& w : a.weight_scales) {
    try {
      r.weight_scales.push_back(parse_weight_scale(w));
    } catch (const InvalidArgument& e) {
      throw UsageError(std::string("--weight-scale: ") + e.what());
    }
  }
  r.max_num_tokens = static_cast<std::uint64_t>(a.max_num_tokens);
  r.target = a.arch.empty() ? default_target() : parse_target(a.arch);
  // The kernels use sm_90a-only instructions (wgmma) and Hopper features
  // (griddepcontrol, 227 KB of shared memory per CTA): another target would
  // fail kernel by kernel at compile time.
  if (r.target != Target{90, true}) {
    const std::string t = to_string(r.target);
    if (!a.arch.empty())
      throw UsageError("--arch " + a.arch + ": moejit's kernels are built for sm_90a (H100/H200) only");
    throw EnvironmentError("GPU 0 is " + t + "; moejit's kernels are built for sm_90a (H100/H200) only: " +
                           "pass --arch sm_90a to prewarm for a Hopper GPU from this machine");
  }
  return r;
}

// enumerate_keys, with a --weight-scale that no quant mode of the plan uses
// named as the user typed it (the library names PrewarmPlan.weight_scales).
std::vector<SpecKey> enumerate_plan_keys(const PrewarmPlan& plan, const std::vector<std::string>& typed) {
  try {
    return enumerate_keys(plan);
  } catch (const InvalidArgument&) {
    for (std::size_t i = 0; i < plan.weight_scales.size() && i < typed.size(); ++i) {
      PrewarmPlan one = plan;
      one.weight_scales = {plan.weight_scales[i]};
      try {
        (void)enumerate_keys(one);
      } catch (const InvalidArgument&) {
        std::string modes;
        for (QuantMode q : plan.quant_modes) modes += (modes.empty() ? "" : ", ") + std::string(to_string(q));
        throw UsageError("--weight-scale " + typed[i] + ": no quant mode of this plan (" + modes +
                         ") has this weight-scale layout (fp8_per_token has per_expert and per_channel; choose "
                         "it with --quant fp8_per_token)");
      }
    }
    throw;
  }
}

// Re-requests every key that prewarm produced from the sealed runtime: each
// must come from memory (no disk read, no compile, no miss after seal).
SealCheckResult seal_check(Runtime& runtime, const std::vector<SpecKey>& keys, const PrewarmReport& report) {
  std::vector<std::string> failed;
  for (const PrewarmFailure& f : report.failures) failed.push_back(f.key_text);
  std::sort(failed.begin(), failed.end());
  runtime.seal();
  SealCheckResult r;
  const RuntimeStats before = runtime.stats();
  for (const SpecKey& key : keys) {
    if (std::binary_search(failed.begin(), failed.end(), key.to_text())) continue;
    ++r.keys;
    try {
      if (runtime.lookup_compiled(key).origin != CompiledKernel::Origin::memory) ++r.misses;
    } catch (const std::exception&) {
      ++r.misses;
    }
  }
  const RuntimeStats after = runtime.stats();
  const std::uint64_t counted = (after.misses_after_seal - before.misses_after_seal);
  if (counted > r.misses) r.misses = counted;
  return r;
}

// The plan's kernels as an AOT pack (write_aot_pack), the manifest describing
// the plan as the summary's "plan" object does.
void write_pack_file(Runtime& runtime, const PrewarmPlan& plan, const std::string& report_json,
                     const std::string& out) {
  const AotPackSummary w = write_aot_pack(runtime, plan, out, nlohmann::json::parse(report_json)["plan"].dump());
  std::fprintf(stderr, "%s: wrote AOT pack %s (%zu keys, target %s, NVRTC %s)\n", kTool, out.c_str(), w.keys,
               w.target.c_str(), w.nvrtc_version.c_str());
}

int run(int argc, char** argv) {
  Args a;
  CLI::App app{"Compile, before traffic, every MoE kernel a model can launch (moejit " MOEJIT_VERSION ")",
               kTool};
  app.set_version_flag("--version", MOEJIT_VERSION);
  std::string models;
  for (const std::string& m : embedded_model_names()) models += (models.empty() ? "" : ", ") + m;
  auto* hf = app.add_option("--hf-config", a.hf_config, "Hugging Face config.json of the model")->option_text("PATH");
  auto* model = app.add_option("--model", a.model, "embedded model config: " + models)->option_text("NAME");
  hf->excludes(model);
  app.add_option("--max-num-tokens", a.max_num_tokens, "per-step token budget of the server (>= 1)")
      ->option_text("N [8192]");
  app.add_option("--arch", a.arch, "target, e.g. sm_90a (default: GPU 0's, else sm_90a)")->option_text("ARCH");
  app.add_option("--tp", a.tp, "tensor-parallel size (divides the expert intermediate size)")->option_text("N [1]");
  app.add_option("--ep", a.ep, "expert-parallel size (divides the experts)")->option_text("N [1]");
  app.add_option("--quant", a.quant, "quant mode override: bf16, w4a16_mxfp4, mxfp8, fp8_per_token")->option_text("MODE");
  app.add_option("--weight-scale", a.weight_scales,
                 "weight-scale layouts to cover, comma-separated (fp8_per_token: per_expert, per_channel; "
                 "default: each mode's own)")
      ->delimiter(',')
      ->option_text("LIST");
  app.add_option("--cache-dir", a.cache_dir, "cache directory (default: $MOEJIT_CACHE_DIR, else $XDG_CACHE_HOME/moejit, else ~/.cache/moejit)")->option_text("DIR");
  app.add_option("-j,--jobs", a.jobs, "compile threads (0: one per core)")->option_text("N [0]");
  app.add_option("--json", a.json_path, "write the report as JSON to PATH ('-': stdout)")->option_text("PATH");
  app.add_flag("--list-keys", a.list_keys, "print every specialization key (canonical text) and exit");
  auto* seal = app.add_flag("--seal-check", a.seal_check, "after prewarm, seal and re-request every key: zero misses or exit 1");
  auto* load = app.add_flag("--load", a.load, "also load every kernel on GPU 0 (needs a GPU)");
  auto* pack = app.add_option("--pack", a.pack, "also write the plan's kernels as one immutable AOT pack file (MOEJIT_CACHE_PACK)")
      ->option_text("OUT");
  app.add_flag("--check", a.check,
               "check, without compiling or writing anything, that the cache directory (and MOEJIT_CACHE_PACK) "
               "holds every kernel of the plan: exit 0 complete, 1 not (for read-only caches)")
      ->excludes(load)
      ->excludes(seal)
      ->excludes(pack);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw UsageError(usage_error_text(app, e));
  }
  if (a.jobs < 0) throw UsageError("-j must be >= 0 (got " + std::to_string(a.jobs) + ")");
  check_output_path("--json", a.json_path);
  check_output_path("--pack", a.pack);

  const PlanRequest request = to_request(a);
  const PrewarmPlan plan = load_plan(request);
  const std::vector<SpecKey> keys = enumerate_plan_keys(plan, a.weight_scales);
  if (a.list_keys) {
    std::string out;
    for (const SpecKey& k : keys) out += k.to_text() + "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  }
  if (a.load && !have_gpu()) throw EnvironmentError("--load needs a GPU, and none is usable on this machine");

  RuntimeOptions ropts;
  ropts.cache_dir = a.cache_dir.empty() ? default_cache_dir() : std::filesystem::path(a.cache_dir);
  if (a.check) {
    // Why no write probe: --check is for caches that must not change (baked
    // into an image, a read-only export); only their trust is checked.
    check_cache_dir_readable(ropts.cache_dir);
    ropts.read_only_cache = true;
  } else {
    // Why check before constructing the Runtime: it would degrade to memory-only
    // with a warning, and a prewarm that persists nothing is useless.
    check_cache_dir_usable(ropts.cache_dir);
  }
  Runtime runtime(ropts);

  PrewarmOptions popts;
  popts.jobs = a.jobs;
  popts.load_on_gpu = a.load;
  popts.check_only = a.check;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  ProgressBar bar(stderr);
  if (tty) popts.on_progress = [&bar](std::size_t done, std::size_t total) { bar.update(done, total); };
  const PrewarmReport report = prewarm(runtime, plan, popts);
  if (tty) bar.finish();

  RunContext ctx;
  ctx.plan = &plan;
  ctx.plan_source = describe(request);
  ctx.tp = a.tp;
  ctx.ep = a.ep;
  ctx.jobs = a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ctx.cache_dir = runtime.cache_dir();
  ctx.check_only = a.check;
  if (a.seal_check) ctx.seal_check = seal_check(runtime, keys, report);

  // With --json -, stdout carries the JSON only and the table goes to stderr.
  print_summary(a.json_path == "-" ? stderr : stdout, report, ctx);
  if (!a.json_path.empty()) write_file(a.json_path, summary_json(report, ctx));

  if (!a.pack.empty()) {
    if (report.failed > 0 || !report.failures.empty())
      throw Error("--pack: not written, " + std::to_string(report.failed) + " kernels failed");
    write_pack_file(runtime, plan, summary_json(report, ctx), a.pack);
  }

  for (const PrewarmFailure& f : report.failures) {
    if (f.kind == PrewarmFailureKind::driver) {
      // Once, however many kernels it stopped (the summary lists none of them).
      std::fprintf(stderr, "%s: error: %s (%zu of %zu kernels not built)\n", kTool, one_line(f.message).c_str(),
                   report.failed, report.distinct_kernels);
      return static_cast<int>(ExitCode::environment);
    }
  }
  if (report.failed > 0 || !report.failures.empty()) {
    std::fprintf(stderr, "%s: error: %zu of %zu kernels failed (listed above)\n", kTool,
                 report.failed + report.load_failed, report.distinct_kernels);
    return static_cast<int>(ExitCode::failed);
  }
  if (ctx.seal_check && ctx.seal_check->misses > 0) {
    std::fprintf(stderr, "%s: error: seal check: %zu of %zu keys missed after seal()\n", kTool,
                 ctx.seal_check->misses, ctx.seal_check->keys);
    return static_cast<int>(ExitCode::failed);
  }
  if (a.check && report.missing > 0) {
    std::fprintf(stderr, "%s: error: --check: %zu of %zu kernels are not in %s\n", kTool, report.missing,
                 report.distinct_kernels, runtime.cache_dir().c_str());
    return static_cast<int>(ExitCode::failed);
  }
  if (report.memory_only > 0) {
    std::fprintf(stderr,
                 "%s: error: cache incomplete: %zu of %zu kernels could not be written to %s and live only in "
                 "this process's memory (see the warning above: disk full, quota, read-only file system?)\n",
                 kTool, report.memory_only, report.distinct_kernels, runtime.cache_dir().c_str());
    return static_cast<int>(ExitCode::incomplete);
  }
  return 0;
}

}  // namespace
}  // namespace moejit::tools

int main(int argc, char** argv) {
  using namespace moejit::tools;
  return run_tool_main(kTool, run, argc, argv);
}
