// The kernels' config structs (kernels/kernel_configs.cuh): the host prints
// every field by name with its own value, every generated grouped GEMM names
// its kernel's config struct and compiles as C++20, and generate(key, config)
// builds the unit of the configuration it is given.
#include <catch2/catch.hpp>

#include <string>

#include "codegen/families.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/moe_layer.hpp"
#include "ops/fp8_gemm_config.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/kernel_configs.hpp"
#include "ops/moe_keys.hpp"
#include "test_shapes.hpp"

using namespace moejit;
using kernel_config_text::text;
using testing::layer_shape;

namespace {
// Every field distinct from its neighbours of the same type, so a printer that
// swapped two of them would print another text.
constexpr GemmEpilogue kEpilogue{.act = 2, .bias = 1, .gather = true, .router_weight = false, .out_f32 = true};
const std::string kEpilogueText = "{.act = 2, .bias = 1, .gather = true, .router_weight = false, .out_f32 = true}";
}  // namespace

TEST_CASE("kernel configs: each printer names every field with its own value, in declaration order", "[codegen]") {
  CHECK(text(kEpilogue) == kEpilogueText);
  CHECK(text(Mxfp4DecodeKernel{.wn = 1, .kw = 2, .mw = 3, .nt = 4, .depth = 5, .ctas = 6, .xs = 7, .fr = true,
                               .epilogue = kEpilogue}) ==
        "moejit::Mxfp4DecodeKernel{.wn = 1, .kw = 2, .mw = 3, .nt = 4, .depth = 5, .ctas = 6, .xs = 7, .fr = true, "
        ".epilogue = " + kEpilogueText + "}");
  CHECK(text(Mxfp4WsKernel{.bm = 192, .cwg = 2, .stages = 7, .k_tail = false, .k_order_in = true,
                           .k_order_out = false, .epilogue = kEpilogue}) ==
        "moejit::Mxfp4WsKernel{.bm = 192, .cwg = 2, .stages = 7, .k_tail = false, .k_order_in = true, "
        ".k_order_out = false, .epilogue = " + kEpilogueText + "}");
  CHECK(text(Mxfp4WgmmaKernel{.wg = 2, .stages = 3, .overlap = true, .k_tail = false, .epilogue = kEpilogue}) ==
        "moejit::Mxfp4WgmmaKernel{.wg = 2, .stages = 3, .overlap = true, .k_tail = false, .epilogue = " +
            kEpilogueText + "}");
  CHECK(text(Mxfp4WgmmaWaKernel{.th = 2, .stages = 8, .k_tail = true, .epilogue = kEpilogue}) ==
        "moejit::Mxfp4WgmmaWaKernel{.th = 2, .stages = 8, .k_tail = true, .epilogue = " + kEpilogueText + "}");
  CHECK(text(MmaGemmKernel{.warps_m = 1, .warps_n = 2, .mi = 3, .ni = 4, .stages = 5, .quant = 6, .k_tail = true,
                           .epilogue = kEpilogue}) ==
        "moejit::MmaGemmKernel{.warps_m = 1, .warps_n = 2, .mi = 3, .ni = 4, .stages = 5, .quant = 6, "
        ".k_tail = true, .epilogue = " + kEpilogueText + "}");
  CHECK(text(TmaWsKernel{.elem = 1, .scale = 2, .bn = 128, .stages = 6, .promote_slices = 3, .k_tail = true,
                         .epilogue = kEpilogue}) ==
        "moejit::TmaWsKernel{.elem = 1, .scale = 2, .bn = 128, .stages = 6, .promote_slices = 3, .k_tail = true, "
        ".epilogue = " + kEpilogueText + "}");
  CHECK(text(Fp8DecodeKernel{.wn = 2, .kw = 4, .depth = 3, .ctas = 6, .wscale = 1, .epilogue = kEpilogue}) ==
        "moejit::Fp8DecodeKernel{.wn = 2, .kw = 4, .depth = 3, .ctas = 6, .wscale = 1, .epilogue = " +
            kEpilogueText + "}");
  CHECK(text(Fp8MmaKernel{.warps_m = 1, .warps_n = 2, .mi = 3, .ni = 4, .stages = 5, .quant = 6, .wscale = 7,
                          .k_tail = false, .epilogue = kEpilogue}) ==
        "moejit::Fp8MmaKernel{.warps_m = 1, .warps_n = 2, .mi = 3, .ni = 4, .stages = 5, .quant = 6, .wscale = 7, "
        ".k_tail = false, .epilogue = " + kEpilogueText + "}");
  CHECK(text(WgradKernel{.bn = 256, .stages = 4, .cluster = 2, .out_bf16 = true}) ==
        "moejit::WgradKernel{.bn = 256, .stages = 4, .cluster = 2, .out_bf16 = true}");
  CHECK(text(CombineKernel{.threads = 256, .cols = 8, .in_flight = 4, .y_bf16 = false}) ==
        "moejit::CombineKernel{.threads = 256, .cols = 8, .in_flight = 4, .y_bf16 = false}");
  CHECK(text(RouteKernel{.threads = 1024, .staged = true}) == "moejit::RouteKernel{.threads = 1024, .staged = true}");
  CHECK(ops::instantiation("moejit::moe_route_kernel", RouteKernel{.threads = 256, .staged = false}) ==
        "moejit::moe_route_kernel<moejit::RouteKernel{.threads = 256, .staged = false}>");
}

