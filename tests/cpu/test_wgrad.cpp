// MoE weight gradient (kernels/moe_wgrad_sm90.cuh): key checks, codegen, NVRTC
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

TEST_CASE("wgrad: both output dtypes compile with NVRTC for sm_90a without spills", "[wgrad][codegen][nvrtc]") {
  if (!driver::nvrtc_available()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  for (DType d : {DType::f32, DType::bf16}) {
    const SpecKey key = moe_wgrad_key(MoeWgradShape{256, 8, 4096, 7168, d}, 4096);
    const auto ks = codegen::generate(key);
    CHECK(ks.source.find("#include") == std::string::npos);
    const auto out = compiler::compile(ks, Target{90, true}, key.to_text());
    INFO(out.log);
    CHECK(!out.cubin.empty());
    CHECK(out.lowered_name.find("moe_wgrad_kernel") != std::string::npos);
    CHECK(out.resources.registers > 0);
    CHECK(out.resources.registers <= 255);
    CHECK(out.resources.spill_store_bytes == 0);
    CHECK(out.resources.spill_load_bytes == 0);
    std::printf("  nvrtc wgrad out=%s: %d regs, %.0f ms\n", std::string(to_string(d)).c_str(), out.resources.registers,
                out.compile_ms);
  }
}
