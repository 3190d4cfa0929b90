// Runtime: memory/disk/compile lookup order, single-flight, dedupe by content
// address, seal policies, errors. Uses tiny kernels (test_cache_support.hpp).
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <thread>

#include "cache/cache_stats.hpp"
#include "cache/disk_cache.hpp"
#include "driver/cuda_api.hpp"
#include "driver/dynlib.hpp"
#include "moejit/error.hpp"
#include "runtime/runtime_access.hpp"
#include "test_cache_support.hpp"

using namespace moejit;
using namespace moejit::test;
using Origin = CompiledKernel::Origin;

TEST_CASE("runtime: compile, then memory hit; same object", "[runtime][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  Runtime rt(options_for(dir.path(), tk));
  auto a = rt.lookup_compiled(tiny_key(3));
  CHECK(a.origin == Origin::compiled);
  REQUIRE(a.kernel);
  CHECK(a.kernel->cubin.size() > 64);
  CHECK(a.kernel->resources.registers > 0);
  CHECK(a.kernel->launch.block_threads == 128);
  CHECK(a.kernel->compile_ms > 0.0);
  CHECK(a.kernel->lowered_name.find("add_const") != std::string::npos);
  auto b = rt.lookup_compiled(tiny_key(3));
  CHECK(b.origin == Origin::memory);
  CHECK(b.kernel.get() == a.kernel.get());
  CHECK(RuntimeAccess::lookup(rt, tiny_key(3)) == a.kernel.get());
  CHECK(RuntimeAccess::lookup(rt, tiny_key(4)) == nullptr);
  auto s = rt.stats();
  CHECK(s.compiles == 1);
  CHECK(s.memory_hits == 1);
  CHECK(s.disk_hits == 0);
  CHECK(*tk.calls == 1);
}

TEST_CASE("runtime: a second Runtime on the same directory hits the disk and compiles nothing", "[runtime][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  std::string cubin;
  Hash128 address;
  {
    Runtime rt(options_for(dir.path(), tk));
    auto k = rt.compiled(tiny_key(5));
    cubin = k->cubin;
    address = k->content_hash;
    CHECK(rt.stats().disk_misses == 1);  // the same counter as stats.json's
  }
  cache::DiskCache dc(dir.path());
  CHECK(std::filesystem::is_regular_file(dc.entry_path(address)));
  Runtime rt2(options_for(dir.path(), tk));
  auto k2 = rt2.lookup_compiled(tiny_key(5));
  CHECK(k2.origin == Origin::disk);
  CHECK(k2.kernel->cubin == cubin);
  CHECK(k2.kernel->content_hash == address);
  CHECK(k2.kernel->resources.registers > 0);
  CHECK(rt2.stats().compiles == 0);
  CHECK(rt2.stats().disk_hits == 1);
  CHECK(rt2.stats().disk_misses == 0);
  RuntimeAccess::flush_stats(rt2);
  auto ps = cache::read_stats(dir.path());
  CHECK(ps.compiles == 1);
  CHECK(ps.disk_hits == 1);
  CHECK(ps.disk_misses == 1);
}

TEST_CASE("runtime: keys with the same generated source share one compiled kernel", "[runtime][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  Runtime rt(options_for(dir.path(), tk));
  auto a = rt.lookup_compiled(tiny_key(7, 1));
  auto b = rt.lookup_compiled(tiny_key(7, 64));  // other bucket, same source
  CHECK(a.origin == Origin::compiled);
  CHECK(b.origin == Origin::memory);
  CHECK(a.kernel.get() == b.kernel.get());
  CHECK(rt.stats().compiles == 1);
  CHECK(RuntimeAccess::kernel_count(rt) == 1);
  auto c = rt.lookup_compiled(tiny_key(8, 1));
  CHECK(c.kernel->content_hash != a.kernel->content_hash);
  CHECK(RuntimeAccess::kernel_count(rt) == 2);
}

TEST_CASE("runtime: 8 threads asking for one missing key cause one compile", "[runtime][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  Runtime rt(options_for(dir.path(), tk));
  std::vector<std::shared_ptr<const CompiledKernel>> got(8);
  std::vector<std::thread> threads;
  std::atomic<int> go{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      while (go.load() == 0) std::this_thread::yield();
      got[static_cast<std::size_t>(i)] = rt.compiled(tiny_key(11));
    });
  go = 1;
  for (auto& t : threads) t.join();
  CHECK(rt.stats().compiles == 1);
  CHECK(*tk.calls == 1);
  for (auto& g : got) CHECK(g.get() == got[0].get());
}

TEST_CASE("runtime: 8 threads, 8 keys of one kernel: one compile", "[runtime][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  Runtime rt(options_for(dir.path(), tk));
  std::vector<std::thread> threads;
  std::atomic<int> go{0};
  std::vector<const CompiledKernel*> got(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      while (go.load() == 0) std::this_thread::yield();
      got[static_cast<std::size_t>(i)] = rt.compiled(tiny_key(12, static_cast<std::uint32_t>(i + 1))).get();
    });
  go = 1;
  for (auto& t : threads) t.join();
  CHECK(rt.stats().compiles == 1);
  for (auto* g : got) CHECK(g == got[0]);
}

