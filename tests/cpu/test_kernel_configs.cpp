// The grouped GEMM kernels' template arguments (kernels/kernel_configs.cuh):
// the host prints every field by name, every generated grouped GEMM names its
// kernel's config struct and compiles as C++20, and generate(key, config)
// gives the unit the heuristic path gives.
#include <catch2/catch.hpp>

#include <string>

#include "codegen/families.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/moe_layer.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/kernel_configs.hpp"
#include "ops/moe_keys.hpp"
#include "test_shapes.hpp"

using namespace moejit;
using testing::layer_shape;

TEST_CASE("grouped GEMM configs: an instantiation names every field in declaration order", "[codegen]") {
  const Mxfp4WsKernel c{.bm = 192, .cwg = 2, .stages = 7, .k_tail = false, .k_order_in = true, .k_order_out = true,
                        .epilogue = {.act = 2, .bias = 2, .gather = true, .router_weight = false, .out_f32 = false}};
  CHECK(ops::instantiation("moejit::grouped_gemm_mxfp4_ws_kernel", c) ==
        "moejit::grouped_gemm_mxfp4_ws_kernel<moejit::Mxfp4WsKernel{.bm = 192, .cwg = 2, .stages = 7, "
        ".k_tail = false, .k_order_in = true, .k_order_out = true, .epilogue = {.act = 2, .bias = 2, "
        ".gather = true, .router_weight = false, .out_f32 = false}}>");
  const Fp8DecodeKernel d{.wn = 2, .kw = 4, .depth = 3, .ctas = 6, .wscale = 1, .epilogue = {}};
  CHECK(kernel_config_text::text(d) ==
        "moejit::Fp8DecodeKernel{.wn = 2, .kw = 4, .depth = 3, .ctas = 6, .wscale = 1, .epilogue = {.act = 0, "
        ".bias = 0, .gather = false, .router_weight = false, .out_f32 = false}}");
}

TEST_CASE("grouped GEMM configs: the epilogue fields come from the key", "[codegen]") {
  const MoeLayerShape s = layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai, BiasKind::f32);
  const SpecKey gu = ops::gemm_key(OpKind::gate_up, s, QuantMode::w4a16_mxfp4, 512, Target{});
  const SpecKey dn = ops::gemm_key(OpKind::down, s, QuantMode::w4a16_mxfp4, 512, Target{});
  const GemmEpilogue eg = ops::gemm_epilogue(gu), ed = ops::gemm_epilogue(dn);
  CHECK((eg.act == 2 && eg.bias == 1 && eg.gather && !eg.router_weight && !eg.out_f32));
  CHECK((ed.act == 0 && ed.bias == 1 && !ed.gather && ed.router_weight));
  CHECK(ed.out_f32 == (dn.out_dtype == DType::f32));
  SpecKey sorted = dn;  // the grouped GEMM over expert-sorted rows: no router weight
  sorted.router_weight = false;
  CHECK(!ops::gemm_epilogue(sorted).router_weight);
}

TEST_CASE("grouped GEMM configs: every grouped GEMM unit names its kernel's config struct, as C++20", "[codegen]") {
  const MoeLayerShape shapes[] = {layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai, BiasKind::bf16),
                                  layer_shape(4096, 14336, 8, 2, Activation::silu_gated)};
  int seen = 0;
  for (const auto& s : shapes)
    for (QuantMode q : {QuantMode::bf16, QuantMode::w4a16_mxfp4, QuantMode::mxfp8, QuantMode::fp8_per_token})
      for (std::uint32_t b : prewarm_set(20000))
        for (OpKind op : {OpKind::gate_up, OpKind::down}) {
          const SpecKey key = ops::gemm_key(op, s, q, b, Target{});
          const KernelSource ks = codegen::generate(key);
          INFO(key.to_text() << "\n" << ks.name_expression);
          CHECK(ks.name_expression.find("Kernel{.") != std::string::npos);
          CHECK(ks.name_expression.back() == '>');
          CHECK(ks.source.find("struct GemmEpilogue {") != std::string::npos);
          CHECK(ks.options == std::vector<std::string>{"-std=c++20"});
          const KernelSource from_config = q == QuantMode::bf16 || q == QuantMode::w4a16_mxfp4
                                               ? codegen::generate_grouped_gemm(key, ops::choose_config(key))
                                               : codegen::generate_grouped_gemm_fp8(key, ops::choose_fp8_config(key));
          CHECK(from_config.source == ks.source);
          CHECK(from_config.name_expression == ks.name_expression);
          CHECK(from_config.options == ks.options);
          CHECK(from_config.launch == ks.launch);
          ++seen;
        }
  CHECK(seen > 100);
}
