// The routing kernel alone against the CPU routing (tests/reference): every
// output it writes, for each of its variants - 256 threads (<= 1024 routes),
// 1024 threads staged in shared memory, and 1024 threads scattering to global
// memory (more routes than the staging holds, or too many experts), the
// latter as three chunked launches past 4096 routes - with dropped routes.
// The layer tests check routing only through sampled tokens.
#include <catch2/catch.hpp>

#include <cstdio>
#include <vector>

#include "driver/cuda_api.hpp"
#include "gpu/gpu_runtime.hpp"
#include "gpu/layer_fixture.hpp"
#include "moejit/bucketing.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/launch_contracts.hpp"
#include "ops/moe_keys.hpp"

using namespace moejit;
using namespace moejit::testing;

namespace {

std::vector<std::int32_t> download_i32(DevicePtr p, std::size_t n) {
  std::vector<std::int32_t> v(n);
  if (n) MOEJIT_CU_CHECK(driver::cuda().cuMemcpyDtoH_v2(v.data(), p, n * 4));
  return v;
}

void check_routing(const char* what, const MoeLayerShape& s, std::uint32_t T, Routing routing, std::uint64_t seed,
                   bool want_chunked = false) {
  ref::TestRng rng(seed);
  const auto in = LayerInputs::make(s, T, routing, rng);
  MoeLayer layer(gpu_runtime(), s, QuantMode::w4a16_mxfp4);
  LayerRun run(layer, in);  // workspace poisoned with 0xFF
  layer.route(run.args, nullptr);
  MOEJIT_CU_CHECK(driver::cuda().cuCtxSynchronize());

  const std::uint32_t E = s.experts, bucket = round_up_tokens(T);
  const std::uint64_t R = std::uint64_t(T) * s.top_k;
  const ref::Routing want = ref::route(in.ids.data(), T, s.top_k, E);
  const MoeWorkspaceView v = layer.workspace_view(run.args);
  const auto offsets = download_i32(v.expert_offsets, E + 1);
  const auto sorted = download_i32(v.sorted_route, R);
  const auto row_of = download_i32(v.route_row, R);
  const std::uint64_t rows = want.rows();
  const bool chunked = ops::route_chunked(E, std::uint64_t(bucket) * s.top_k, R);
  std::printf("  %-44s T=%-5u E=%-4u routes=%-6llu rows=%-6llu threads=%u staged=%d chunks=%llu\n", what, T, E,
              static_cast<unsigned long long>(R), static_cast<unsigned long long>(rows),
              ops::route_threads(std::uint64_t(bucket) * s.top_k),
              int(ops::route_staged(E, std::uint64_t(bucket) * s.top_k)),
              static_cast<unsigned long long>(chunked ? ops::route_chunks(R) : 0));
  REQUIRE(chunked == want_chunked);

  // Per-expert row ranges are exact; the order inside an expert is free.
  for (std::uint32_t e = 0; e <= E; ++e) REQUIRE(std::uint64_t(offsets[e]) == want.expert_offsets[e]);
  std::vector<char> seen(rows, 0);
  for (std::uint64_t i = 0; i < R; ++i) {
    const std::int32_t e = in.ids[i];
    if (e < 0) {
      REQUIRE(row_of[i] == -1);
      continue;
    }
    const std::int64_t r = row_of[i];
    REQUIRE(r >= std::int64_t(want.expert_offsets[e]));
    REQUIRE(r < std::int64_t(want.expert_offsets[e + 1]));
    REQUIRE(sorted[r] == std::int32_t(i));
    REQUIRE(!seen[r]);
    seen[r] = 1;
  }
  // Both tile lists (one when they alias): experts ascending, bm rows each.
  // With split tail (large T), an expert's last c % bm rows, when 1..64, form
  // one tile of the tail list instead of a tile of the bm list.
  const bool split = ops::split_tail_bucket(s, QuantMode::w4a16_mxfp4, bucket, Target{}) != 0;
  auto check_list = [&](const DevicePtr (&list)[4], int bm, int kind) {
    std::vector<std::int32_t> te, tb, tn;
    for (std::uint32_t e = 0; e < E; ++e) {
      const std::uint64_t first = want.expert_offsets[e], end = want.expert_offsets[e + 1], c = end - first;
      const std::uint64_t r = split ? c % bm : 0;
      const bool tail = r > 0 && r <= 64;
      if (kind == 2) {
        if (tail) te.push_back(std::int32_t(e)), tb.push_back(std::int32_t(end - r)), tn.push_back(std::int32_t(end));
        continue;
      }
      const std::uint64_t stop = tail ? end - r : end;
      for (std::uint64_t row = first; row < stop; row += bm) {
        te.push_back(std::int32_t(e));
        tb.push_back(std::int32_t(row));
        tn.push_back(std::int32_t(stop));
      }
    }
    const auto n = download_i32(list[3], 5);
    INFO("tile list " << kind << " bm=" << bm << " split=" << split);
    REQUIRE(std::size_t(n[0]) == te.size());
    // The GEMMs' work-item counters and done counts, zeroed by the routing
    // (the workspace started as 0xFF).
    CHECK(n[1] == 0);
    CHECK(n[2] == 0);
    CHECK(n[3] == 0);
    CHECK(n[4] == 0);
    CHECK(download_i32(list[0], te.size()) == te);
    CHECK(download_i32(list[1], te.size()) == tb);
    CHECK(download_i32(list[2], te.size()) == tn);
  };
  const OpKind ops_[2] = {OpKind::gate_up, OpKind::down};
  for (int g = 0; g < 2; ++g)
    check_list(v.tiles[g], ops::choose_config(ops::gemm_key(ops_[g], s, QuantMode::w4a16_mxfp4, bucket, Target{})).bm(),
               g);
  if (split) check_list(v.tail_tiles, 128, 2);
  if (split) std::printf("  %-44s split tail: list checked\n", what);
}

}  // namespace