TEST_CASE("runtime: compile error carries the key text; not cached; counted", "[runtime][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  Runtime rt(options_for(dir.path(), tk));
  const std::string text = tiny_key(13).to_text();
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      rt.compiled(tiny_key(13));
      FAIL("expected CompileError");
    } catch (const CompileError& e) {
      CHECK(e.key_text() == text);
      CHECK(e.log().find("error") != std::string::npos);
    }
  }
  CHECK(rt.stats().compile_failures == 2);
  CHECK(rt.stats().compiles == 0);
  CHECK(*tk.calls == 2);  // retried, not remembered as success
  RuntimeAccess::flush_stats(rt);
  CHECK(cache::read_stats(dir.path()).compile_failures == 2);
  // Other keys still work.
  CHECK(rt.compiled(tiny_key(14))->cubin.size() > 0);
}

TEST_CASE("runtime: generator's InvalidArgument propagates", "[runtime]") {
  TempDir dir;
  TinyKernels tk;
  Runtime rt(options_for(dir.path(), tk));
  CHECK_THROWS_AS(rt.compiled(tiny_key(0)), InvalidArgument);
  CHECK_THROWS_AS(rt.compiled(tiny_key(0)), InvalidArgument);
  CHECK(*tk.calls == 2);
}

TEST_CASE("runtime: seal under warn policy compiles, counts and warns", "[runtime][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  auto opts = options_for(dir.path(), tk);
  opts.seal_policy = SealPolicy::warn;
  Runtime rt(opts);
  rt.compiled(tiny_key(21));
  CHECK_FALSE(rt.sealed());
  rt.seal();
  CHECK(rt.sealed());
  CHECK(rt.seal_policy() == SealPolicy::warn);
  LogCapture log;
  rt.compiled(tiny_key(21));  // prewarmed: not a miss
  CHECK(rt.stats().misses_after_seal == 0);
  auto k = rt.compiled(tiny_key(22));
  CHECK(k->cubin.size() > 0);
  CHECK(rt.stats().misses_after_seal == 1);
  CHECK(log.count_containing("miss after seal") == 1);
  CHECK(log.count_containing(tiny_key(22).to_text()) >= 1);
  rt.compiled(tiny_key(22));  // now in memory
  CHECK(rt.stats().misses_after_seal == 1);
}

TEST_CASE("runtime: seal under strict policy throws SealedMiss naming the key", "[runtime][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  auto opts = options_for(dir.path(), tk);
  opts.seal_policy = SealPolicy::strict;
  Runtime rt(opts);
  rt.compiled(tiny_key(31));
  rt.seal();
  CHECK(rt.compiled(tiny_key(31)) != nullptr);
  try {
    rt.compiled(tiny_key(32));
    FAIL("expected SealedMiss");
  } catch (const SealedMiss& e) {
    CHECK(std::string(e.what()).find(tiny_key(32).to_text()) != std::string::npos);
  }
  CHECK(rt.stats().misses_after_seal == 1);
  CHECK(rt.stats().compiles == 1);
  CHECK_THROWS_AS(rt.get(tiny_key(33)), SealedMiss);
}

TEST_CASE("runtime: MOEJIT_STRICT=1 selects the strict policy when unset", "[runtime]") {
  TempDir dir;
  ::setenv("MOEJIT_STRICT", "1", 1);
  RuntimeOptions o;
  o.cache_dir = dir.path();
  Runtime strict(o);
  ::setenv("MOEJIT_STRICT", "0", 1);
  Runtime lax(o);
  ::unsetenv("MOEJIT_STRICT");
  CHECK(strict.seal_policy() == SealPolicy::strict);
  CHECK(lax.seal_policy() == SealPolicy::warn);
}

TEST_CASE("runtime: cache directory 0700, entries 0600", "[runtime][cache][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  const auto root = dir.path() / "fresh" / "cache";
  Runtime rt(options_for(root, tk));
  auto k = rt.compiled(tiny_key(41));
  cache::DiskCache dc(root);
  auto mode = [](const std::filesystem::path& p) {
    struct stat st{};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_mode & 0777;
  };
  CHECK(mode(root) == 0700);
  CHECK(mode(root / "entries") == 0700);
  CHECK(mode(root / "quarantine") == 0700);
  CHECK(mode(dc.entry_path(k->content_hash).parent_path()) == 0700);
  CHECK(mode(dc.entry_path(k->content_hash)) == 0600);
  CHECK(mode(dc.stamp_path(k->content_hash)) == 0600);
}

TEST_CASE("runtime: use_disk_cache=false writes nothing", "[runtime][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  auto opts = options_for(dir.path() / "unused", tk);
  opts.use_disk_cache = false;
  Runtime rt(opts);
  CHECK(rt.lookup_compiled(tiny_key(42)).origin == Origin::compiled);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "unused"));
}

TEST_CASE("runtime: get() without libcuda throws DriverError naming libcuda.so.1", "[runtime][driver][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  Runtime rt(options_for(dir.path(), tk));
  if (driver::open_first({"libcuda.so.1"}).handle) {
    if (driver::gpu_available()) {
      KernelRef ref = rt.get(tiny_key(43));
      CHECK(ref.function != nullptr);
      CHECK(ref.launch.block_threads == 128);
      CHECK(rt.get(tiny_key(43)).function == ref.function);
      CHECK(rt.stats().module_loads == 1);
    }
    return;
  }
  try {
    rt.get(tiny_key(43));
    FAIL("expected DriverError");
  } catch (const DriverError& e) {
    CHECK(std::string(e.what()).find("libcuda.so.1") != std::string::npos);
  }
  // The kernel was compiled (needs no GPU) and a second get() fails the same way.
  CHECK(rt.stats().compiles == 1);
  CHECK_THROWS_AS(rt.get(tiny_key(43)), DriverError);
}
