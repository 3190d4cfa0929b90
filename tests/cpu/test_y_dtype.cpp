// The dtype of Y, the down projection's output: bf16 when the heuristic keeps K
// whole, f32 split-K partials otherwise. The down key, the combine key and the
// workspace view must agree, and the combine's two variants never share a key.
#include <catch2/catch.hpp>

#include <filesystem>

#include "codegen/kernel_source.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/runtime.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/moe_keys.hpp"
#include "test_shapes.hpp"

using namespace moejit;
using testing::layer_shape;

namespace {
const MoeLayerShape kGptOss = layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai);
const MoeLayerShape kMixtral = layer_shape(4096, 14336, 8, 2, Activation::silu_gated);
}  // namespace

TEST_CASE("Y dtype: a down key with out=bf16 is accepted and runs without split-K", "[heuristic][ydtype]") {
  SpecKey k = ops::gemm_key(OpKind::down, kGptOss, QuantMode::w4a16_mxfp4, 4096, Target{});
  k.out_dtype = DType::bf16;
  ops::GemmConfig c;
  REQUIRE_NOTHROW(c = ops::choose_config(k));
  CHECK(c.splits == 1);
  CHECK(ops::why_not_implementable(k).empty());
  // Types other than f32 / bf16 are still refused, naming the field.
  k.out_dtype = DType::f16;
  CHECK_THROWS_WITH(ops::choose_config(k), Catch::Contains("out=f16"));
}

TEST_CASE("Y dtype: a bf16-out down key that would split K is rejected naming out", "[heuristic][ydtype]") {
  // Mixtral at T = 1: two experts hit, too few warps, the heuristic splits K.
  SpecKey k = ops::gemm_key(OpKind::down, kMixtral, QuantMode::bf16, 1, Target{});
  CHECK(k.out_dtype == DType::f32);
  REQUIRE(ops::choose_config(k).splits > 1);
  k.out_dtype = DType::bf16;
  CHECK_THROWS_WITH(ops::choose_config(k), Catch::Contains("out=bf16") && Catch::Contains("splits K"));
}

TEST_CASE("Y dtype: the layer's down key is bf16 exactly when its config has splits == 1", "[heuristic][ydtype]") {
  const MoeLayerShape shapes[] = {kGptOss, layer_shape(2048, 768, 128, 8, Activation::silu_gated),
                                  layer_shape(7168, 2048, 256, 8, Activation::silu_gated), kMixtral};
  std::size_t bf16 = 0, f32 = 0;
  for (const auto& s : shapes)
    for (QuantMode q : {QuantMode::bf16, QuantMode::w4a16_mxfp4})
      for (std::uint32_t b : prewarm_set(20000)) {
        const SpecKey key = ops::gemm_key(OpKind::down, s, q, b, Target{});
        SpecKey twin = key;
        twin.out_dtype = DType::f32;
        const ops::GemmConfig c = ops::choose_config(key), ct = ops::choose_config(twin);
        INFO(key.to_text() << " -> " << c.to_string());
        CHECK(key.out_dtype == (ct.splits == 1 ? DType::bf16 : DType::f32));
        CHECK(c.to_string() == ct.to_string());  // the out dtype never changes the tiles
        (key.out_dtype == DType::bf16 ? bf16 : f32) += 1;
        // The combine the layer launches reads Y in the down key's dtype.
        auto keys = moe_layer_keys(s, q, b, Target{});
        // The reorder of X for the warp-specialized gate_up (op=k_order) comes
        // after the route; the rest is indexed without it.
        if (keys.size() > 1 && keys[1].op == OpKind::k_order) keys.erase(keys.begin() + 1);
        const std::uint32_t tb = ops::split_tail_bucket(s, q, b, Target{});
        REQUIRE(keys.size() == (tb != 0 ? 6u : 4u));
        if (tb != 0) {  // the split tail's kernels: the smaller bucket's GEMMs, same Y dtype
          CHECK(keys[4] == ops::gemm_key(OpKind::gate_up, s, q, tb, Target{}));
          CHECK(keys[5] == ops::gemm_key(OpKind::down, s, q, tb, Target{}));
          CHECK(keys[5].out_dtype == key.out_dtype);
        }
        CHECK(keys[2] == key);
        CHECK(keys[3].op == OpKind::combine);
        CHECK(keys[3].in_dtype == key.out_dtype);
        CHECK(keys[3].out_dtype == DType::bf16);
      }
  CHECK(bf16 > 0);
  CHECK(f32 > 0);  // Mixtral at T = 1 splits K (two experts hit)
  // FP8 modes never split K: bf16 Y at every bucket, decode and prefill.
  for (QuantMode q : {QuantMode::mxfp8, QuantMode::fp8_per_token})
    for (const MoeLayerShape& s : {kGptOss, kMixtral})
      for (std::uint32_t bucket : {1u, 8u, 64u, 4096u}) {
        INFO(to_string(q) << " bucket " << bucket);
        const auto keys = moe_layer_keys(s, q, bucket, Target{});
        REQUIRE(keys.size() >= 6);
        REQUIRE(keys[4].op == OpKind::down);
        CHECK(keys[4].out_dtype == DType::bf16);
        REQUIRE(keys[5].op == OpKind::combine);
        CHECK(keys[5].in_dtype == DType::bf16);  // the Y the combine reads
        CHECK(keys[5].out_dtype == DType::bf16);
      }
}

