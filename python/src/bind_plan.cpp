// Layer shapes, model configs, prewarm plans, specialization keys, buckets.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>
#include <nanobind/stl/filesystem.h>

#include <optional>
#include <string>

#include "bindings.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/key.hpp"
#include "moejit/model.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/prewarm.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace moejit::python {
namespace {

std::string str(std::string_view s) { return std::string(s); }

MoeLayerShape make_shape(std::uint32_t hidden, std::uint32_t intermediate, std::uint32_t experts, std::uint32_t top_k,
                         const std::string& act, float alpha, float limit, const std::string& gate_up_bias,
                         const std::string& down_bias) {
  MoeLayerShape s;
  s.hidden = hidden;
  s.intermediate = intermediate;
  s.experts = experts;
  s.top_k = top_k;
  s.act = parse_activation(act);
  s.act_alpha = alpha;
  s.act_limit = limit;
  s.gate_up_bias = parse_bias_kind(gate_up_bias);
  s.down_bias = parse_bias_kind(down_bias);
  return s;
}

// A token count from Python: a negative int is InvalidArgument naming the
// parameter (an unsigned parameter would make it a TypeError about the signature).
std::uint64_t token_count(const char* name, std::int64_t v) {
  if (v < 1) throw InvalidArgument(std::string(name) + "=" + std::to_string(v) + ": must be >= 1");
  return static_cast<std::uint64_t>(v);
}

// A plan's target: one the kernels can be built for. Like moejit-prewarm --arch, anything but
// sm_90a is refused here rather than kernel by kernel at compile time (the kernels use wgmma,
// an sm_90a-only instruction, and Hopper features such as 227 KB of shared memory per CTA).
Target plan_target(const std::string& text) {
  const Target t = parse_target(text);  // InvalidArgument for a malformed target, naming it
  if (t != Target{90, true})
    throw InvalidArgument("target: '" + text + "': moejit's kernels are built for sm_90a (H100/H200) only");
  return t;
}

PrewarmPlan make_plan_py(const ModelSpec& model, std::int64_t max_num_tokens, const std::optional<std::string>& quant,
                         int tp, int ep, const std::string& target, int bucket_exponent) {
  PlanOptions o;
  if (quant) o.quant = parse_quant_mode(*quant);
  o.max_num_tokens = token_count("max_num_tokens", max_num_tokens);
  o.tp = tp;
  o.ep = ep;
  o.target = plan_target(target);
  o.bucket_exponent = bucket_exponent;
  return make_plan(model, o);
}

}  // namespace

