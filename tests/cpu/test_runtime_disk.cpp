// Runtime against unusual cache directories and several processes.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/cache_admin.hpp"
#include "cache/cache_stats.hpp"
#include "cache/content_address.hpp"
#include "cache/disk_cache.hpp"
#include "compiler/nvrtc_compiler.hpp"
#include "moejit/moe_layer.hpp"
#include "test_cache_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

TEST_CASE("runtime: cache dir that is a regular file -> memory only, one warning", "[runtime][cache][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  write_file(dir.path() / "file", "not a directory");
  TinyKernels tk;
  LogCapture log;
  Runtime rt(options_for(dir.path() / "file", tk));
  CHECK(log.count_containing("memory only") == 1);
  CHECK(rt.lookup_compiled(tiny_key(101)).origin == CompiledKernel::Origin::compiled);
  CHECK(rt.lookup_compiled(tiny_key(101)).origin == CompiledKernel::Origin::memory);
  CHECK(read_file(dir.path() / "file") == "not a directory");
}

TEST_CASE("runtime: publish failure warns once and serves from memory", "[runtime][cache][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  TinyKernels tk;
  // Block every shard folder: a regular file where entries/<2 hex>/ must go.
  fs::create_directories(dir.path() / "entries");
  for (int i = 0; i < 256; ++i) {
    char name[3];
    std::snprintf(name, sizeof name, "%02x", i);
    write_file(dir.path() / "entries" / name, "x");
  }
  LogCapture log;
  Runtime rt(options_for(dir.path(), tk));
  CHECK(rt.compiled(tiny_key(102))->cubin.size() > 0);
  CHECK(rt.compiled(tiny_key(103))->cubin.size() > 0);
  CHECK(rt.stats().compiles == 2);
  CHECK(log.count_containing("cannot write cache entry") == 1);
  CHECK(cache::list_entries(dir.path()).empty());
}

TEST_CASE("runtime: 4 processes on one cold directory compile a kernel once", "[runtime][cache][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  constexpr int kProcs = 4;
  std::vector<pid_t> pids;
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  for (int i = 0; i < kProcs; ++i) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(pipefd[1]);
      char c;
      (void)::read(pipefd[0], &c, 1);  // start together
      int rc = 1;
      try {
        TinyKernels tk;
        Runtime rt(options_for(dir.path(), tk));
        rc = rt.compiled(tiny_key(111))->cubin.empty() ? 1 : 0;
      } catch (...) {
        rc = 2;
      }
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  ::close(pipefd[0]);
  ::close(pipefd[1]);  // EOF releases every child at once
  for (pid_t pid : pids) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  auto stats = cache::read_stats(dir.path());
  CHECK(stats.compiles == 1);  // the entry lock serialized them; the others hit the disk
  CHECK(stats.disk_hits == kProcs - 1);
  CHECK(cache::verify_all(dir.path()).clean());
  CHECK(cache::list_entries(dir.path()).size() == 1);
}

TEST_CASE("runtime: compiled() carries the ptxas report of real MoE kernels, compiled and from disk",
          "[runtime][cache][nvrtc]") {
  REQUIRE_NVRTC();
  TempDir dir;
  MoeLayerShape s;
  s.hidden = 2880, s.intermediate = 2880, s.experts = 128, s.top_k = 4;
  s.act = Activation::swiglu_oai, s.act_alpha = 1.702f, s.act_limit = 7.f;
  s.gate_up_bias = s.down_bias = BiasKind::bf16;
  const auto keys = moe_layer_keys(s, QuantMode::w4a16_mxfp4, 1, Target{});
  RuntimeOptions o;
  o.cache_dir = dir.path();
  o.seal_policy = SealPolicy::warn;
  {
    Runtime rt(o);
    for (const SpecKey& k : keys) {
      INFO(k.to_text());
      const auto ck = rt.compiled(k);
      CHECK(ck->resources.registers > 0);
      CHECK(ck->resources.spill_store_bytes == 0);
      CHECK(rt.compiled(k)->resources.registers == ck->resources.registers);  // memory hit
    }
  }
  Runtime again(o);
  for (const SpecKey& k : keys) {
    INFO(k.to_text());
    CHECK(again.lookup_compiled(k).origin == CompiledKernel::Origin::disk);
    CHECK(again.compiled(k)->resources.registers > 0);
  }
}
