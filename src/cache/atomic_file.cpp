#include "cache/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include "moejit/error.hpp"

namespace moejit::cache {
namespace {

std::string errno_text(int e) { return std::strerror(e); }

std::string random_suffix() {
  static std::atomic<std::uint64_t> counter{0};
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uint64_t v = rng() ^ (counter.fetch_add(1, std::memory_order_relaxed) << 48);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::atomic<FaultInjector> g_fault{nullptr};

// errno to fail `op` with, or 0.
int injected(FsOp op, const std::filesystem::path& path) noexcept {
  FaultInjector f = g_fault.load(std::memory_order_relaxed);
  return f ? f(op, path) : 0;
}

}  // namespace

void set_fault_injector_for_testing(FaultInjector injector) noexcept { g_fault.store(injector); }

std::string_view to_string(FsOp op) noexcept {
  switch (op) {
    case FsOp::create_temp: return "create_temp";
    case FsOp::write: return "write";
    case FsOp::fsync: return "fsync";
    case FsOp::rename: return "rename";
    case FsOp::mkdir: return "mkdir";
  }
  return "unknown";
}

AtomicFile::AtomicFile(std::filesystem::path target, Durability durability)
    : target_(std::move(target)), durability_(durability) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    temp_ = target_;
    temp_ += std::string(kTempMarker) + std::to_string(::getpid()) + "." + random_suffix();
    if (int e = injected(FsOp::create_temp, temp_)) {
      errno = e;
      break;
    }
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ >= 0) return;
    if (errno != EEXIST) break;
  }
  int e = errno;
  throw Error("cannot create temp file " + temp_.string() + ": " + errno_text(e));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write(std::string_view bytes) {
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    ssize_t n;
    if (int e = injected(FsOp::write, temp_)) errno = e, n = -1;
    else n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      throw Error("cannot write " + temp_.string() + ": " + errno_text(e));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  if (int e = injected(FsOp::fsync, temp_)) {
    throw Error("cannot fsync " + temp_.string() + ": " + errno_text(e));
  }
  if (durability_ == Durability::fsync && ::fsync(fd_) != 0) {
    int e = errno;
    throw Error("cannot fsync " + temp_.string() + ": " + errno_text(e));
  }
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    int e = errno;
    throw Error("cannot close " + temp_.string() + ": " + errno_text(e));
  }
  const int fault = injected(FsOp::rename, target_);
  if (fault != 0 || ::rename(temp_.c_str(), target_.c_str()) != 0) {
    int e = fault != 0 ? fault : errno;
    throw Error("cannot rename " + temp_.string() + " to " + target_.string() + ": " + errno_text(e));
  }
  committed_ = true;
  if (durability_ == Durability::fsync) fsync_directory(target_.parent_path());
}

void fsync_directory(const std::filesystem::path& dir) noexcept {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

void create_private_directories(const std::filesystem::path& dir) {
  std::filesystem::path cur;
  for (const auto& part : dir) {
    cur /= part;
    if (cur.empty() || cur == cur.root_path()) continue;
    // An injected fault acts like a real one: an existing directory is EEXIST first.
    struct stat cst{};
    const int fault = ::stat(cur.c_str(), &cst) == 0 ? 0 : injected(FsOp::mkdir, cur);
    if (fault != 0 || (::mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST)) {
      int e = fault != 0 ? fault : errno;
      throw Error("cannot create cache directory " + cur.string() + ": " + errno_text(e));
    }
  }
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error("cache directory " + dir.string() + " is not a directory");
}

ReadResult read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
  ReadResult r;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT || e == ENOTDIR) r.status = ReadStatus::absent;  // ENOTDIR: a file where the shard folder should be
    else if (e == ELOOP) r.status = ReadStatus::not_regular, r.error = "is a symbolic link";
    else r.error = errno_text(e);
    return r;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    r.error = errno_text(errno);
    ::close(fd);
    return r;
  }
  r.dev = st.st_dev;
  r.ino = st.st_ino;
  r.uid = st.st_uid;
  if (!S_ISREG(st.st_mode)) {
    r.status = ReadStatus::not_regular;
    r.error = S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file";
    ::close(fd);
    return r;
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    r.error = "file of " + std::to_string(st.st_size) + " bytes exceeds the limit of " + std::to_string(max_bytes);
    ::close(fd);
    return r;
  }
  r.bytes.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < r.bytes.size()) {
    ssize_t n = ::read(fd, r.bytes.data() + got, r.bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      r.error = errno_text(errno);
      ::close(fd);
      return r;
    }
    if (n == 0) break;  // shrank under us: the decoder reports the truncation
    got += static_cast<std::size_t>(n);
  }
  r.bytes.resize(got);
  ::close(fd);
  r.status = ReadStatus::ok;
  return r;
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> file_identity(const std::filesystem::path& path) noexcept {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  return std::make_pair(static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino));
}

}  // namespace moejit::cache
