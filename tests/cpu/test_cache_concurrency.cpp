// Concurrency of the cache: 16 processes prewarming one plan into one cold
// cache directory at once, and 8 threads of one process. Every distinct kernel
// is compiled exactly once in total: the per-entry flock serializes the
// compilers across processes (the loser re-reads the entry after taking the
// lock), and the Runtime's single-flight serializes threads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cache/cache_admin.hpp"
#include "cache/cache_stats.hpp"
#include "cli/spawn_tool.hpp"
#include "driver/nvrtc_api.hpp"
#include "moejit/model.hpp"
#include "moejit/prewarm.hpp"
#include "runtime/runtime_access.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

PrewarmPlan small_gpt_oss_plan(std::uint64_t max_tokens) {
  PlanOptions o;
  o.max_num_tokens = max_tokens;
  return make_plan(embedded_model("gpt-oss-120b"), o);
}

}  // namespace

TEST_CASE("concurrency: 16 moejit-prewarm processes on one cold cache compile each kernel once",
          "[cache][concurrency][cli][nvrtc]") {
  if (!driver::nvrtc_available()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  constexpr int kProcs = 16;
  TempDir dir("conc16");
  const fs::path cache = dir.path() / "cache";
  std::vector<pid_t> pids;
  {
    StartBarrier barrier;
    for (int i = 0; i < kProcs; ++i) {
      SpawnSpec s;
      s.tool = "moejit-prewarm";
      // -j2: two threads per process, so processes also race inside themselves.
      s.args = {"--model", "gpt-oss-120b", "--max-num-tokens", "4", "-j2", "--cache-dir", cache.string(),
                "--json", (dir.path() / ("r" + std::to_string(i) + ".json")).string()};
      s.env = {"MOEJIT_LOG_LEVEL=warn"};
      s.out = dir.path() / ("out" + std::to_string(i));
      s.err = dir.path() / ("err" + std::to_string(i));
      pids.push_back(spawn(s, &barrier));
    }
  }  // barrier released: all start at once
  for (int i = 0; i < kProcs; ++i) {
    const int rc = wait_exit(pids[static_cast<std::size_t>(i)]);
    INFO("process " << i << " stderr: " << read_text(dir.path() / ("err" + std::to_string(i))));
    CHECK(rc == 0);
  }
  std::size_t compiled = 0, disk_hits = 0, distinct = 0;
  for (int i = 0; i < kProcs; ++i) {
    const auto j = nlohmann::json::parse(read_text(dir.path() / ("r" + std::to_string(i) + ".json")));
    if (distinct == 0) distinct = j["distinct_kernels"].get<std::size_t>();
    CHECK(j["distinct_kernels"].get<std::size_t>() == distinct);
    CHECK(j["failed"].get<std::size_t>() == 0);
    compiled += j["compiled"].get<std::size_t>();
    disk_hits += j["disk_hits"].get<std::size_t>();
  }
  REQUIRE(distinct >= 4);
  // Exactly once: the flock makes a second compile impossible unless a peer held
  // the lock for longer than the 120 s timeout (not the case here).
  CHECK(compiled == distinct);
  CHECK(disk_hits + compiled == distinct * kProcs);
  const Stats st = cache::read_stats(cache);
  CHECK(st.compiles == distinct);
  CHECK(st.quarantined == 0);
  CHECK(st.publish_failures == 0);
  const cache::VerifyReport v = cache::verify_all(cache);
  CHECK(v.clean());
  CHECK(v.entries_ok == distinct);
  const ToolResult verify = run_tool("moejit-cache", {"verify", "--cache-dir", cache.string()});
  CHECK(verify.exit_code == 0);
}

TEST_CASE("concurrency: prewarm -j8 in one process compiles each kernel once", "[cache][concurrency][nvrtc]") {
  if (!driver::nvrtc_available()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  TempDir dir("conc8t");
  const PrewarmPlan plan = small_gpt_oss_plan(4);
  RuntimeOptions ro;
  ro.cache_dir = dir.path() / "cache";
  Runtime rt(ro);
  PrewarmOptions po;
  po.jobs = 8;
  const PrewarmReport r = prewarm(rt, plan, po);
  INFO(r.to_json());
  REQUIRE(r.failed == 0);
  CHECK(r.compiled == r.distinct_kernels);
  CHECK(rt.stats().compiles == r.distinct_kernels);
  CHECK(RuntimeAccess::kernel_count(rt) == r.distinct_kernels);
  RuntimeAccess::flush_stats(rt);
  CHECK(cache::read_stats(ro.cache_dir).compiles == r.distinct_kernels);
  CHECK(cache::verify_all(ro.cache_dir).clean());
}

TEST_CASE("concurrency: 8 threads requesting every key in shuffled orders compile each kernel once",
          "[cache][concurrency][nvrtc]") {
  if (!driver::nvrtc_available()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  TempDir dir("conc8s");
  const std::vector<SpecKey> keys = enumerate_keys(small_gpt_oss_plan(4));
  RuntimeOptions ro;
  ro.cache_dir = dir.path() / "cache";
  Runtime rt(ro);
  std::vector<std::vector<const CompiledKernel*>> seen(8);
  {
    std::vector<std::jthread> pool;
    for (unsigned t = 0; t < 8; ++t) {
      pool.emplace_back([&, t] {
        std::vector<std::size_t> order(keys.size());
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::mt19937 rng(t);
        std::shuffle(order.begin(), order.end(), rng);
        seen[t].assign(keys.size(), nullptr);
        for (std::size_t i : order) seen[t][i] = rt.compiled(keys[i]).get();
      });
    }
  }
  const std::size_t distinct = RuntimeAccess::kernel_count(rt);
  CHECK(rt.stats().compiles == distinct);
  // Every thread got the same kernel object for each key.
  for (unsigned t = 1; t < 8; ++t) CHECK(seen[t] == seen[0]);
  CHECK(cache::verify_all(ro.cache_dir).entries_ok == distinct);
}
