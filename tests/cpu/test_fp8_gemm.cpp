// FP8 grouped GEMM family (kernels/grouped_gemm_fp8_sm90.cuh): keys, config
// heuristic, codegen, NVRTC compile for sm_90a of representative keys; and the
// float64 reference's FP8 operands against a hand-written computation.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "codegen/families.hpp"
#include "compiler/nvrtc_compiler.hpp"
#include "driver/nvrtc_api.hpp"
#include "moejit/error.hpp"
#include "moejit/moe_layer.hpp"
#include "ops/fp8_gemm_config.hpp"
#include "ops/fp8_grouped_gemm.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/moe_keys.hpp"
#include "reference/moe_reference.hpp"
#include "reference/rng.hpp"

using namespace moejit;

namespace {

MoeLayerShape gpt_oss() {
  MoeLayerShape s;
  s.hidden = 2880, s.intermediate = 2880, s.experts = 128, s.top_k = 4;
  s.act = Activation::swiglu_oai, s.act_alpha = 1.702f, s.act_limit = 7.0f;
  s.gate_up_bias = BiasKind::bf16, s.down_bias = BiasKind::bf16;
  return s;
}
MoeLayerShape qwen3() {
  MoeLayerShape s;
  s.hidden = 2048, s.intermediate = 768, s.experts = 128, s.top_k = 8;
  s.act = Activation::silu_gated;
  return s;
}

void compile_ok(const SpecKey& key) {
  const auto ks = codegen::generate(key);
  INFO(key.to_text() << "\n" << ks.name_expression << " (" << ks.config_text << ")");
  CHECK(ks.source.find("#include") == std::string::npos);
  const auto out = compiler::compile(ks, Target{90, true}, key.to_text());
  CHECK(!out.cubin.empty());
  // Past 24 rows per expert both modes run the TMA warp-specialized
  // mainloop; fp8_per_token at most 8 rows per expert hit, the decode kernel.
  const auto cfg = ops::choose_fp8_config(key);
  const bool ws = cfg.ws;
  const char* family = ws ? "grouped_gemm_tma_ws_kernel" : cfg.decode ? "grouped_gemm_fp8_decode_kernel" : "grouped_gemm_fp8_kernel";
  CHECK(out.lowered_name.find(family) != std::string::npos);
  INFO(out.log);
  CHECK(out.log.find("serialized") == std::string::npos);  // ptxas kept the wgmma pipeline asynchronous
  if (ws) CHECK(out.resources.registers == 168);          // the launch bound's budget setmaxnreg assumes
  CHECK(out.resources.registers > 0);
  CHECK(out.resources.registers <= 255);
  CHECK(out.resources.spill_store_bytes == 0);
  CHECK(out.resources.spill_load_bytes == 0);
  std::printf("  nvrtc %s %s %s: %d regs, %.0f ms (%s)\n", std::string(to_string(key.op)).c_str(),
              std::string(to_string(key.quant)).c_str(), std::string(to_string(key.weight_scale)).c_str(),
              out.resources.registers, out.compile_ms, ks.config_text.c_str());
}

}  // namespace

TEST_CASE("fp8 gemm: keys of the FP8 modes carry their weight-scale granularity", "[fp8][keys]") {
  const MoeLayerShape s = gpt_oss();
  const SpecKey mx = ops::gemm_key(OpKind::gate_up, s, QuantMode::mxfp8, 64, Target{});
  CHECK(mx.weight_scale == WeightScale::e8m0_block32);
  CHECK_NOTHROW(validate(mx));
  const SpecKey pt = ops::gemm_key(OpKind::down, s, QuantMode::fp8_per_token, 64, Target{});
  CHECK(pt.weight_scale == WeightScale::per_expert);
  CHECK_NOTHROW(validate(pt));
  const SpecKey pc = ops::gemm_key(OpKind::down, s, QuantMode::fp8_per_token, WeightScale::per_channel, 64, Target{});
  CHECK(pc.weight_scale == WeightScale::per_channel);
  CHECK(!(pc == pt));
  CHECK(pc.hash() != pt.hash());
  // The existing modes are unchanged by the overload.
  CHECK(ops::gemm_key(OpKind::gate_up, s, QuantMode::w4a16_mxfp4, 64, Target{}).weight_scale ==
        WeightScale::e8m0_block32);
  CHECK(ops::gemm_key(OpKind::gate_up, s, QuantMode::bf16, 64, Target{}).weight_scale == WeightScale::none);
}