void bind_plan(nb::module_& m) {
  nb::class_<MoeLayerShape>(m, "MoeLayerShape",
                            "The shape of one MoE layer on one GPU (after tensor- and expert-parallel splits).\n\n"
                            "hidden D, intermediate I per expert, experts E, top_k routes per token; act is\n"
                            "'none', 'silu_gated' or 'swiglu_oai' (gpt-oss: alpha 1.702, limit 7.0); biases\n"
                            "'none', 'f32' or 'bf16'.")
      .def(nb::init<>())
      .def("__init__",
           [](MoeLayerShape* self, std::uint32_t hidden, std::uint32_t intermediate, std::uint32_t experts,
              std::uint32_t top_k, const std::string& act, float alpha, float limit, const std::string& gate_up_bias,
              const std::string& down_bias) {
             new (self) MoeLayerShape(
                 make_shape(hidden, intermediate, experts, top_k, act, alpha, limit, gate_up_bias, down_bias));
           },
           "hidden"_a, "intermediate"_a, "experts"_a, "top_k"_a, "act"_a = "silu_gated", "alpha"_a = 0.f,
           "limit"_a = 0.f, "gate_up_bias"_a = "none", "down_bias"_a = "none")
      .def_rw("hidden", &MoeLayerShape::hidden, "D: K of gate_up, N of down")
      .def_rw("intermediate", &MoeLayerShape::intermediate, "I per expert on this GPU")
      .def_rw("experts", &MoeLayerShape::experts, "E local to this GPU")
      .def_rw("top_k", &MoeLayerShape::top_k, "routes per token")
      .def_prop_rw(
          "act", [](const MoeLayerShape& s) { return str(to_string(s.act)); },
          [](MoeLayerShape& s, const std::string& v) { s.act = parse_activation(v); })
      .def_rw("alpha", &MoeLayerShape::act_alpha)
      .def_rw("limit", &MoeLayerShape::act_limit)
      .def_prop_rw(
          "gate_up_bias", [](const MoeLayerShape& s) { return str(to_string(s.gate_up_bias)); },
          [](MoeLayerShape& s, const std::string& v) { s.gate_up_bias = parse_bias_kind(v); })
      .def_prop_rw(
          "down_bias", [](const MoeLayerShape& s) { return str(to_string(s.down_bias)); },
          [](MoeLayerShape& s, const std::string& v) { s.down_bias = parse_bias_kind(v); })
      .def("__eq__", [](const MoeLayerShape& a, const MoeLayerShape& b) { return a == b; })
      .def("__repr__", [](const MoeLayerShape& s) { return "MoeLayerShape(" + s.to_string() + ")"; })
      .def("__str__", &MoeLayerShape::to_string);

  nb::class_<ModelSpec>(m, "ModelSpec", "One model's MoE facts from a Hugging Face config.json (before any split).")
      .def_ro("name", &ModelSpec::name)
      .def_ro("model_type", &ModelSpec::model_type)
      .def_ro("hidden", &ModelSpec::hidden)
      .def_ro("intermediate", &ModelSpec::intermediate)
      .def_ro("experts", &ModelSpec::experts)
      .def_ro("top_k", &ModelSpec::top_k)
      .def_ro("layers_moe", &ModelSpec::layers_moe)
      .def_prop_ro("act", [](const ModelSpec& s) { return str(to_string(s.act)); })
      .def_ro("alpha", &ModelSpec::alpha)
      .def_ro("limit", &ModelSpec::limit)
      .def_prop_ro("gate_up_bias", [](const ModelSpec& s) { return str(to_string(s.gate_up_bias)); })
      .def_prop_ro("down_bias", [](const ModelSpec& s) { return str(to_string(s.down_bias)); })
      .def_prop_ro("checkpoint_quant",
                   [](const ModelSpec& s) -> std::optional<std::string> {
                     if (!s.checkpoint_quant) return std::nullopt;
                     return str(to_string(*s.checkpoint_quant));
                   },
                   "the moejit quant mode of the checkpoint's weights; None for bf16 or unsupported")
      .def_ro("checkpoint_quant_method", &ModelSpec::checkpoint_quant_method)
      .def_ro("shared_experts", &ModelSpec::shared_experts)
      .def("__repr__", [](const ModelSpec& s) { return "ModelSpec(" + s.to_string() + ")"; })
      .def("__str__", &ModelSpec::to_string);

  m.def("parse_hf_config", &parse_hf_config, "json_text"_a, "name_for_errors"_a = "config.json",
        "Parses a Hugging Face config.json text. Raises InvalidArgument naming the field.");
  m.def("load_hf_config", &load_hf_config, "path"_a,
        "Reads a config.json (a directory means <dir>/config.json). Raises InvalidArgument naming the path.");
  m.def("embedded_model_names", &embedded_model_names, "The model configs compiled into the library, sorted.");
  m.def("embedded_model", &embedded_model, "name"_a,
        "An embedded config by name ('gpt-oss-120b'); InvalidArgument lists the names when unknown.");

  nb::class_<SpecKey>(m, "SpecKey", "A specialization key: everything one compiled kernel depends on.")
      .def_prop_ro("text", &SpecKey::to_text, "canonical text: 'op=gate_up quant=w4a16_mxfp4 tokens=1024 ...'")
      .def_prop_ro("hash", [](const SpecKey& k) { return k.hash().hex(); }, "XXH3-128 of the packed key, 32 hex digits")
      .def_prop_ro("op", [](const SpecKey& k) { return str(to_string(k.op)); })
      .def_prop_ro("quant", [](const SpecKey& k) { return str(to_string(k.quant)); })
      .def_ro("token_bucket", &SpecKey::token_bucket, "bucketed token count (text field 'tokens'), not rows")
      .def_ro("n", &SpecKey::n, "output columns: GEMM N, combine hidden D, quantize columns; route 0")
      .def_ro("k", &SpecKey::k, "GEMM reduction length K; 0 for route, combine and quantize")
      .def_ro("experts", &SpecKey::experts, "experts E for the GEMMs and the route; 0 elsewhere")
      .def_ro("top_k", &SpecKey::top_k, "routes per token for the GEMMs, route and combine; 0 for quantize")
      .def_ro("router_weight", &SpecKey::router_weight,
              "down: rows multiplied by their router weight (the layer; the grouped GEMM over sorted rows: False)")
      .def_prop_ro("in_dtype", [](const SpecKey& k) { return str(to_string(k.in_dtype)); },
                   "text field 'in': the Y dtype the combine reads; 'none' for every other op")
      .def_prop_ro("out_dtype", [](const SpecKey& k) { return str(to_string(k.out_dtype)); },
                   "text field 'out': the dtype the kernel writes")
      .def_prop_ro("target", [](const SpecKey& k) { return to_string(k.target); })
      .def("fields", &key_fields, "(name, value) pairs of the canonical text, in order")
      .def("__eq__", [](const SpecKey& a, const SpecKey& b) { return a == b; })
      .def("__hash__", [](const SpecKey& k) { return static_cast<std::int64_t>(k.hash().lo >> 1); })
      .def("__str__", &SpecKey::to_text)
      .def("__repr__", [](const SpecKey& k) { return "SpecKey('" + k.to_text() + "')"; });
  m.def("parse_key", &parse_key, "text"_a,
        "Parses a key's canonical text. Raises InvalidArgument naming the field and value.");
  m.def("key_diff", &key_diff, "a"_a, "b"_a, "The fields in which two keys differ, one 'field: a -> b' per line.");

  nb::class_<PrewarmPlan>(m, "Plan",
                          "A prewarm plan: layer shapes x quant modes x token buckets up to max_num_tokens.\n"
                          "Build one with moejit.plan(model, ...) or Plan(layers, quant_modes, ...).")
      .def("__init__",
           [](PrewarmPlan* self, std::vector<MoeLayerShape> layers, std::vector<std::string> quant_modes,
              std::int64_t max_num_tokens, const std::string& model_name, const std::string& target,
              int bucket_exponent, std::vector<std::string> weight_scales) {
             PrewarmPlan p;
             p.layers = std::move(layers);
             for (const auto& q : quant_modes) p.quant_modes.push_back(parse_quant_mode(q));
             for (const auto& w : weight_scales) p.weight_scales.push_back(parse_weight_scale(w));
             p.max_num_tokens = token_count("max_num_tokens", max_num_tokens);
             p.model_name = model_name;
             p.target = plan_target(target);
             p.bucket_exponent = bucket_exponent;
             new (self) PrewarmPlan(std::move(p));
           },
           "layers"_a, "quant_modes"_a, "max_num_tokens"_a = 8192, "model_name"_a = "", "target"_a = "sm_90a",
           "bucket_exponent"_a = kDefaultBucketExponent, "weight_scales"_a = std::vector<std::string>{})
      .def_ro("model_name", &PrewarmPlan::model_name)
      .def_ro("layers", &PrewarmPlan::layers)
      .def_prop_ro("quant_modes",
                   [](const PrewarmPlan& p) {
                     std::vector<std::string> v;
                     for (QuantMode q : p.quant_modes) v.push_back(str(to_string(q)));
                     return v;
                   })
      .def_prop_ro("weight_scales",
                   [](const PrewarmPlan& p) {
                     std::vector<std::string> v;
                     for (WeightScale w : p.weight_scales) v.push_back(str(to_string(w)));
                     return v;
                   })
      .def_ro("max_num_tokens", &PrewarmPlan::max_num_tokens)
      .def_ro("bucket_exponent", &PrewarmPlan::bucket_exponent)
      .def_prop_ro("target", [](const PrewarmPlan& p) { return to_string(p.target); })
      .def_prop_ro("buckets", [](const PrewarmPlan& p) { return prewarm_set(p.max_num_tokens, p.bucket_exponent); },
                   "token buckets the plan covers, ascending")
      .def("keys", [](const PrewarmPlan& p) { return enumerate_keys(p); }, "Every specialization key the plan can launch, de-duplicated, stable order.")
      .def_prop_ro("num_keys", [](const PrewarmPlan& p) { return enumerate_keys(p).size(); })
      .def("__repr__", [](const PrewarmPlan& p) {
        std::string s = "Plan(model='" + p.model_name + "', max_num_tokens=" + std::to_string(p.max_num_tokens) +
                        ", target=" + to_string(p.target) + ", quant_modes=[";
        for (std::size_t i = 0; i < p.quant_modes.size(); ++i) s += (i ? ", " : "") + str(to_string(p.quant_modes[i]));
        s += "], layers=[";
        for (std::size_t i = 0; i < p.layers.size(); ++i) s += (i ? "; " : "") + p.layers[i].to_string();
        return s + "])";
      });
  m.def("plan", &make_plan_py, "model"_a, "max_num_tokens"_a = 8192, "quant"_a = nb::none(), "tp"_a = 1, "ep"_a = 1,
        "target"_a = "sm_90a", "bucket_exponent"_a = kDefaultBucketExponent,
        "The prewarm plan of one GPU for a model (same defaults as the C++ make_plan):\n"
        "quant None = the checkpoint's (bf16 for an unquantized one); tp splits I, ep splits E;\n"
        "target 'sm_90a' (the only target the kernels are built for).\n"
        "Raises InvalidArgument naming the option and value.");

  m.def(
      "layer_keys",
      [](const MoeLayerShape& shape, const std::string& quant, std::uint32_t token_bucket, const std::string& target,
         const std::optional<std::string>& weight_scale) {
        const QuantMode q = parse_quant_mode(quant);
        const WeightScale w = weight_scale ? parse_weight_scale(*weight_scale) : default_weight_scale(q);
        return moe_layer_keys(shape, q, w, token_bucket, parse_target(target));
      },
      "shape"_a, "quant"_a, "token_bucket"_a, "target"_a = "sm_90a", "weight_scale"_a = nb::none(),
      "The keys one MoE layer call requests at a token bucket, in launch order.");
  m.def(
      "round_up_tokens",
      [](std::int64_t num_tokens, int exponent) { return round_up_tokens(token_count("num_tokens", num_tokens), exponent); },
      "num_tokens"_a, "exponent"_a = kDefaultBucketExponent,
      "The token bucket of num_tokens (1 <= num_tokens <= 2**31).");
  m.def(
      "bucket_set",
      [](std::int64_t max_tokens, int exponent) { return bucket_set(token_count("max_tokens", max_tokens), exponent); },
      "max_tokens"_a, "exponent"_a = kDefaultBucketExponent,
      "Every bucket <= max_tokens, ascending (2**exponent buckets per octave).");
  m.def(
      "prewarm_set",
      [](std::int64_t max_tokens, int exponent) { return prewarm_set(token_count("max_tokens", max_tokens), exponent); },
      "max_tokens"_a, "exponent"_a = kDefaultBucketExponent,
      "Every bucket a server with this token budget can launch (bucket_set plus the bucket of max_tokens).");
  m.def("parse_quant_mode", [](const std::string& s) { return str(to_string(parse_quant_mode(s))); }, "text"_a,
        "Checks a quant mode spelling ('bf16', 'w4a16_mxfp4', 'mxfp8', 'fp8_per_token').");
}

}  // namespace moejit::python
