// Model plans from Hugging Face config.json (embedded and from files).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "moejit/error.hpp"
#include "moejit/model.hpp"
#include "util/embedded_file.hpp"

using namespace moejit;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json embedded_json(std::string_view name) {
  for (const auto& f : model::embedded_model_configs())
    if (f.name == name) return json::parse(f.text);
  FAIL("no embedded config " << name);
  return {};
}

std::string dump(const json& j) { return j.dump(); }

// A scratch folder under the build tree: tests/data/<test> (never the source tree).
fs::path data_dir(const std::string& test) {
  const fs::path dir = fs::path(MOEJIT_BINARY_DIR) / "tests" / "data" / test;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

}  // namespace

TEST_CASE("model: embedded configs parse to the published model shapes", "[model]") {
  struct Row {
    const char* name;
    const char* type;
    std::uint32_t D, I, E, top_k, moe_layers;
  };
  const Row rows[] = {
      {"gpt-oss-120b", "gpt_oss", 2880, 2880, 128, 4, 36},
      {"gpt-oss-20b", "gpt_oss", 2880, 2880, 32, 4, 24},
      {"deepseek-v3", "deepseek_v3", 7168, 2048, 256, 8, 58},  // 61 layers, first 3 dense
      {"qwen3-30b-a3b", "qwen3_moe", 2048, 768, 128, 8, 48},
      {"qwen3-235b-a22b", "qwen3_moe", 4096, 1536, 128, 8, 94},
      {"mixtral-8x7b", "mixtral", 4096, 14336, 8, 2, 32},
  };
  CHECK(embedded_model_names() == std::vector<std::string>{"deepseek-v3", "gpt-oss-120b",
                                                            "gpt-oss-20b", "mixtral-8x7b",
                                                            "qwen3-235b-a22b", "qwen3-30b-a3b"});
  for (const Row& r : rows) {
    INFO(r.name);
    const ModelSpec m = embedded_model(r.name);
    CHECK(m.name == r.name);
    CHECK(m.model_type == r.type);
    CHECK(m.hidden == r.D);
    CHECK(m.intermediate == r.I);
    CHECK(m.experts == r.E);
    CHECK(m.top_k == r.top_k);
    CHECK(m.layers_moe == r.moe_layers);
    const bool oss = std::string(r.type) == "gpt_oss";
    CHECK(m.act == (oss ? Activation::swiglu_oai : Activation::silu_gated));
    CHECK(m.alpha == (oss ? 1.702f : 0.f));
    CHECK(m.limit == (oss ? 7.0f : 0.f));
    CHECK(m.gate_up_bias == (oss ? BiasKind::bf16 : BiasKind::none));
    CHECK(m.down_bias == (oss ? BiasKind::bf16 : BiasKind::none));
    CHECK(m.checkpoint_quant == (oss ? std::optional(QuantMode::w4a16_mxfp4) : std::nullopt));
  }
  const ModelSpec ds = embedded_model("deepseek-v3");
  CHECK(ds.checkpoint_quant_method == "fp8 weight_block_size=128x128");
  CHECK(ds.shared_experts == 1);
  CHECK(embedded_model("mixtral-8x7b").checkpoint_quant_method.empty());
  CHECK(embedded_model("gpt-oss-20b").to_string() ==
        "gpt-oss-20b (gpt_oss): D=2880 I=2880 E=32 top_k=4 moe_layers=24 act=swiglu_oai "
        "alpha=1.702 limit=7 gate_up_bias=bf16 down_bias=bf16 checkpoint_quant=w4a16_mxfp4");
  CHECK_THROWS_WITH(embedded_model("llama-3-8b"),
                    Catch::Contains("'llama-3-8b'") && Catch::Contains("gpt-oss-120b") &&
                        Catch::Contains("qwen3-30b-a3b"));
}

