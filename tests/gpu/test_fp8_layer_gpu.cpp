// The MoE layer in the FP8 modes (mxfp8, fp8_per_token) on the GPU: the GPU
// activation quantizers against the CPU ones bit for bit, the whole layer
// against the float64 reference over the same quantized activations, and
// padding invariance by memcmp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "driver/cuda_api.hpp"
#include "gpu/fp8_fixture.hpp"
#include "gpu/gpu_runtime.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/quant.hpp"

using namespace moejit;
using namespace moejit::testing;

namespace {

void device_sync() { MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize()); }

// bf16 rows with the cases the rule singles out: NaN, Inf, all zero (with
// -0.0), subnormal-only, huge, and plain normal rows.
std::vector<std::uint16_t> tricky_rows(std::uint32_t rows, std::uint32_t stride, std::uint32_t cols, ref::TestRng& rng) {
  std::vector<std::uint16_t> x(std::size_t(rows) * stride, 0x7FC1);  // padding between rows: NaN (must be ignored)
  for (std::uint32_t r = 0; r < rows; ++r) {
    std::uint16_t* row = x.data() + std::size_t(r) * stride;
    for (std::uint32_t c = 0; c < cols; ++c) {
      switch (r % 8) {
        case 0: row[c] = c == cols / 2 ? 0x7FC0 : float_to_bf16(static_cast<float>(rng.normal())); break;  // NaN
        case 1: row[c] = c == 3 ? 0xFF80 : float_to_bf16(static_cast<float>(rng.normal())); break;          // -Inf
        case 2: row[c] = (c & 1) ? 0x8000 : 0x0000; break;                                                 // zeros
        case 3: row[c] = static_cast<std::uint16_t>((rng.bits32() & 0x807F) | 1); break;                   // subnormal
        case 4: row[c] = float_to_bf16(static_cast<float>(rng.normal(0, 1e30))); break;
        case 5: row[c] = float_to_bf16(static_cast<float>(rng.normal(0, 1e-30))); break;
        case 6: row[c] = float_to_bf16(static_cast<float>(rng.normal(0, std::ldexp(1.0, int(rng.integer(-20, 20)))))); break;
        default: {  // any finite bf16: every binade, subnormals, both zeros
          std::uint16_t b = static_cast<std::uint16_t>(rng.bits32());
          if ((b & 0x7F80) == 0x7F80) b &= 0xFF7F;
          row[c] = b;
          break;
        }
      }
    }
  }
  return x;
}

const Fp8LayerWeights& fp8_weights(const std::string& name, const MoeLayerShape& s, QuantMode q, WeightScale ws) {
  static std::map<std::string, std::unique_ptr<Fp8LayerWeights>> cache;
  auto& slot = cache[name + "/" + std::string(to_string(q)) + "/" + std::string(to_string(ws))];
  if (!slot) slot = Fp8LayerWeights::make(s, q, ws, ref::process_seed() ^ std::hash<std::string>{}(name));
  return *slot;
}

// Each stage against float64 over the operands it was given: H from X, Y from
// the GPU's own H (quantized as the GPU quantizer does, bit for bit), out from
// the references of those Y rows. The end-to-end error (out against the
// reference's own chain, e2e) also counts the reference's re-quantization of
// its H: where GPU and reference H differ by one bf16 step (the tensor-core
// accumulation order), the e4m3 code of that element can differ by one step
// (up to 12.5 %), so it is checked against a wider bound.
struct Errors {
  double out = 0, h = 0, y = 0, e2e = 0;
  std::size_t nonfinite_out = 0;
};

