// Failures that are visible and read-only caches: kernels that cannot be
// persisted are counted (PrewarmReport::persisted / memory_only); a cache
// directory that cannot be written serves its entries and keeps misses in
// memory; prewarm's check-only mode says whether such a cache is complete
// without writing anything.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <map>
#include <nlohmann/json.hpp>

#include "cache/atomic_file.hpp"
#include "cache/cache_admin.hpp"
#include "cache/disk_cache.hpp"
#include "moejit/model.hpp"
#include "moejit/prewarm.hpp"
#include "test_cache_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

namespace {

std::atomic<int> g_fault_errno{0};
std::atomic<bool> g_fail_writes{false};  // also the write() of a publish (disk full)

int fail_creates(cache::FsOp op, const fs::path&) noexcept {
  if (op == cache::FsOp::create_temp || op == cache::FsOp::mkdir) return g_fault_errno.load();
  if (g_fail_writes && op == cache::FsOp::write) return g_fault_errno.load();
  return 0;
}

struct Faults {
  explicit Faults(int err, bool writes = false) {
    g_fault_errno = err;
    g_fail_writes = writes;
    cache::set_fault_injector_for_testing(&fail_creates);
  }
  ~Faults() { cache::set_fault_injector_for_testing(nullptr); }
};

// A small real plan whose keys all compile to tiny kernels (one per key).
PrewarmPlan small_plan() {
  PlanOptions o;
  o.max_num_tokens = 4;
  o.target = parse_target("sm_90a");
  return make_plan(embedded_model("gpt-oss-20b"), o);
}

RuntimeOptions tiny_options(const fs::path& dir) {
  RuntimeOptions o;
  o.cache_dir = dir;
  o.seal_policy = SealPolicy::warn;
  const auto tiny = TinyKernels{}.generator();
  o.generator = [tiny](const SpecKey& key) {
    // One tiny kernel per key: n from the key's text (never 0 or 13).
    const std::size_t h = std::hash<std::string>{}(key.to_text());
    return tiny(tiny_key(static_cast<std::uint32_t>(100 + h % 100000)));
  };
  return o;
}

// Every file under dir with its size and mtime: "nothing was written" is equality.
std::map<std::string, std::pair<std::uintmax_t, std::int64_t>> snapshot(const fs::path& dir) {
  std::map<std::string, std::pair<std::uintmax_t, std::int64_t>> out;
  for (const auto& de : fs::recursive_directory_iterator(dir)) {
    struct stat st{};
    ::lstat(de.path().c_str(), &st);
    out[de.path().string()] = {static_cast<std::uintmax_t>(st.st_size),
                               static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  }
  return out;
}

}  // namespace

TEST_CASE("persistence: kernels that cannot be written are counted as memory-only in the report and its JSON",
          "[cache][faults][prewarm][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  const PrewarmPlan plan = small_plan();
  {
    Faults full(ENOSPC, /*writes=*/true);
    Runtime rt(tiny_options(dir.path()));
    const PrewarmReport r = prewarm(rt, plan, {.jobs = 2});
    REQUIRE(r.failed == 0);
    REQUIRE(r.compiled > 0);
    CHECK(r.memory_only == r.compiled);
    CHECK(r.persisted == 0);
    const auto j = nlohmann::json::parse(r.to_json());
    CHECK(j["memory_only"] == r.compiled);
    CHECK(j["persisted"] == 0);
  }
  Runtime rt(tiny_options(dir.path()));
  const PrewarmReport r = prewarm(rt, plan, {.jobs = 2});
  CHECK(r.disk_hits == 0);  // nothing of the first run reached the disk
  CHECK(r.memory_only == 0);
  CHECK(r.persisted == r.compiled);
  CHECK(r.persisted + r.memory_only == r.compiled + r.disk_hits + r.memory_hits);
}

TEST_CASE("read-only cache: a directory whose layout cannot be completed still serves its entries",
          "[cache][faults][readonly][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  {
    Runtime rt(options_for(dir.path(), tk));
    rt.compiled(tiny_key(84));
  }
  fs::remove_all(dir.path() / "quarantine");  // an image built without it
  Faults ro(EROFS);
  LogCapture log;
  Runtime rt(options_for(dir.path(), tk));
  CHECK(log.count_containing("serving its entries read-only") == 1);
  CHECK(rt.lookup_compiled(tiny_key(84)).origin == CompiledKernel::Origin::disk);
  const CompiledLookup miss = rt.lookup_compiled(tiny_key(85));
  CHECK(miss.origin == CompiledKernel::Origin::compiled);
  CHECK(!miss.kernel->persisted);
  CHECK(rt.stats().publish_failures == 1);
}

TEST_CASE("read-only cache: check-only prewarm says complete or not and writes nothing",
          "[cache][readonly][prewarm][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  const PrewarmPlan plan = small_plan();
  std::size_t kernels = 0;
  {
    Runtime rt(tiny_options(dir.path()));
    const PrewarmReport r = prewarm(rt, plan, {.jobs = 2});
    REQUIRE(r.failed == 0);
    kernels = r.distinct_kernels;
  }
  RuntimeOptions o = tiny_options(dir.path());
  o.read_only_cache = true;
  const auto before = snapshot(dir.path());
  {
    Runtime rt(o);
    const PrewarmReport r = prewarm(rt, plan, {.jobs = 2, .check_only = true});
    CHECK(r.missing == 0);
    CHECK(r.compiled == 0);
    CHECK(r.disk_hits == kernels);
    CHECK(r.persisted == kernels);
    CHECK(rt.stats().compiles == 0);
  }
  CHECK(snapshot(dir.path()) == before);  // no stamp, no statistics, nothing

  // One entry gone, one corrupt: both missing, still nothing written.
  auto entries = cache::list_entries(dir.path());
  REQUIRE(entries.size() >= 2);
  fs::remove(entries[0].path);
  {
    std::string bytes = read_file(entries[1].path);
    bytes[bytes.size() / 2] ^= 1;
    write_file(entries[1].path, bytes);
  }
  const auto damaged = snapshot(dir.path());
  Runtime rt(o);
  const PrewarmReport r = prewarm(rt, plan, {.jobs = 2, .check_only = true});
  INFO("disk_hits " << r.disk_hits << " memory " << r.memory_hits << " kernels " << r.distinct_kernels << " entries " << entries.size());
  CHECK(r.missing == 2);
  CHECK(r.compiled == 0);
  CHECK(r.failed == 0);
  CHECK(snapshot(dir.path()) == damaged);
}
