// Specialization key: vocabulary enums, canonical text, parser, hash.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>

#include "moejit/error.hpp"
#include "moejit/key.hpp"
#include "moejit/types.hpp"

using namespace moejit;

namespace {

SpecKey gpt_oss_gate_up() {
  SpecKey k = make_gemm_key(OpKind::gate_up, QuantMode::w4a16_mxfp4, 1024, 5760, 2880,
                            parse_target("sm_90a"));
  k.experts = 128;
  k.top_k = 4;
  k.bias = BiasKind::f32;
  k.act = Activation::swiglu_oai;
  k.act_alpha = 1.702f;
  k.act_limit = 7.0f;
  return k;
}

constexpr const char* kGptOssText =
    "op=gate_up quant=w4a16_mxfp4 tokens=1024 n=5760 k=2880 n_align=128 k_align=64 "
    "experts=128 top_k=4 wscale=e8m0_block32 bias=f32 act=swiglu_oai alpha=1.702 limit=7 router_weight=0 "
    "in=none out=bf16 target=sm_90a";

// gpt-oss-120b's route and combine keys at 1024 tokens.
constexpr const char* kRouteText =
    "op=route quant=bf16 tokens=1024 n=0 k=0 n_align=256 k_align=256 experts=128 top_k=4 wscale=none bias=none "
    "act=none alpha=0 limit=0 router_weight=0 in=none out=i32 target=sm_90a";
constexpr const char* kCombineText =
    "op=combine quant=bf16 tokens=1024 n=2880 k=0 n_align=64 k_align=256 experts=0 top_k=4 wscale=none bias=none "
    "act=none alpha=0 limit=0 router_weight=0 in=f32 out=bf16 target=sm_90a";
constexpr const char* kQuantizeText =
    "op=quantize quant=mxfp8 tokens=1 n=2880 k=0 n_align=64 k_align=256 experts=0 top_k=0 wscale=e8m0_block32 "
    "bias=none act=none alpha=0 limit=0 router_weight=0 in=none out=e4m3 target=sm_90a";

SpecKey random_key(std::mt19937_64& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  SpecKey k;
  k.op = static_cast<OpKind>(pick(6));
  k.quant = static_cast<QuantMode>(pick(4));
  switch (k.quant) {
    case QuantMode::bf16: k.weight_scale = WeightScale::none; break;
    case QuantMode::w4a16_mxfp4:
    case QuantMode::mxfp8: k.weight_scale = WeightScale::e8m0_block32; break;
    case QuantMode::fp8_per_token:
      k.weight_scale = pick(2) ? WeightScale::per_expert : WeightScale::per_channel;
      break;
  }
  k.token_bucket = 1 + static_cast<std::uint32_t>(rng() % (pick(2) ? 70000u : 0xffffffffu));
  auto dim = [&]() -> std::uint32_t {
    switch (pick(4)) {
      case 0: return static_cast<std::uint32_t>(rng());  // any value, including 0
      case 1: return static_cast<std::uint32_t>(pick(1 << 16)) * 64;
      default: return static_cast<std::uint32_t>(pick(20000));
    }
  };
  const bool gemm = k.op == OpKind::gate_up || k.op == OpKind::down || k.op == OpKind::wgrad;
  // The per-op rules of validate(): k only for GEMMs, n not for route, E and
  // top_k where the op depends on them, the epilogue only for GEMMs, in only
  // for the combine.
  k.n = k.op == OpKind::route ? 0 : dim();
  k.k = gemm ? dim() : 0;
  k.n_align = alignment_of(k.n);
  k.k_align = alignment_of(k.k);
  if (gemm) k.top_k = static_cast<std::uint16_t>(pick(9));  // the heuristic, not validate, refuses 0
  else if (k.op != OpKind::quantize) k.top_k = static_cast<std::uint16_t>(1 + pick(8));
  if (gemm || k.op == OpKind::route) k.experts = static_cast<std::uint16_t>((gemm ? 0 : 1) + pick(300));
  if (gemm) {
    k.bias = static_cast<BiasKind>(pick(3));
    k.act = static_cast<Activation>(pick(3));
    if (k.act == Activation::swiglu_oai) {
      // Arbitrary positive floats, not only short decimals: exercises shortest round-trip.
      std::uniform_real_distribution<float> d(1e-6f, 1e6f);
      k.act_alpha = pick(4) ? d(rng) : 1.702f;
      k.act_limit = pick(4) ? d(rng) : std::numeric_limits<float>::denorm_min();
    }
    k.router_weight = pick(2) == 1;
  }
  switch (k.op) {
    case OpKind::route: k.out_dtype = DType::i32; break;
    case OpKind::combine:
      k.in_dtype = static_cast<DType>(1 + pick(6));  // any but none
      k.out_dtype = DType::bf16;
      break;
    default: k.out_dtype = static_cast<DType>(pick(7)); break;
  }
  static const std::uint16_t sms[] = {75, 80, 86, 89, 90, 100, 103, 120};
  k.target.sm = sms[pick(8)];
  k.target.arch_specific = pick(2) == 1;
  return k;
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

}  // namespace

TEST_CASE("types: every enum round-trips through to_string / parse", "[key][types]") {
  for (int i = 0; i < 6; ++i) {
    const auto v = static_cast<OpKind>(i);
    CHECK(parse_op_kind(to_string(v)) == v);
  }
  for (int i = 0; i < 4; ++i) {
    const auto v = static_cast<QuantMode>(i);
    CHECK(parse_quant_mode(to_string(v)) == v);
  }
  for (int i = 0; i < 7; ++i) {
    const auto v = static_cast<DType>(i);
    CHECK(parse_dtype(to_string(v)) == v);
  }
  for (int i = 0; i < 3; ++i) {
    const auto v = static_cast<Activation>(i);
    CHECK(parse_activation(to_string(v)) == v);
  }
  for (int i = 0; i < 3; ++i) {
    const auto v = static_cast<BiasKind>(i);
    CHECK(parse_bias_kind(to_string(v)) == v);
  }
  for (int i = 0; i < 4; ++i) {
    const auto v = static_cast<WeightScale>(i);
    CHECK(parse_weight_scale(to_string(v)) == v);
  }
  CHECK(to_string(QuantMode::w4a16_mxfp4) == "w4a16_mxfp4");
  CHECK(to_string(Activation::swiglu_oai) == "swiglu_oai");
  CHECK(to_string(WeightScale::e8m0_block32) == "e8m0_block32");
  CHECK_THROWS_WITH(parse_quant_mode("mxfp4"),
                    Catch::Contains("'mxfp4'") && Catch::Contains("w4a16_mxfp4") &&
                        Catch::Contains("fp8_per_token"));
  CHECK_THROWS_AS(parse_dtype("BF16"), InvalidArgument);
  CHECK_THROWS_AS(parse_op_kind(""), InvalidArgument);
}

TEST_CASE("types: targets and dtype sizes", "[key][types]") {
  CHECK(parse_target("sm_90a") == Target{90, true});
  CHECK(parse_target("sm_90") == Target{90, false});
  CHECK(parse_target("sm_100a") == Target{100, true});
  CHECK(to_string(Target{100, true}) == "sm_100a");
  CHECK(to_string(Target{}) == "sm_90a");
  CHECK(to_string(parse_target("sm_89")) == "sm_89");
  for (const char* bad : {"sm90a", "sm_", "sm_a", "sm_9", "sm_090", "sm_1000", "sm_90b",
                          "compute_90", "sm_90aa", " sm_90a", "sm_-90"})
    CHECK_THROWS_WITH(parse_target(bad), Catch::Contains(std::string("'") + bad + "'"));
  CHECK(dtype_size(DType::none) == 0);
  CHECK(dtype_size(DType::f32) == 4);
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_size(DType::f16) == 2);
  CHECK(dtype_size(DType::e4m3) == 1);
  CHECK(dtype_size(DType::u8) == 1);
  CHECK(dtype_size(DType::i32) == 4);
}

