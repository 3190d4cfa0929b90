// Crash safety: processes publishing into one cache directory are killed with
// SIGKILL at random moments (and at each step of a publish); afterwards no
// partial entry is ever loaded, verify reports nothing but temp debris, and the
// temp sweep removes that debris by age.
//
// MOEJIT_CRASH_ROUNDS (test-only, read here) raises the number of random-kill
// rounds for the soak script (scripts/soak-crash.sh); the suite runs 50.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <random>
#include <thread>

#include "cache/atomic_file.hpp"
#include "cache/cache_admin.hpp"
#include "cache/disk_cache.hpp"
#include "runtime/runtime_access.hpp"
#include "test_cache_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kFirstN = 300, kKeys = 24;

struct Reference {
  std::map<std::uint32_t, cache::Entry> entries;  // n -> what a correct publish writes
};

Reference make_reference(const TinyKernels& tk) {
  Reference ref;
  RuntimeOptions o;
  o.use_disk_cache = false;
  o.generator = tk.generator();
  Runtime rt(o);
  for (std::uint32_t n = kFirstN; n < kFirstN + kKeys; ++n) ref.entries[n] = RuntimeAccess::entry_for(rt, tiny_key(n));
  return ref;
}

// Child body: compile every key (hits for published ones) in a random order.
[[noreturn]] void child_publish(const fs::path& dir, const TinyKernels& tk, unsigned seed) {
  try {
    Runtime rt(options_for(dir, tk));
    std::vector<std::uint32_t> order;
    for (std::uint32_t n = kFirstN; n < kFirstN + kKeys; ++n) order.push_back(n);
    std::mt19937 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    for (std::uint32_t n : order) (void)rt.compiled(tiny_key(n));
  } catch (...) {
    ::_exit(3);
  }
  ::_exit(0);
}

// After a crash: everything verify reports is temp debris, and every entry on
// disk loads (DiskCache::load, the runtime's path) with exactly the reference bytes.
void check_after_crash(const fs::path& dir, const Reference& ref, std::size_t& temp_seen) {
  const cache::VerifyReport v = cache::verify_all(dir);
  for (const cache::Problem& p : v.problems) {
    INFO(p.path.string() << ": " << p.message);
    CHECK(p.kind == cache::ProblemKind::temp_debris);
  }
  temp_seen += v.problems.size();
  cache::DiskCache dc(dir);
  for (const auto& [n, e] : ref.entries) {
    const Hash128 a = e.header.payload.address();
    if (!fs::exists(dc.entry_path(a))) continue;
    cache::LoadResult r = dc.load(a, e.header.payload);
    INFO("n=" << n << " " << r.reason);
    REQUIRE(r.status == cache::LoadStatus::hit);
    CHECK(r.entry->cubin == e.cubin);
    CHECK(r.entry->header.lowered_name == e.header.lowered_name);
  }
}

int rounds_from_env(int fallback) {
  const char* v = std::getenv("MOEJIT_CRASH_ROUNDS");
  return v && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

// Fault injector for the staged kills: SIGKILL at the chosen step of the
// chosen publish (counted per process).
std::atomic<int> g_stage{-1}, g_countdown{0};
int kill_at_stage(cache::FsOp op, const fs::path& p) noexcept {
  if (static_cast<int>(op) == g_stage.load() && p.string().find(".entry") != std::string::npos &&
      g_countdown.fetch_sub(1) == 0)
    ::raise(SIGKILL);
  return 0;
}

}  // namespace

TEST_CASE("crash safety: SIGKILL at random moments never leaves a loadable partial entry",
          "[cache][crash][nvrtc]") {
  if (!have_nvrtc()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  TinyKernels tk;
  const Reference ref = make_reference(tk);
  TempDir dir;
  const int rounds = rounds_from_env(50);
  const unsigned seed = static_cast<unsigned>(std::random_device{}());
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  int killed = 0, finished = 0;
  std::size_t temp_seen = 0;
  for (int round = 0; round < rounds; ++round) {
    // Keep compile work for the next child: drop a random third of the entries.
    if (round % 4 == 3) {
      cache::DiskCache dc(dir.path());
      for (const auto& [n, e] : ref.entries)
        if (rng() % 3 == 0) fs::remove(dc.entry_path(e.header.payload.address()));
    }
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) child_publish(dir.path(), tk, seed + static_cast<unsigned>(round));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 60000));
    ::kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status)) ++killed;
    else {
      CHECK(WEXITSTATUS(status) == 0);
      ++finished;
    }
    check_after_crash(dir.path(), ref, temp_seen);
  }
  INFO("killed " << killed << ", finished " << finished << ", temp files seen " << temp_seen);
  CHECK(killed > rounds / 2);

  // The sweep removes debris by age: nothing younger than the limit, all older.
  const std::size_t kept = cache::sweep_temp_files(dir.path(), std::chrono::hours(1));
  CHECK(kept == 0);
  cache::sweep_temp_files(dir.path(), std::chrono::seconds(0));
  CHECK(cache::verify_all(dir.path()).clean());

  // A final runtime gets every kernel right, from disk or by compiling it.
  Runtime rt(options_for(dir.path(), tk));
  for (const auto& [n, e] : ref.entries) CHECK(rt.compiled(tiny_key(n))->cubin == e.cubin);
  CHECK(rt.stats().quarantined == 0);
}

TEST_CASE("crash safety: SIGKILL at each step of a publish", "[cache][crash][nvrtc]") {
  if (!have_nvrtc()) {
    WARN("skipped: libnvrtc not found");
    return;
  }
  TinyKernels tk;
  const Reference ref = make_reference(tk);
  struct Stage {
    const char* name;
    cache::FsOp op;
  };
  for (const Stage& s : {Stage{"before the temp file exists", cache::FsOp::create_temp},
                         Stage{"temp file created, nothing written", cache::FsOp::write},
                         Stage{"temp file written, before fsync", cache::FsOp::fsync},
                         Stage{"fsynced, before rename", cache::FsOp::rename}}) {
    for (int countdown : {0, 5}) {
      TempDir dir;
      pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        g_stage = static_cast<int>(s.op);
        g_countdown = countdown;
        cache::set_fault_injector_for_testing(&kill_at_stage);
        child_publish(dir.path(), tk, 7);
      }
      int status = 0;
      REQUIRE(::waitpid(pid, &status, 0) == pid);
      INFO(s.name << ", publish #" << countdown);
      CHECK(WIFSIGNALED(status));
      std::size_t temp_seen = 0;
      check_after_crash(dir.path(), ref, temp_seen);
      const bool temp_expected = s.op != cache::FsOp::create_temp;
      CHECK(temp_seen == (temp_expected ? 1u : 0u));
      // The published ones (countdown of them) are intact; the interrupted one is absent.
      CHECK(cache::verify_all(dir.path()).entries_ok == static_cast<std::size_t>(countdown));
      // A runtime opened with the default age keeps the young debris; age 0 sweeps it.
      RuntimeOptions o = options_for(dir.path(), tk);
      o.temp_max_age = std::chrono::seconds(0);
      Runtime rt(o);
      CHECK(cache::verify_all(dir.path()).clean());
      for (const auto& [n, e] : ref.entries) CHECK(rt.compiled(tiny_key(n))->cubin == e.cubin);
      CHECK(rt.stats().quarantined == 0);
    }
  }
}
