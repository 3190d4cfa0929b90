// Token bucketing (include/moejit/bucketing.hpp): geometric buckets, 2^e per octave.
#include "moejit/bucketing.hpp"

#include <bit>
#include <string>

#include "moejit/error.hpp"

namespace moejit {
namespace {

void check_exponent(int exponent) {
  if (exponent < 0 || exponent > 16)
    throw InvalidArgument("bucket exponent must be in [0, 16], got " + std::to_string(exponent));
}

// Precondition: 1 <= m <= kMaxBucketedTokens, exponent checked.
std::uint32_t round_up_unchecked(std::uint64_t m, int exponent) noexcept {
  if (m <= (std::uint64_t{1} << exponent)) return static_cast<std::uint32_t>(m);
  const int log2m = std::bit_width(m) - 1;  // floor(log2 m) >= exponent + 1 here
  const std::uint64_t g = std::uint64_t{1} << (log2m - exponent);
  // Why this cannot overflow uint32: m <= 2^31, and the result is at most the
  // next power of two above m's octave start, i.e. <= 2^31.
  return static_cast<std::uint32_t>((m + g - 1) / g * g);
}

void check_max(std::uint64_t max_tokens) {
  if (max_tokens < 1)
    throw InvalidArgument("max_tokens must be >= 1, got " + std::to_string(max_tokens));
  if (max_tokens > kMaxBucketedTokens)
    throw InvalidArgument("max_tokens must be <= " + std::to_string(kMaxBucketedTokens) +
                          ", got " + std::to_string(max_tokens));
}

}  // namespace

std::uint32_t round_up_tokens(std::uint64_t m, int exponent) {
  if (m < 1) throw InvalidArgument("token count m must be >= 1, got 0");
  if (m > kMaxBucketedTokens)
    throw InvalidArgument("token count m must be <= " + std::to_string(kMaxBucketedTokens) +
                          ", got " + std::to_string(m));
  check_exponent(exponent);
  return round_up_unchecked(m, exponent);
}

std::vector<std::uint32_t> bucket_set(std::uint64_t max_tokens, int exponent) {
  check_max(max_tokens);
  check_exponent(exponent);
  std::vector<std::uint32_t> out;
  std::uint64_t b = 1;
  while (b <= max_tokens) {
    out.push_back(static_cast<std::uint32_t>(b));
    if (b + 1 > kMaxBucketedTokens) break;
    b = round_up_unchecked(b + 1, exponent);
  }
  return out;
}

std::vector<std::uint32_t> prewarm_set(std::uint64_t max_tokens, int exponent) {
  std::vector<std::uint32_t> out = bucket_set(max_tokens, exponent);
  const std::uint32_t top = round_up_unchecked(max_tokens, exponent);
  if (top > out.back()) out.push_back(top);
  return out;
}

}  // namespace moejit
