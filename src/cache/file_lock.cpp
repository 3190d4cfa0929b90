#include "cache/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <thread>
#include <utility>

namespace moejit::cache {
namespace {
int open_lock_file(const std::filesystem::path& path) {
  return ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
}
}  // namespace

FileLock FileLock::acquire(const std::filesystem::path& path, std::chrono::milliseconds timeout) {
  FileLock l;
  int fd = open_lock_file(path);
  if (fd < 0) return l;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  // Why poll instead of a blocking flock: a peer stopped in a debugger (or hung)
  // must not block this process forever; after the timeout we compile anyway.
  while (true) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      l.fd_ = fd;
      return l;
    }
    if (errno != EWOULDBLOCK && errno != EINTR) break;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  ::close(fd);
  return l;
}

FileLock FileLock::try_acquire(const std::filesystem::path& path) {
  return acquire(path, std::chrono::milliseconds(0));
}

FileLock FileLock::try_acquire_shared(const std::filesystem::path& path) {
  FileLock l;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT) fd = open_lock_file(path);
  if (fd < 0) return l;
  if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
    l.fd_ = fd;
    return l;
  }
  ::close(fd);
  return l;
}

FileLock::~FileLock() { release(); }

FileLock::FileLock(FileLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

void FileLock::release() noexcept {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
    fd_ = -1;
  }
}

}  // namespace moejit::cache