Errors run_and_check(const Fp8LayerWeights& w, const LayerInputs& in, std::uint32_t sample = 8) {
  MoeLayer layer(gpu_runtime(), w.shape, w.quant, w.wscale);
  LayerRun run(layer, in);
  layer.run(w.device(), run.args, nullptr);
  device_sync();
  const auto& s = w.shape;
  Errors err;
  const auto out = run.download_out(s);
  err.nonfinite_out = ref::count_nonfinite(out.data(), out.size());
  const auto res = ref::moe_reference(w.reference_args(in), sample_tokens(in.tokens, sample));
  std::vector<std::uint16_t> got_out;
  for (auto t : res.tokens)
    got_out.insert(got_out.end(), out.begin() + std::size_t(t) * s.hidden, out.begin() + std::size_t(t + 1) * s.hidden);
  err.e2e = ref::relative_frobenius_error(res.out, got_out);
  const MoeWorkspaceView v = layer.workspace_view(run.args);
  REQUIRE(v.y_dtype == DType::bf16);  // the FP8 down projection never splits K: bf16 Y
  REQUIRE(v.y_splits == 1);
  const std::size_t routes = std::size_t(in.tokens) * s.top_k;
  std::vector<std::int32_t> route_row(routes);
  MOEJIT_CU_CHECK(driver::cuda().cuMemcpyDtoH_v2(route_row.data(), v.route_row, routes * 4));
  std::vector<double> ref_h, ref_y;
  std::vector<std::uint16_t> got_h, hrow(s.intermediate);
  std::vector<float> got_y;
  std::vector<std::uint16_t> yrow(s.hidden);
  for (std::size_t i = 0; i < res.rows.size(); ++i) {
    const auto r = res.rows[i];
    const std::int32_t gr = route_row[std::size_t(res.routing.row_token[r]) * s.top_k + res.routing.row_slot[r]];
    REQUIRE(gr >= 0);
    REQUIRE_FALSE(v.h_fragment_order);  // FP8 modes keep H in column order
    MOEJIT_CU_CHECK(driver::cuda().cuMemcpyDtoH_v2(hrow.data(), v.h + std::size_t(gr) * s.intermediate * 2, hrow.size() * 2));
    MOEJIT_CU_CHECK(driver::cuda().cuMemcpyDtoH_v2(yrow.data(), v.y + std::size_t(gr) * s.hidden * 2, yrow.size() * 2));
    got_h.insert(got_h.end(), hrow.begin(), hrow.end());
    for (auto y : yrow) got_y.push_back(bf16_to_float(y));
    ref_h.insert(ref_h.end(), res.h.begin() + i * s.intermediate, res.h.begin() + (i + 1) * s.intermediate);
    ref_y.insert(ref_y.end(), res.y.begin() + i * s.hidden, res.y.begin() + (i + 1) * s.hidden);
  }
  err.h = ref::relative_frobenius_error(ref_h, got_h);
  // Y from the GPU's H, and out from those Y rows (slot order, as the combine).
  const ref::MoeReferenceArgs ra = w.reference_args(in);
  const std::uint32_t hc = ra.h_cols();
  std::vector<double> hq(got_h.size());
  for (std::size_t i = 0; i < res.rows.size(); ++i) {
    std::vector<double> row(hc);
    for (std::uint32_t c = 0; c < hc; ++c) row[c] = bf16_to_float(got_h[i * hc + c]);
    ref::quantize_dequantize_row(ra.act_quant, row.data(), hc, true, hq.data() + i * hc);
  }
  const std::vector<double> ref_y_gpu_h = ref::down_reference(ra, res.routing, res.rows, hq.data());
  err.y = ref::relative_frobenius_error(ref_y_gpu_h, got_y);
  std::vector<double> ref_out(res.out.size(), 0.0);
  for (std::size_t ti = 0; ti < res.tokens.size(); ++ti)
    for (std::uint32_t j = 0; j < s.top_k; ++j) {
      const std::int64_t r = res.routing.row_of_slot[std::uint64_t(res.tokens[ti]) * s.top_k + j];
      if (r < 0) continue;
      const std::size_t yi = static_cast<std::size_t>(res.index_of_row(static_cast<std::uint64_t>(r)));
      // The combine sums the stored (bf16) Y: so does this reference.
      for (std::uint32_t d = 0; d < s.hidden; ++d)
        ref_out[ti * s.hidden + d] += double(bf16_to_float(float_to_bf16(static_cast<float>(ref_y_gpu_h[yi * s.hidden + d]))));
    }
  err.out = ref::relative_frobenius_error(ref_out, got_out);
  return err;
}

void report(const char* what, QuantMode q, WeightScale ws, std::uint32_t T, const Errors& e) {
  std::printf("  %-24s %-13s %-12s T=%-5u rel.err out=%.2e H=%.2e Y=%.2e end-to-end=%.2e nonfinite=%zu\n", what,
              std::string(to_string(q)).c_str(), std::string(to_string(ws)).c_str(), T, e.out, e.h, e.y, e.e2e,
              e.nonfinite_out);
  CHECK(e.nonfinite_out == 0);
  CHECK(e.out < 1e-2);
  CHECK(e.e2e < 5e-2);
  CHECK(e.h < 1e-2);
  CHECK(e.y < 1e-2);
}

}  // namespace

