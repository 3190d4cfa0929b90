// Token bucketing properties (the formula in include/moejit/bucketing.hpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "moejit/bucketing.hpp"
#include "moejit/error.hpp"

using namespace moejit;

TEST_CASE("round_up_tokens: reference examples", "[bucketing]") {
  CHECK(round_up_tokens(1) == 1);
  CHECK(round_up_tokens(8) == 8);
  CHECK(round_up_tokens(16) == 16);
  CHECK(round_up_tokens(17) == 18);
  CHECK(round_up_tokens(33) == 36);
  CHECK(round_up_tokens(100) == 104);
  CHECK(round_up_tokens(129) == 144);
  CHECK(round_up_tokens(1000) == 1024);
  CHECK(round_up_tokens(18433) == 20480);
  CHECK(round_up_tokens(kMaxBucketedTokens) == kMaxBucketedTokens);
  CHECK(round_up_tokens(kMaxBucketedTokens - 1) == kMaxBucketedTokens);
}

TEST_CASE("round_up_tokens: properties for every m in [1, 65536]", "[bucketing]") {
  for (int e : {3, 0, 1, 2, 5}) {
    const std::vector<std::uint32_t> set = bucket_set(65536, e);
    REQUIRE(std::is_sorted(set.begin(), set.end()));
    REQUIRE(std::adjacent_find(set.begin(), set.end()) == set.end());
    std::uint32_t prev = 0;
    std::uint64_t bad = 0;  // count instead of CHECK per m: 65536 assertions are slow
    std::uint64_t first_bad = 0;
    for (std::uint64_t m = 1; m <= 65536; ++m) {
      const std::uint32_t b = round_up_tokens(m, e);
      const std::uint64_t slack = std::max<std::uint64_t>(m >> e, 1);
      const bool ok = m <= b && b <= m + slack            // bounded padding
                      && round_up_tokens(b, e) == b       // fixed point
                      && b >= prev                        // monotonic
                      && std::binary_search(set.begin(), set.end(), b);  // membership
      if (!ok && bad++ == 0) first_bad = m;
      prev = b;
    }
    INFO("exponent " << e << ", first failing m " << first_bad);
    CHECK(bad == 0);
    // Every bucket is reached: the set is exactly the image of round_up on [1, 65536].
    for (std::uint32_t b : set) CHECK(round_up_tokens(b, e) == b);
  }
}

TEST_CASE("round_up_tokens: e=3 padding is at most 12.5 % and about 4.7 % on average", "[bucketing]") {
  double sum = 0;
  for (std::uint64_t m = 1; m <= 20000; ++m) {
    const double pad = double(round_up_tokens(m) - m) / double(m);
    REQUIRE(pad <= 0.125);
    sum += pad;
  }
  CHECK(sum / 20000 == Approx(0.047).margin(0.003));
}

TEST_CASE("bucket_set and prewarm_set sizes", "[bucketing]") {
  const auto set = bucket_set(20000);
  CHECK(set.size() == 97);
  CHECK(set.front() == 1);
  CHECK(set.back() == 18432);
  CHECK(std::count_if(set.begin(), set.end(), [](auto b) { return b <= 16384; }) == 96);
  for (std::uint32_t b = 1; b <= 16; ++b) CHECK(set[b - 1] == b);
  CHECK(set[16] == 18);

  const auto pw = prewarm_set(20000);
  CHECK(pw.size() == 98);
  CHECK(pw.back() == 20480);
  CHECK(std::equal(set.begin(), set.end(), pw.begin()));

  // max on a bucket: nothing added.
  CHECK(prewarm_set(16384) == bucket_set(16384));
  CHECK(bucket_set(1) == std::vector<std::uint32_t>{1});
  CHECK(prewarm_set(17) == std::vector<std::uint32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                                       13, 14, 15, 16, 18});
  // exponent 0: powers of two.
  CHECK(bucket_set(100, 0) == std::vector<std::uint32_t>{1, 2, 4, 8, 16, 32, 64});
  CHECK(prewarm_set(100, 0).back() == 128);
}

TEST_CASE("bucketing: bad input names the parameter and value", "[bucketing]") {
  CHECK_THROWS_WITH(round_up_tokens(0), Catch::Contains("m") && Catch::Contains("got 0"));
  CHECK_THROWS_AS(round_up_tokens(0), InvalidArgument);
  CHECK_THROWS_WITH(round_up_tokens(kMaxBucketedTokens + 1),
                    Catch::Contains(std::to_string(kMaxBucketedTokens + 1)));
  CHECK_THROWS_WITH(round_up_tokens(5, -1), Catch::Contains("exponent") && Catch::Contains("-1"));
  CHECK_THROWS_WITH(round_up_tokens(5, 17), Catch::Contains("exponent") && Catch::Contains("17"));
  CHECK_THROWS_AS(bucket_set(0), InvalidArgument);
  CHECK_THROWS_WITH(prewarm_set(0), Catch::Contains("max_tokens") && Catch::Contains("got 0"));
  CHECK_THROWS_WITH(bucket_set(100, 99), Catch::Contains("99"));
}