TEST_CASE("alignment_of", "[key]") {
  CHECK(alignment_of(0) == 256);
  CHECK(alignment_of(1) == 1);
  CHECK(alignment_of(3) == 1);
  CHECK(alignment_of(2880) == 64);
  CHECK(alignment_of(5760) == 128);
  CHECK(alignment_of(768) == 256);
  CHECK(alignment_of(1536) == 256);
  CHECK(alignment_of(96) == 32);
  CHECK(alignment_of(0x80000000u) == 256);
}

TEST_CASE("key: canonical text of a gpt-oss gate_up key", "[key]") {
  const SpecKey k = gpt_oss_gate_up();
  CHECK_NOTHROW(validate(k));
  CHECK(k.to_text() == kGptOssText);
  CHECK(parse_key(kGptOssText) == k);
  const auto fields = key_fields(k);
  REQUIRE(fields.size() == 18);
  CHECK(fields.front() == std::pair<std::string, std::string>{"op", "gate_up"});
  CHECK(fields[2] == std::pair<std::string, std::string>{"tokens", "1024"});
  CHECK(fields[15] == std::pair<std::string, std::string>{"in", "none"});
  CHECK(fields[16] == std::pair<std::string, std::string>{"out", "bf16"});
  CHECK(fields.back() == std::pair<std::string, std::string>{"target", "sm_90a"});
  // Shortest round-trip float text.
  SpecKey k2 = k;
  k2.act_alpha = 0.1f;
  k2.act_limit = 1e-7f;
  CHECK(k2.to_text().find(" alpha=0.1 limit=1e-07 ") != std::string::npos);
}

