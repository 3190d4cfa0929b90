// FP8 activation quantizers (kernels/quantize_fp8.cuh): keys, codegen, NVRTC
// compile for sm_90a, the per-token rule as the kernel computes it (host build of
// the shared encoders) against the CPU quantizer; the FP8 layer's keys and
// workspace.
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "codegen/families.hpp"
#include "compiler/nvrtc_compiler.hpp"
#include "driver/nvrtc_api.hpp"
#include "moejit/error.hpp"
#include "moejit/formats.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/quant.hpp"
#include "moejit/runtime.hpp"
#include "reference/rng.hpp"
#include "reference/tensors.hpp"

#include "../../kernels/quantize_mxfp4.cuh"

using namespace moejit;

namespace {

// The per-token kernel's arithmetic for one row, on the host: amax over |bits|,
// scale = amax / 448 (IEEE fp32 division), code = encode_scaled<E4m3>(x / scale, 0).
void per_token_like_gpu(const std::uint16_t* x, std::uint32_t cols, std::uint8_t* codes, float* scale) {
  std::uint32_t amax = 0;
  for (std::uint32_t i = 0; i < cols; ++i) amax = std::max(amax, (std::uint32_t(x[i]) << 16) & 0x7FFFFFFFu);
  const bool nonfinite = amax >= 0x7F800000u;
  float s;
  if (nonfinite) s = std::bit_cast<float>(0x7FC00000u);
  else if (amax == 0) s = 1.0f;
  else {
    volatile float a = std::bit_cast<float>(amax);
    s = a / 448.0f;
    if (s == 0.0f) s = std::bit_cast<float>(1u);
  }
  *scale = s;
  for (std::uint32_t i = 0; i < cols; ++i) {
    const float v = std::bit_cast<float>(std::uint32_t(x[i]) << 16);
    codes[i] = nonfinite ? 0 : static_cast<std::uint8_t>(mxq::encode_scaled<mxq::E4m3>(std::bit_cast<std::uint32_t>(v / s), 0));
  }
}

}  // namespace

TEST_CASE("fp8 quantizer: per-token kernel arithmetic equals the CPU quantizer bit for bit", "[fp8][quant][gpu-math]") {
  ref::TestRng rng(4242);
  const std::uint32_t cols = 96;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::uint16_t> x(cols);
    const int mode = trial % 6;
    for (auto& v : x) {
      switch (mode) {
        case 0: v = static_cast<std::uint16_t>(rng.bits32()); break;  // anything, NaN/Inf included
        case 1: v = static_cast<std::uint16_t>(rng.bits32() & 0x807F); break;  // subnormal / zero
        case 2: v = float_to_bf16(static_cast<float>(rng.normal(0, std::ldexp(1.0, int(rng.integer(-60, 60)))))); break;
        case 3: v = (rng.bits32() & 1) ? 0x8000 : 0x0000; break;
        default: v = float_to_bf16(static_cast<float>(rng.normal())); break;
      }
      if (mode == 0 && (v & 0x7F80) == 0x7F80 && rng.integer(0, 3) != 0) v &= 0xBFFF;  // keep some rows finite
    }
    std::vector<std::uint8_t> a(cols), b(cols);
    float sa = 0, sb = 0;
    quantize_fp8_per_token_cpu(x.data(), 1, cols, a.data(), &sa);
    per_token_like_gpu(x.data(), cols, b.data(), &sb);
    INFO("trial " << trial << " mode " << mode);
    REQUIRE(std::bit_cast<std::uint32_t>(sa) == std::bit_cast<std::uint32_t>(sb));
    REQUIRE(a == b);
  }
}