TEST_CASE("fp8 gemm: can_implement reasons name the field", "[fp8][config]") {
  SpecKey k = ops::gemm_key(OpKind::gate_up, qwen3(), QuantMode::mxfp8, 16, Target{});
  CHECK(ops::why_not_fp8(k).empty());
  SpecKey bad = k;
  bad.k = 48;  // not a multiple of 32
  bad.k_align = alignment_of(48);
  CHECK_THAT(ops::why_not_fp8(bad), Catch::Contains("k=48") && Catch::Contains("multiple of 32"));
  CHECK_THROWS_AS(ops::choose_fp8_config(bad), InvalidArgument);
  CHECK_THROWS_WITH(codegen::generate(bad), Catch::Contains("k=48"));
  // per-token needs only 16-byte rows
  SpecKey pt = ops::gemm_key(OpKind::gate_up, qwen3(), QuantMode::fp8_per_token, 16, Target{});
  pt.k = 48;
  pt.k_align = alignment_of(48);
  CHECK(ops::why_not_fp8(pt).empty());
  pt.k = 40;
  CHECK_THAT(ops::why_not_fp8(pt), Catch::Contains("k=40"));
  bad = k;
  bad.weight_scale = WeightScale::per_expert;
  CHECK_THAT(ops::why_not_fp8(bad), Catch::Contains("wscale"));
  bad = k;
  bad.n = 24;
  CHECK_THAT(ops::why_not_fp8(bad), Catch::Contains("n=24"));
  // down writes Y in bf16 (the layer's choice) or f32; nothing else.
  SpecKey dn = ops::gemm_key(OpKind::down, qwen3(), QuantMode::mxfp8, 16, Target{});
  CHECK(dn.out_dtype == DType::bf16);
  CHECK(ops::why_not_fp8(dn).empty());
  dn.out_dtype = DType::f32;
  CHECK(ops::why_not_fp8(dn).empty());
  dn.out_dtype = DType::f16;
  CHECK_THAT(ops::why_not_fp8(dn), Catch::Contains("out=f16"));
  bad = k;  // gate_up writes bf16 H only
  bad.out_dtype = DType::f32;
  CHECK_THAT(ops::why_not_fp8(bad), Catch::Contains("out=f32"));
}

