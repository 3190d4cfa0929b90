// Hugging Face config.json -> ModelSpec, for the model types of moejit/model.hpp.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "model/config_reader.hpp"
#include "moejit/error.hpp"
#include "moejit/model.hpp"
#include "util/embedded_file.hpp"

namespace moejit {
namespace {

using nlohmann::json;
using model::ConfigReader;

// gpt-oss SwiGLU alpha: a constant of the architecture (model card, reference
// implementation), absent from config.json.
constexpr float kGptOssAlpha = 1.702f;
constexpr float kGptOssDefaultLimit = 7.0f;  // GptOssConfig's default swiglu_limit

// Top-k under its common spellings; both present and disagreeing is an error.
std::uint32_t read_top_k(const ConfigReader& r, bool allow_experts_per_token) {
  if (allow_experts_per_token && r.has("experts_per_token")) {
    const std::uint32_t alt = r.positive("experts_per_token");
    if (r.has("num_experts_per_tok") && r.positive("num_experts_per_tok") != alt)
      r.fail("experts_per_token", "disagrees with num_experts_per_tok=" +
                                      std::to_string(r.positive("num_experts_per_tok")));
    return alt;
  }
  return r.positive("num_experts_per_tok");
}

void require_silu(const ConfigReader& r) {
  const auto act = r.string_opt("hidden_act");
  if (act && *act != "silu") r.fail("hidden_act", "must be \"silu\" (silu-gated experts)");
}

void parse_gpt_oss(const ConfigReader& r, ModelSpec& m) {
  m.hidden = r.positive("hidden_size");
  m.intermediate = r.positive("intermediate_size");
  m.experts = r.positive("num_local_experts");
  m.top_k = read_top_k(r, true);
  m.layers_moe = r.positive("num_hidden_layers");
  m.act = Activation::swiglu_oai;
  m.alpha = kGptOssAlpha;
  m.limit = r.positive_float_or("swiglu_limit", kGptOssDefaultLimit);
  // Why bf16: the checkpoint stores the expert biases in bf16; the epilogue reads
  // them as stored, so loading needs no conversion pass and no fp32 copy.
  m.gate_up_bias = BiasKind::bf16;
  m.down_bias = BiasKind::bf16;
}

void parse_deepseek_v3(const ConfigReader& r, ModelSpec& m) {
  require_silu(r);
  m.hidden = r.positive("hidden_size");
  m.intermediate = r.positive("moe_intermediate_size");
  m.experts = r.positive("n_routed_experts");
  m.top_k = read_top_k(r, false);
  const std::uint32_t layers = r.positive("num_hidden_layers");
  const std::uint32_t first_dense = r.count_or("first_k_dense_replace", 0);
  const std::uint32_t freq = r.positive_or("moe_layer_freq", 1);
  // HF DeepseekV3: layer i is MoE iff i >= first_k_dense_replace and i % moe_layer_freq == 0.
  for (std::uint32_t i = first_dense; i < layers; ++i)
    if (i % freq == 0) ++m.layers_moe;
  m.shared_experts = r.count_or("n_shared_experts", 0);
}

void parse_qwen3_moe(const ConfigReader& r, ModelSpec& m) {
  require_silu(r);
  m.hidden = r.positive("hidden_size");
  m.intermediate = r.positive("moe_intermediate_size");
  m.experts = r.positive("num_experts");
  m.top_k = read_top_k(r, false);
  const std::uint32_t layers = r.positive("num_hidden_layers");
  const std::uint32_t step = r.positive_or("decoder_sparse_step", 1);
  std::vector<std::int64_t> dense;
  if (r.has("mlp_only_layers")) {
    const json& v = r.at("mlp_only_layers");
    if (!v.is_array()) r.fail("mlp_only_layers", "must be an array of layer indices");
    for (const json& e : v) {
      if (!e.is_number_integer()) r.fail("mlp_only_layers", "must be an array of layer indices");
      dense.push_back(e.get<std::int64_t>());
    }
  }
  // HF Qwen3Moe: layer i is MoE iff i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0.
  for (std::uint32_t i = 0; i < layers; ++i)
    if (std::find(dense.begin(), dense.end(), i) == dense.end() && (i + 1) % step == 0)
      ++m.layers_moe;
}

void parse_mixtral(const ConfigReader& r, ModelSpec& m) {
  require_silu(r);
  m.hidden = r.positive("hidden_size");
  m.intermediate = r.positive("intermediate_size");
  m.experts = r.positive("num_local_experts");
  m.top_k = read_top_k(r, false);
  m.layers_moe = r.positive("num_hidden_layers");
}

struct ModelType {
  std::string_view name;
  void (*parse)(const ConfigReader&, ModelSpec&);
};
constexpr ModelType kModelTypes[] = {
    {"gpt_oss", parse_gpt_oss},
    {"deepseek_v3", parse_deepseek_v3},
    {"qwen3_moe", parse_qwen3_moe},
    {"mixtral", parse_mixtral},
};

std::string supported_model_types() {
  std::string out;
  for (const auto& t : kModelTypes) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

void parse_quantization(const ConfigReader& r, ModelSpec& m) {
  if (!r.has("quantization_config")) return;
  const json& q = r.at("quantization_config");
  if (!q.is_object()) r.fail("quantization_config", "must be an object");
  ConfigReader qr(q, "quantization_config");
  const auto method = qr.string_opt("quant_method");
  if (!method) r.fail("quantization_config", "has no string field 'quant_method'");
  m.checkpoint_quant_method = *method;
  bool blocked = false;
  if (qr.has("weight_block_size")) {
    blocked = true;
    const json& b = q.at("weight_block_size");
    m.checkpoint_quant_method += " weight_block_size=";
    if (b.is_array()) {
      for (std::size_t i = 0; i < b.size(); ++i)
        m.checkpoint_quant_method += (i ? "x" : "") + b[i].dump();
    } else {
      m.checkpoint_quant_method += b.dump();
    }
  }
  if (*method == "mxfp4") m.checkpoint_quant = QuantMode::w4a16_mxfp4;
  else if (*method == "fp8" && !blocked) m.checkpoint_quant = QuantMode::fp8_per_token;
  // Anything else: no moejit mode; make_plan() asks for an explicit quant.
}

std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw InvalidArgument("model config '" + path.string() + "' does not exist");
  if (std::filesystem::is_directory(path, ec))
    throw InvalidArgument("model config '" + path.string() + "' is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument("model config '" + path.string() + "' cannot be opened for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw InvalidArgument("model config '" + path.string() + "' could not be read");
  return ss.str();
}

}  // namespace

namespace {

json parse_json(std::string_view text, const std::string& source) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw InvalidArgument(source + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw InvalidArgument(source + ": config.json must be a JSON object");
  return j;
}

ModelSpec spec_from_json(const json& j, const std::string& source) {
  const ConfigReader r(j, source);
  const auto type = r.string_opt("model_type");
  if (!type)
    r.fail("model_type", "is required (supported: " + supported_model_types() + ")");
  const ModelType* mt = nullptr;
  for (const auto& t : kModelTypes)
    if (t.name == *type) mt = &t;
  if (!mt)
    r.fail_msg("unsupported model_type '" + *type + "' (supported: " + supported_model_types() +
               ")");
  ModelSpec m;
  m.name = source;
  m.model_type = *type;
  mt->parse(r, m);
  parse_quantization(r, m);
  if (m.top_k > m.experts)
    r.fail_msg("experts per token (" + std::to_string(m.top_k) + ") exceeds the expert count (" +
               std::to_string(m.experts) + ")");
  if (m.layers_moe == 0) r.fail_msg("the config describes no MoE layer");
  return m;
}

}  // namespace

ModelSpec parse_hf_config(std::string_view json_text, std::string_view name_for_errors) {
  const std::string source(name_for_errors);
  return spec_from_json(parse_json(json_text, source), source);
}

ModelSpec load_hf_config(const std::filesystem::path& path_in) {
  std::filesystem::path path = path_in;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) path /= "config.json";
  const std::string source = "model config '" + path.string() + "'";
  const json j = parse_json(read_file(path), source);
  ModelSpec m = spec_from_json(j, source);
  // Display name: _name_or_path, else the folder of a config.json, else the stem.
  std::string name;
  if (j.contains("_name_or_path") && j["_name_or_path"].is_string())
    name = j["_name_or_path"].get<std::string>();
  if (name.empty()) {
    const auto parent = std::filesystem::absolute(path, ec).parent_path().filename().string();
    name = path.filename() == "config.json" && !parent.empty() ? parent : path.stem().string();
  }
  m.name = name;
  return m;
}

std::vector<std::string> embedded_model_names() {
  std::vector<std::string> out;
  for (const auto& f : model::embedded_model_configs()) out.emplace_back(f.name);
  std::sort(out.begin(), out.end());
  return out;
}

ModelSpec embedded_model(std::string_view name) {
  for (const auto& f : model::embedded_model_configs())
    if (f.name == name) {
      ModelSpec m = parse_hf_config(f.text, "embedded model config '" + std::string(name) + "'");
      m.name = std::string(name);
      return m;
    }
  std::string names;
  for (const auto& n : embedded_model_names()) names += (names.empty() ? "" : ", ") + n;
  throw InvalidArgument("unknown model '" + std::string(name) + "' (embedded models: " + names +
                        ")");
}

}  // namespace moejit