TEST_CASE("gpu: FP8 activation quantizers match the CPU quantizers bit for bit", "[gpu][fp8][quant]") {
  for (QuantMode q : {QuantMode::fp8_per_token, QuantMode::mxfp8}) {
    // Shapes of every row geometry (quantize_fp8_geometry.cuh): 32 to 256
    // threads per row, one to ten 16-byte chunks per thread, a CTA's rows
    // cut by the batch end.
    for (auto [rows, cols, stride] :
         {std::tuple{1u, 32u, 32u}, std::tuple{333u, 2880u, 2888u}, std::tuple{64u, 7168u, 7168u},
          std::tuple{4097u, 768u, 776u}, std::tuple{70u, 14336u, 14336u}, std::tuple{19u, 2048u, 2056u},
          std::tuple{16u, 20480u, 20480u}, std::tuple{9u, 4096u, 4096u}, std::tuple{37u, 256u, 264u},
          std::tuple{41u, 512u, 512u}}) {
      ref::TestRng rng(rows * 7 + cols);
      const auto x = tricky_rows(rows, stride, cols, rng);
      // CPU on the packed rows
      std::vector<std::uint16_t> packed(std::size_t(rows) * cols);
      for (std::uint32_t r = 0; r < rows; ++r)
        std::memcpy(&packed[std::size_t(r) * cols], &x[std::size_t(r) * stride], cols * 2);
      std::vector<std::uint8_t> cpu_codes(packed.size()), gpu_codes(packed.size());
      const bool mx = q == QuantMode::mxfp8;
      const std::size_t sbytes = mx ? std::size_t(rows) * cols / 32 : std::size_t(rows) * 4;
      std::vector<std::uint8_t> cpu_scales(sbytes), gpu_scales(sbytes);
      if (mx) quantize_mxfp8_cpu(packed.data(), rows, cols, cpu_codes.data(), cpu_scales.data());
      else quantize_fp8_per_token_cpu(packed.data(), rows, cols, cpu_codes.data(), reinterpret_cast<float*>(cpu_scales.data()));
      driver::DeviceBuffer din(x.size() * 2), dcodes(gpu_codes.size()), dscales(sbytes);
      din.upload(x.data(), x.size() * 2);
      dcodes.fill_bytes(0xAB);
      dscales.fill_bytes(0xAB);
      quantize_fp8_gpu(gpu_runtime(), q, din.get(), stride, rows, cols, dcodes.get(), dscales.get(), nullptr);
      device_sync();
      dcodes.download(gpu_codes.data(), gpu_codes.size());
      dscales.download(gpu_scales.data(), sbytes);
      INFO(to_string(q) << " rows=" << rows << " cols=" << cols << " stride=" << stride);
      CHECK(std::memcmp(cpu_codes.data(), gpu_codes.data(), cpu_codes.size()) == 0);
      CHECK(std::memcmp(cpu_scales.data(), gpu_scales.data(), sbytes) == 0);
    }
  }
  CHECK_THROWS_WITH(quantize_fp8_gpu(gpu_runtime(), QuantMode::mxfp8, 16, 48, 1, 48, 16, 16, nullptr),
                    Catch::Contains("cols = 48"));
  CHECK_THROWS_WITH(quantize_fp8_gpu(gpu_runtime(), QuantMode::bf16, 16, 64, 1, 64, 16, 16, nullptr),
                    Catch::Contains("mode"));
}

TEST_CASE("gpu: FP8 MoE layer matches the float64 reference on real model shapes", "[gpu][fp8][layer]") {
  MoeLayerShape qb = qwen3_30b_shape();
  qb.gate_up_bias = BiasKind::f32;
  qb.down_bias = BiasKind::bf16;
  const std::tuple<const char*, MoeLayerShape, QuantMode, WeightScale> models[] = {
      {"gpt-oss-120b", gpt_oss_120b_shape(), QuantMode::mxfp8, WeightScale::e8m0_block32},
      {"gpt-oss-120b", gpt_oss_120b_shape(), QuantMode::fp8_per_token, WeightScale::per_expert},
      {"qwen3-30b-a3b", qb, QuantMode::fp8_per_token, WeightScale::per_channel},
      {"qwen3-30b-a3b", qb, QuantMode::mxfp8, WeightScale::e8m0_block32},
      {"mixtral-8x7b", mixtral_shape(), QuantMode::fp8_per_token, WeightScale::per_channel},
  };
  for (const auto& [name, shape, q, ws] : models) {
    const Fp8LayerWeights& w = fp8_weights(name, shape, q, ws);
    for (std::uint32_t T : {1u, 7u, 64u, 300u, 2049u}) {
      ref::TestRng rng(T);
      const auto in = LayerInputs::make(shape, T, Routing::uniform, rng);
      INFO(name << " " << to_string(q) << " T=" << T << " seed=" << rng.seed());
      report(name, q, ws, T, run_and_check(w, in));
    }
  }
}