TEST_CASE("kernel configs: the epilogue fields come from the key", "[codegen]") {
  const MoeLayerShape s = layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai, BiasKind::f32);
  const SpecKey gu = ops::gemm_key(OpKind::gate_up, s, QuantMode::w4a16_mxfp4, 512, Target{});
  const SpecKey dn = ops::gemm_key(OpKind::down, s, QuantMode::w4a16_mxfp4, 512, Target{});
  const GemmEpilogue eg = ops::gemm_epilogue(gu), ed = ops::gemm_epilogue(dn);
  CHECK((eg.act == 2 && eg.bias == 1 && eg.gather && !eg.router_weight && !eg.out_f32));
  CHECK((ed.act == 0 && ed.bias == 1 && !ed.gather && ed.router_weight));
  CHECK(ed.out_f32 == (dn.out_dtype == DType::f32));
  const MoeLayerShape q = layer_shape(2048, 768, 128, 8, Activation::silu_gated, BiasKind::bf16);
  const GemmEpilogue eq = ops::gemm_epilogue(ops::gemm_key(OpKind::gate_up, q, QuantMode::bf16, 64, Target{}));
  CHECK((eq.act == 1 && eq.bias == 2));
}

TEST_CASE("kernel configs: every grouped GEMM unit names its kernel's config struct, as C++20", "[codegen]") {
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
          CHECK(ks.name_expression.find(".epilogue = " + text(ops::gemm_epilogue(key)) + "}>") != std::string::npos);
          CHECK(ks.source.find("struct GemmEpilogue {") != std::string::npos);
          CHECK(ks.options == std::vector<std::string>{"-std=c++20"});
          ++seen;
        }
  CHECK(seen > 100);
}

TEST_CASE("kernel configs: generate(key, config) builds the unit of the configuration it is given", "[codegen]") {
  const MoeLayerShape s = layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai, BiasKind::bf16);
  // MXFP4 warp-specialized (T = 4096: 192-row tiles) with another ring depth.
  const SpecKey ws = ops::gemm_key(OpKind::gate_up, s, QuantMode::w4a16_mxfp4, 4096, Target{});
  ops::GemmConfig c = ops::choose_config(ws);
  REQUIRE(c.kernel == ops::GemmKernel::mxfp4_ws);
  c.stages = 3;
  const KernelSource a = codegen::generate_grouped_gemm(ws, c);
  CHECK(a.name_expression.find("Mxfp4WsKernel{.bm = 192, .cwg = 2, .stages = 3,") != std::string::npos);
  CHECK(a.launch.dynamic_smem_bytes == c.smem_bytes(ws.quant, ws.k));
  CHECK(a.launch.dynamic_smem_bytes < codegen::generate(ws).launch.dynamic_smem_bytes);
  // FP8 per-token decode with another K split.
  const SpecKey fp8 = ops::gemm_key(OpKind::down, s, QuantMode::fp8_per_token, 1, Target{});
  ops::Fp8GemmConfig f = ops::choose_fp8_config(fp8);
  REQUIRE(f.decode);
  f.kw = f.kw == 1 ? 2 : 1;
  const KernelSource b = codegen::generate_grouped_gemm_fp8(fp8, f);
  CHECK(b.name_expression.find("Fp8DecodeKernel{.wn = " + std::to_string(f.wn) + ", .kw = " + std::to_string(f.kw) +
                               ",") != std::string::npos);
  CHECK(b.name_expression != codegen::generate(fp8).name_expression);
}
