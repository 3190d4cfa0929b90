// GemmTuning (moejit/tuning.hpp): the typed fields and their MOEJIT_GEMM_TUNE
// text choose the same configurations and kernels for every key; bad values
// are named; a Runtime, its layers and prewarm follow the runtime's tuning.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/kernel_source.hpp"
#include "env_guard.hpp"
#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"
#include "moejit/moe_layer.hpp"
#include "moejit/runtime.hpp"
#include "moejit/tuning.hpp"
#include "ops/fp8_gemm_config.hpp"
#include "ops/grouped_gemm_config.hpp"
#include "ops/layer_plan.hpp"
#include "ops/moe_keys.hpp"
#include "test_cache_support.hpp"
#include "test_shapes.hpp"
#include "util/env.hpp"

using namespace moejit;
using testing::layer_shape;

namespace {

// A tuning written both ways.
struct Case {
  const char* text;
  GemmTuning typed;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  auto add = [&](const char* text, auto&& set) {
    GemmTuning t;
    set(t);
    c.push_back({text, t});
  };
  add("", [](GemmTuning&) {});
  add("decode.kw=2", [](GemmTuning& t) { t.decode.kw = 2; });
  add("decode.depth=3,decode.ctas=2", [](GemmTuning& t) { t.decode.depth = 3, t.decode.ctas = 2; });
  add("decode.xs=0", [](GemmTuning& t) { t.decode.xs = false; });
  add("decode.fr=0", [](GemmTuning& t) { t.decode.fr = false; });
  add("decode.wn=2,decode.kw=2,decode.mw=2,decode.nt=2", [](GemmTuning& t) {
    t.decode.wn = 2, t.decode.kw = 2, t.decode.nt = 2, t.decode.mw = 2;
  });
  add("prefill.wg=1,prefill.stages=4", [](GemmTuning& t) { t.prefill.wg = 1, t.prefill.stages = 4; });
  add("prefill.depth=1,prefill.wa=0", [](GemmTuning& t) { t.prefill.depth = 1, t.prefill.wa = false; });
  add("prefill.st=0", [](GemmTuning& t) { t.prefill.split_tail = false; });
  add("prefill.ws=1", [](GemmTuning& t) { t.prefill.ws = true; });
  add("prefill.ws=0", [](GemmTuning& t) { t.prefill.ws = false; });
  add("prefill.stages=6,prefill.ws=1", [](GemmTuning& t) { t.prefill.ws = true, t.prefill.stages = 6; });
  return c;
}

const MoeLayerShape kShapes[] = {layer_shape(2880, 2880, 128, 4, Activation::swiglu_oai),
                                 layer_shape(2048, 768, 128, 8, Activation::silu_gated),
                                 layer_shape(4096, 14336, 8, 2, Activation::silu_gated)};

// Every GEMM key's configuration and kernel name, and the layer's keys, under
// `t` (or, with env = true, under the process's MOEJIT_GEMM_TUNE through the
// overloads without a tuning), one line per key; a refused key says so.
std::string configs(const GemmTuning* t) {
  std::ostringstream out;
  for (const MoeLayerShape& s : kShapes)
    for (QuantMode q : {QuantMode::bf16, QuantMode::w4a16_mxfp4, QuantMode::fp8_per_token})
      for (std::uint32_t b : prewarm_set(20000)) {
        for (OpKind op : {OpKind::gate_up, OpKind::down}) {
          try {
            const SpecKey k = t ? ops::gemm_key(op, s, q, default_weight_scale(q), b, Target{}, *t)
                                : ops::gemm_key(op, s, q, b, Target{});
            const std::string config =
                ops::is_fp8(q) ? (t ? ops::choose_fp8_config(k, *t) : ops::choose_fp8_config(k)).to_string()
                               : (t ? ops::choose_config(k, *t) : ops::choose_config(k)).to_string();
            out << k.to_text() << " -> " << config << " "
                << (t ? codegen::generate(k, *t) : codegen::generate(k)).name_expression << "\n";
          } catch (const InvalidArgument&) {
            out << "refused\n";
          }
        }
        try {
          const auto keys = t ? moe_layer_keys(s, q, default_weight_scale(q), b, Target{}, *t)
                              : moe_layer_keys(s, q, b, Target{});
          for (const SpecKey& k : keys) out << k.to_text() << ";";
        } catch (const InvalidArgument&) {
          out << "refused";
        }
        out << "\n";
      }
  return out.str();
}

}  // namespace

