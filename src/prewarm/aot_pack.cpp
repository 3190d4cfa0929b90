// moejit/aot_pack.hpp: the plan's kernels as one AOT pack file.
#include "moejit/aot_pack.hpp"

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cache/pack.hpp"
#include "moejit/error.hpp"
#include "runtime/runtime_access.hpp"

namespace moejit {
namespace {

std::string plan_json(const PrewarmPlan& plan) {
  std::vector<std::string> layers, quants, scales;
  for (const MoeLayerShape& s : plan.layers) layers.push_back(s.to_string());
  for (QuantMode q : plan.quant_modes) quants.emplace_back(to_string(q));
  for (WeightScale w : plan.weight_scales) scales.emplace_back(to_string(w));
  nlohmann::ordered_json j = {{"model", plan.model_name},       {"quant_modes", quants},
                              {"weight_scales", scales},        {"layers", layers},
                              {"target", to_string(plan.target)}, {"max_num_tokens", plan.max_num_tokens},
                              {"bucket_exponent", plan.bucket_exponent}};
  return j.dump();
}

}  // namespace

AotPackSummary write_aot_pack(Runtime& runtime, const PrewarmPlan& plan, const std::filesystem::path& out,
                              std::string_view description) {
  if (out.empty()) throw InvalidArgument("write_aot_pack: out must be a file path, got an empty path");
  // Why first: producing the kernels can take minutes; a destination that
  // cannot take the pack must fail before that.
  cache::check_pack_destination(out);
  const std::vector<SpecKey> keys = enumerate_keys(plan, runtime.gemm_tuning());
  cache::PackManifest m;
  std::vector<cache::Entry> entries;
  entries.reserve(keys.size());
  for (const SpecKey& k : keys) {
    cache::Entry e = RuntimeAccess::entry_for(runtime, k);
    m.keys.push_back({k.to_text(), e.header.payload.address()});
    entries.push_back(std::move(e));
  }
  if (entries.empty()) throw InvalidArgument("write_aot_pack: the plan has no keys");
  m.moejit_version = entries.front().header.payload.moejit_version;
  m.nvrtc_version = entries.front().header.payload.nvrtc_version;
  m.target = to_string(plan.target);
  m.created_unix = static_cast<std::int64_t>(std::time(nullptr));
  m.plan_json = description.empty() ? plan_json(plan) : std::string(description);
  cache::write_pack(out, m, entries);
  return AotPackSummary{keys.size(), m.target, m.nvrtc_version};
}

std::size_t write_aot_pack(Runtime& runtime, const PrewarmPlan& plan, const std::filesystem::path& out) {
  return write_aot_pack(runtime, plan, out, {}).keys;
}

}  // namespace moejit
