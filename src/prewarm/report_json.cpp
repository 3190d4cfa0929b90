// PrewarmReport::to_json: the machine-readable report (moejit-prewarm --json).
#include <nlohmann/json.hpp>

#include "moejit/prewarm.hpp"

namespace moejit {

std::string PrewarmReport::to_json() const {
  nlohmann::ordered_json j;
  j["model"] = model_name;
  j["max_num_tokens"] = max_num_tokens;
  j["target"] = target;
  j["buckets"] = buckets;
  j["keys"] = keys;
  j["distinct_kernels"] = distinct_kernels;
  j["compiled"] = compiled;
  j["disk_hits"] = disk_hits;
  j["memory_hits"] = memory_hits;
  j["failed"] = failed;
  j["missing"] = missing;
  j["persisted"] = persisted;
  j["memory_only"] = memory_only;
  j["loaded"] = loaded;
  j["load_failed"] = load_failed;
  j["wall_ms"] = wall_ms;
  j["compile_ms_total"] = compile_ms_total;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const PrewarmFailure& f : failures) list.push_back({{"key", f.key_text}, {"kind", to_string(f.kind)}, {"message", f.message}});
  j["failures"] = std::move(list);
  return j.dump(2);
}

}  // namespace moejit