TEST_CASE("gemm tuning: typed fields and their text choose the same configs for every key", "[heuristic][tuning]") {
  for (const Case& c : cases()) {
    INFO("MOEJIT_GEMM_TUNE=" << c.text);
    const GemmTuning parsed = parse_gemm_tuning(c.text);
    CHECK(parsed == c.typed);
    CHECK(to_string(c.typed) == c.text);  // the cases are written in the struct's order
    CHECK_NOTHROW(check_gemm_tuning(c.typed));
    CHECK(configs(&parsed) == configs(&c.typed));
  }
  // A later item overrides an earlier one, as the typed field holds one value.
  GemmTuning kw4;
  kw4.decode.kw = 4;
  CHECK(parse_gemm_tuning("decode.kw=1,decode.kw=4") == kw4);
  // Nothing set: the heuristic's own choices.
  CHECK(GemmTuning{}.empty());
  CHECK(!kw4.empty());
  if (!std::getenv("MOEJIT_GEMM_TUNE")) {
    const GemmTuning none;
    CHECK(configs(&none) == configs(nullptr));
  }
}

// Child of the next case: the MOEJIT_GEMM_TUNE path (Runtime without a tuning,
// the overloads without one) writes what it chose.
TEST_CASE("gemm tuning (child): writes the configs chosen under MOEJIT_GEMM_TUNE", "[.][tuning-child]") {
  const char* out = std::getenv("MOEJIT_TEST_TUNING_OUT");
  REQUIRE(out != nullptr);
  RuntimeOptions o;
  o.use_disk_cache = false;
  Runtime rt(o);
  std::ofstream(out) << to_string(rt.gemm_tuning()) << "\n" << configs(nullptr);
}

TEST_CASE("gemm tuning: MOEJIT_GEMM_TUNE in a process gives the typed tuning's configs", "[heuristic][tuning]") {
  test::TempDir dir;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  for (const Case& c : cases()) {
    if (!*c.text) continue;
    INFO("MOEJIT_GEMM_TUNE=" << c.text);
    const std::string file = (dir.path() / "configs.txt").string();
    int rc = 0;
    {
      test::EnvGuard tune("MOEJIT_GEMM_TUNE", c.text);
      test::EnvGuard where("MOEJIT_TEST_TUNING_OUT", file.c_str());
      rc = std::system(("'" + self + "' '[tuning-child]' > /dev/null 2>&1").c_str());
    }
    REQUIRE(rc == 0);
    std::ifstream in(file);
    std::stringstream got;
    got << in.rdbuf();
    CHECK(got.str() == to_string(c.typed) + "\n" + configs(&c.typed));
  }
}

