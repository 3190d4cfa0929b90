// Memory is bounded by what a valid entry can need: the 40-byte prefix and its
// declared sizes are checked against the file size and kMaxEntryBytes before a
// body is read. Large or sparse files (a valid-looking prefix over a hole)
// cost 40 bytes each: 16 threads loading 16 of them (a -j16 prewarm) and a
// verify over a directory of them stay far below the files' sizes in peak RSS.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include "cache/cache_admin.hpp"
#include "cache/disk_cache.hpp"
#include "cache/little_endian.hpp"
#include "cli/run_tool.hpp"
#include "moejit/error.hpp"

using namespace moejit;
namespace fs = std::filesystem;
using moejit::test::tool_path;

namespace {

constexpr std::uint64_t kSparseBytes = 64ull << 20;  // under the old 257 MiB limit, over the entry limit

// A sparse file at the entry path of `address` whose prefix declares exactly
// its size: a reader that trusted the prefix would allocate all of it.
void make_sparse_entry(const fs::path& dir, const Hash128& address, std::uint64_t size) {
  const fs::path p = cache::DiskCache(dir).entry_path(address);
  fs::create_directories(p.parent_path());
  fs::permissions(p.parent_path(), fs::perms::owner_all, fs::perm_options::replace);
  std::string prefix(cache::kEntryMagic, 8);
  cache::put_u32(prefix, cache::kEntryFormatVersion);
  cache::put_u32(prefix, 64);
  cache::put_u64(prefix, size - cache::kEntryPrefixBytes - 64);
  cache::put_u64(prefix, 0);
  cache::put_u64(prefix, 0);
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, prefix.data(), prefix.size()) == static_cast<ssize_t>(prefix.size()));
  REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0);
  ::close(fd);
}

Hash128 address_of(int i) {
  Hash128 h;
  h.hi = 0x1000000000000000ull * static_cast<std::uint64_t>(i % 16) + static_cast<std::uint64_t>(i);
  h.lo = 0xabcdef0000000000ull + static_cast<std::uint64_t>(i);
  return h;
}

// Runs `exe args` and returns its exit code and peak RSS (KiB).
std::pair<int, long> run_measured(const std::string& exe, const std::vector<std::string>& args,
                                  const std::vector<std::string>& env) {
  std::vector<std::string> argv_s{exe};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru{};
  while (::wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, ru.ru_maxrss};
}

}  // namespace

TEST_CASE("bounded memory: an entry whose prefix declares more than the limit is refused before its body is read",
          "[cache][hostile][memory]") {
  test::TempDir dir("sparse");
  make_sparse_entry(dir.path(), address_of(1), kSparseBytes);
  const cache::EntryCheck c = cache::DiskCache(dir.path()).inspect(address_of(1));
  REQUIRE(c.found);
  CHECK(!c.entry);
  CHECK_THAT(c.problem, Catch::Contains("exceed the entry limit of " + std::to_string(cache::kMaxEntryBytes)));
  // A prefix that declares sizes within the limit but not the file's size.
  make_sparse_entry(dir.path(), address_of(2), 1 << 20);
  ::truncate(cache::DiskCache(dir.path()).entry_path(address_of(2)).c_str(), kSparseBytes);
  CHECK_THAT(cache::DiskCache(dir.path()).inspect(address_of(2)).problem, Catch::StartsWith("size mismatch"));
  // The publisher refuses to write what no reader would accept.
  cache::Entry huge;
  huge.cubin.assign(cache::kMaxEntryBytes, '\0');
  CHECK_THROWS_WITH(cache::DiskCache(dir.path()).publish(address_of(3), huge), Catch::Contains("entry limit"));
}

// Peak resident memory of this process's own address space (VmHWM, KiB):
// unlike wait4's ru_maxrss it does not include the pages a forked child shared
// with its parent before exec.
long own_peak_kib() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

TEST_CASE("bounded memory (child): 16 threads load 16 oversized sparse entries, then verify runs over them",
          "[.][memory-child]") {
  const char* d = std::getenv("MOEJIT_TEST_SPARSE_DIR");
  const char* out = std::getenv("MOEJIT_TEST_RSS_OUT");
  REQUIRE(d != nullptr);
  REQUIRE(out != nullptr);
  const cache::DiskCache dc(d);
  std::vector<std::jthread> threads;
  std::atomic<int> refused{0};
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&, i] {
      const cache::LoadResult r = dc.load(address_of(i), cache::AddressPayload{});
      if (r.status == cache::LoadStatus::quarantined && r.reason.find("entry limit") != std::string::npos) ++refused;
    });
  threads.clear();
  REQUIRE(refused.load() == 16);
  const long load_kib = own_peak_kib();
  // moejit-cache verify, a child of this small process (its ru_maxrss starts
  // from this process's footprint, not from the test runner's).
  for (int i = 0; i < 16; ++i) make_sparse_entry(d, address_of(i), kSparseBytes);
  const fs::path exe = tool_path("moejit-cache");
  REQUIRE(!exe.empty());
  const auto [vrc, vkib] = run_measured(exe.string(), {"verify", "--cache-dir", d}, {});
  std::ofstream(out) << load_kib << " " << vrc << " " << vkib << "\n";
}

TEST_CASE("bounded memory: 16 concurrent loads and a verify over 64 MiB sparse entries stay under 150 MB RSS",
          "[cache][hostile][memory]") {
  test::TempDir dir("sparse");
  for (int i = 0; i < 16; ++i) make_sparse_entry(dir.path(), address_of(i), kSparseBytes);
  const fs::path rss = dir.path() / "rss.txt";
  const auto [rc, ignored] = run_measured("/proc/self/exe", {"[memory-child]"},
                                          {"MOEJIT_TEST_SPARSE_DIR=" + dir.path().string(),
                                           "MOEJIT_TEST_RSS_OUT=" + rss.string()});
  REQUIRE(rc == 0);
  long load_kib = 0, verify_kib = 0;
  int verify_rc = -1;
  std::ifstream(rss) >> load_kib >> verify_rc >> verify_kib;
  INFO("16 loads: peak RSS " << load_kib / 1024 << " MiB; verify: peak RSS " << verify_kib / 1024 << " MiB");
  CHECK(load_kib > 0);
  CHECK(load_kib < 150 * 1024);   // 16 x 64 MiB would be read by a reader that trusted the prefix
  CHECK(verify_rc == 1);          // every one is reported corrupt
  CHECK(verify_kib > 0);
  CHECK(verify_kib < 150 * 1024);
}