TEST_CASE("gpu: FP8 layer routing edge cases (one expert, drops, zero-row experts, E = 256 on expert 255)",
          "[gpu][fp8][layer]") {
  const MoeLayerShape s = qwen3_30b_shape();
  for (auto [q, ws] : {std::pair{QuantMode::mxfp8, WeightScale::e8m0_block32},
                       std::pair{QuantMode::fp8_per_token, WeightScale::per_expert}}) {
    const Fp8LayerWeights& w = fp8_weights("qwen3-30b-a3b", s, q, ws);
    ref::TestRng rng(11);
    report("all rows on one expert", q, ws, 300, run_and_check(w, LayerInputs::make(s, 300, Routing::one_expert, rng)));
    report("-1 routes dropped", q, ws, 64, run_and_check(w, LayerInputs::make(s, 64, Routing::with_drops, rng)));
    report("zero-row experts", q, ws, 3, run_and_check(w, LayerInputs::make(s, 3, Routing::uniform, rng)));
    // A decode bucket whose 24 routes all name one expert: three 8-row tiles.
    report("3 tokens, one expert", q, ws, 3, run_and_check(w, LayerInputs::make(s, 3, Routing::one_expert, rng)));
  }
  MoeLayerShape e;
  e.hidden = 7168, e.intermediate = 2048, e.experts = 256, e.top_k = 8;
  e.act = Activation::silu_gated;
  const Fp8LayerWeights& w = fp8_weights("e256", e, QuantMode::mxfp8, WeightScale::e8m0_block32);
  ref::TestRng rng(256);
  report("E=256 expert 255 only", QuantMode::mxfp8, WeightScale::e8m0_block32, 33,
         run_and_check(w, LayerInputs::make(e, 33, Routing::last_expert_only, rng), 33));
}

TEST_CASE("gpu: FP8 padding invariance is bit-exact (both modes, with and without bias)", "[gpu][fp8][padding]") {
  for (auto [q, ws] : {std::pair{QuantMode::mxfp8, WeightScale::e8m0_block32},
                       std::pair{QuantMode::fp8_per_token, WeightScale::per_channel}}) {
    for (BiasKind bias : {BiasKind::none, BiasKind::f32}) {
      MoeLayerShape s = qwen3_30b_shape();
      s.gate_up_bias = bias;
      s.down_bias = bias;
      const auto w = Fp8LayerWeights::make(s, q, ws, ref::process_seed() + 99);
      MoeLayer layer(gpu_runtime(), s, q, ws);
      for (std::uint32_t T : {5u, 17u, 100u, 1000u, 2049u}) {
        const auto [alone, padded] = alone_and_padded(s, T, T + 1000);
        LayerRun ra(layer, alone), rb(layer, padded), rc(layer, alone);
        layer.run(w->device(), ra.args, nullptr);
        layer.run(w->device(), rb.args, nullptr);
        layer.run(w->device(), rc.args, nullptr);
        device_sync();
        const auto oa = ra.download_out(s), ob = rb.download_out(s), oc = rc.download_out(s);
        INFO(to_string(q) << " bias=" << to_string(bias) << " T=" << T << " padded to " << padded.tokens);
        CHECK(ref::count_nonfinite(oa.data(), oa.size()) == 0);
        const bool same = std::memcmp(oa.data(), ob.data(), oa.size() * 2) == 0;
        CHECK(same);
        CHECK(std::memcmp(oa.data(), oc.data(), oa.size() * 2) == 0);
        std::printf("  padding %s bias=%s T=%u in batch of %u: %s\n", std::string(to_string(q)).c_str(),
                    std::string(to_string(bias)).c_str(), T, padded.tokens, same ? "identical" : "DIFFERENT");
      }
    }
  }
}