TEST_CASE("model: make_plan for gpt-oss-120b", "[model]") {
  const ModelSpec m = embedded_model("gpt-oss-120b");
  PlanOptions o;
  o.max_num_tokens = 20000;
  const PrewarmPlan plan = make_plan(m, o);
  CHECK(plan.model_name == "gpt-oss-120b");
  REQUIRE(plan.layers.size() == 1);
  CHECK(plan.layers[0].to_string() ==
        "D=2880 I=2880 E=128 top_k=4 act=swiglu_oai alpha=1.702 limit=7 gate_up_bias=bf16 "
        "down_bias=bf16");
  CHECK(plan.quant_modes == std::vector<QuantMode>{QuantMode::w4a16_mxfp4});
  CHECK(plan.max_num_tokens == 20000);
  CHECK(plan.bucket_exponent == 3);
  CHECK(plan.target == Target{90, true});

  o.quant = QuantMode::bf16;
  o.target = parse_target("sm_100a");
  o.bucket_exponent = 2;
  const PrewarmPlan p2 = make_plan(m, o);
  CHECK(p2.quant_modes == std::vector<QuantMode>{QuantMode::bf16});
  CHECK(p2.target == Target{100, true});
  CHECK(p2.bucket_exponent == 2);
}

TEST_CASE("model: tensor- and expert-parallel splits", "[model]") {
  const ModelSpec oss = embedded_model("gpt-oss-120b");
  PlanOptions o;
  o.tp = 2;
  o.ep = 4;
  auto shape = make_plan(oss, o).layers.at(0);
  CHECK(shape.intermediate == 1440);
  CHECK(shape.experts == 32);
  CHECK(shape.hidden == 2880);
  CHECK(shape.top_k == 4);

  // 2880 / 4 = 720 is not a whole number of MXFP4 blocks; fine in bf16.
  o = {};
  o.tp = 4;
  CHECK_THROWS_WITH(make_plan(oss, o), Catch::Contains("720") && Catch::Contains("tp=4") &&
                                           Catch::Contains("w4a16_mxfp4"));
  o.quant = QuantMode::bf16;
  CHECK(make_plan(oss, o).layers.at(0).intermediate == 720);

  o = {};
  o.tp = 7;
  CHECK_THROWS_WITH(make_plan(oss, o),
                    Catch::Contains("tp=7") && Catch::Contains("2880") && Catch::Contains("gpt-oss-120b"));
  o = {};
  o.ep = 3;
  CHECK_THROWS_WITH(make_plan(oss, o), Catch::Contains("ep=3") && Catch::Contains("128"));
  o = {};
  o.tp = 0;
  CHECK_THROWS_WITH(make_plan(oss, o), Catch::Contains("tp must be >= 1, got 0"));
  o = {};
  o.ep = -2;
  CHECK_THROWS_WITH(make_plan(oss, o), Catch::Contains("ep must be >= 1, got -2"));

  const ModelSpec qwen = embedded_model("qwen3-30b-a3b");
  o = {};
  o.tp = 4;
  o.ep = 8;
  shape = make_plan(qwen, o).layers.at(0);
  CHECK(shape.intermediate == 192);
  CHECK(shape.experts == 16);
  CHECK(shape.act == Activation::silu_gated);
  CHECK(make_plan(qwen, o).quant_modes == std::vector<QuantMode>{QuantMode::bf16});

  const ModelSpec mixtral = embedded_model("mixtral-8x7b");
  o = {};
  o.ep = 8;
  CHECK(make_plan(mixtral, o).layers.at(0).experts == 1);
  o.ep = 16;
  CHECK_THROWS_WITH(make_plan(mixtral, o), Catch::Contains("ep=16") && Catch::Contains("8"));
}

TEST_CASE("model: plan option errors", "[model]") {
  const ModelSpec m = embedded_model("gpt-oss-20b");
  PlanOptions o;
  o.max_num_tokens = 0;
  CHECK_THROWS_AS(make_plan(m, o), InvalidArgument);
  CHECK_THROWS_WITH(make_plan(m, o), "max_num_tokens must be >= 1, got 0");
  o.max_num_tokens = (1ull << 31) + 1;
  CHECK_THROWS_WITH(make_plan(m, o), Catch::Contains("max_num_tokens") && Catch::Contains("2147483649"));
  o = {};
  o.bucket_exponent = 17;
  CHECK_THROWS_WITH(make_plan(m, o), Catch::Contains("bucket_exponent") && Catch::Contains("17"));
  CHECK_THROWS_WITH(make_plan(ModelSpec{}, PlanOptions{}), Catch::Contains("incomplete"));
}

