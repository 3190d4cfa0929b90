#include "summary.hpp"

#include <nlohmann/json.hpp>
#include <vector>

#include "common/tool_support.hpp"

namespace moejit::tools {
namespace {

std::string quant_list(const PrewarmPlan& plan) {
  std::string s;
  for (QuantMode q : plan.quant_modes) {
    if (!s.empty()) s += ",";
    s += to_string(q);
  }
  if (!plan.weight_scales.empty()) {
    s += " (weight scales";
    for (WeightScale w : plan.weight_scales) s += " " + std::string(to_string(w));
    s += ")";
  }
  return s;
}

void row(std::FILE* out, const char* name, const std::string& value) {
  std::fprintf(out, "  %-18s %s\n", name, value.c_str());
}

}  // namespace

void print_summary(std::FILE* out, const PrewarmReport& r, const RunContext& ctx, std::size_t max_failures) {
  const PrewarmPlan& plan = *ctx.plan;
  std::fprintf(out, "moejit-prewarm summary\n");
  row(out, "plan", plan.model_name + " (" + ctx.plan_source + ")");
  row(out, "quant", quant_list(plan));
  row(out, "split", "tp=" + std::to_string(ctx.tp) + " ep=" + std::to_string(ctx.ep) + ", " +
                        std::to_string(plan.layers.size()) + " layer shape(s)");
  row(out, "target", r.target);
  row(out, "max num tokens", std::to_string(r.max_num_tokens));
  row(out, "buckets", std::to_string(r.buckets));
  row(out, "keys", std::to_string(r.keys));
  row(out, "distinct kernels", std::to_string(r.distinct_kernels));
  if (!ctx.check_only)
    row(out, "compiled",
        std::to_string(r.compiled) +
            (r.compiled ? " (" + format_ms(r.compile_ms_total) + " summed NVRTC wall time)" : ""));
  row(out, "disk hits", std::to_string(r.disk_hits));
  if (r.memory_hits) row(out, "memory hits", std::to_string(r.memory_hits));
  if (ctx.check_only) row(out, "missing", std::to_string(r.missing) + (r.missing ? " (cache incomplete)" : ""));
  row(out, "failed", std::to_string(r.failed));
  row(out, "persisted", std::to_string(r.persisted) + " (on disk or in the pack)");
  if (r.memory_only)
    row(out, "memory only", std::to_string(r.memory_only) + " (could not be written: the cache is incomplete)");
  if (r.loaded || r.load_failed)
    row(out, "loaded on GPU", std::to_string(r.loaded) + " keys, " + std::to_string(r.load_failed) + " failed");
  if (ctx.seal_check)
    row(out, "seal check", std::to_string(ctx.seal_check->keys) + " keys re-requested, " +
                               std::to_string(ctx.seal_check->misses) + " misses");
  row(out, "wall time", format_ms(r.wall_ms) + " (-j" + std::to_string(ctx.jobs) + ")");
  row(out, "cache dir", ctx.cache_dir.string());
  if (!r.failures.empty()) {
    // A driver failure (NVRTC or libcuda missing) has one cause for every key:
    // it is counted here and said once, by the tool's error line.
    std::vector<const PrewarmFailure*> listed;
    std::size_t driver = 0;
    for (const PrewarmFailure& f : r.failures) {
      if (f.kind == PrewarmFailureKind::driver) ++driver;
      else listed.push_back(&f);
    }
    std::fprintf(out, "failures (%zu):\n", r.failures.size());
    if (driver) std::fprintf(out, "  [driver] %zu keys not built (the cause: the error line below)\n", driver);
    for (std::size_t i = 0; i < listed.size() && i < max_failures; ++i) {
      const PrewarmFailure& f = *listed[i];
      std::fprintf(out, "  [%s] %s\n      %s\n", std::string(to_string(f.kind)).c_str(), f.key_text.c_str(),
                   one_line(f.message).c_str());
    }
    if (listed.size() > max_failures)
      std::fprintf(out, "  ... %zu more (full messages: --json PATH)\n", listed.size() - max_failures);
  }
  std::fflush(out);
}

std::string summary_json(const PrewarmReport& r, const RunContext& ctx) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(r.to_json());
  const PrewarmPlan& plan = *ctx.plan;
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const MoeLayerShape& s : plan.layers) layers.push_back(s.to_string());
  nlohmann::ordered_json quants = nlohmann::ordered_json::array();
  for (QuantMode q : plan.quant_modes) quants.push_back(std::string(to_string(q)));
  nlohmann::ordered_json scales = nlohmann::ordered_json::array();
  for (WeightScale w : plan.weight_scales) scales.push_back(std::string(to_string(w)));
  j["plan"] = {{"model", plan.model_name}, {"source", ctx.plan_source}, {"quant_modes", quants},
               {"weight_scales", scales},
               {"layers", layers}, {"tp", ctx.tp}, {"ep", ctx.ep}, {"target", to_string(plan.target)},
               {"max_num_tokens", plan.max_num_tokens}, {"bucket_exponent", plan.bucket_exponent}};
  j["cache_dir"] = ctx.cache_dir.string();
  j["jobs"] = ctx.jobs;
  j["check_only"] = ctx.check_only;
  if (ctx.seal_check) j["seal_check"] = {{"keys", ctx.seal_check->keys}, {"misses", ctx.seal_check->misses}};
  return j.dump(2) + "\n";
}

}  // namespace moejit::tools
