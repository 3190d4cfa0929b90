// The grouped GEMM tile heuristic: what it accepts, and invariants of every
// configuration it returns over the real model shapes and all buckets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/moe_layer.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/moe_keys.hpp"
#include "test_shapes.hpp"

using namespace moejit;
using testing::layer_shape;


TEST_CASE("grouped GEMM config: invariants over real shapes and every bucket", "[heuristic]") {
  const MoeLayerShape shapes[] = {layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai),
                                  layer_shape(2048, 768, 128, 8, Activation::silu_gated),
                                  layer_shape(7168, 2048, 256, 8, Activation::silu_gated),
                                  layer_shape(4096, 14336, 8, 2, Activation::silu_gated)};
  for (const auto& s : shapes)
    for (QuantMode q : {QuantMode::bf16, QuantMode::w4a16_mxfp4})
      for (std::uint32_t b : prewarm_set(20000))
        for (OpKind op : {OpKind::gate_up, OpKind::down}) {
          const SpecKey key = ops::gemm_key(op, s, q, b, Target{});
          const ops::GemmConfig c = ops::choose_config(key);
          INFO(key.to_text() << " -> " << c.to_string());
          CHECK(c.smem_bytes(q, key.k) <= 227u * 1024u);
          // Loader contracts of the kernels (activation chunks per thread).
          if (c.kernel == ops::GemmKernel::x_operand_a) CHECK((c.bm() * 8) % c.threads() == 0);
          if (c.kernel == ops::GemmKernel::mxfp4_wgmma) CHECK((c.bm() * 8) % c.threads() == 0);
          // Weights as A: two warpgroups of 64 weight rows, 64 or 128 routed
          // rows, and a ring that leaves two CTAs per SM (228 KB, 1 KB each
          // reserved) unless even three stages cannot.
          if (c.wa) {
            CHECK(c.kernel == ops::GemmKernel::mxfp4_wgmma);
            CHECK(c.threads() == 256);
            CHECK((c.wg == 1 || c.wg == 2));
            CHECK(c.stages >= 3);
            ops::GemmConfig c3 = c;
            c3.stages = 3;
            const bool two_possible = 2 * (c3.smem_bytes(q, key.k) + 1024) <= 228u * 1024u;
            if (two_possible) CHECK(2 * (c.smem_bytes(q, key.k) + 1024) <= 228u * 1024u);
            if (!two_possible) CHECK(c.stages >= 4);  // one CTA: a deeper ring
          }
          // One prefill kernel over all buckets: a split tail (a smaller
          // bucket's kernel) must give the main tiles' bits.
          if (c.kernel == ops::GemmKernel::mxfp4_wgmma && !std::getenv("MOEJIT_GEMM_TUNE")) CHECK(c.wa);
          // bf16 runs the activations-as-A kernel up to 24 rows per expert
          // hit and the warp-specialized kernel past that (128-row m-tiles,
          // 256 weight rows, one persistent CTA per SM, a ring of >= 2
          // slices, no split K); MXFP4 the activations-as-A kernel only
          // between decode (<= 8 rows per expert hit) and prefill (> 24),
          // for the grouped GEMM over sorted rows with more than 128 experts
          // (the middle range's test below).
          {
            const std::uint64_t rows = std::uint64_t(b) * s.top_k;
            const std::uint64_t hit = std::min<std::uint64_t>(s.experts, rows);
            const bool past = (rows + hit - 1) / hit > 24;
            if (q == QuantMode::bf16)
              CHECK(c.kernel == (past ? ops::GemmKernel::bf16_ws : ops::GemmKernel::x_operand_a));
            if (c.kernel == ops::GemmKernel::bf16_ws) {
              CHECK(c.bm() == 128);
              CHECK(c.bn() == 256);
              CHECK(c.threads() == 384);
              CHECK(c.stages >= 2);
              CHECK(c.splits == 1);
              CHECK(c.grid_y(100) == 1u);
              CHECK(c.grid_x(key.n, 1000) <= 132u);
              // The ring, its mbarriers, the work-item slots (64), then the
              // epilogue's staging block (16 KB, 128-byte aligned) and the column-operand tables
              // (4 x 256 x 8 bytes): kernels/grouped_gemm_tma_ws_sm90.cuh.
              CHECK(c.smem_bytes(q, key.k) ==
                    1024u + c.stages * (128u * 128u + 256u * 128u) + 16u * c.stages + 64u + 128u + 16384u + 32u * 256u);
              if (!std::getenv("MOEJIT_GEMM_TUNE")) CHECK(c.stages == 4);  // 48 KB slices
            }
          }
          if (c.kernel == ops::GemmKernel::mxfp4_decode) {
            // One n8 token tile per warp task at every decode bucket (docs/kernels.md, "Decode").
            if (!std::getenv("MOEJIT_GEMM_TUNE")) CHECK(c.nt == 1);
            CHECK(c.wn * c.kw == 4);
            CHECK(std::min(4, int((key.k + 255) / 256)) % c.kw == 0);  // kw divides the kernel's K segments
            // Staged activations: one token tile, every row a tile can hold
            // (min(8, bucket * top_k)), and six CTAs' worth fits an SM.
            if (c.xs > 0) {
              CHECK(c.nt == 1);
              CHECK(std::uint64_t(c.xs) == std::min<std::uint64_t>(8, std::uint64_t(b) * s.top_k));
              CHECK(6 * c.smem_bytes(q, key.k) <= 227u * 1024u);
            }
            CHECK((c.ctas == 1 || (c.ctas == 6 && c.xs > 0 && c.kw > 1)));
            if (c.fr) CHECK((c.nt == 1 && std::uint64_t(b) * s.top_k <= 32));
          } else {
            CHECK(c.xs == 0);
            CHECK(!c.fr);
          }
          CHECK(c.splits >= 1);
          CHECK(c.splits <= ops::kSplitKMax);
          if (c.splits > 1) {
            CHECK(op == OpKind::down);
            CHECK(std::uint64_t(b) * s.top_k <= ops::kSplitKMaxRows);
          }
          CHECK(c.k_tail == (key.k % 64 != 0));
          // MoeLayer::run relies on both GEMMs of a bucket agreeing on fused
          // routing: a gate_up that routes itself rewrites the tile lists that
          // a non-fused down would read before its PDL wait.
          if (op == OpKind::down)
            CHECK(c.fr == ops::choose_config(ops::gemm_key(OpKind::gate_up, s, q, b, Target{})).fr);
        }
}

