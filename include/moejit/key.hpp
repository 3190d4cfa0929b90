#pragma once
// The specialization key: everything a compiled kernel may depend on, and
// nothing else (never a file-system path, never a device pointer).
//
// Many keys share one compiled kernel: the kernel-config heuristic maps a key to
// tile parameters, and the generated source + NVRTC options + NVRTC version +
// target form the content address of a cache entry (see docs/cache-format.md).
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "moejit/types.hpp"

namespace moejit {

// 128-bit hash (XXH3-128). Printed as 32 lowercase hex digits, high word first.
struct Hash128 {
  std::uint64_t lo = 0, hi = 0;
  friend bool operator==(const Hash128&, const Hash128&) = default;
  std::string hex() const;
};

// Where the bias comes from in the epilogue.
enum class BiasKind : std::uint8_t { none, f32, bf16 };
// Granularity of the weight scales.
enum class WeightScale : std::uint8_t {
  none,          // bf16 weights
  e8m0_block32,  // one E8M0 byte per 32 K (MXFP4, MXFP8)
  per_expert,    // one fp32 per expert (fp8_per_token)
  per_channel,   // one fp32 per expert and output column [E, N] (fp8_per_token)
};
std::string_view to_string(BiasKind);     // "none", "f32", "bf16"
std::string_view to_string(WeightScale);  // "none", "e8m0_block32", "per_expert", "per_channel"
// Exact to_string() spellings; InvalidArgument naming the text and listing the
// accepted spellings otherwise.
BiasKind parse_bias_kind(std::string_view);
WeightScale parse_weight_scale(std::string_view);

// Version of the binary packing that SpecKey::hash() hashes (docs/key.md). It is
// the first packed byte; bump it whenever a field, a field's meaning or an enum's
// numeric value changes. docs/key.md lists the packed fields and their offsets.
inline constexpr std::uint8_t kKeyHashVersion = 2;

// Every field has one meaning for every op; a field an op does not depend on
// holds its neutral value (0, none), which validate() enforces.
struct SpecKey {
  OpKind op = OpKind::gate_up;
  QuantMode quant = QuantMode::bf16;
  // Text name "tokens". Bucketed token count T (round_up_tokens(T)), a number of
  // tokens, not of rows: the grouped GEMMs see T * top_k routed rows, the route
  // T * top_k routes, the combine T output rows. quantize: 1 (rows are a launch
  // argument).
  std::uint32_t token_bucket = 1;
  // n: the op's output columns. GEMM (gate_up, down, wgrad): N of one expert's
  // weight [N, K]; combine: hidden D; quantize: columns; route: 0 (it writes
  // index lists, no columns).
  // k: the GEMM reduction length K; 0 for route, combine and quantize.
  std::uint32_t n = 0, k = 0;
  // Divisibility facts (derived from n, k by make_*; checked by the parser):
  // the largest power of two <= 256 dividing n, resp. k.
  std::uint16_t n_align = 1, k_align = 1;
  // Experts E on this GPU and routes per token, for every op whose code depends
  // on them: GEMMs (the heuristic sizes m-tiles from token_bucket * top_k / E and
  // refuses 0), route (E >= 1, top_k >= 1), combine (top_k >= 1; experts 0: its
  // code does not depend on E). quantize: both 0.
  std::uint16_t experts = 0, top_k = 0;
  WeightScale weight_scale = WeightScale::none;
  // Epilogue (GEMMs only; route, combine, quantize: none, none, 0, 0, false).
  BiasKind bias = BiasKind::none;
  Activation act = Activation::none;
  float act_alpha = 0.f;  // swiglu_oai: 1.702 (gpt-oss model card); else 0
  float act_limit = 0.f;  // swiglu_oai: 7.0; else 0
  bool router_weight = false;  // down: multiply row r by gamma[r]
  // Text name "in". The dtype of the rows the kernel reads where the kernel
  // depends on it and no other field implies it: combine: the dtype of the Y
  // rows (f32 or bf16, the down key's out_dtype). DType::none for every other op.
  DType in_dtype = DType::none;
  // Text name "out". The dtype the kernel writes: gate_up bf16; down the dtype
  // of Y (bf16, or f32 when split-K or FP8); wgrad f32 or bf16; route i32 (index
  // lists); combine bf16; quantize u8 (MXFP4 codes) or e4m3 (FP8 codes).
  DType out_dtype = DType::bf16;
  Target target{};