TEST_CASE("fp8 gemm: config fits shared memory and tiles follow rows per expert", "[fp8][config]") {
  for (QuantMode q : {QuantMode::mxfp8, QuantMode::fp8_per_token}) {
    for (std::uint32_t bucket : {1u, 8u, 64u, 512u, 4096u, 16384u}) {
      for (OpKind op : {OpKind::gate_up, OpKind::down}) {
        const SpecKey key = ops::gemm_key(op, gpt_oss(), q, bucket, Target{});
        const auto c = ops::choose_fp8_config(key);
        INFO(key.to_text() << " -> " << c.to_string());
        CHECK(c.smem_bytes(q) <= 227u * 1024u);
        CHECK(c.stages >= 2);
        if (!c.ws && !c.decode) CHECK((c.bm() * 8) % c.threads() == 0);  // loader contract of the mma.sync kernel
        // The warp-specialized kernel: both modes past 24 rows per expert hit;
        // 128 x 128 work items, 384 threads.
        const std::uint64_t rows = std::uint64_t(bucket) * key.top_k;
        const std::uint64_t hit = std::min<std::uint64_t>(key.experts, rows);
        CHECK(c.ws == ((rows + hit - 1) / hit > 24));
        if (c.ws) CHECK((c.bm() == 128 && c.bn() == 128 && c.threads() == 384));
        // The decode kernel: fp8_per_token at most 8 rows per expert hit, 8-row m-tiles, 24
        // resident warps per SM, K split over 1, 2 or 4 warps.
        CHECK(c.decode == (q == QuantMode::fp8_per_token && (rows + hit - 1) / hit <= 8 && key.experts <= 128 &&
                           std::uint64_t(key.n) * key.k <= 0xFFFFFFFFull));
        if (c.decode) {
          CHECK(c.bm() == 8);
          CHECK(c.bn() == 16 * c.wn);
          CHECK((c.kw == 1 || c.kw == 2 || c.kw == 4));
          CHECK(c.ctas * c.threads() == 768);
          CHECK(c.smem_bytes(q) == 0u);
        }
        CHECK(c.k_tail == (key.k % 128 != 0));
        const auto ks = codegen::generate(key);
        CHECK(ks.launch.block_threads == static_cast<std::uint32_t>(c.threads()));
        CHECK(ks.launch.dynamic_smem_bytes == c.smem_bytes(q));
        CHECK((ks.name_expression.find("grouped_gemm_fp8_decode_kernel") != std::string::npos) == c.decode);
        // MXFP8 on the warp-specialized kernel: e4m3 operands, scale 3 (block
        // scales) and the per-slice fp32 scale tables in its shared memory.
        if (c.ws && q == QuantMode::mxfp8) {
          CHECK(ks.name_expression.find("grouped_gemm_tma_ws_kernel<moejit::TmaWsKernel{.elem = 1, .scale = 3, .bn = 128,") !=
                std::string::npos);
          CHECK(c.smem_bytes(q) == 1024u + c.stages * (128u * 128u + 128u * 128u + 4608u) + 16u * c.stages + 64u);
          CHECK(c.promote_slices == 1);  // (its block scales apply every 32 K)
        }
        // Per token on the warp-specialized kernel: promotion every 256 K (the
        // config's promote_slices), the epilogue's staging block (16 KB,
        // 128-byte aligned) after the ring's mbarriers and the work-item
        // slots (64 bytes), then the column-operand tables (4 x 128 x 8 bytes).
        if (c.ws && q == QuantMode::fp8_per_token) {
          CHECK(c.promote_slices == 2);
          CHECK(ks.name_expression.find(".promote_slices = 2,") != std::string::npos);
          CHECK(c.smem_bytes(q) ==
                1024u + c.stages * (128u * 128u + 128u * 128u) + 16u * c.stages + 64u + 128u + 16384u + 32u * 128u);
          CHECK(c.to_string().find("promote=2") != std::string::npos);
        }
      }
    }
  }
  const auto small = ops::choose_fp8_config(ops::gemm_key(OpKind::gate_up, gpt_oss(), QuantMode::mxfp8, 1, Target{}));
  const auto big = ops::choose_fp8_config(ops::gemm_key(OpKind::gate_up, gpt_oss(), QuantMode::mxfp8, 16384, Target{}));
  CHECK(!small.decode);  // MXFP8 decodes on the mma.sync kernel
  CHECK(small.bm() == 16);
  CHECK(big.bm() > small.bm());
  const auto pt = ops::choose_fp8_config(ops::gemm_key(OpKind::gate_up, gpt_oss(), QuantMode::fp8_per_token,
                                                       WeightScale::per_expert, 1, Target{}));
  CHECK(pt.decode);
  CHECK(pt.bm() == 8);
  MoeLayerShape e256 = gpt_oss();
  e256.experts = 256;  // more than 128 experts: the mma.sync kernel (measured faster there)
  CHECK(!ops::choose_fp8_config(ops::gemm_key(OpKind::down, e256, QuantMode::fp8_per_token, WeightScale::per_expert,
                                              8, Target{})).decode);
}