TEST_CASE("grouped GEMM config: gpt-oss-120b MXFP4 variants per bucket", "[heuristic]") {
  const MoeLayerShape s = layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai);
  for (std::uint32_t T : {1u, 8u, 64u, 512u, 4096u, 16384u}) {
    const auto gu = ops::choose_config(ops::gemm_key(OpKind::gate_up, s, QuantMode::w4a16_mxfp4, T, Target{}));
    const auto dn = ops::choose_config(ops::gemm_key(OpKind::down, s, QuantMode::w4a16_mxfp4, T, Target{}));
    std::printf("  T=%-6u gate_up %-62s down %s\n", T, gu.to_string().c_str(), dn.to_string().c_str());
    if (T <= 64) {  // decode: 8-row token tiles, bytes bound, no split-K partials
      CHECK(gu.kernel == ops::GemmKernel::mxfp4_decode);
      CHECK(gu.bm() == 8);
      CHECK(dn.splits == 1);
    }
    // Experts of > ~117 routed rows (T >= 4096 here): the persistent
    // warp-specialized kernel on 192-row tiles, two consumer warpgroups.
    if (T >= 4096) {
      CHECK(gu.kernel == ops::GemmKernel::mxfp4_ws);
      CHECK(dn.kernel == ops::GemmKernel::mxfp4_ws);
      CHECK((gu.bm() == 192 && dn.bm() == 192 && gu.cwg == 2 && gu.threads() == 384 && gu.splits == 1));
      CHECK(gu.smem_bytes(QuantMode::w4a16_mxfp4, 2880) <= 227u * 1024u);
    }
    // T = 512 (16 rows per expert): the warp-specialized kernel on 32-row
    // tiles with four consumer warpgroups (the middle range).
    if (T == 512) {
      CHECK(gu.kernel == ops::GemmKernel::mxfp4_ws);
      CHECK(dn.kernel == ops::GemmKernel::mxfp4_ws);
      CHECK((gu.bm() == 32 && gu.cwg == 4 && gu.threads() == 640 && dn.bm() == 32));
    }
    // T = 1: the four routed rows' activations staged (4 x 6160 bytes), six
    // CTAs per SM; from T = 2 the 8-row stage (49 KB) is too big for that.
    CHECK(gu.xs == (T == 1 ? 4 : 0));
    CHECK(dn.xs == (T == 1 ? 4 : 0));
    CHECK(gu.ctas == (T == 1 ? 6 : 1));
    // T = 1: gate_up's 1440 16-row groups in one wave of 6 x 4 warps per SM
    // with K split in two (2 x 2 warps); down's 720 fit with K in four.
    if (T == 1) CHECK((gu.kw == 2 && gu.wn == 2 && dn.kw == 4 && dn.wn == 1));
    // At <= 32 routes (T <= 8 with top_k 4) both GEMMs route topk_ids themselves.
    CHECK(gu.fr == (T <= 8));
    CHECK(dn.fr == (T <= 8));
    if (T == 1) CHECK(gu.smem_bytes(QuantMode::w4a16_mxfp4, 2880) == 4u * (12 * 512 + 16));
  }
  // A decode down projection with too few warps splits K (Mixtral: 2 experts hit
  // at T = 1); prefill never does.
  const MoeLayerShape mixtral = layer_shape(4096, 14336, 8, 2, Activation::silu_gated);
  CHECK(ops::choose_config(ops::gemm_key(OpKind::down, mixtral, QuantMode::bf16, 1, Target{})).splits > 1);
  CHECK(ops::choose_config(ops::gemm_key(OpKind::down, s, QuantMode::w4a16_mxfp4, 4096, Target{})).splits == 1);
}