  friend bool operator==(const SpecKey&, const SpecKey&) = default;

  // Canonical text, one line: "op=gate_up quant=w4a16_mxfp4 tokens=1024 n=5760 ..."
  // Fields in fixed order; floats with the shortest text that round-trips.
  // Grammar and field names: docs/key.md.
  std::string to_text() const;
  // 128-bit hash (XXH3-128, seed 0) of a fixed 40-byte little-endian packing of
  // every field (not of the text; layout in docs/key.md), its first byte
  // kKeyHashVersion: no allocation, no formatting; usable on the launch path.
  // -0.0 is hashed as +0.0, so keys that compare equal hash equal. It identifies
  // keys in memory (the runtime's key map); cache files are named by content
  // address, not by this hash.
  Hash128 hash() const noexcept;
};

// Parses to_text() output. Fields are separated by spaces; any order is accepted
// (to_text() always writes the canonical order), every field exactly once. Throws
// InvalidArgument naming the offending field and value (unknown field, missing
// field, bad number, divisibility facts that do not match n/k, any rule of
// validate(), ...). Text of an older key version (e.g. "m=" for the token bucket)
// is refused as an unknown or missing field. parse_key(k.to_text()) == k for
// every valid key.
SpecKey parse_key(std::string_view text);

// Largest power of two <= 256 that divides v (v == 0 gives 256).
std::uint16_t alignment_of(std::uint32_t v) noexcept;

// Checks the key's internal consistency; throws InvalidArgument naming the field
// (text name) and its value:
//  - tokens (token_bucket) >= 1;
//  - n_align == alignment_of(n), k_align == alignment_of(k);
//  - act_alpha, act_limit finite; both 0 unless act == swiglu_oai, both > 0 if it is;
//  - weight_scale matches quant: bf16 -> none; w4a16_mxfp4, mxfp8 -> e8m0_block32;
//    fp8_per_token -> per_expert or per_channel;
//  - per op: route, combine, quantize have k = 0, bias none, act none and
//    router_weight 0; route has n = 0, experts >= 1, top_k >= 1, out i32;
//    combine has experts = 0, top_k >= 1, in != none, out bf16; quantize has
//    experts = top_k = 0; in is none for every op but combine.
void validate(const SpecKey&);

// The (name, value) pairs of the canonical text, in canonical order:
// op, quant, tokens, n, k, n_align, k_align, experts, top_k, wscale, bias, act,
// alpha, limit, router_weight, in, out, target. to_text() is these joined as
// "name=value" by spaces.
std::vector<std::pair<std::string, std::string>> key_fields(const SpecKey&);

// The fields in which a and b differ, one per line as "field: a -> b"
// (canonical order, '\n'-separated, no trailing newline); "" when a == b.
std::string key_diff(const SpecKey& a, const SpecKey& b);

// The weight-scale granularity a quant mode uses by default: bf16 -> none,
// w4a16_mxfp4 / mxfp8 -> e8m0_block32, fp8_per_token -> per_expert.
WeightScale default_weight_scale(QuantMode) noexcept;

// Convenience constructor for a grouped-GEMM key (gate_up, down, wgrad) with a
// plain epilogue: sets n_align/k_align from n/k, weight_scale from
// default_weight_scale(quant), no bias, act none, no router weight, in none,
// out bf16, experts and top_k 0.
// Callers then set the epilogue fields. Does not validate (call validate()).
SpecKey make_gemm_key(OpKind op, QuantMode quant, std::uint32_t token_bucket, std::uint32_t n,
                      std::uint32_t k, const Target& target) noexcept;

}  // namespace moejit