TEST_CASE("model: DeepSeek-V3 block-128 FP8 needs an explicit quant mode", "[model]") {
  const ModelSpec ds = embedded_model("deepseek-v3");
  CHECK_FALSE(ds.checkpoint_quant.has_value());
  CHECK_THROWS_WITH(make_plan(ds, {}), Catch::Contains("fp8 weight_block_size=128x128") &&
                                           Catch::Contains("mxfp4 -> w4a16_mxfp4") &&
                                           Catch::Contains("fp8_per_token"));
  PlanOptions o;
  o.quant = QuantMode::fp8_per_token;
  o.ep = 8;
  const auto plan = make_plan(ds, o);
  CHECK(plan.quant_modes == std::vector<QuantMode>{QuantMode::fp8_per_token});
  CHECK(plan.layers.at(0).to_string() ==
        "D=7168 I=2048 E=32 top_k=8 act=silu_gated gate_up_bias=none down_bias=none");
}

TEST_CASE("model: quantization_config methods", "[model]") {
  json j = embedded_json("qwen3-30b-a3b");
  j["quantization_config"] = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}};
  ModelSpec m = parse_hf_config(dump(j), "qwen-fp8");
  CHECK(m.checkpoint_quant == QuantMode::fp8_per_token);
  CHECK(make_plan(m, {}).quant_modes == std::vector<QuantMode>{QuantMode::fp8_per_token});

  j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
  m = parse_hf_config(dump(j), "qwen-gptq");
  CHECK_FALSE(m.checkpoint_quant.has_value());
  CHECK(m.checkpoint_quant_method == "gptq");
  CHECK_THROWS_WITH(make_plan(m, {}), Catch::Contains("'gptq'") && Catch::Contains("mxfp4"));
  PlanOptions o;
  o.quant = QuantMode::mxfp8;
  CHECK(make_plan(m, o).quant_modes == std::vector<QuantMode>{QuantMode::mxfp8});

  j["quantization_config"] = {{"bits", 4}};
  CHECK_THROWS_WITH(parse_hf_config(dump(j), "qwen-noq"), Catch::Contains("quant_method"));
  j["quantization_config"] = "mxfp4";
  CHECK_THROWS_WITH(parse_hf_config(dump(j), "qwen-str"), Catch::Contains("quantization_config"));
  j["quantization_config"] = nullptr;
  CHECK(parse_hf_config(dump(j), "qwen-null").checkpoint_quant_method.empty());
}

TEST_CASE("model: bad configs give clear errors", "[model]") {
  const json oss = embedded_json("gpt-oss-120b");
  json j = oss;
  j["model_type"] = "llama";
  CHECK_THROWS_WITH(parse_hf_config(dump(j), "cfg"),
                    Catch::Contains("'llama'") &&
                        Catch::Contains("gpt_oss, deepseek_v3, qwen3_moe, mixtral"));
  j.erase("model_type");
  CHECK_THROWS_WITH(parse_hf_config(dump(j), "cfg"), Catch::Contains("'model_type'"));

  j = oss;
  j.erase("hidden_size");
  CHECK_THROWS_WITH(parse_hf_config(dump(j), "cfg-x"),
                    Catch::Contains("cfg-x") && Catch::Contains("'hidden_size'") &&
                        Catch::Contains("missing"));
  j = oss;
  j["hidden_size"] = "2880";
  CHECK_THROWS_WITH(parse_hf_config(dump(j), "cfg"),
                    Catch::Contains("'hidden_size'") && Catch::Contains("\"2880\""));
  j["hidden_size"] = -5;
  CHECK_THROWS_WITH(parse_hf_config(dump(j), "cfg"), Catch::Contains("-5"));
  j["hidden_size"] = 2880.5;
  CHECK_THROWS_WITH(parse_hf_config(dump(j), "cfg"), Catch::Contains("2880.5"));
  j["hidden_size"] = 0;
  CHECK_THROWS_WITH(parse_hf_config(dump(j), "cfg"), Catch::Contains("positive"));
  j["hidden_size"] = 1ull << 33;
  CHECK_THROWS_WITH(parse_hf_config(dump(j), "cfg"), Catch::Contains("'hidden_size'"));

  j = oss;
  j["experts_per_token"] = 8;  // disagrees with num_experts_per_tok = 4
  CHECK_THROWS_WITH(parse_hf_config(dump(j), "cfg"), Catch::Contains("experts_per_token"));
  j = oss;
  j["num_experts_per_tok"] = 200;
  j["experts_per_token"] = 200;
  CHECK_THROWS_WITH(parse_hf_config(dump(j), "cfg"), Catch::Contains("200") && Catch::Contains("128"));
  j = oss;
  j["swiglu_limit"] = -1;
  CHECK_THROWS_WITH(parse_hf_config(dump(j), "cfg"), Catch::Contains("'swiglu_limit'"));
  j.erase("swiglu_limit");
  CHECK(parse_hf_config(dump(j), "cfg").limit == 7.0f);

  json mix = embedded_json("mixtral-8x7b");
  mix["hidden_act"] = "gelu";
  CHECK_THROWS_WITH(parse_hf_config(dump(mix), "cfg"),
                    Catch::Contains("'hidden_act'") && Catch::Contains("gelu"));
  mix = embedded_json("mixtral-8x7b");
  mix.erase("num_local_experts");
  CHECK_THROWS_WITH(parse_hf_config(dump(mix), "cfg"), Catch::Contains("'num_local_experts'"));

  CHECK_THROWS_WITH(parse_hf_config("{\"model_type\": ", "broken.json"),
                    Catch::Contains("broken.json") && Catch::Contains("not valid JSON"));
  CHECK_THROWS_WITH(parse_hf_config("[1, 2]", "arr.json"), Catch::Contains("JSON object"));
}