TEST_CASE("grouped GEMM config: keys it cannot run are rejected naming the field", "[heuristic]") {
  const MoeLayerShape s = layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai);
  SpecKey k = ops::gemm_key(OpKind::gate_up, s, QuantMode::w4a16_mxfp4, 8, Target{});
  k.k = 2880 + 16;
  k.k_align = alignment_of(k.k);
  CHECK_THROWS_WITH(ops::choose_config(k), Catch::Contains("k=2896"));
  k = ops::gemm_key(OpKind::gate_up, s, QuantMode::w4a16_mxfp4, 8, Target{});
  k.quant = QuantMode::mxfp8;
  CHECK_THROWS_WITH(ops::choose_config(k), Catch::Contains("quant=mxfp8"));
  k = ops::gemm_key(OpKind::down, s, QuantMode::bf16, 8, Target{});
  k.n = 2888;
  CHECK_THROWS_WITH(ops::choose_config(k), Catch::Contains("n=2888"));
  CHECK_THROWS_WITH(ops::check_shape(layer_shape(2880, 2880, 128, 0, Activation::none), QuantMode::bf16),
                    Catch::Contains("top_k=0"));
  // The FP8 modes run in the layer (fp8 branch); their K % 32 rule is the shape's % 32 rule.
  CHECK_NOTHROW(ops::check_shape(layer_shape(2880, 2880, 128, 4, Activation::silu_gated), QuantMode::mxfp8));
  CHECK_THROWS_WITH(ops::check_shape(layer_shape(2896 - 8, 2880, 128, 4, Activation::silu_gated), QuantMode::mxfp8),
                    Catch::Contains("hidden=2888"));
}

TEST_CASE("grouped GEMM config: split tail uses a smaller bucket's one-warpgroup wgmma kernels", "[heuristic]") {
  const MoeLayerShape shapes[] = {layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai),
                                  layer_shape(2048, 768, 128, 8, Activation::silu_gated),
                                  layer_shape(7168, 2048, 256, 8, Activation::silu_gated),
                                  layer_shape(4096, 14336, 8, 2, Activation::silu_gated)};
  const bool tuned = std::getenv("MOEJIT_GEMM_TUNE") != nullptr;
  for (const auto& s : shapes) {
    std::size_t split = 0;
    for (std::uint32_t b : prewarm_set(20000)) {
      const auto q = QuantMode::w4a16_mxfp4;
      const SpecKey gu = ops::gemm_key(OpKind::gate_up, s, q, b, Target{});
      const SpecKey dn = ops::gemm_key(OpKind::down, s, q, b, Target{});
      const auto cg = ops::choose_config(gu), cd = ops::choose_config(dn);
      const std::uint32_t tb = ops::split_tail_bucket(s, q, b, Target{});
      INFO(gu.to_text() << " -> " << cg.to_string() << " tail bucket " << tb);
      const bool two = cg.kernel == ops::GemmKernel::mxfp4_wgmma && cg.wg == 2;
      if (!tuned) CHECK((tb != 0) == two);  // every gpt-oss / Qwen3 / DeepSeek / Mixtral wgmma bucket has one
      if (tb == 0) continue;
      ++split;
      CHECK(tb < b);
      const SpecKey tg = ops::gemm_key(OpKind::gate_up, s, q, tb, Target{});
      const SpecKey td = ops::gemm_key(OpKind::down, s, q, tb, Target{});
      const auto ctg = ops::choose_config(tg), ctd = ops::choose_config(td);
      CHECK(ctg.kernel == ops::GemmKernel::mxfp4_wgmma);
      CHECK(ctg.wg == 1);
      CHECK(ctd.wg == 1);
      CHECK(ctg.bn() == cg.bn());  // the same 128 weight columns per CTA
      CHECK(td.out_dtype == dn.out_dtype);
      // Everything but the bucket is the same key: same epilogue and shape.
      SpecKey same = tg;
      same.token_bucket = b;
      CHECK(same == gu);
      // The tail bucket is prewarmed with this one, and it is the largest
      // bucket below b with one-warpgroup tiles for both GEMMs.
      const auto set = prewarm_set(b);
      CHECK(std::find(set.begin(), set.end(), tb) != set.end());
      for (std::uint32_t mid : set) {
        if (mid <= tb || mid >= b) continue;
        const auto mg = ops::choose_config(ops::gemm_key(OpKind::gate_up, s, q, mid, Target{}));
        const auto md = ops::choose_config(ops::gemm_key(OpKind::down, s, q, mid, Target{}));
        CHECK(!(mg.kernel == ops::GemmKernel::mxfp4_wgmma && mg.wg == 1 && md.wg == 1));
      }
    }
    if (!tuned) CHECK(split > 0);
    CHECK(ops::split_tail_bucket(s, QuantMode::bf16, 16384, Target{}) == 0);
  }
}

