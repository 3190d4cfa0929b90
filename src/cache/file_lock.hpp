#pragma once
// Advisory whole-file lock (flock) on a lock file, RAII. Used to avoid duplicate
// compiles across processes and to serialize statistics updates. Correctness
// never depends on it: publication is atomic with or without the lock.
#include <chrono>
#include <filesystem>

namespace moejit::cache {

class FileLock {
 public:
  FileLock() = default;
  // Opens/creates `path` (0600) and takes an exclusive flock, polling until
  // `timeout` passes. locked() tells whether it was obtained; never throws
  // (a read-only directory or a timeout simply yields an unlocked FileLock).
  static FileLock acquire(const std::filesystem::path& path, std::chrono::milliseconds timeout);
  // Non-blocking attempt.
  static FileLock try_acquire(const std::filesystem::path& path);
  // Non-blocking shared flock (readers of an entry): coexists with other shared
  // holders, excludes an exclusive one (an evictor or a publisher). Opens the
  // file read-only when it exists, so it works in a read-only directory too.
  static FileLock try_acquire_shared(const std::filesystem::path& path);

  ~FileLock();
  FileLock(FileLock&& o) noexcept;
  FileLock& operator=(FileLock&& o) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  bool locked() const noexcept { return fd_ >= 0; }
  void release() noexcept;

 private:
  int fd_ = -1;
};

}  // namespace moejit::cache
