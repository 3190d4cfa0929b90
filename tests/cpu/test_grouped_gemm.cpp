// The grouped GEMM over expert-sorted rows (moejit/grouped_gemm.hpp) without a
// GPU: its keys per row bucket in every format (the layer's down kernels
// without router weights, no in-GEMM routing, the combine only where K is
// split), the workspace bound, and errors that name the field before anything
// is launched.
#include <catch2/catch.hpp>

#include <filesystem>

#include "codegen/kernel_source.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/grouped_gemm.hpp"
#include "moejit/quant.hpp"
#include "ops/fp8_gemm_config.hpp"
#include "ops/grouped_gemm_config.hpp"

using namespace moejit;

namespace {
struct TempRuntime {
  RuntimeOptions o;
  std::unique_ptr<Runtime> rt;
  TempRuntime() {
    o.cache_dir = std::filesystem::temp_directory_path() / "moejit-grouped-gemm-test";
    rt = std::make_unique<Runtime>(o);
  }
  ~TempRuntime() {
    rt.reset();
    std::filesystem::remove_all(o.cache_dir);
  }
};
const GroupedGemmShape kDown{2880, 2880, 128, BiasKind::bf16};  // gpt-oss-120b's down projection
}  // namespace

TEST_CASE("grouped gemm: keys are the down kernels without router weights", "[grouped_gemm][keys]") {
  TempRuntime t;
  for (QuantMode q : {QuantMode::bf16, QuantMode::w4a16_mxfp4, QuantMode::mxfp8, QuantMode::fp8_per_token}) {
    const GroupedGemm op(*t.rt, kDown, q);
    bool saw_split = false;
    for (std::uint32_t b : prewarm_set(20000)) {
      INFO(to_string(q) << " bucket " << b);
      const auto keys = op.keys(b);
      REQUIRE(keys.size() >= 2);
      CHECK(keys[0].op == OpKind::route);
      CHECK(keys[0].experts == 128);
      CHECK(keys[0].top_k == 1);
      const SpecKey& g = keys[1];
      CHECK(g.op == OpKind::down);
      CHECK(g.quant == q);
      CHECK(g.token_bucket == b);
      CHECK(g.n == 2880);
      CHECK(g.k == 2880);
      CHECK(g.top_k == 1);
      CHECK_FALSE(g.router_weight);
      CHECK(g.bias == BiasKind::bf16);
      CHECK(g.act == Activation::none);
      // No kernel routes topk_ids itself: the rows come sorted.
      unsigned splits = 1;
      if (ops::is_fp8(q)) {
        CHECK_FALSE(ops::choose_fp8_config(g).fr);
      } else {
        const ops::GemmConfig c = ops::choose_config(g);
        CHECK_FALSE(c.fr);
        splits = static_cast<unsigned>(c.splits);
      }
      if (splits > 1) {
        saw_split = true;
        REQUIRE(keys.size() == 3);
        CHECK(g.out_dtype == DType::f32);  // partials
        CHECK(keys[2].op == OpKind::combine);
        CHECK(keys[2].in_dtype == DType::f32);
        CHECK(keys[2].top_k == 1);
      } else {
        CHECK(keys.size() == 2);
        CHECK(g.out_dtype == DType::bf16);  // Y straight into the output
      }
      // The code generator takes every key (no GPU, no NVRTC).
      for (const SpecKey& k : keys) CHECK_NOTHROW(codegen::generate(k));
    }
    if (ops::is_fp8(q)) CHECK_FALSE(saw_split);
  }
}

