// Every embedded kernel source is used by a kernel family, and every bf16 /
// MXFP4 grouped GEMM variant the heuristic can pick for the real model shapes
// (down with bf16 Y, and with f32 Y where it splits K) and every combine
// variant compile with NVRTC for sm_90a without spills.
#include <catch2/catch.hpp>

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "codegen/kernel_source.hpp"
#include "compiler/nvrtc_compiler.hpp"
#include "driver/nvrtc_api.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/quant.hpp"
#include "moejit/error.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/k_order.hpp"
#include "ops/moe_keys.hpp"
#include "util/embedded_file.hpp"
#include "test_shapes.hpp"

using namespace moejit;
using testing::layer_shape;

namespace {
const MoeLayerShape kShapes[] = {
    // gpt-oss-120b: K tail (2880 % 64 = 0, % 128 = 64)
    layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai, BiasKind::bf16),
    layer_shape(2048, 768, 128, 8, Activation::silu_gated, BiasKind::none),   // Qwen3-30B-A3B
    layer_shape(7168, 2048, 256, 8, Activation::silu_gated, BiasKind::f32),   // DeepSeek-V3 shape
    layer_shape(4096, 14336, 8, 2, Activation::silu_gated, BiasKind::none),   // Mixtral-8x7B
    layer_shape(96, 32, 4, 2, Activation::none, BiasKind::none),              // K % 64 = 32: the k_tail variant
};
}  // namespace

TEST_CASE("kernel sources: every embedded file is part of some family's translation unit", "[codegen]") {
  std::set<std::string> sources;
  for (QuantMode q : {QuantMode::bf16, QuantMode::w4a16_mxfp4, QuantMode::mxfp8, QuantMode::fp8_per_token})
    for (std::uint32_t bucket : {64u, 512u, 2048u, 4096u})  // decode, WS (32- and 192-row tiles) and weights-as-A GEMM kernels
      for (const SpecKey& k : moe_layer_keys(kShapes[0], q, bucket, Target{}))
        sources.insert(codegen::generate(k).source);
  sources.insert(codegen::generate(quantize_mxfp4_key(2880, Target{})).source);
  for (const auto& f : codegen::embedded_kernel_sources()) {
    bool used = false;
    for (const auto& s : sources) used = used || s.find(f.text) != std::string::npos;
    INFO(f.name);
    CHECK((used || f.name == "moe_wgrad_sm90.cuh" || f.name == "moe_wgrad_mma_sm90.cuh"));  // wgrad is a training op, not part of the layer
  }
}

