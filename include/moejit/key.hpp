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
std::string_view to_string(BiasKind);
std::string_view to_string(WeightScale);

struct SpecKey {
  OpKind op = OpKind::gate_up;
  QuantMode quant = QuantMode::bf16;
  // Bucketed token count T (round_up_tokens(T)); the grouped GEMMs see T*top_k rows.
  std::uint32_t token_bucket = 1;
  // GEMM: output columns N and reduction length K of one expert's weight [N, K].
  // route: n = experts E, k = top_k. combine: n = hidden D, k = top_k.
  // quantize: n = columns, k = 0.
  std::uint32_t n = 0, k = 0;
  // Divisibility facts (derived from n, k by make_*; checked by the parser):
  // the largest power of two <= 256 dividing n, resp. k.
  std::uint16_t n_align = 1, k_align = 1;
  // GEMM keys: local experts E and routes per token, so the heuristic can size
  // m-tiles from the expected rows per expert (bucket * top_k / E). 0 elsewhere.
  std::uint16_t experts = 0, top_k = 0;
  WeightScale weight_scale = WeightScale::none;
  // Epilogue.
  BiasKind bias = BiasKind::none;
  Activation act = Activation::none;
  float act_alpha = 0.f;  // swiglu_oai: 1.702 (gpt-oss model card); else 0
  float act_limit = 0.f;  // swiglu_oai: 7.0; else 0
  bool router_weight = false;  // down: multiply row r by gamma[r]
  DType out_dtype = DType::bf16;
  Target target{};

  friend bool operator==(const SpecKey&, const SpecKey&) = default;

  // Canonical text, one line: "op=gate_up quant=w4a16_mxfp4 m=1024 n=5760 ..."
  // Fields in fixed order; floats with the shortest text that round-trips.
  std::string to_text() const;
  // 128-bit hash of the binary field values (not of the text): no allocation,
  // no formatting; usable on the launch path.
  Hash128 hash() const noexcept;
};

// Parses to_text() output. Throws InvalidArgument naming the offending field and
// value (unknown field, missing field, bad number, divisibility facts that do not
// match n/k, ...). parse_key(k.to_text()) == k for every valid key.
SpecKey parse_key(std::string_view text);

// Largest power of two <= 256 that divides v (v == 0 gives 256).
std::uint16_t alignment_of(std::uint32_t v) noexcept;

// Checks the key's internal consistency (alignment facts, act parameters, quant
// vs weight_scale); throws InvalidArgument naming the field.
void validate(const SpecKey&);

}  // namespace moejit
