// moejit/stats.hpp: the statistics' ids are a contract (numbers and names),
// and every place that shows counters uses them.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <set>
#include <string>

#include "cache/cache_stats.hpp"
#include "moejit/runtime.hpp"
#include "moejit/stats.hpp"
#include "test_cache_support.hpp"

using namespace moejit;

TEST_CASE("stats: numeric and string ids are stable", "[stats]") {
  // The contract: append here, never change a line.
  const std::pair<int, const char*> ids[] = {
      {0, "memory_hits"},  {1, "disk_hits"},         {2, "pack_hits"},    {3, "disk_misses"},
      {4, "compiles"},     {5, "compile_failures"},  {6, "quarantined"},  {7, "misses_after_seal"},
      {8, "module_loads"}, {9, "evicted"},           {10, "publish_failures"}};
  REQUIRE(std::size(ids) == kStatCount);
  for (const auto& [n, name] : ids) {
    const StatId id = static_cast<StatId>(n);
    CHECK(kAllStats[n] == id);
    CHECK(to_string(id) == name);
    CHECK(parse_stat_id(name) == id);
    CHECK(!describe(id).empty());
  }
  CHECK(!parse_stat_id("disk_hit").has_value());
  CHECK(!is_persisted(StatId::memory_hits));
  CHECK(!is_persisted(StatId::module_loads));
  CHECK(is_persisted(StatId::pack_hits));
}

TEST_CASE("stats: indexing by id is the named field; sums and emptiness", "[stats]") {
  Stats s;
  CHECK(s.empty());
  s[StatId::pack_hits] = 3;
  CHECK(s.pack_hits == 3);
  s.compiles = 2;
  CHECK(s[StatId::compiles] == 2);
  Stats t;
  t.compile_ms_total = 1.5;
  CHECK(!t.empty());
  t += s;
  t += s;
  CHECK(t.pack_hits == 6);
  CHECK(t.compiles == 4);
  CHECK(t.compile_ms_total == 1.5);
}

TEST_CASE("stats: stats.json holds the persisted counters by their ids", "[stats][cache]") {
  test::TempDir dir;
  Stats d;
  for (StatId id : kAllStats) d[id] = static_cast<std::uint64_t>(id) + 1;
  d.compile_ms_total = 2.5;
  REQUIRE(cache::add_stats(dir.path(), d));
  REQUIRE(cache::add_stats(dir.path(), d));
  const auto j = nlohmann::json::parse(test::read_file(dir.path() / "stats.json"));
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  std::set<std::string> want = {"format", std::string(kCompileMsTotalId)};
  for (StatId id : kAllStats)
    if (is_persisted(id)) want.insert(std::string(to_string(id)));
  CHECK(keys == want);
  const Stats back = cache::read_stats(dir.path());
  for (StatId id : kAllStats) {
    INFO(to_string(id));
    CHECK(back[id] == (is_persisted(id) ? 2 * d[id] : 0));
  }
  CHECK(back.compile_ms_total == 5.0);
}

TEST_CASE("stats: a new runtime's counters are all zero", "[stats][runtime]") {
  RuntimeOptions o;
  o.use_disk_cache = false;
  CHECK(Runtime(o).stats().empty());
}