TEST_CASE("gemm tuning: bad values name the field or item and the value", "[heuristic][tuning]") {
  GemmTuning t;
  t.decode.kw = 0;
  CHECK_THROWS_WITH(check_gemm_tuning(t), Catch::Contains("GemmTuning decode.kw=0") && Catch::Contains("1..16"));
  t = {};
  t.prefill.stages = 17;
  CHECK_THROWS_WITH(check_gemm_tuning(t), Catch::Contains("GemmTuning prefill.stages=17"));
  // The Runtime refuses it before it opens anything.
  RuntimeOptions o;
  o.use_disk_cache = false;
  o.gemm_tuning = t;
  CHECK_THROWS_AS(Runtime(o), InvalidArgument);
  CHECK_THROWS_WITH(Runtime(o), Catch::Contains("prefill.stages=17"));

  // The text: the first bad item, quoted.
  for (const char* bad : {"decode.kw", "decode.kw=0", "decode.kw=17", "decode.kw=2x", "both.kw=2", "decode.tile=2",
                          "decode.kw=2,", "kw=2", "decode.stages=4", "decode.wg=2", "prefill.kw=2", "prefill.ctas=6",
                          "prefill.st=2", "decode.st=1", "decode.xs=2", "prefill.xs=1", "decode.fr=2", "prefill.fr=1",
                          "prefill.wa=2", "decode.wa=1", "prefill.split_tail=0"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_gemm_tuning(bad), Catch::Contains("MOEJIT_GEMM_TUNE item '"));
  }
  CHECK_THROWS_WITH(parse_gemm_tuning("decode.kw=2,prefill.depth=x"), Catch::Contains("'prefill.depth=x'"));

  // A combination the kernel cannot run for a key: named with the config and K.
  GemmTuning kw3;
  kw3.decode.kw = 3;  // gpt-oss K = 2880: 4 K segments, which 3 does not divide
  const SpecKey k = ops::gemm_key(OpKind::gate_up, kShapes[0], QuantMode::w4a16_mxfp4,
                                  WeightScale::e8m0_block32, 1, Target{}, GemmTuning{});
  CHECK_THROWS_WITH(ops::choose_config(k, kw3), Catch::Contains("GEMM tuning 'decode.kw=3'") &&
                                                    Catch::Contains("kernel=mxfp4_decode") &&
                                                    Catch::Contains("k=2880"));
  CHECK_THROWS_AS(moe_layer_keys(kShapes[0], QuantMode::w4a16_mxfp4, WeightScale::e8m0_block32, 1, Target{}, kw3),
                  InvalidArgument);
  // The FP8 per-token decode kernel takes the same decode fields.
  const SpecKey f = ops::gemm_key(OpKind::gate_up, kShapes[0], QuantMode::fp8_per_token, WeightScale::per_expert, 1,
                                  Target{}, GemmTuning{});
  CHECK_THROWS_WITH(ops::choose_fp8_config(f, kw3), Catch::Contains("GEMM tuning 'decode.kw=3'") &&
                                                        Catch::Contains("fp8 kernel=decode") &&
                                                        Catch::Contains("k=2880"));
  GemmTuning wide;
  wide.decode.ctas = 16;  // 16 CTAs of 4 warps: 2048 threads per SM is the limit, 2 x 2 warps x 16 x 32 = 2048 fits
  CHECK_NOTHROW(ops::choose_fp8_config(f, wide));
  wide.decode.wn = 4;  // 16 CTAs of 8 warps: 4096 threads
  CHECK_THROWS_WITH(ops::choose_fp8_config(f, wide), Catch::Contains("fp8 kernel=decode wn=4"));
  GemmTuning deep;
  deep.decode.depth = 7;  // the FP8 kernel's ring holds at most 6 units
  CHECK_THROWS_WITH(ops::choose_fp8_config(f, deep), Catch::Contains("depth=7"));
  GemmTuning w16;
  w16.decode.wn = 16;
  w16.decode.kw = 4;  // 64 warps per CTA
  CHECK_THROWS_WITH(ops::choose_fp8_config(f, w16), Catch::Contains("wn=16 kw=4"));
  // K = 192: three 64-k units, fewer than the 4 segments a K split needs.
  MoeLayerShape short_k = kShapes[0];
  short_k.hidden = 192;
  const SpecKey fs = ops::gemm_key(OpKind::gate_up, short_k, QuantMode::fp8_per_token, WeightScale::per_expert, 1,
                                   Target{}, GemmTuning{});
  GemmTuning kw2;
  kw2.decode.kw = 2;
  CHECK_THROWS_WITH(ops::choose_fp8_config(fs, kw2), Catch::Contains("k=192"));
  // A number outside 1..16 names its field, before any heuristic divides by it.
  GemmTuning zero;
  zero.decode.wn = 0;
  CHECK_THROWS_WITH(ops::choose_fp8_config(f, zero), Catch::Contains("decode.wn=0"));
  CHECK_THROWS_WITH(moe_layer_keys(kShapes[0], QuantMode::fp8_per_token, WeightScale::per_expert, 1, Target{}, zero),
                    Catch::Contains("decode.wn=0"));
  CHECK_THROWS_WITH(moe_layer_keys(kShapes[0], QuantMode::w4a16_mxfp4, WeightScale::e8m0_block32, 1, Target{}, zero),
                    Catch::Contains("decode.wn=0"));
}