TEST_CASE("key: parse accepts any field order and extra spaces", "[key]") {
  const std::string shuffled =
      "  target=sm_90a out=bf16 in=none router_weight=0 limit=7 alpha=1.702 act=swiglu_oai\tbias=f32 "
      "top_k=4 experts=128 wscale=e8m0_block32 k_align=64 n_align=128 k=2880 n=5760  tokens=1024 quant=w4a16_mxfp4 "
      "op=gate_up ";
  CHECK(parse_key(shuffled) == gpt_oss_gate_up());
}

TEST_CASE("key: random valid keys round-trip through text; hash is stable", "[key]") {
  std::mt19937_64 rng(20261129);
  std::set<std::pair<std::uint64_t, std::uint64_t>> hashes;
  std::set<std::string> texts;
  for (int i = 0; i < 5000; ++i) {
    const SpecKey k = random_key(rng);
    REQUIRE_NOTHROW(validate(k));
    const std::string text = k.to_text();
    SpecKey back;
    REQUIRE_NOTHROW(back = parse_key(text));
    INFO(text);
    REQUIRE(back == k);
    REQUIRE(back.to_text() == text);
    REQUIRE(back.hash() == k.hash());
    hashes.insert({k.hash().lo, k.hash().hi});
    texts.insert(text);
  }
  CHECK(hashes.size() == texts.size());  // no collisions among distinct keys
}

TEST_CASE("key: golden hash guards the packing", "[key]") {
  // Computed once from the packing in src/key/key_hash.cpp (and cross-checked with
  // XXH3_128bits in C over Python's struct.pack("<BBBIIIHHHHBBBffBBBHB", 2, ...)). If it
  // changes, the published SpecKey hash changes: bump kKeyHashVersion and update
  // docs/key.md.
  const Hash128 h = gpt_oss_gate_up().hash();
  CHECK(h.hex() == "ee67eec91e572eb357091baf160cdf3b");
  CHECK(h.hex().size() == 32);
  CHECK(Hash128{0x0123456789abcdefull, 0xfedcba9876543210ull}.hex() ==
        "fedcba98765432100123456789abcdef");
}