// The K split of the decode kernel: waves x (a warp's units + 10), over the
// measured sweep's GEMMs (docs/kernels.md, "FP8 per-token decode").
TEST_CASE("fp8 gemm: the decode kernel's K split follows the wave model", "[fp8][config]") {
  MoeLayerShape mixtral = qwen3();
  mixtral.hidden = 4096, mixtral.intermediate = 14336, mixtral.experts = 8, mixtral.top_k = 2;
  auto kw = [](OpKind op, const MoeLayerShape& s, std::uint32_t T) {
    const auto c = ops::choose_fp8_config(ops::gemm_key(op, s, QuantMode::fp8_per_token, WeightScale::per_expert, T,
                                                        Target{}),
                                          GemmTuning{});
    REQUIRE(c.decode);
    CHECK(c.ctas * c.threads() == 768);
    return c.kw;
  };
  // One wave holds every warp: the finest split that fits.
  CHECK(kw(OpKind::down, gpt_oss(), 1) == 4);
  CHECK(kw(OpKind::gate_up, gpt_oss(), 1) == 2);
  CHECK(kw(OpKind::gate_up, gpt_oss(), 2) == 1);
  // Just over one wave unsplit: two splits fill about three waves evenly
  // (measured 10-16 % faster than kw = 1 there).
  CHECK(kw(OpKind::gate_up, gpt_oss(), 3) == 2);
  CHECK(kw(OpKind::down, gpt_oss(), 5) == 2);
  CHECK(kw(OpKind::down, gpt_oss(), 6) == 2);
  CHECK(kw(OpKind::gate_up, mixtral, 1) == 2);
  CHECK(kw(OpKind::gate_up, qwen3(), 5) == 2);
  CHECK(kw(OpKind::down, mixtral, 4) == 4);  // K = 14336: 224 units per warp unsplit
  // Two waves or more unsplit: no split.
  CHECK(kw(OpKind::gate_up, gpt_oss(), 4) == 1);
  CHECK(kw(OpKind::gate_up, gpt_oss(), 8) == 1);
  CHECK(kw(OpKind::down, qwen3(), 8) == 1);
  // Fewer than 4 units of K: the kernel has fewer than 4 segments, no split.
  CHECK(ops::decode_k_split(10, 3, 3168) == 1);
  CHECK(ops::decode_k_split(10, 4, 3168) == 4);
}

