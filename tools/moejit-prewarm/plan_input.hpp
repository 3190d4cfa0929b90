#pragma once
// Where moejit-prewarm's plan comes from: a Hugging Face config.json on disk
// (--hf-config) or one embedded in the binary (--model).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "moejit/prewarm.hpp"

namespace moejit::tools {

struct PlanRequest {
  std::optional<std::filesystem::path> hf_config;
  std::optional<std::string> model;
  int tp = 1, ep = 1;
  std::optional<QuantMode> quant;  // override of the config's quantization_config
  std::vector<WeightScale> weight_scales;  // PrewarmPlan::weight_scales (empty: each mode's default)
  std::uint64_t max_num_tokens = 8192;
  Target target{};
};

// Names accepted by --model (folders of models/), sorted.
std::vector<std::string> embedded_model_names();

// The plan for the request. Throws UsageError (exit code 2) for a missing or
// unreadable file, text that is not JSON, an unknown --model name (the message
// lists the known ones), and passes on the model loader's InvalidArgument
// (unknown model_type, unsupported quantization, TP/EP not dividing the shape).
PrewarmPlan load_plan(const PlanRequest& request);

// One-word description for the summary: "--model gpt-oss-120b" / "--hf-config PATH".
std::string describe(const PlanRequest& request);

}  // namespace moejit::tools