TEST_CASE("grouped GEMM config: the MXFP4 middle range runs the warp-specialized kernel, any expert count",
          "[heuristic]") {
  // 9..24 routed rows per expert hit: warp-specialized with four consumer
  // warpgroups on 32-row tiles (gpt-oss-120b T = 512: 16 rows; DeepSeek-V3
  // T = 512: 16; the GPU suite's 1056 x 544 layer of 144 experts at T = 800:
  // 11.1); 32 rows (gpt-oss-120b T = 1024) keep the one-warpgroup wgmma kernel.
  MoeLayerShape wide = layer_shape(1056, 544, 144, 2, Activation::swiglu_oai, BiasKind::bf16);
  const MoeLayerShape gpt_oss = layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai);
  const std::tuple<MoeLayerShape, std::uint32_t, ops::GemmKernel, int> cases[] = {
      {gpt_oss, 512u, ops::GemmKernel::mxfp4_ws, 32},
      {layer_shape(7168, 2048, 256, 8, Activation::silu_gated, BiasKind::f32), 512u, ops::GemmKernel::mxfp4_ws, 32},
      {wide, 800u, ops::GemmKernel::mxfp4_ws, 32},
      {gpt_oss, 1024u, ops::GemmKernel::mxfp4_wgmma, 64},
  };
  for (const auto& [s, T, want, bm] : cases) {
    for (OpKind op : {OpKind::gate_up, OpKind::down}) {
      const SpecKey key = ops::gemm_key(op, s, QuantMode::w4a16_mxfp4, T, Target{});
      INFO(key.to_text());
      const auto c = ops::choose_config(key, GemmTuning{});
      CHECK(c.kernel == want);
      CHECK(c.bm() == bm);
      if (want == ops::GemmKernel::mxfp4_ws) CHECK(c.cwg == 4);
      // The tuning turns it off (activations as A up to 24 rows, the wgmma
      // kernels past) or forces it.
      GemmTuning off, on;
      off.prefill.ws = false;
      on.prefill.ws = true;
      const std::uint64_t rows = std::uint64_t(T) * s.top_k;
      const bool middle = (rows + s.experts - 1) / s.experts <= 24;
      CHECK(ops::choose_config(key, off).kernel ==
            (middle ? ops::GemmKernel::x_operand_a : ops::GemmKernel::mxfp4_wgmma));
      CHECK(ops::choose_config(key, on).kernel == ops::GemmKernel::mxfp4_ws);
    }
  }
}

TEST_CASE("grouped GEMM config: every MXFP4 bucket on 128-row wgmma tiles has a split tail", "[heuristic]") {
  // The buckets of 25..56 routed rows per expert hit keep the one-warpgroup
  // wgmma kernel, on which the two-warpgroup buckets run their tails.
  const MoeLayerShape shapes[] = {
      layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai, BiasKind::bf16),
      layer_shape(2048, 768, 128, 8, Activation::silu_gated, BiasKind::none),
      layer_shape(7168, 2048, 256, 8, Activation::silu_gated, BiasKind::f32),
      layer_shape(4096, 14336, 8, 2, Activation::silu_gated, BiasKind::none),
  };
  int two_wg = 0;
  for (const auto& s : shapes)
    for (std::uint32_t b : prewarm_set(20000)) {
      const SpecKey key = ops::gemm_key(OpKind::gate_up, s, QuantMode::w4a16_mxfp4, b, Target{});
      const auto c = ops::choose_config(key, GemmTuning{});
      if (c.kernel != ops::GemmKernel::mxfp4_wgmma || c.wg != 2) continue;
      ++two_wg;
      INFO(key.to_text());
      CHECK(ops::split_tail_bucket(s, QuantMode::w4a16_mxfp4, b, Target{}, GemmTuning{}) != 0);
    }
  CHECK(two_wg > 0);
}
