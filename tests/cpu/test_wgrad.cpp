// MoE weight gradient (kernels/moe_wgrad_sm90.cuh, moe_wgrad_mma_sm90.cuh): key checks, codegen, NVRTC
// compile for sm_90a.
#include <string>

#include <catch2/catch.hpp>

#include "codegen/families.hpp"
#include "compiler/nvrtc_compiler.hpp"
#include "driver/nvrtc_api.hpp"
#include "moejit/error.hpp"
#include "moejit/moe_wgrad.hpp"

using namespace moejit;

TEST_CASE("wgrad: key fields and rejections", "[wgrad][keys]") {
  MoeWgradShape s{128, 4, 5760, 2880, DType::f32};
  const SpecKey k = moe_wgrad_key(s, 64);
  CHECK(k.op == OpKind::wgrad);
  CHECK(k.n == 5760);
  CHECK(k.k == 2880);
  CHECK(k.experts == 128);
  CHECK(k.out_dtype == DType::f32);
  CHECK_NOTHROW(validate(k));
  MoeWgradShape b = s;
  b.n = 12;
  CHECK_THROWS_WITH(moe_wgrad_key(b, 1), Catch::Contains("n=12"));
  b = s;
  b.k = 0;
  CHECK_THROWS_WITH(moe_wgrad_key(b, 1), Catch::Contains("k=0"));
  b = s;
  b.out_dtype = DType::e4m3;
  CHECK_THROWS_WITH(moe_wgrad_key(b, 1), Catch::Contains("out=e4m3"));
  b = s;
  b.experts = 0;
  CHECK_THROWS_WITH(moe_wgrad_key(b, 1), Catch::Contains("experts"));
  SpecKey bad = k;
  bad.quant = QuantMode::w4a16_mxfp4;
  bad.weight_scale = WeightScale::e8m0_block32;
  CHECK_THROWS_AS(codegen::generate(bad), InvalidArgument);
}

TEST_CASE("wgrad: both output dtypes, both channel blocks, with and without clusters compile with NVRTC for sm_90a without spills",
          "[wgrad][codegen][nvrtc]") {
  if (!driver::nvrtc_available()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  // 64 routed rows per expert and more (bucket 16384 x top_k 8 / 256 experts: 512) take the
  // warp-specialized kernel: N = 4096 (DeepSeek-V3 down's weights) with 256 output channels
  // per item, N = 5760 (gpt-oss-120b gate_up) with 192; fewer rows (bucket 64) the mma.sync kernel.
  // K = 7168 has 56 feature blocks of 128: clusters of two CTAs share the grad tiles; K = 128
  // has one, and the kernel runs without clusters.
  struct Case {
    std::uint32_t N, K, bucket;
    const char* config;
  };
  for (const Case& c : {Case{4096, 7168, 16384, "ws bn=256 bk=128 rows=64 stages=4 threads=384 cluster=2"},
                        Case{5760, 7168, 16384, "ws bn=192 bk=128 rows=64 stages=4 threads=384 cluster=2"},
                        Case{4096, 128, 16384, "ws bn=256 bk=128 rows=64 stages=4 threads=384 cluster=1"},
                        Case{4096, 7168, 64, "mma"}})
  for (DType d : {DType::f32, DType::bf16}) {
    const char* config = c.config;
    const SpecKey key = moe_wgrad_key(MoeWgradShape{256, 8, c.N, c.K, d}, c.bucket);
    const auto ks = codegen::generate(key);
    CHECK(ks.config_text.find(config) != std::string::npos);
    CHECK(ks.source.find("#include") == std::string::npos);
    const auto out = compiler::compile(ks, Target{90, true}, key.to_text());
    INFO(out.log);
    CHECK(!out.cubin.empty());
    CHECK(out.lowered_name.find(c.bucket == 64 ? "moe_wgrad_mma_kernel" : "moe_wgrad_kernel") != std::string::npos);
    CHECK(out.resources.registers > 0);
    CHECK(out.resources.registers <= 255);
    CHECK(out.resources.spill_store_bytes == 0);
    CHECK(out.resources.spill_load_bytes == 0);
    CHECK(out.log.find("serialized") == std::string::npos);  // ptxas kept the wgmma pipeline asynchronous
    std::printf("  nvrtc wgrad %s out=%s: %d regs, %.0f ms\n", config, std::string(to_string(d)).c_str(),
                out.resources.registers, out.compile_ms);
  }
}
