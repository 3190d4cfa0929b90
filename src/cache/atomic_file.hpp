#pragma once
// Crash-safe publication of one file: write a private temp file in the target's
// directory, fsync it, rename() it over the target, fsync the directory.
// Readers see the old file or the complete new one, never a partial one.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <utility>
#include <string>
#include <string_view>

namespace moejit::cache {

enum class Durability : unsigned char {
  fsync,  // fsync file and directory (cache entries)
  none,   // rename only (statistics: losing an update at a crash is acceptable)
};

class AtomicFile {
 public:
  // Creates "<target>.tmp.<pid>.<random>" with O_CREAT|O_EXCL, mode 0600.
  // Throws Error naming the path and errno text.
  explicit AtomicFile(std::filesystem::path target, Durability durability = Durability::fsync);
  // Removes the temp file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends bytes (retries short writes and EINTR). Throws Error (e.g. ENOSPC, EFBIG).
  void write(std::string_view bytes);
  // fsync + close + rename + fsync(dir). Throws Error; the temp file is removed then.
  void commit();

  const std::filesystem::path& temp_path() const noexcept { return temp_; }
  const std::filesystem::path& target() const noexcept { return target_; }

 private:
  std::filesystem::path target_, temp_;
  Durability durability_;
  int fd_ = -1;
  bool committed_ = false;
};

// Marker that every temp file name contains; verify/sweep recognize debris by it.
inline constexpr std::string_view kTempMarker = ".tmp.";

// Why 10 minutes: a publish takes milliseconds (write + fsync + rename of one
// cubin); a temp file this old belongs to a process that died mid-publish.
inline constexpr std::chrono::seconds kDefaultTempMaxAge{600};

// File-system operations that the test-only fault injector can fail.
enum class FsOp : unsigned char {
  create_temp,  // AtomicFile: open(O_CREAT|O_EXCL) of the temp file
  write,        // AtomicFile::write: each write() call
  fsync,        // AtomicFile::commit: fsync of the temp file
  rename,       // AtomicFile::commit: rename over the target
  mkdir,        // create_private_directories: each mkdir()
};
std::string_view to_string(FsOp op) noexcept;

// TEST-ONLY hook: when set, called before each operation above with the path it
// acts on; a non-zero return value is used as the errno the operation fails
// with (EROFS, ENOSPC, EIO, ...), 0 lets it proceed. It may also stop the
// process (crash tests raise SIGKILL at a chosen step). Library and tool code
// never set it; nullptr (the default) costs one relaxed atomic load per operation.
using FaultInjector = int (*)(FsOp op, const std::filesystem::path& path) noexcept;
void set_fault_injector_for_testing(FaultInjector injector) noexcept;

// fsync() of a directory (Why: rename() is durable only once the directory entry
// is; ext4/xfs with data=ordered usually are, NFS and others not). Never throws.
void fsync_directory(const std::filesystem::path& dir) noexcept;

// Creates `dir` and missing parents with mode 0700 (existing ones untouched).
// Throws Error naming the path.
void create_private_directories(const std::filesystem::path& dir);

enum class ReadStatus : unsigned char { ok, absent, not_regular, error };
struct [[nodiscard]] ReadResult {
  ReadStatus status = ReadStatus::error;
  std::string bytes;
  std::string error;  // for not_regular / error: why (errno text, "is a directory", "is a symlink")
  std::uint64_t dev = 0, ino = 0;  // identity of what was opened (when it could be)
  std::uint32_t uid = 0;           // owner of what was opened (when it could be)
};
// Identity (st_dev, st_ino) of `path` itself (lstat); nullopt when absent.
std::optional<std::pair<std::uint64_t, std::uint64_t>> file_identity(const std::filesystem::path& path) noexcept;
// Reads a whole regular file without following a final symlink (O_NOFOLLOW),
// refusing files larger than max_bytes. Never throws (except bad_alloc).
ReadResult read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes);

}  // namespace moejit::cache