// Decode token counts on gpt-oss-120b (top_k = 4), both FP8 modes: up to 8
// routed rows per expert hit fp8_per_token runs the decode kernel
// (kernels/grouped_gemm_fp8_decode_sm90.cuh), and T = 300-500 (10-16 rows)
// the mma.sync kernel's buckets just past it. A T that is its own bucket is
// padded with 3 more tokens (still the same kernel).
TEST_CASE("gpu: FP8 padding invariance is bit-exact at decode token counts (both modes)", "[gpu][fp8][padding]") {
  const MoeLayerShape s = gpt_oss_120b_shape();
  for (auto [q, ws] : {std::pair{QuantMode::mxfp8, WeightScale::e8m0_block32},
                       std::pair{QuantMode::fp8_per_token, WeightScale::per_expert}}) {
    const Fp8LayerWeights& w = fp8_weights("gpt-oss-120b", s, q, ws);
    MoeLayer layer(gpu_runtime(), s, q, ws);
    for (std::uint32_t T : {1u, 2u, 3u, 7u, 8u, 9u, 63u, 64u, 300u, 384u, 500u}) {
      const auto [alone, padded] = alone_and_padded(s, T, T + 3000);
      LayerRun ra(layer, alone), rb(layer, padded);
      layer.run(w.device(), ra.args, nullptr);
      layer.run(w.device(), rb.args, nullptr);
      device_sync();
      const auto oa = ra.download_out(s), ob = rb.download_out(s);
      INFO(to_string(q) << " T=" << T << " padded to " << padded.tokens);
      CHECK(ref::count_nonfinite(oa.data(), oa.size()) == 0);
      const bool same = std::memcmp(oa.data(), ob.data(), oa.size() * 2) == 0;
      CHECK(same);
      std::printf("  padding %s T=%u in batch of %u: %s\n", std::string(to_string(q)).c_str(), T, padded.tokens,
                  same ? "identical" : "DIFFERENT");
    }
  }
}

// The FP8 per-token decode kernel sums K in fixed segments whatever the number
// of warps that share them (its K split, decode_k_split or decode.kw): the
// layer's bits must not depend on the split. gpt-oss-120b at T = 1 (gate_up
// kw 2, down kw 4 by default) and T = 5 (down kw 2), under kw = 1, 2 and 4.
TEST_CASE("gpu: FP8 per-token decode gives the same bits under every K split", "[gpu][fp8][layer]") {
  const MoeLayerShape s = gpt_oss_120b_shape();
  const Fp8LayerWeights& w = fp8_weights("gpt-oss-120b", s, QuantMode::fp8_per_token, WeightScale::per_expert);
  for (std::uint32_t T : {1u, 5u}) {
    ref::TestRng rng(T + 70);
    const auto in = LayerInputs::make(s, T, Routing::uniform, rng);
    std::vector<std::vector<std::uint16_t>> outs;
    for (int kw : {1, 2, 4}) {
      GemmTuning t;
      t.decode.kw = kw;
      Runtime rt(tuned_runtime_options(t));
      MoeLayer layer(rt, s, QuantMode::fp8_per_token, WeightScale::per_expert);
      LayerRun run(layer, in);
      layer.run(w.device(), run.args, nullptr);
      device_sync();
      outs.push_back(run.download_out(s));
    }
    INFO("T=" << T);
    CHECK(ref::count_nonfinite(outs[0].data(), outs[0].size()) == 0);
    const bool same2 = std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 2) == 0;
    const bool same4 = std::memcmp(outs[0].data(), outs[2].data(), outs[0].size() * 2) == 0;
    CHECK(same2);
    CHECK(same4);
    std::printf("  fp8_per_token decode T=%u under kw = 1, 2, 4: %s\n", T, same2 && same4 ? "identical" : "DIFFERENT");
  }
}

// The persistent FP8 grouped GEMMs take work items from counters that route()
// zeroes and each GEMM zeroes again when it ends: a GEMM step run twice on one
// routing output computes every item both times (Qwen3-30B-A3B T = 1000: 62
// routed rows per expert, the warp-specialized kernel; both FP8 modes).
TEST_CASE("gpu: FP8 gate_up and down run twice after one route() give the bits of run()", "[gpu][fp8][layer]") {
  for (auto [q, ws] : {std::pair{QuantMode::mxfp8, WeightScale::e8m0_block32},
                       std::pair{QuantMode::fp8_per_token, WeightScale::per_channel}}) {
    const MoeLayerShape s = qwen3_30b_shape();
    const auto w = Fp8LayerWeights::make(s, q, ws, ref::process_seed() + 131);
    MoeLayer layer(gpu_runtime(), s, q, ws);
    ref::TestRng rng(37);
    const auto in = LayerInputs::make(s, 1000, Routing::uniform, rng);
    const auto outs = outputs_of_steps_after_one_route(layer, w->device(), in, 2);
    for (std::size_t rep = 1; rep < outs.size(); ++rep) {
      const auto &a = outs[0], &b = outs[rep];
      INFO(to_string(q) << " repetition " << rep - 1);
      CHECK(ref::count_nonfinite(b.data(), b.size()) == 0);
      CHECK(std::memcmp(a.data(), b.data(), a.size() * 2) == 0);
    }
  }
}
