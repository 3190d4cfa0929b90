#pragma once
// Model plans from a Hugging Face config.json: which MoE layer shapes a model has,
// and the prewarm plan that covers them on one GPU after tensor- and
// expert-parallel splits.
//
// Supported model_type values and the config.json fields read:
//   gpt_oss     hidden_size, intermediate_size, num_local_experts,
//               num_experts_per_tok (or experts_per_token), num_hidden_layers,
//               swiglu_limit (default 7.0). Activation swiglu_oai with alpha 1.702
//               (a constant of the model, not in the config) and limit swiglu_limit;
//               bf16 biases on gate_up and down (the checkpoint stores them as bf16).
//   deepseek_v3 hidden_size, moe_intermediate_size, n_routed_experts,
//               num_experts_per_tok, num_hidden_layers, first_k_dense_replace
//               (default 0), moe_layer_freq (default 1), n_shared_experts (default 0).
//   qwen3_moe   hidden_size, moe_intermediate_size, num_experts, num_experts_per_tok,
//               num_hidden_layers, decoder_sparse_step (default 1), mlp_only_layers
//               (default []).
//   mixtral     hidden_size, intermediate_size, num_local_experts,
//               num_experts_per_tok, num_hidden_layers.
// All but gpt_oss: silu_gated activation (hidden_act must be "silu"), no biases.
// Only routed experts are planned: DeepSeek's shared expert is a dense MLP, not a
// grouped GEMM (its count is kept in ModelSpec::shared_experts for reports).
//
// Checkpoint quantization (quantization_config.quant_method):
//   absent                          -> none (bf16 checkpoint)
//   "mxfp4"                         -> QuantMode::w4a16_mxfp4
//   "fp8" without weight_block_size -> QuantMode::fp8_per_token (per-tensor or
//                                      per-channel weight scales map to per_expert /
//                                      per_channel; activations get per-token scales)
//   anything else, including "fp8" with weight_block_size (DeepSeek-V3's 128x128
//   blocks, not supported yet) -> no moejit mode. Parsing still succeeds (the
//   shapes are known); make_plan() then needs an explicit PlanOptions::quant and
//   otherwise throws an error that lists the supported methods.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "moejit/key.hpp"
#include "moejit/moe_shape.hpp"
#include "moejit/prewarm.hpp"
#include "moejit/types.hpp"

namespace moejit {

// One model's MoE facts, before any parallel split.
struct ModelSpec {
  std::string name;        // display name: embedded folder name, or derived from the path
  std::string model_type;  // "gpt_oss", "deepseek_v3", "qwen3_moe", "mixtral"
  std::uint32_t hidden = 0;        // D
  std::uint32_t intermediate = 0;  // I of one routed expert
  std::uint32_t experts = 0;       // routed experts E
  std::uint32_t top_k = 0;         // experts per token
  std::uint32_t layers_moe = 0;    // number of MoE layers (dense layers not counted)
  Activation act = Activation::silu_gated;
  float alpha = 0.f, limit = 0.f;  // swiglu_oai parameters; 0 otherwise
  BiasKind gate_up_bias = BiasKind::none, down_bias = BiasKind::none;
  // The moejit mode matching the checkpoint's weights; nullopt for a bf16 checkpoint
  // and for a quantized one moejit cannot run (see checkpoint_quant_method).
  std::optional<QuantMode> checkpoint_quant;
  // quantization_config.quant_method as written ("" when absent), followed by
  // " weight_block_size=AxB" when the config has one (e.g. "fp8 weight_block_size=128x128").
  std::string checkpoint_quant_method;
  std::uint32_t shared_experts = 0;  // DeepSeek's always-on experts (not planned)

  std::string to_string() const;  // "gpt-oss-120b (gpt_oss): D=2880 I=2880 E=128 top_k=4 ..."
};

// Parses a config.json text. name_for_errors names the source in messages and
// becomes ModelSpec::name. Throws InvalidArgument naming the source and the
// field: invalid JSON, unknown model_type (message lists the supported ones),
// missing or non-positive-integer field, unsupported hidden_act, a top_k larger
// than the expert count.
ModelSpec parse_hf_config(std::string_view json_text, std::string_view name_for_errors);

// Reads and parses a config.json file (a directory means <dir>/config.json).
// ModelSpec::name: "_name_or_path" when the config has it, else the parent
// folder's name for a file called config.json, else the file stem.
// Throws InvalidArgument naming the path when it does not exist, cannot be read,
// or does not parse (plus everything parse_hf_config throws).
ModelSpec load_hf_config(const std::filesystem::path& path);

// The configs compiled into the library (models/<name>/config.json), sorted.
std::vector<std::string> embedded_model_names();

// An embedded config by folder name ("gpt-oss-120b"). Throws InvalidArgument
// listing the available names when unknown.
ModelSpec embedded_model(std::string_view name);

struct PlanOptions {
  // Weight format to plan for; unset = the checkpoint's (ModelSpec::checkpoint_quant),
  // or bf16 for an unquantized checkpoint.
  std::optional<QuantMode> quant;
  std::uint64_t max_num_tokens = 8192;  // per-step token budget; >= 1
  int tp = 1;  // tensor parallel: splits each expert's intermediate I (must divide it)
  int ep = 1;  // expert parallel: splits the experts E (must divide them)
  Target target{};
  int bucket_exponent = 3;  // buckets per octave = 2^bucket_exponent, in [0, 16]
};

// The prewarm plan of one GPU: one MoeLayerShape (all MoE layers of the supported
// models share one shape) with I / tp and E / ep, the quant mode, the token
// budget, the bucket exponent and the target. Throws InvalidArgument with a
// message naming the option and value: max_num_tokens 0 ("max_num_tokens must
// be >= 1, got 0") or above 2^31, tp or ep < 1 or not dividing I resp. E,
// bucket_exponent out of range, a checkpoint quantization moejit cannot run
// without an explicit quant, or an MX quant (w4a16_mxfp4, mxfp8) whose K
// (hidden, or I / tp) is not a multiple of the 32-element block.
PrewarmPlan make_plan(const ModelSpec& model, const PlanOptions& options);

}  // namespace moejit
