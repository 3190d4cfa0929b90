// The MoE layer's m-tile lists: when gate_up and down run on the same m-tile
// height, the workspace view points down's list at gate_up's (the routing
// kernel then builds it once); otherwise the two lists are separate regions of
// the workspace. What the GEMM launches read is exactly what the view names.
#include <catch2/catch.hpp>

#include <filesystem>

#include "moejit/bucketing.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/runtime.hpp"
#include "ops/fp8_gemm_config.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/moe_keys.hpp"
#include "test_shapes.hpp"

using namespace moejit;
using testing::layer_shape;

namespace {
int tile_bm(OpKind op, const MoeLayerShape& s, QuantMode q, std::uint32_t T) {
  const SpecKey k = ops::gemm_key(op, s, q, round_up_tokens(T), Target{});
  return ops::is_fp8(q) ? ops::choose_fp8_config(k).bm() : ops::choose_config(k).bm();
}
}  // namespace

TEST_CASE("workspace view: down's tile list aliases gate_up's exactly when their m-tile heights agree",
          "[layer][heuristic]") {
  RuntimeOptions o;
  o.cache_dir = std::filesystem::temp_directory_path() / "moejit-workspace-tiles-test";
  std::size_t aliased = 0, separate = 0;
  {
    Runtime rt(o);
    const MoeLayerShape shapes[] = {layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai, BiasKind::bf16),
                                    layer_shape(2048, 768, 128, 8, Activation::silu_gated),
                                    layer_shape(4096, 14336, 8, 2, Activation::silu_gated)};
    for (const MoeLayerShape& s : shapes)
      for (QuantMode q : {QuantMode::bf16, QuantMode::w4a16_mxfp4, QuantMode::mxfp8}) {
        MoeLayer layer(rt, s, q);
        for (std::uint32_t T : {1u, 7u, 64u, 300u, 512u, 2049u, 4096u}) {
          MoeLayerArgs a;
          a.workspace = 0x100000;
          a.num_tokens = T;
          const MoeWorkspaceView v = layer.workspace_view(a);
          const bool same = tile_bm(OpKind::gate_up, s, q, T) == tile_bm(OpKind::down, s, q, T);
          INFO("quant " << to_string(q) << " T=" << T << " D=" << s.hidden);
          for (int i = 0; i < 4; ++i) {
            CHECK((v.tiles[1][i] == v.tiles[0][i]) == same);
            CHECK(v.tiles[0][i] >= a.workspace);
            CHECK(v.tiles[1][i] < a.workspace + layer.workspace_size(T));
          }
          (same ? aliased : separate) += 1;
        }
      }
  }
  std::filesystem::remove_all(o.cache_dir);
  // Today's heuristics pick the m-tile height from the rows per expert alone,
  // the same for both GEMMs, so every case here shares one list; the separate
  // lists remain for a heuristic that ever differs.
  CHECK(aliased > 0);
  CHECK(aliased + separate == 3 * 3 * 7);
}
