#include "cache/disk_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "cache/atomic_file.hpp"
#include "cache/entry_reader.hpp"
#include "moejit/error.hpp"
#include "util/logging.hpp"

namespace moejit::cache {
namespace fs = std::filesystem;

std::string check_entry(const Entry& entry, const Hash128& address, const AddressPayload* expected) {
  const AddressPayload& p = entry.header.payload;
  if (expected && !(p == *expected))
    return "payload differs from the expected one (" + p.first_difference(*expected) + ")";
  if (!(p.address() == address)) {
    char want[33], got[33];
    hash_hex(address, want);
    hash_hex(p.address(), got);
    return std::string("payload hashes to ") + got + ", not to the file name's " + want;
  }
  if (entry.cubin.empty()) return "empty cubin";
  if (entry.header.lowered_name.empty()) return "empty lowered_name";
  return {};
}

DiskCache::DiskCache(fs::path dir, Ownership ownership) : dir_(std::move(dir)), ownership_(ownership) {}

namespace {
std::string hex_of(const Hash128& h) {
  char buf[33];
  hash_hex(h, buf);
  return buf;
}
}  // namespace

fs::path DiskCache::entry_path(const Hash128& a) const {
  std::string hex = hex_of(a);
  return entries_dir() / hex.substr(0, 2) / (hex + ".entry");
}
fs::path DiskCache::lock_path(const Hash128& a) const {
  std::string hex = hex_of(a);
  return entries_dir() / hex.substr(0, 2) / (hex + ".lock");
}
fs::path DiskCache::stamp_path(const Hash128& a) const {
  std::string hex = hex_of(a);
  return entries_dir() / hex.substr(0, 2) / (hex + ".used");
}

void DiskCache::ensure_layout() const {
  create_private_directories(entries_dir());
  create_private_directories(quarantine_dir());
}

LoadResult DiskCache::load(const Hash128& address, const AddressPayload& expected) const {
  // Why a retry: another process may replace a bad entry with a good one between
  // our read and our quarantine; we then re-read instead of quarantining theirs.
  for (int attempt = 0;; ++attempt) {
    LoadResult r = load_once(address, expected, attempt < 2);
    if (r.status != LoadStatus::absent || r.reason.empty()) return r;
  }
}

EntryCheck DiskCache::inspect(const Hash128& address, FormatVersions versions) const {
  EntryCheck c;
  EntryRead file = read_entry_file(dir_, address, ownership_, versions);
  if (file.status == EntryReadStatus::absent) return c;
  c.found = true;
  c.dev = file.dev;
  c.ino = file.ino;
  c.format_version = file.format_version;
  c.bad_path = entry_path(address);
  if (file.status == EntryReadStatus::bad_folder) {
    c.bad_folder = true;
    c.bad_path = file.folder_path;
    c.problem = "folder " + file.folder_path.string() + " refused: " + file.error;
    return c;
  }
  if (file.status == EntryReadStatus::bad) {
    c.problem = file.error;
    return c;
  }
  DecodeResult d = decode_entry(file.bytes, versions);
  if (!d.entry) c.problem = d.error;
  else if (std::string why = check_entry(*d.entry, address, nullptr); !why.empty()) c.problem = why;
  else c.entry = std::move(d.entry);
  return c;
}

LoadResult DiskCache::load_once(const Hash128& address, const AddressPayload& expected, bool may_retry) const {
  LoadResult out;
  const fs::path path = entry_path(address);
  EntryCheck c;
  {
    // Why only a non-blocking attempt: an exclusive holder is a publisher (the
    // rename makes reading safe anyway) or an evictor (we then see no entry and
    // compile); waiting would stall a lookup for a whole compile.
    // Only in a real shard folder: the lock file is never created through a link.
    struct stat st{};
    const bool real_folder = ::lstat(path.parent_path().c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    FileLock reading = real_folder ? FileLock::try_acquire_shared(lock_path(address)) : FileLock{};
    c = inspect(address);
  }
  if (!c.found) return out;
  std::string reason = c.problem;
  if (reason.empty()) {
    if (std::string why = check_entry(*c.entry, address, &expected); !why.empty()) {
      reason = why;
    } else {
      out.status = LoadStatus::hit;
      out.entry = std::move(c.entry);
      return out;
    }
  }
  if (may_retry && !c.bad_folder && c.ino != 0) {
    auto now = file_identity(path);
    if (!now || *now != std::make_pair(c.dev, c.ino)) {
      out.status = LoadStatus::absent;
      out.reason = "replaced while reading";  // signals load() to re-read
      return out;
    }
  }
  out.status = LoadStatus::quarantined;
  out.reason = reason;
  if (read_only_) {
    util::logger()->warn("cache entry {} is bad ({}); the cache directory is read-only, so it stays in place and "
                         "the kernel is compiled into memory",
                         c.bad_path.string(), reason);
    return out;
  }
  out.quarantined_to = quarantine(c.bad_path, reason);
  return out;
}

void DiskCache::publish(const Hash128& address, const Entry& entry) const {
  if (read_only_) throw Error("cache directory " + dir_.string() + " is read-only");
  const fs::path path = entry_path(address);
  const std::string bytes = encode_entry(entry);
  if (bytes.size() > kMaxEntryBytes)
    throw Error("entry of " + std::to_string(bytes.size()) + " bytes exceeds the entry limit of " +
                std::to_string(kMaxEntryBytes) + " bytes");
  for (int attempt = 0;; ++attempt) {
    create_private_directories(path.parent_path());
    // Why check the shard folder itself: create_private_directories follows a
    // link; the cache never writes through one (docs/cache-format.md, Trust).
    struct stat st{};
    if (::lstat(path.parent_path().c_str(), &st) == 0) {
      if (std::string why = folder_trust_problem(st, ownership_); !why.empty())
        throw Error("cache folder " + path.parent_path().string() + " refused: " + why);
    }
    try {
      AtomicFile f(path, Durability::fsync);
      f.write(bytes);
      f.commit();
      break;
    } catch (const Error&) {
      // Why one retry: prune removes empty shard folders; one may vanish between
      // the mkdir and the temp file's creation.
      std::error_code ec;
      if (attempt == 0 && !fs::exists(path.parent_path(), ec)) continue;
      throw;
    }
  }
  touch(address);
}

FileLock DiskCache::lock_entry(const Hash128& address, std::chrono::milliseconds timeout) const {
  if (read_only_) return FileLock{};
  const fs::path p = lock_path(address);
  std::error_code ec;
  if (fs::is_symlink(p.parent_path(), ec)) return FileLock{};  // load() quarantines it; never lock through a link
  if (!fs::is_directory(p.parent_path(), ec)) {
    try {
      create_private_directories(p.parent_path());
    } catch (...) {
      return FileLock{};
    }
  }
  return FileLock::acquire(p, timeout);
}

void DiskCache::touch(const Hash128& address) const noexcept {
  if (read_only_) return;
  const fs::path p = stamp_path(address);
  // Why a separate stamp file and not the entry's atime/mtime: atime is often
  // disabled (noatime/relatime), and rewriting the entry's mtime would make an
  // entry look fresh to a concurrent `verify` of a half-copied cache.
  if (::utimensat(AT_FDCWD, p.c_str(), nullptr, AT_SYMLINK_NOFOLLOW) == 0) return;
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) ::close(fd);
}

fs::path DiskCache::quarantine(const fs::path& path, std::string_view reason, bool log) const noexcept {
  static std::atomic<unsigned> counter{0};
  try {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    fs::path dest = quarantine_dir() / (path.filename().string() + "." + stamp + "." + std::to_string(::getpid()) +
                                        "." + std::to_string(counter.fetch_add(1)));
    std::error_code ec;
    create_private_directories(quarantine_dir());
    if (::rename(path.c_str(), dest.c_str()) == 0) {
      if (log)
        util::logger()->warn("cache entry {} is bad ({}); moved to {}; it will be recompiled", path.string(), reason,
                           dest.string());
      return dest;
    }
    if (errno == ENOENT) return {};  // another process moved or replaced it first
    fs::remove_all(path, ec);
    if (log)
      util::logger()->warn("cache entry {} is bad ({}); could not move it to quarantine, {}; it will be recompiled",
                         path.string(), reason, ec ? "and could not remove it: " + ec.message() : "removed it");
  } catch (...) {
  }
  return {};
}

}  // namespace moejit::cache