TEST_CASE("Y dtype: the combine key and kernel differ between f32 and bf16 Y", "[ydtype][codegen]") {
  const SpecKey kf = ops::combine_key(kGptOss, DType::f32, 64, Target{});
  const SpecKey kb = ops::combine_key(kGptOss, DType::bf16, 64, Target{});
  CHECK(!(kf == kb));
  CHECK(!(kf.hash() == kb.hash()));
  CHECK(key_diff(kf, kb) == "in: f32 -> bf16");
  const auto sf = codegen::generate(kf), sb = codegen::generate(kb);
  CHECK(sf.name_expression ==
        "moejit::moe_combine_kernel<moejit::CombineKernel{.threads = 256, .cols = 4, .in_flight = 4, .y_bf16 = false}>");
  CHECK(sb.name_expression ==
        "moejit::moe_combine_kernel<moejit::CombineKernel{.threads = 256, .cols = 8, .in_flight = 4, .y_bf16 = true}>");
  CHECK(sb.config_text == "threads=256 cols=8 in_flight=4 y=bf16");
  CHECK_THROWS_WITH(codegen::generate(ops::combine_key(kGptOss, DType::f16, 64, Target{})), Catch::Contains("in=f16"));
}

TEST_CASE("Y dtype: the workspace view names Y's dtype and splits", "[ydtype][layer]") {
  RuntimeOptions o;
  o.cache_dir = std::filesystem::temp_directory_path() / "moejit-ydtype-test";
  {
    Runtime rt(o);
    MoeLayerArgs a;
    a.workspace = 0x100000;
    for (const auto& [s, q] : {std::pair{kGptOss, QuantMode::w4a16_mxfp4}, std::pair{kMixtral, QuantMode::bf16}}) {
      MoeLayer layer(rt, s, q);
      for (std::uint32_t T : {1u, 7u, 64u, 300u, 4096u}) {
        a.num_tokens = T;
        const MoeWorkspaceView v = layer.workspace_view(a);
        const SpecKey down = ops::gemm_key(OpKind::down, s, q, round_up_tokens(T), Target{});
        INFO(down.to_text());
        CHECK(v.y_dtype == down.out_dtype);
        CHECK(v.y_splits == static_cast<std::uint32_t>(ops::choose_config(down).splits));
        CHECK((v.y_dtype == DType::bf16) == (v.y_splits == 1));
        // Y fits in the workspace whatever its dtype.
        CHECK(v.y + std::size_t(v.y_splits) * T * s.top_k * s.hidden * dtype_size(v.y_dtype) <=
              a.workspace + layer.workspace_size(T));
      }
    }
    // FP8 layers: the view follows the plan too (bf16 Y, one split).
    for (QuantMode q : {QuantMode::mxfp8, QuantMode::fp8_per_token}) {
      MoeLayer fp8(rt, kGptOss, q);
      for (std::uint32_t T : {1u, 64u, 4096u}) {
        a.num_tokens = T;
        const MoeWorkspaceView v = fp8.workspace_view(a);
        CHECK(v.y_dtype == DType::bf16);
        CHECK(v.y_splits == 1);
      }
      a.num_tokens = 0;
      CHECK(fp8.workspace_view(a).y_dtype == DType::f32);  // no plan for T = 0
    }
  }
  std::filesystem::remove_all(o.cache_dir);
}
