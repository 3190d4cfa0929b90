// The combine's launch contract: the columns per thread the codegen derives from
// the key are the ones the layer sizes its flat grid with, the grid covers every
// (token, column chunk) with no empty CTA, and token counts past the kernel's
// 32-bit unit index are refused before any launch.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "codegen/kernel_source.hpp"
#include "moejit/error.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/runtime.hpp"
#include "ops/launch_contracts.hpp"
#include "ops/moe_keys.hpp"
#include "test_shapes.hpp"

using namespace moejit;
using testing::layer_shape;

TEST_CASE("combine launch: 16-byte bf16 loads where hidden % 8 == 0, 4 columns otherwise", "[combine][codegen]") {
  CHECK(ops::combine_cols(2880, true) == 8);
  CHECK(ops::combine_cols(2880, false) == 4);  // f32 Y: 4 floats are already 16 bytes
  CHECK(ops::combine_cols(2884, true) == 4);   // hidden % 8 == 4: 8-byte loads
  CHECK(ops::combine_cols(2884, false) == 4);
}

TEST_CASE("combine launch: codegen and grid agree, every unit covered, no empty CTA", "[combine][codegen]") {
  const MoeLayerShape shapes[] = {
      layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai),  // gpt-oss-120b
      layer_shape(2048, 768, 128, 8, Activation::silu_gated),   // Qwen3-30B-A3B
      layer_shape(7168, 2048, 256, 8, Activation::silu_gated),  // DeepSeek-V3
      layer_shape(96, 32, 4, 2, Activation::none),
  };
  for (const auto& s : shapes)
    for (DType y : {DType::bf16, DType::f32})
      for (std::uint64_t T : {1ull, 7ull, 64ull, 300ull, 4096ull, 20000ull}) {
        const SpecKey key = ops::combine_key(s, y, 64, Target{});
        const auto ks = codegen::generate(key);
        const std::uint32_t cols = ops::combine_cols(s.hidden, y == DType::bf16);
        INFO(key.to_text() << " T=" << T << " " << ks.config_text);
        CHECK(ks.launch.block_threads == ops::kCombineThreads);
        CHECK(ks.config_text.find(" cols=" + std::to_string(cols) + " ") != std::string::npos);
        CHECK(ks.name_expression.find("{.threads = " + std::to_string(ops::kCombineThreads) +
                                      ", .cols = " + std::to_string(cols) + ",") != std::string::npos);
        const std::uint64_t units = T * (s.hidden / cols), ctas = ops::combine_ctas(T, s.hidden, cols);
        CHECK(ctas * ops::kCombineThreads >= units);
        CHECK((ctas - 1) * ops::kCombineThreads < units);
      }
  // gpt-oss-120b at T = 4096, bf16 Y: 360 threads of 8 columns per token, 5760
  // CTAs, none idle (was 3 CTAs of 1024 columns per token, the third 20 % idle).
  CHECK(ops::combine_ctas(4096, 2880, 8) == 5760);
  CHECK(ops::combine_ctas(4096, 2880, 8) * ops::kCombineThreads == 4096ull * 360);
}

TEST_CASE("combine launch: a unit count past 32 bits is refused naming num_tokens, before any launch",
          "[combine][layer]") {
  CHECK(ops::combine_fits(11930464, 2880, 8));   // 4294967040 units: 16777215 CTAs
  CHECK(!ops::combine_fits(11930465, 2880, 8));  // one more token: past 2^32 threads
  // The layer checks with 4 columns (the f32-Y variant's), in check_args, so
  // route() (the first launch of run()) refuses already: 5965232 * 720 units fit.
  CHECK(ops::combine_fits(5965232, 2880, 4));
  CHECK(!ops::combine_fits(5965233, 2880, 4));
  RuntimeOptions o;
  o.cache_dir = std::filesystem::temp_directory_path() / "moejit-combine-launch-test";
  {
    Runtime rt(o);
    MoeLayer layer(rt, layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai), QuantMode::w4a16_mxfp4);
    MoeLayerArgs a;
    a.num_tokens = 5965233;
    a.x = a.topk_ids = a.topk_weights = a.out = 0x100000;
    a.workspace = 0x100000;
    a.workspace_bytes = layer.workspace_size(a.num_tokens);
    CHECK_THROWS_WITH(layer.route(a, nullptr), Catch::Contains("MoeLayerArgs.num_tokens=5965233"));
    CHECK_THROWS_WITH(layer.combine(a, nullptr), Catch::Contains("MoeLayerArgs.num_tokens=5965233"));
  }
  std::filesystem::remove_all(o.cache_dir);
}
