// E8M0 edge codes inside real MXFP4 blocks of the grouped GEMM: 0x00 (2^-127),
// 0x01, scales above 2 (the kernel's second-factor path: 128, 129, 160) and
// 0xFF (NaN), which must turn exactly the affected outputs into NaN.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>

#include "driver/cuda_api.hpp"
#include "gpu/gpu_runtime.hpp"
#include "gpu/layer_fixture.hpp"

using namespace moejit;
using namespace moejit::testing;

TEST_CASE("gpu: E8M0 edge codes inside MXFP4 blocks (gate_up)", "[gpu][mxfp4]") {
  MoeLayerShape s;
  s.hidden = 256, s.intermediate = 64, s.experts = 2, s.top_k = 1;
  s.act = Activation::none;  // H = X W1^T: one weight row per H column
  auto w = LayerWeights::make(s, QuantMode::w4a16_mxfp4, ref::process_seed() + 8);
  const std::uint32_t blocks = s.hidden / 32;  // 8 per weight row
  auto set_row = [&](std::uint32_t e, std::uint32_t row, std::initializer_list<std::uint8_t> codes) {
    std::uint32_t b = 0;
    for (auto c : codes) w->w1.scales[(std::size_t(e) * s.intermediate + row) * blocks + b++] = c;
  };
  set_row(1, 0, {0x00, 0x01, 127});
  set_row(1, 1, {128, 120});
  set_row(1, 2, {129});
  set_row(1, 3, {160, 0x00});
  set_row(1, 5, {0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01});
  set_row(1, 4, {0xFF});  // NaN block: H column 4 of every row of expert 1
  set_row(0, 7, {0, 0, 0, 0, 0, 0, 0, 0x00});
  w->d1.scales.upload(w->w1.scales.data(), w->w1.scales.size());

  MoeLayer layer(gpu_runtime(), s, w->quant);
  // One token count per kernel family (rows per expert hit, two experts):
  // 8 -> decode, 20 -> the warp-specialized kernel (32-row tiles), 32 -> wgmma
  // (src/ops/grouped_gemm_config.cpp).
  for (const std::uint32_t T : {16u, 40u, 64u}) {
    ref::TestRng rng(77 + T);
    auto in = LayerInputs::make(s, T, Routing::uniform, rng);
    LayerRun run(layer, in);
    layer.route(run.args, nullptr);
    layer.gate_up(w->device(), run.args, nullptr);
    MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());
    const MoeWorkspaceView v = layer.workspace_view(run.args);
    std::vector<std::int32_t> route_row(in.ids.size());
    MOEJIT_CU_CHECK(driver::cuda().cuMemcpyDtoH_v2(route_row.data(), v.route_row, route_row.size() * 4));
    std::vector<std::uint16_t> h(in.ids.size() * s.intermediate);
    MOEJIT_CU_CHECK(driver::cuda().cuMemcpyDtoH_v2(h.data(), v.h, h.size() * 2));

    const auto res = ref::moe_reference(reference_args(*w, in));
    std::size_t nan_expected = 0, nan_got = 0, checked = 0;
    double err2 = 0, ref2 = 0;
    for (std::size_t i = 0; i < res.rows.size(); ++i) {
      const auto r = res.rows[i];
      const std::uint32_t t = res.routing.row_token[r], e = res.routing.row_expert[r];
      const std::int32_t gr = route_row[std::size_t(t) * s.top_k + res.routing.row_slot[r]];
      REQUIRE(gr >= 0);
      for (std::uint32_t c = 0; c < s.intermediate; ++c) {
        const double want = res.h[i * s.intermediate + c];
        const std::uint32_t at = v.h_fragment_order ? h_column_position(c) : c;
        const double got = bf16_to_float(h[std::size_t(gr) * s.intermediate + at]);
        if (e == 1 && c == 4) {
          ++nan_expected;
          nan_got += std::isnan(got) ? 1 : 0;
          continue;
        }
        REQUIRE(std::isfinite(got));
        // Per element relative to the row's scale of values: rows differ by
        // 2^40.
        double row_norm = 0;
        for (std::uint32_t cc = 0; cc < s.intermediate; ++cc)
          if (!(e == 1 && cc == 4)) row_norm = std::max(row_norm, std::fabs(res.h[i * s.intermediate + cc]));
        const double d = (got - want) / row_norm;
        err2 += d * d;
        ref2 += (want / row_norm) * (want / row_norm);
        ++checked;
      }
    }
    const double rel = std::sqrt(err2 / ref2);
    std::printf(
        "  E8M0 edges T=%u: %zu outputs checked, rel.err %.2e, NaN "
        "where the 0xFF block is: %zu of %zu\n",
        T, checked, rel, nan_got, nan_expected);
    CHECK(nan_expected > 0);
    CHECK(nan_got == nan_expected);
    CHECK(rel < 1e-2);
  }
}
