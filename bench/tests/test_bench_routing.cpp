// Routing generator of the benchmarks (bench/bench_util.hpp): distinct experts
// per token; the skewed routing sends about half of the routes to 4 hot experts.
#include <catch2/catch.hpp>

#include <set>

#include "bench_util.hpp"

using moejit::bench::experts_hit;
using moejit::bench::make_routing;

TEST_CASE("bench routing: distinct experts per token, in range, deterministic", "[bench][routing]") {
  for (bool skewed : {false, true}) {
    for (auto [E, k] : {std::pair{128u, 4u}, std::pair{256u, 8u}, std::pair{8u, 2u}}) {
      const auto ids = make_routing(2000, k, E, skewed, 3);
      REQUIRE(ids.size() == 2000u * k);
      for (std::uint32_t t = 0; t < 2000; ++t) {
        std::set<std::int32_t> s(ids.begin() + t * k, ids.begin() + (t + 1) * k);
        CHECK(s.size() == k);
        CHECK(*s.begin() >= 0);
        CHECK(*s.rbegin() < static_cast<std::int32_t>(E));
      }
      CHECK(make_routing(2000, k, E, skewed, 3) == ids);
      CHECK(make_routing(2000, k, E, skewed, 4) != ids);
    }
  }
}

TEST_CASE("bench routing: skewed puts about half of the routes on 4 experts", "[bench][routing]") {
  const auto ids = make_routing(16384, 4, 128, true, 1);
  std::size_t hot = 0;
  for (auto e : ids) hot += e < 4;
  const double share = double(hot) / double(ids.size());
  CHECK(share > 0.45);
  CHECK(share < 0.52);
  const auto u = make_routing(16384, 4, 128, false, 1);
  std::size_t uhot = 0;
  for (auto e : u) uhot += e < 4;
  CHECK(double(uhot) / double(u.size()) < 0.05);  // uniform: 4/128 = 3.1 %
  CHECK(experts_hit(u) == 128u);
  CHECK(experts_hit(make_routing(1, 4, 128, false, 1)) == 4u);
}