TEST_CASE("grouped gemm: workspace grows with the rows and holds the split-K partials", "[grouped_gemm]") {
  TempRuntime t;
  for (QuantMode q : {QuantMode::bf16, QuantMode::w4a16_mxfp4, QuantMode::fp8_per_token}) {
    const GroupedGemm op(*t.rt, kDown, q);
    std::size_t prev = 0;
    bool saw_split = false;
    for (std::uint32_t m : {1u, 2u, 3u, 7u, 64u, 300u, 4096u, 20000u}) {
      INFO(to_string(q) << " M=" << m);
      const std::size_t w = op.workspace_size(m), exact = op.workspace_size_for(m);
      CHECK(w >= prev);  // monotonic bound
      CHECK(w % 256 == 0);
      CHECK(exact <= w);
      CHECK(exact >= std::size_t(m) * 8);  // sorted_route and route_row
      // The exact size holds the partials of this bucket's kernel when it splits K.
      const auto keys = op.keys(round_up_tokens(m));
      if (keys.size() == 3) {
        saw_split = true;
        const unsigned splits = static_cast<unsigned>(ops::choose_config(keys[1]).splits);
        CHECK(exact >= std::size_t(m) * splits * kDown.n * 4);
      }
      prev = w;
    }
    if (q == QuantMode::fp8_per_token) {
      CHECK_FALSE(saw_split);
      CHECK(op.workspace_size(20000) < std::size_t(20000) * kDown.n);  // no room for fp32 partials reserved
    }
  }
  CHECK(GroupedGemm(*t.rt, kDown, QuantMode::bf16).workspace_size_for(0) == 0);
}

TEST_CASE("grouped gemm: bad shapes and arguments name the field", "[grouped_gemm][errors]") {
  TempRuntime t;
  CHECK_THROWS_WITH(GroupedGemm(*t.rt, GroupedGemmShape{0, 256, 4}, QuantMode::bf16), Catch::Contains("n=0"));
  CHECK_THROWS_WITH(GroupedGemm(*t.rt, GroupedGemmShape{256, 48, 4}, QuantMode::bf16), Catch::Contains("k=48"));
  CHECK_THROWS_WITH(GroupedGemm(*t.rt, GroupedGemmShape{256, 256, 0}, QuantMode::bf16),
                    Catch::Contains("experts=0"));
  CHECK_THROWS_WITH(GroupedGemm(*t.rt, GroupedGemmShape{256, 256, 5000}, QuantMode::bf16),
                    Catch::Contains("experts=5000"));
  CHECK_THROWS_AS(GroupedGemm(*t.rt, GroupedGemmShape{256, 256, 4}, QuantMode::mxfp8, WeightScale::per_expert),
                  InvalidArgument);

  const GroupedGemm op(*t.rt, GroupedGemmShape{256, 256, 4, BiasKind::f32}, QuantMode::fp8_per_token);
  GroupedGemmArgs a;
  a.num_rows = 0;
  CHECK_NOTHROW(op.run(a, nullptr));  // M = 0: nothing launched, null tensors allowed
  a.num_rows = 16;
  a.a = 0x10000;
  a.a_scales = 0x20000;
  a.expert_offsets = 0x30000;
  a.w = 0x40000;
  a.w_scales = 0x50000;
  a.bias = 0x60000;
  a.out = 0x70000;
  a.workspace = 0x100000;
  a.workspace_bytes = op.workspace_size(16);
  auto expect = [&](GroupedGemmArgs bad, const char* what) {
    CHECK_THROWS_WITH(op.run(bad, nullptr), Catch::Contains(what));
  };
  GroupedGemmArgs b = a;
  b.a = 0x10008;
  expect(b, "GroupedGemmArgs.a=");
  b = a;
  b.a_row_stride = 264;  // e4m3 rows: multiple of 16 bytes
  expect(b, "a_row_stride=264");
  b = a;
  b.a_scales = 0;
  expect(b, "a_scales=0");
  b = a;
  b.expert_offsets = 0;
  expect(b, "expert_offsets=0");
  b = a;
  b.w_scales = 0;
  expect(b, "w_scales=0");
  b = a;
  b.bias = 0;
  expect(b, "bias=0");
  b = a;
  b.out = 0x70004;
  expect(b, "out=");
  b = a;
  b.out_row_stride = 260;
  expect(b, "out_row_stride=260");
  b = a;
  b.workspace_bytes = 100;
  expect(b, "workspace_bytes=100");
  b = a;
  b.workspace = 0x100010;
  expect(b, "workspace=");
  b = a;
  b.num_rows = 0x80000000u;
  expect(b, "num_rows=");
  CHECK_THROWS_WITH(op.keys(0), Catch::Contains("row_bucket"));
  CHECK_THROWS_WITH(op.prewarm(0), Catch::Contains("max_rows"));
}