TEST_CASE("gpu: the routing kernel's outputs equal the CPU routing, every variant, with dropped routes",
          "[gpu][layer][route]") {
  MoeLayerShape many = qwen3_30b_shape();
  many.experts = 2048;  // 16 B per expert: too many to stage the routes
  check_routing("256 threads, drops (qwen3)", qwen3_30b_shape(), 100, Routing::with_drops, 1);
  check_routing("1024 threads staged, drops (qwen3)", qwen3_30b_shape(), 300, Routing::with_drops, 2);
  check_routing("1024 threads staged, uniform (gpt-oss)", gpt_oss_120b_shape(), 4096, Routing::uniform, 3);
  check_routing("1024 threads staged, one expert (gpt-oss)", gpt_oss_120b_shape(), 2049, Routing::one_expert, 4);
  check_routing("1024 threads unstaged: 2048 experts, drops", many, 300, Routing::with_drops, 5);  // 2400 routes
  check_routing("1024 threads chunked: > 24576 routes (gpt-oss)", gpt_oss_120b_shape(), 8192, Routing::with_drops, 6, true);
  check_routing("chunked, last chunk partial, one expert (qwen3)", qwen3_30b_shape(), 4100, Routing::one_expert, 7, true);
  check_routing("chunked: 2048 experts, 40000 routes, drops", many, 5000, Routing::with_drops, 8, true);
  check_routing("chunked: 131072 routes, uniform (qwen3)", qwen3_30b_shape(), 16384, Routing::uniform, 9, true);
  // Split tail with experts of <= 64 rows (tail only), 65..128 (one full-list
  // tile), and 129+ rows: qwen3 at T = 1000 (about 62 rows per expert).
  check_routing("1024 threads staged, split tail (qwen3)", qwen3_30b_shape(), 1000, Routing::with_drops, 11);
}