TEST_CASE("key: changing any single field changes the hash", "[key]") {
  const SpecKey base = gpt_oss_gate_up();
  std::vector<SpecKey> variants;
  auto add = [&](auto mutate) {
    SpecKey k = base;
    mutate(k);
    REQUIRE_FALSE(k == base);
    variants.push_back(k);
  };
  add([](SpecKey& k) { k.op = OpKind::down; });
  add([](SpecKey& k) { k.quant = QuantMode::mxfp8; });
  add([](SpecKey& k) { k.token_bucket = 1152; });
  add([](SpecKey& k) { k.n = 5761; });
  add([](SpecKey& k) { k.k = 2881; });
  add([](SpecKey& k) { k.n_align = 64; });
  add([](SpecKey& k) { k.k_align = 32; });
  add([](SpecKey& k) { k.experts = 32; });
  add([](SpecKey& k) { k.top_k = 8; });
  add([](SpecKey& k) { k.weight_scale = WeightScale::per_channel; });
  add([](SpecKey& k) { k.bias = BiasKind::bf16; });
  add([](SpecKey& k) { k.act = Activation::silu_gated; });
  add([](SpecKey& k) { k.act_alpha = std::nextafter(1.702f, 2.f); });
  add([](SpecKey& k) { k.act_limit = 7.5f; });
  add([](SpecKey& k) { k.router_weight = true; });
  add([](SpecKey& k) { k.in_dtype = DType::f32; });
  add([](SpecKey& k) { k.out_dtype = DType::f32; });
  add([](SpecKey& k) { k.target.sm = 100; });
  add([](SpecKey& k) { k.target.arch_specific = false; });
  std::set<std::string> seen{base.hash().hex()};
  for (const auto& v : variants) {
    INFO(key_diff(base, v));
    CHECK(seen.insert(v.hash().hex()).second);
  }
  // -0.0 == 0.0 as keys, so they must hash alike.
  SpecKey z = make_gemm_key(OpKind::down, QuantMode::bf16, 8, 2880, 2880, Target{});
  SpecKey nz = z;
  nz.act_alpha = -0.0f;
  CHECK(z == nz);
  CHECK(z.hash() == nz.hash());
}

TEST_CASE("key: key_diff lists the differing fields", "[key]") {
  const SpecKey a = gpt_oss_gate_up();
  CHECK(key_diff(a, a).empty());
  SpecKey b = a;
  b.token_bucket = 2048;
  b.target = parse_target("sm_100a");
  CHECK(key_diff(a, b) == "tokens: 1024 -> 2048\ntarget: sm_90a -> sm_100a");
  const SpecKey c = parse_key(kCombineText);
  SpecKey d = c;
  d.in_dtype = DType::bf16;
  CHECK(key_diff(c, d) == "in: f32 -> bf16");
}

TEST_CASE("key: validate", "[key]") {
  CHECK_THROWS_WITH(validate(SpecKey{}), Catch::Contains("n_align"));  // n = 0 -> alignment 256
  SpecKey k = gpt_oss_gate_up();
  k.token_bucket = 0;
  CHECK_THROWS_WITH(validate(k), Catch::Contains("'tokens'"));
  k = gpt_oss_gate_up();
  k.k_align = 128;
  CHECK_THROWS_WITH(validate(k), Catch::Contains("'k_align'") && Catch::Contains("128"));
  k = gpt_oss_gate_up();
  k.act = Activation::silu_gated;
  CHECK_THROWS_WITH(validate(k), Catch::Contains("'alpha'") && Catch::Contains("1.702"));
  k.act_alpha = 0;
  CHECK_THROWS_WITH(validate(k), Catch::Contains("'limit'") && Catch::Contains("7"));
  k.act_limit = 0;
  CHECK_NOTHROW(validate(k));
  k = gpt_oss_gate_up();
  k.act_limit = 0;
  CHECK_THROWS_WITH(validate(k), Catch::Contains("'limit'"));
  k.act_limit = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(validate(k), Catch::Contains("'limit'") && Catch::Contains("finite"));
  k = gpt_oss_gate_up();
  k.weight_scale = WeightScale::per_expert;
  CHECK_THROWS_WITH(validate(k), Catch::Contains("'wscale'") && Catch::Contains("w4a16_mxfp4"));
  k = make_gemm_key(OpKind::gate_up, QuantMode::fp8_per_token, 1, 1536, 4096, Target{});
  CHECK(k.weight_scale == WeightScale::per_expert);
  CHECK_NOTHROW(validate(k));
  k.weight_scale = WeightScale::per_channel;
  CHECK_NOTHROW(validate(k));
  k.weight_scale = WeightScale::none;
  CHECK_THROWS_AS(validate(k), InvalidArgument);
  k = make_gemm_key(OpKind::down, QuantMode::bf16, 1, 4096, 1536, Target{});
  k.weight_scale = WeightScale::e8m0_block32;
  CHECK_THROWS_WITH(validate(k), Catch::Contains("'wscale'") && Catch::Contains("bf16"));
}

