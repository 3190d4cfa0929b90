#pragma once
// Token bucketing: rounds a token count up to a geometric bucket so that the set
// of specializations is finite. The formula:
//
//   round_up(m): m <= 2^e            -> m
//                otherwise g = 2^(floor(log2 m) - e); ceil(m / g) * g
//   bucket_set(max): b = 1; while b <= max { emit b; b = round_up(b + 1) }
//   prewarm_set(max) = bucket_set(max) plus round_up(max)
//
// e is the buckets-per-octave exponent (2^e buckets per power-of-two octave,
// default 3: 8 per octave, padding at most 12.5 %: m <= round_up(m) <= m + max(m/8, 1)).
#include <cstdint>
#include <vector>

namespace moejit {

inline constexpr int kDefaultBucketExponent = 3;
// Largest m accepted by round_up (2^31): larger token counts are rejected.
inline constexpr std::uint64_t kMaxBucketedTokens = 1ull << 31;

// Rounds m up to its bucket. Preconditions: 1 <= m <= kMaxBucketedTokens,
// 0 <= exponent <= 16. Throws InvalidArgument naming the parameter otherwise.
// Does not allocate; safe on the launch path.
std::uint32_t round_up_tokens(std::uint64_t m, int exponent = kDefaultBucketExponent);

// Every bucket b <= max_tokens, ascending. max_tokens >= 1 (InvalidArgument otherwise).
std::vector<std::uint32_t> bucket_set(std::uint64_t max_tokens, int exponent = kDefaultBucketExponent);

// bucket_set(max_tokens) plus round_up(max_tokens) when that lies above max_tokens:
// the buckets a server with this token budget can ever launch.
std::vector<std::uint32_t> prewarm_set(std::uint64_t max_tokens, int exponent = kDefaultBucketExponent);

}  // namespace moejit