TEST_CASE("model: MoE layer counting follows the HF layer rules", "[model]") {
  json q = embedded_json("qwen3-30b-a3b");
  q["num_hidden_layers"] = 8;
  q["decoder_sparse_step"] = 2;  // layers 1, 3, 5, 7
  q["mlp_only_layers"] = {1};
  CHECK(parse_hf_config(dump(q), "q").layers_moe == 3);
  q["mlp_only_layers"] = {1, 3, 5, 7};
  CHECK_THROWS_WITH(parse_hf_config(dump(q), "q"), Catch::Contains("no MoE layer"));
  q["mlp_only_layers"] = "all";
  CHECK_THROWS_WITH(parse_hf_config(dump(q), "q"), Catch::Contains("'mlp_only_layers'"));

  json d = embedded_json("deepseek-v3");
  d["num_hidden_layers"] = 10;
  d["first_k_dense_replace"] = 1;
  d["moe_layer_freq"] = 3;  // layers 3, 6, 9
  CHECK(parse_hf_config(dump(d), "d").layers_moe == 3);
}

TEST_CASE("model: load_hf_config from a file written by the test", "[model]") {
  const fs::path dir = data_dir("load_hf_config") / "my-oss";
  fs::create_directories(dir);
  json j = embedded_json("gpt-oss-20b");
  j["num_local_experts"] = 64;
  write(dir / "config.json", dump(j));

  ModelSpec m = load_hf_config(dir / "config.json");
  CHECK(m.name == "my-oss");
  CHECK(m.experts == 64);
  CHECK(load_hf_config(dir).experts == 64);  // a directory means <dir>/config.json

  j["_name_or_path"] = "openai/gpt-oss-custom";
  write(dir / "named.json", dump(j));
  CHECK(load_hf_config(dir / "named.json").name == "openai/gpt-oss-custom");
  j.erase("_name_or_path");
  write(dir / "other.json", dump(j));
  CHECK(load_hf_config(dir / "other.json").name == "other");

  const fs::path missing = dir / "nope" / "config.json";
  CHECK_THROWS_WITH(load_hf_config(missing),
                    Catch::Contains(missing.string()) && Catch::Contains("does not exist"));
  write(dir / "bad.json", "{ \"model_type\": \"gpt_oss\", ");
  CHECK_THROWS_WITH(load_hf_config(dir / "bad.json"),
                    Catch::Contains((dir / "bad.json").string()) && Catch::Contains("not valid JSON"));
  j["model_type"] = "bert";
  write(dir / "bert.json", dump(j));
  CHECK_THROWS_WITH(load_hf_config(dir / "bert.json"),
                    Catch::Contains((dir / "bert.json").string()) && Catch::Contains("'bert'"));
  const fs::path empty_dir = data_dir("load_hf_config_empty");
  CHECK_THROWS_WITH(load_hf_config(empty_dir),
                    Catch::Contains((empty_dir / "config.json").string()));
}