TEST_CASE("key: parser rejects each malformed variant, naming the field", "[key]") {
  const std::string good = kGptOssText;
  struct Case {
    std::string text, must_contain;
  };
  const std::vector<Case> cases = {
      {"", "'op'"},
      {replace(good, "op=gate_up", "op=gemm"), "'op'"},
      {replace(good, "quant=w4a16_mxfp4", "quant=mxfp4"), "'quant'"},
      {replace(good, "tokens=1024", "tokens=0"), "'tokens'"},
      {replace(good, "tokens=1024", "tokens=01024"), "'tokens'"},
      {replace(good, "tokens=1024", "tokens=-1"), "'tokens'"},
      {replace(good, "tokens=1024", "tokens=+1024"), "'tokens'"},
      {replace(good, "tokens=1024", "tokens=4294967296"), "'tokens'"},
      {replace(good, "tokens=1024", "tokens="), "'tokens'"},
      {replace(good, "n=5760", "n=57x0"), "'n'"},
      {replace(good, "k=2880", "k=2880.0"), "'k'"},
      {replace(good, "n_align=128", "n_align=64"), "'n_align'"},
      {replace(good, "k_align=64", "k_align=65536"), "'k_align'"},
      {replace(good, "k=2880", "k=2944"), "'k_align'"},  // 2944 = 128 * 23: facts disagree
      {replace(good, "wscale=e8m0_block32", "wscale=none"), "'wscale'"},
      {replace(good, "bias=f32", "bias=fp32"), "'bias'"},
      {replace(good, "act=swiglu_oai", "act=gelu"), "'act'"},
      {replace(good, "act=swiglu_oai", "act=silu_gated"), "'alpha'"},
      {replace(good, "alpha=1.702", "alpha=nan"), "'alpha'"},
      {replace(good, "alpha=1.702", "alpha=1.7.2"), "'alpha'"},
      {replace(good, "limit=7", "limit=inf"), "'limit'"},
      {replace(good, "limit=7", "limit=1e99"), "'limit'"},
      {replace(good, "router_weight=0", "router_weight=2"), "'router_weight'"},
      {replace(good, "router_weight=0", "router_weight=true"), "'router_weight'"},
      {replace(good, "out=bf16", "out=f64"), "'out'"},
      {replace(good, "target=sm_90a", "target=sm_9a"), "'target'"},
      {replace(good, " k=2880", ""), "'k'"},
      {replace(good, "target=sm_90a", ""), "'target'"},
      {good + " tokens=1024", "'tokens'"},
      {good + " in=none", "'in'"},
      {replace(good, "in=none", "in=f33"), "'in'"},
      {replace(good, "in=none", "in=f32"), "'in'"},  // only the combine reads in
      {replace(good, " in=none", ""), "'in'"},
      {replace(good, "tokens=1024", "m=1024"), "'m'"},  // key version 1 text
      {good + " tile=128", "'tile'"},
      {good + " n5760", "'n5760'"},
      {good + " =3", "''"},
  };
  for (const auto& c : cases) {
    INFO("text: " << c.text);
    CHECK_THROWS_AS(parse_key(c.text), InvalidArgument);
    CHECK_THROWS_WITH(parse_key(c.text), Catch::Contains(c.must_contain));
  }
  CHECK_THROWS_WITH(parse_key(good + " tokens=2048"), Catch::Contains("duplicate"));
  CHECK_THROWS_WITH(parse_key(replace(good, "tokens=1024", "m=1024")),
                    Catch::Contains("unknown field 'm'") && Catch::Contains("key version 2 names the token bucket 'tokens'"));
  CHECK_THROWS_WITH(parse_key(replace(good, " k=2880", "")), Catch::Contains("missing"));
  CHECK_THROWS_WITH(parse_key(good + " tile=128"), Catch::Contains("unknown field"));
}