TEST_CASE("kernel sources: every bf16/MXFP4 grouped GEMM variant compiles for sm_90a without spills",
          "[codegen][nvrtc]") {
  if (!driver::nvrtc_available()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  // Distinct name expressions over all shapes, formats, buckets up to 20000.
  std::map<std::string, SpecKey> variants;
  for (const auto& s : kShapes)
    for (QuantMode q : {QuantMode::bf16, QuantMode::w4a16_mxfp4})
      for (std::uint32_t b : prewarm_set(20000))
        for (OpKind op : {OpKind::gate_up, OpKind::down}) {
          const SpecKey key = ops::gemm_key(op, s, q, b, Target{});
          variants.emplace(codegen::generate(key).name_expression, key);
        }
  std::printf("  %zu distinct grouped GEMM variants\n", variants.size());
  CHECK(variants.size() >= 10);
  // Down projections with bf16 Y (no split-K) and with f32 split-K partials.
  std::set<DType> down_out;
  for (const auto& [name, key] : variants)
    if (key.op == OpKind::down) down_out.insert(key.out_dtype);
  CHECK(down_out == std::set<DType>{DType::f32, DType::bf16});
  for (const auto& [name, key] : variants) {
    const auto ks = codegen::generate(key);
    const auto out = compiler::compile(ks, Target{90, true}, key.to_text());
    INFO(key.to_text() << "\n" << name << "\n" << out.log);
    CHECK(!out.cubin.empty());
    CHECK(out.resources.registers > 0);
    CHECK(out.resources.spill_store_bytes == 0);
    CHECK(out.resources.spill_load_bytes == 0);
    // ptxas falls back to waiting after every wgmma when it cannot prove the
    // asynchronous pipeline safe (warning C7510, "... are serialized due to ...").
    CHECK(out.log.find("serialized") == std::string::npos);
    // The warp-specialized kernels' setmaxnreg budgets assume the launch
    // bound's whole register budget (kernels/grouped_gemm_mxfp4_ws_sm90.cuh,
    // kernels/grouped_gemm_tma_ws_sm90.cuh): with
    // fewer, the consumers' setmaxnreg.inc would wait forever.
    if (name.find("grouped_gemm_mxfp4_ws_kernel") != std::string::npos ||
        name.find("grouped_gemm_tma_ws_kernel") != std::string::npos)
      CHECK(out.resources.registers == static_cast<int>((65536 / ks.launch.block_threads) & ~7u));
    std::printf("  %-90s %3d regs %6.0f ms\n", name.c_str(), out.resources.registers, out.compile_ms);
  }
}

TEST_CASE("kernel sources: every combine variant (f32 Y; bf16 Y with 8 and 4 columns; each top_k window) "
          "compiles for sm_90a without spills",
          "[codegen][nvrtc][combine]") {
  if (!driver::nvrtc_available()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  // Every shape's combine for both Y dtypes (top_k 4, 8 and 2: windows of 4, 8
  // and 2 rows), and hidden 2884 (% 8 = 4): the 4-column bf16 variant the codegen
  // keeps for keys the layer itself never builds (it requires hidden % 32 == 0).
  MoeLayerShape odd = kShapes[0];
  odd.hidden = 2884;
  std::map<std::string, SpecKey> variants;
  for (const auto& s : kShapes)
    for (DType y : {DType::f32, DType::bf16}) {
      const SpecKey key = ops::combine_key(s, y, 4096, Target{});
      variants.emplace(codegen::generate(key).name_expression, key);
    }
  const SpecKey odd_key = ops::combine_key(odd, DType::bf16, 4096, Target{});
  variants.emplace(codegen::generate(odd_key).name_expression, odd_key);
  std::set<std::string> names;
  for (const auto& [name, key] : variants) names.insert(name);
  auto combine = [](int cols, int in_flight, bool y_bf16) {
    return "moejit::moe_combine_kernel<moejit::CombineKernel{.threads = 256, .cols = " + std::to_string(cols) +
           ", .in_flight = " + std::to_string(in_flight) + ", .y_bf16 = " + (y_bf16 ? "true" : "false") + "}>";
  };
  CHECK(names == std::set<std::string>{combine(4, 2, false), combine(4, 4, false), combine(4, 8, false),
                                       combine(8, 2, true), combine(8, 4, true), combine(8, 8, true),
                                       combine(4, 4, true)});
  for (const auto& [name, key] : variants) {
    const auto ks = codegen::generate(key);
    const auto out = compiler::compile(ks, Target{90, true}, key.to_text());
    INFO(key.to_text() << "\n" << ks.name_expression << "\n" << out.log);
    CHECK(!out.cubin.empty());
    CHECK(out.resources.spill_store_bytes == 0);
    CHECK(out.resources.spill_load_bytes == 0);
    std::printf("  %-90s %3d regs %6.0f ms\n", ks.name_expression.c_str(), out.resources.registers, out.compile_ms);
  }
}

TEST_CASE("kernel sources: the k_order kernel compiles for sm_90a without spills, one source for every n",
          "[codegen][nvrtc]") {
  // Its key is refused for columns that are not a multiple of 32.
  CHECK_THROWS_AS(ops::k_order_key(2884, Target{}), InvalidArgument);
  CHECK_THROWS_AS(ops::k_order_key(0, Target{}), InvalidArgument);
  SpecKey bad = ops::k_order_key(2880, Target{});
  bad.quant = QuantMode::bf16;
  CHECK_THROWS_AS(validate(bad), InvalidArgument);
  CHECK(parse_key(ops::k_order_key(2880, Target{}).to_text()) == ops::k_order_key(2880, Target{}));
  // The column count is a launch argument: every model's reorder is one kernel.
  std::set<std::string> sources;
  for (std::uint32_t n : {2880u, 2048u, 7168u, 4096u}) sources.insert(codegen::generate(ops::k_order_key(n, Target{})).source);
  CHECK(sources.size() == 1);
  if (!driver::nvrtc_available()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  const SpecKey key = ops::k_order_key(2880, Target{});
  const auto ks = codegen::generate(key);
  const auto out = compiler::compile(ks, Target{90, true}, key.to_text());
  INFO(out.log);
  CHECK(!out.cubin.empty());
  CHECK(out.resources.spill_store_bytes == 0);
  CHECK(out.resources.spill_load_bytes == 0);
  std::printf("  %-90s %3d regs %6.0f ms\n", ks.name_expression.c_str(), out.resources.registers, out.compile_ms);
}