TEST_CASE("fp8 gemm: in-warp routing arguments are refused before anything launches", "[fp8][launch]") {
  // Every case below fails a check, so the launch (which needs a driver) is
  // never reached; the kernel handle only has to be non-null.
  auto key_at = [](OpKind op, std::uint32_t bucket) {
    return ops::gemm_key(op, gpt_oss(), QuantMode::fp8_per_token, WeightScale::per_expert, bucket, Target{});
  };
  auto args_for = [](const SpecKey& key, std::uint32_t T) {
    ops::Fp8GemmArgs a;
    a.a = 0x10000, a.a_row_stride = key.k, a.a_scales = 0x20000, a.w = 0x30000, a.w_scales = 0x40000;
    a.bias = 0x50000, a.gamma = key.router_weight ? 0x60000 : 0, a.out = 0x70000;
    a.out_row_stride = key.op == OpKind::gate_up ? key.n / 2 : key.n;
    a.sorted_route = 0x80000, a.tile_expert = 0x81000, a.tile_row_begin = 0x82000, a.tile_row_end = 0x83000;
    a.num_tiles = 0x84000;
    a.topk_ids = 0x90000;
    a.num_routes = T * key.top_k;
    a.route_expert_offsets = 0xA0000, a.route_sorted_route = 0xA1000, a.route_route_row = 0xA2000;
    for (int i = 0; i < 4; ++i) a.route_tiles[i] = 0xB0000 + 0x1000 * i;
    a.max_tiles = ops::max_m_tiles(a.num_routes, key.experts, 8);
    return a;
  };
  KernelRef k;
  k.function = reinterpret_cast<CUfunction>(std::uintptr_t(0x1));
  auto refused = [&](const SpecKey& key, const ops::Fp8GemmArgs& a, const char* field) {
    INFO(field);
    const ops::Fp8GemmConfig c = ops::choose_fp8_config(key);
    k.launch.block_threads = static_cast<std::uint32_t>(c.threads());
    CHECK_THROWS_AS(ops::launch_fp8_grouped_gemm(k, key, c, a, nullptr), InvalidArgument);
    CHECK_THROWS_WITH(ops::launch_fp8_grouped_gemm(k, key, c, a, nullptr), Catch::Contains(field));
  };
  const SpecKey gu1 = key_at(OpKind::gate_up, 1), dn8 = key_at(OpKind::down, 8);
  REQUIRE(ops::choose_fp8_config(gu1).fr);
  REQUIRE(ops::choose_fp8_config(dn8).fr);
  // Not a decode bucket of <= 32 routes.
  const SpecKey gu64 = key_at(OpKind::gate_up, 64), gu4096 = key_at(OpKind::gate_up, 4096);
  REQUIRE(ops::choose_fp8_config(gu64).decode);
  REQUIRE_FALSE(ops::choose_fp8_config(gu64).fr);
  refused(gu64, args_for(gu64, 8), "Fp8GemmArgs.topk_ids");
  refused(gu4096, args_for(gu4096, 8), "tiles_ready/topk_ids");
  {
    ops::Fp8GemmArgs a = args_for(gu4096, 8);
    a.topk_ids = 0;
    a.tiles_ready = true;
    refused(gu4096, a, "tiles_ready/topk_ids");
  }
  // Misaligned topk_ids, route counts out of range, too few tiles.
  {
    ops::Fp8GemmArgs a = args_for(gu1, 1);
    a.topk_ids += 2;
    refused(gu1, a, "Fp8GemmArgs.topk_ids");
  }
  for (std::uint32_t routes : {0u, 33u}) {  // 1..32
    ops::Fp8GemmArgs a = args_for(dn8, 8);
    a.num_routes = routes;
    refused(dn8, a, "Fp8GemmArgs.num_routes");
  }
  {
    ops::Fp8GemmArgs a = args_for(gu1, 1);
    a.num_routes = 5;  // more than the bucket of T = 1 holds (top_k = 4)
    refused(gu1, a, "Fp8GemmArgs.num_routes");
  }
  {
    ops::Fp8GemmArgs a = args_for(dn8, 8);
    a.max_tiles -= 1;
    refused(dn8, a, "Fp8GemmArgs.max_tiles");
    a.max_tiles = 0;  // an empty launch is no exemption
    refused(dn8, a, "Fp8GemmArgs.max_tiles");
  }
  // gate_up writes the routing outputs: each must be there and 4-byte aligned.
  for (int which = 0; which < 7; ++which) {
    for (bool null_it : {true, false}) {
      ops::Fp8GemmArgs a = args_for(gu1, 1);
      DevicePtr* outs[] = {&a.route_expert_offsets, &a.route_sorted_route, &a.route_route_row, &a.route_tiles[0],
                           &a.route_tiles[1],       &a.route_tiles[2],     &a.route_tiles[3]};
      *outs[which] = null_it ? 0 : *outs[which] + 1;
      refused(gu1, a, "Fp8GemmArgs.route_*");
    }
  }
  // down reads none of them, but the router weights go through sorted_route.
  {
    ops::Fp8GemmArgs a = args_for(dn8, 8);
    a.route_expert_offsets = a.route_sorted_route = a.route_route_row = 0;
    a.sorted_route = 0;
    refused(dn8, a, "Fp8GemmArgs.sorted_route");
  }
}