TEST_CASE("fp8 quantizer: keys, generated source, rejections", "[fp8][quant][codegen]") {
  for (QuantMode q : {QuantMode::mxfp8, QuantMode::fp8_per_token}) {
    const SpecKey key = quantize_fp8_key(q, 2880);
    CHECK(key.op == OpKind::quantize);
    CHECK(key.out_dtype == DType::e4m3);
    CHECK_NOTHROW(validate(key));
    const auto ks = codegen::generate(key);
    CHECK(ks.source.find("#include") == std::string::npos);
    CHECK(ks.name_expression.find(q == QuantMode::mxfp8 ? "quantize_mxfp8_kernel" : "quantize_fp8_per_token_kernel") !=
          std::string::npos);
    CHECK(codegen::generate(quantize_fp8_key(q, 768)).source == ks.source);
    SpecKey bad = key;
    bad.out_dtype = DType::u8;
    CHECK_THROWS_WITH(codegen::generate(bad), Catch::Contains("out_dtype"));
  }
  CHECK_THROWS_WITH(quantize_fp8_key(QuantMode::mxfp8, 48), Catch::Contains("cols = 48"));
  CHECK_NOTHROW(quantize_fp8_key(QuantMode::fp8_per_token, 48));
  CHECK_THROWS_WITH(quantize_fp8_key(QuantMode::bf16, 64), Catch::Contains("mode"));
  // The MXFP4 quantizer key is untouched by the dispatch.
  CHECK(codegen::generate(quantize_mxfp4_key(64)).name_expression.find("quantize_mxfp4_kernel") != std::string::npos);
}

TEST_CASE("fp8 quantizer: both kernels compile with NVRTC for sm_90a without spills", "[fp8][quant][nvrtc]") {
  if (!driver::nvrtc_available()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  for (QuantMode q : {QuantMode::mxfp8, QuantMode::fp8_per_token}) {
    const SpecKey key = quantize_fp8_key(q, 2880);
    const auto out = compiler::compile(codegen::generate(key), Target{90, true}, key.to_text());
    INFO(out.log);
    CHECK(!out.cubin.empty());
    CHECK(out.resources.registers > 0);
    CHECK(out.resources.registers <= 128);
    CHECK(out.resources.spill_store_bytes == 0);
  }
}

TEST_CASE("fp8 layer: keys include both quantizers, every key generates, workspace grows", "[fp8][layer][keys]") {
  MoeLayerShape s;
  s.hidden = 2880, s.intermediate = 2880, s.experts = 128, s.top_k = 4;
  s.act = Activation::swiglu_oai, s.act_alpha = 1.702f, s.act_limit = 7.0f;
  s.gate_up_bias = BiasKind::bf16, s.down_bias = BiasKind::bf16;
  for (QuantMode q : {QuantMode::mxfp8, QuantMode::fp8_per_token}) {
    const auto keys = moe_layer_keys(s, q, 64, Target{});
    REQUIRE(keys.size() == 6);
    CHECK(keys[0].op == OpKind::route);
    CHECK(keys[1] == quantize_fp8_key(q, s.hidden));
    CHECK(keys[2].op == OpKind::gate_up);
    CHECK(keys[3] == quantize_fp8_key(q, s.intermediate));
    CHECK(keys[4].op == OpKind::down);
    CHECK(keys[5].op == OpKind::combine);
    for (const auto& k : keys) CHECK_NOTHROW(codegen::generate(k));
  }
  const auto pc = moe_layer_keys(s, QuantMode::fp8_per_token, WeightScale::per_channel, 64, Target{});
  CHECK(pc[2].weight_scale == WeightScale::per_channel);
  CHECK(pc[4].weight_scale == WeightScale::per_channel);
  CHECK(moe_layer_keys(s, QuantMode::w4a16_mxfp4, 64, Target{}).size() == 4);

  RuntimeOptions o;
  o.cache_dir = std::filesystem::temp_directory_path() / "moejit-fp8-layer-test";
  Runtime rt(o);
  MoeLayer bf(rt, s, QuantMode::bf16);
  for (QuantMode q : {QuantMode::mxfp8, QuantMode::fp8_per_token}) {
    MoeLayer layer(rt, s, q);
    std::size_t prev = 0;
    for (std::uint32_t T : {0u, 1u, 2u, 7u, 17u, 100u, 1000u, 4096u, 20000u}) {
      const std::size_t w = layer.workspace_size(T);
      CHECK(w >= prev);
      CHECK(w >= bf.workspace_size(T));
      // X and H codes need at least T*D + T*top_k*I bytes more than bf16.
      CHECK(w - bf.workspace_size(T) >= std::size_t(T) * s.hidden + std::size_t(T) * s.top_k * s.intermediate);
      prev = w;
    }
  }
  CHECK_THROWS_WITH(MoeLayer(rt, s, QuantMode::mxfp8, WeightScale::per_expert), Catch::Contains("wscale"));
  CHECK_NOTHROW(MoeLayer(rt, s, QuantMode::fp8_per_token, WeightScale::per_channel));
  std::filesystem::remove_all(o.cache_dir);
}