TEST_CASE("gemm tuning: a runtime's kernels follow its tuning", "[tuning][nvrtc]") {
  REQUIRE_NVRTC();
  GemmTuning depth3;
  depth3.decode.depth = 3;
  RuntimeOptions o;
  o.use_disk_cache = false;
  o.gemm_tuning = depth3;
  Runtime tuned(o);
  CHECK(tuned.gemm_tuning() == depth3);
  const SpecKey k = ops::gemm_key(OpKind::gate_up, kShapes[0], QuantMode::w4a16_mxfp4,
                                  WeightScale::e8m0_block32, 1, Target{}, depth3);
  const auto kernel = tuned.compiled(k);
  // The tuned config, not the heuristic's (depth 1), is compiled.
  const std::string expected = codegen::generate(k, depth3).name_expression;
  CHECK(expected != codegen::generate(k, GemmTuning{}).name_expression);
  CHECK(kernel->launch.block_threads == codegen::generate(k, depth3).launch.block_threads);
  CHECK(kernel->lowered_name.find("grouped_gemm_mxfp4_decode_kernel") != std::string::npos);
  CHECK(expected.find(".depth = 3,") != std::string::npos);
  // The compiled kernel's mangled name carries the config's fields in order:
  // wn, kw, mw, nt, then depth 3.
  const ops::GemmConfig c3 = ops::choose_config(k, depth3);
  CHECK(kernel->lowered_name.find("Mxfp4DecodeKernelELi" + std::to_string(c3.wn) + "ELi" + std::to_string(c3.kw) +
                                  "ELi" + std::to_string(c3.mw) + "ELi" + std::to_string(c3.nt) + "ELi3E") !=
        std::string::npos);
  // FP8 per token at decode: the K split of the tuning, in the kernel and in
  // the layer plan's launch configuration alike.
  GemmTuning kw1;
  kw1.decode.kw = 1;
  RuntimeOptions o1 = o;
  o1.gemm_tuning = kw1;
  Runtime tuned_fp8(o1);
  const SpecKey f = ops::gemm_key(OpKind::gate_up, kShapes[0], QuantMode::fp8_per_token, WeightScale::per_expert, 1,
                                  Target{}, kw1);
  REQUIRE(ops::choose_fp8_config(f, GemmTuning{}).kw == 2);  // the heuristic's split for gpt-oss gate_up at T = 1
  CHECK(ops::choose_fp8_config(f, kw1).kw == 1);
  const ops::MoeLayerPlan plan =
      ops::make_layer_plan(kShapes[0], QuantMode::fp8_per_token, WeightScale::per_expert, 1, Target{}, kw1);
  CHECK(plan.gate_up.fp8.kw == 1);
  CHECK(plan.down.fp8.kw == 1);
  CHECK(plan.gate_up.fp8.threads() == 64);
  const auto fk = tuned_fp8.compiled(f);
  CHECK(fk->launch.block_threads == 64u);  // wn = 2 warps x kw = 1
  CHECK(fk->lowered_name.find("grouped_gemm_fp8_decode_kernel") != std::string::npos);
  CHECK(codegen::generate(f, kw1).name_expression != codegen::generate(f, GemmTuning{}).name_expression);
}