TEST_CASE("fp8 gemm: every variant compiles with NVRTC for sm_90a without spills", "[fp8][codegen][nvrtc]") {
  if (!driver::nvrtc_available()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  std::vector<SpecKey> keys;
  const MoeLayerShape g = gpt_oss(), q = qwen3();
  // gpt-oss (K = 2880: k tail, swiglu, bf16 bias) small and large tiles, both modes.
  for (QuantMode m : {QuantMode::mxfp8, QuantMode::fp8_per_token})
    for (std::uint32_t bucket : {1u, 4096u}) {
      keys.push_back(ops::gemm_key(OpKind::gate_up, g, m, bucket, Target{}));
      keys.push_back(ops::gemm_key(OpKind::down, g, m, bucket, Target{}));
    }
  // per-channel weight scales, silu_gated, f32 bias; act none with N = 768, K = 32.
  MoeLayerShape qb = q;
  qb.gate_up_bias = BiasKind::f32;
  keys.push_back(ops::gemm_key(OpKind::gate_up, qb, QuantMode::fp8_per_token, WeightScale::per_channel, 300, Target{}));
  keys.push_back(ops::gemm_key(OpKind::down, q, QuantMode::fp8_per_token, WeightScale::per_channel, 300, Target{}));
  MoeLayerShape odd;
  odd.hidden = 32, odd.intermediate = 768, odd.experts = 8, odd.top_k = 2, odd.act = Activation::none;
  keys.push_back(ops::gemm_key(OpKind::gate_up, odd, QuantMode::mxfp8, 64, Target{}));
  // MXFP8 on the warp-specialized kernel: silu_gated with f32 bias (K = 2048,
  // no k tail), act none with K = 32 (one block of a slice's four) and with
  // N = 32 (a partial weight tile).
  keys.push_back(ops::gemm_key(OpKind::gate_up, qb, QuantMode::mxfp8, 4096, Target{}));
  keys.push_back(ops::gemm_key(OpKind::gate_up, odd, QuantMode::mxfp8, 4096, Target{}));
  keys.push_back(ops::gemm_key(OpKind::down, odd, QuantMode::mxfp8, 4096, Target{}));
  for (const auto& k : keys) compile_ok(k);
}

TEST_CASE("fp8 reference: dequantized FP8 operands against a hand-written loop", "[fp8][reference]") {
  using namespace moejit::ref;
  const std::uint32_t T = 3, D = 64, I = 32, E = 2, K = 1;
  TestRng rng(77);
  const auto x = random_bf16(std::size_t(T) * D, rng);
  const std::int32_t ids[] = {1, 0, 1};
  const float gamma[] = {0.5f, 1.0f, 0.25f};
  std::vector<float> w1f(std::size_t(E) * I * D), w2f(std::size_t(E) * D * I);
  for (auto& v : w1f) v = static_cast<float>(rng.normal(0, 0.2));
  for (auto& v : w2f) v = static_cast<float>(rng.normal(0, 0.2));
  for (ActQuant aq : {ActQuant::fp8_per_token, ActQuant::mxfp8}) {
    INFO("act_quant " << int(aq));
    std::vector<std::uint8_t> c1(w1f.size()), c2(w2f.size()), s1(w1f.size() / 32), s2(w2f.size() / 32);
    std::vector<float> f1(E), f2(E);
    MoeReferenceArgs a;
    a.tokens = T, a.hidden = D, a.intermediate = I, a.experts = E, a.top_k = K;
    a.x = x.data(), a.topk_ids = ids, a.topk_weights = gamma;
    a.act = Activation::none;
    a.act_quant = aq;
    // weights and their exact dequantized values
    std::vector<double> w1d(w1f.size()), w2d(w2f.size());
    if (aq == ActQuant::mxfp8) {
      quantize_mxfp8_cpu(w1f.data(), std::uint64_t(E) * I, D, c1.data(), s1.data());
      quantize_mxfp8_cpu(w2f.data(), std::uint64_t(E) * D, I, c2.data(), s2.data());
      dequantize_mxfp8_cpu(c1.data(), s1.data(), std::uint64_t(E) * I, D, w1d.data());
      dequantize_mxfp8_cpu(c2.data(), s2.data(), std::uint64_t(E) * D, I, w2d.data());
      a.w1 = WeightsView::of_mxfp8(c1.data(), s1.data(), E, I, D);
      a.w2 = WeightsView::of_mxfp8(c2.data(), s2.data(), E, D, I);
    } else {
      for (std::uint32_t e = 0; e < E; ++e) {
        f1[e] = 0.01f * (e + 1);
        f2[e] = 0.02f * (e + 1);
      }
      for (std::size_t i = 0; i < w1f.size(); ++i) {
        c1[i] = float_to_e4m3(w1f[i] / f1[i / (std::size_t(I) * D)]);
        w1d[i] = double(e4m3_to_float(c1[i])) * f1[i / (std::size_t(I) * D)];
      }
      for (std::size_t i = 0; i < w2f.size(); ++i) {
        c2[i] = float_to_e4m3(w2f[i] / f2[i / (std::size_t(D) * I)]);
        w2d[i] = double(e4m3_to_float(c2[i])) * f2[i / (std::size_t(D) * I)];
      }
      a.w1 = WeightsView::of_fp8_per_token(c1.data(), f1.data(), WeightScale::per_expert, E, I, D);
      a.w2 = WeightsView::of_fp8_per_token(c2.data(), f2.data(), WeightScale::per_expert, E, D, I);
    }
    const auto res = moe_reference(a);
    for (std::uint32_t t = 0; t < T; ++t) {
      // X row quantized as the kernels see it
      std::vector<std::uint8_t> xc(D), xs(D / 32);
      float xsc = 0;
      std::vector<double> xd(D), h(I), hd(I);
      if (aq == ActQuant::mxfp8) {
        quantize_mxfp8_cpu(x.data() + t * D, 1, D, xc.data(), xs.data());
        dequantize_mxfp8_cpu(xc.data(), xs.data(), 1, D, xd.data());
      } else {
        quantize_fp8_per_token_cpu(x.data() + t * D, 1, D, xc.data(), &xsc);
        dequantize_fp8_per_token_cpu(xc.data(), &xsc, 1, D, xd.data());
      }
      const std::uint32_t e = static_cast<std::uint32_t>(ids[t]);
      std::vector<std::uint16_t> hb(I);
      for (std::uint32_t n = 0; n < I; ++n) {
        double acc = 0;
        for (std::uint32_t d = 0; d < D; ++d) acc += w1d[(std::size_t(e) * I + n) * D + d] * xd[d];
        hb[n] = float_to_bf16(static_cast<float>(acc));
        h[n] = bf16_to_float(hb[n]);
      }
      std::vector<std::uint8_t> hc(I), hs(I / 32);
      float hsc = 0;
      if (aq == ActQuant::mxfp8) {
        quantize_mxfp8_cpu(hb.data(), 1, I, hc.data(), hs.data());
        dequantize_mxfp8_cpu(hc.data(), hs.data(), 1, I, hd.data());
      } else {
        quantize_fp8_per_token_cpu(hb.data(), 1, I, hc.data(), &hsc);
        dequantize_fp8_per_token_cpu(hc.data(), &hsc, 1, I, hd.data());
      }
      const std::int64_t hi = res.index_of_row(static_cast<std::uint64_t>(res.routing.row_of_slot[t]));
      REQUIRE(hi >= 0);
      for (std::uint32_t n = 0; n < I; ++n) CHECK(res.h[std::size_t(hi) * I + n] == Approx(h[n]).epsilon(1e-12));
      for (std::uint32_t d = 0; d < D; ++d) {
        double acc = 0;
        for (std::uint32_t i = 0; i < I; ++i) acc += w2d[(std::size_t(e) * D + d) * I + i] * hd[i];
        CHECK(res.out[t * D + d] == Approx(gamma[t] * acc).epsilon(1e-9).margin(1e-12));
      }
    }
  }
}