TEST_CASE("key: route, combine and quantize keys round-trip; each field has one meaning", "[key]") {
  const Target t = parse_target("sm_90a");
  SpecKey route = make_gemm_key(OpKind::route, QuantMode::bf16, 1024, 0, 0, t);
  route.experts = 128;
  route.top_k = 4;
  route.out_dtype = DType::i32;
  SpecKey combine = make_gemm_key(OpKind::combine, QuantMode::bf16, 1024, 2880, 0, t);
  combine.top_k = 4;
  combine.in_dtype = DType::f32;
  combine.out_dtype = DType::bf16;
  SpecKey quantize = make_gemm_key(OpKind::quantize, QuantMode::mxfp8, 1, 2880, 0, t);
  quantize.out_dtype = DType::e4m3;
  const std::pair<SpecKey, const char*> cases[] = {
      {route, kRouteText}, {combine, kCombineText}, {quantize, kQuantizeText}, {gpt_oss_gate_up(), kGptOssText}};
  for (const auto& [key, text] : cases) {
    INFO(text);
    CHECK_NOTHROW(validate(key));
    CHECK(key.to_text() == text);
    CHECK(parse_key(text) == key);
    CHECK(parse_key(text).hash() == key.hash());
  }
  // Same shape numbers, different meaning: the route's E is not a column count.
  SpecKey as_n = route;
  as_n.n = 128;
  as_n.n_align = alignment_of(128);
  CHECK_THROWS_WITH(validate(as_n), Catch::Contains("'n' = 128") && Catch::Contains("op=route"));
}

TEST_CASE("key: validate enforces the per-op rules, naming the field and value", "[key]") {
  struct Case {
    std::string text, must_contain;
  };
  const std::string route = kRouteText, combine = kCombineText, quantize = kQuantizeText, gemm = kGptOssText;
  const std::vector<Case> cases = {
      // k is the GEMM reduction length: 0 elsewhere.
      {replace(route, " k=0 ", " k=256 "), "'k' = 256"},  // k_align=256 fits k=256
      {replace(combine, " k=0 ", " k=768 "), "'k' = 768"},
      {replace(quantize, " k=0 ", " k=256 "), "'k' = 256"},
      // route: no columns; E and top_k >= 1; writes i32 index lists.
      {replace(route, "n=0 k=0 n_align=256", "n=128 k=0 n_align=128"), "'n' = 128"},
      {replace(route, "experts=128", "experts=0"), "'experts' = 0"},
      {replace(route, "top_k=4", "top_k=0"), "'top_k' = 0"},
      {replace(route, "out=i32", "out=bf16"), "'out' = bf16"},
      {replace(route, "in=none", "in=f32"), "'in' = f32"},
      // combine: reads Y in `in`, writes bf16; its code does not depend on E.
      {replace(combine, "in=f32", "in=none"), "'in' = none"},
      {replace(combine, "out=bf16", "out=f32"), "'out' = f32"},
      {replace(combine, "experts=0", "experts=128"), "'experts' = 128"},
      {replace(combine, "top_k=4", "top_k=0"), "'top_k' = 0"},
      // quantize: neither E nor top_k; reads what it is given (in none).
      {replace(quantize, "experts=0", "experts=8"), "'experts' = 8"},
      {replace(quantize, "top_k=0", "top_k=2"), "'top_k' = 2"},
      {replace(quantize, "in=none", "in=bf16"), "'in' = bf16"},
      // The GEMM epilogue fields are none / 0 for the other ops.
      {replace(combine, "bias=none", "bias=f32"), "'bias' = f32"},
      {replace(route, "act=none", "act=silu_gated"), "'act' = silu_gated"},
      {replace(quantize, "router_weight=0", "router_weight=1"), "'router_weight' = 1"},
      // GEMMs: in is none.
      {replace(gemm, "in=none", "in=bf16"), "'in' = bf16"},
  };
  for (const auto& c : cases) {
    INFO("text: " << c.text);
    CHECK_THROWS_AS(parse_key(c.text), InvalidArgument);
    CHECK_THROWS_WITH(parse_key(c.text), Catch::Contains(c.must_contain));
  }
}

TEST_CASE("key: the packing starts with version 2 and covers in_dtype", "[key]") {
  CHECK(kKeyHashVersion == 2);
  // The combine's Y dtype rides in in_dtype, not in out_dtype: the two keys
  // differ in one field and hash apart.
  SpecKey f = parse_key(kCombineText), b = f;
  b.in_dtype = DType::bf16;
  CHECK(key_diff(f, b) == "in: f32 -> bf16");
  CHECK_FALSE(f.hash() == b.hash());
  // Moving a dtype between in and out changes the hash (two packed bytes).
  SpecKey g = gpt_oss_gate_up(), swapped = g;
  swapped.in_dtype = DType::bf16;
  swapped.out_dtype = DType::none;
  CHECK_FALSE(g.hash() == swapped.hash());
}
