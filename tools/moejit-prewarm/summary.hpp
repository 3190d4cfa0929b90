#pragma once
// The end-of-run summary table of moejit-prewarm and its JSON document.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "moejit/prewarm.hpp"

namespace moejit::tools {

struct SealCheckResult {
  std::size_t keys = 0;    // keys re-requested after seal()
  std::size_t misses = 0;  // of those, not served from memory
};

struct RunContext {
  const PrewarmPlan* plan = nullptr;
  std::string plan_source;  // "--model gpt-oss-120b" or the config path
  int tp = 1, ep = 1, jobs = 0;
  std::filesystem::path cache_dir;
  std::optional<SealCheckResult> seal_check;
  bool check_only = false;  // --check: nothing compiled, `missing` counted
};

// Prints the table (always) to `out`; failures (key + tools::one_line of the
// message, at most `max_failures`) follow it.
void print_summary(std::FILE* out, const PrewarmReport& report, const RunContext& ctx, std::size_t max_failures = 10);

// report.to_json() plus "plan" (model, quant, layers, tp, ep, target), "cache_dir",
// "jobs" and, when run, "seal_check".
std::string summary_json(const PrewarmReport& report, const RunContext& ctx);

}  // namespace moejit::tools
