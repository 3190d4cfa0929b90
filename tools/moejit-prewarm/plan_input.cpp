#include "plan_input.hpp"

#include <system_error>

#include "moejit/error.hpp"
#include "moejit/model.hpp"
#include "common/tool_support.hpp"

namespace moejit::tools {

std::vector<std::string> embedded_model_names() { return ::moejit::embedded_model_names(); }

PrewarmPlan load_plan(const PlanRequest& request) {
  ModelSpec spec;
  if (request.hf_config) {
    namespace fs = std::filesystem;
    const fs::path& p = *request.hf_config;
    std::error_code ec;
    // Why check here and not only in the loader: the tool promises exit code 2
    // and a one-line message naming the option for a missing input file.
    if (!fs::exists(p, ec)) throw UsageError("--hf-config: '" + p.string() + "' does not exist");
    try {
      spec = load_hf_config(p);
    } catch (const InvalidArgument& e) {
      // The library names its input "model config '<path>'"; the user typed --hf-config.
      std::string msg = e.what();
      const std::string prefix = "model config ";
      if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
      throw UsageError("--hf-config " + msg);
    }
  } else {
    spec = embedded_model(*request.model);
  }
  if (!request.quant && !spec.checkpoint_quant && !spec.checkpoint_quant_method.empty())
    throw UsageError(describe(request) + ": its checkpoint quantization '" + spec.checkpoint_quant_method +
                     "' is not supported; choose a quant mode with --quant (bf16, w4a16_mxfp4, mxfp8, fp8_per_token)");
  // The split flags, named as typed (the library names PlanOptions' fields).
  if (request.tp >= 1 && spec.intermediate % static_cast<std::uint32_t>(request.tp) != 0)
    throw UsageError("--tp " + std::to_string(request.tp) + ": does not divide the expert intermediate size " +
                     std::to_string(spec.intermediate) + " of " + describe(request));
  if (request.ep >= 1 && spec.experts % static_cast<std::uint32_t>(request.ep) != 0)
    throw UsageError("--ep " + std::to_string(request.ep) + ": does not divide the expert count " +
                     std::to_string(spec.experts) + " of " + describe(request));
  PlanOptions opts;
  opts.quant = request.quant;
  opts.max_num_tokens = request.max_num_tokens;
  opts.tp = request.tp;
  opts.ep = request.ep;
  opts.target = request.target;
  PrewarmPlan plan = make_plan(spec, opts);
  if (plan.model_name.empty()) plan.model_name = spec.name;
  plan.weight_scales = request.weight_scales;
  return plan;
}

std::string describe(const PlanRequest& request) {
  if (request.hf_config) return "--hf-config " + request.hf_config->string();
  if (request.model) return "--model " + *request.model;
  return "";
}

}  // namespace moejit::tools
