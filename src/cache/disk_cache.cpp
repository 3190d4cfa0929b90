#include "cache/disk_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "cache/atomic_file.hpp"
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

std::string owner_problem(std::uint32_t uid, Ownership ownership) {
  if (ownership == Ownership::shared || uid == ::geteuid()) return {};
  return "owned by uid " + std::to_string(uid) + ", not by the current user (uid " + std::to_string(::geteuid()) +
         "); set MOEJIT_CACHE_ALLOW_SHARED=1 to accept other users' entries";
}

std::string directory_trust_problem(const fs::path& dir) {
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0) return {};
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  // Why refuse: whoever can write into the directory can plant a cubin that this
  // process would load and run on the GPU with its privileges.
  if (st.st_uid != ::geteuid())
    return "it is owned by uid " + std::to_string(st.st_uid) + ", not by the current user (uid " +
           std::to_string(::geteuid()) + ")";
  if (st.st_mode & 022) return std::string("it is writable by other users (mode ") + mode + ")";
  return {};
}

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

LoadResult DiskCache::load_once(const Hash128& address, const AddressPayload& expected, bool may_retry) const {
  LoadResult out;
  const fs::path path = entry_path(address);
  ReadResult file;
  {
    // Why only a non-blocking attempt: an exclusive holder is a publisher (the
    // rename makes reading safe anyway) or an evictor (we then see no entry and
    // compile); waiting would stall a lookup for a whole compile.
    FileLock reading = FileLock::try_acquire_shared(lock_path(address));
    file = read_regular_file(path, kMaxEntryBytes + (1 << 20));
  }
  if (file.status == ReadStatus::absent) return out;
  std::string reason;
  if (file.status != ReadStatus::ok) {
    reason = "unreadable: " + file.error;
  } else if (std::string why = owner_problem(file.uid, ownership_); !why.empty()) {
    reason = why;
  } else {
    DecodeResult d = decode_entry(file.bytes);
    if (!d.entry) reason = d.error;
    else if (std::string why = check_entry(*d.entry, address, &expected); !why.empty()) reason = why;
    else {
      out.status = LoadStatus::hit;
      out.entry = std::move(d.entry);
      return out;
    }
  }
  if (may_retry && file.ino != 0) {
    auto now = file_identity(path);
    if (!now || *now != std::make_pair(file.dev, file.ino)) {
      out.status = LoadStatus::absent;
      out.reason = "replaced while reading";  // signals load() to re-read
      return out;
    }
  }
  out.status = LoadStatus::quarantined;
  out.reason = reason;
  out.quarantined_to = quarantine(path, reason);
  return out;
}

void DiskCache::publish(const Hash128& address, const Entry& entry) const {
  const fs::path path = entry_path(address);
  create_private_directories(path.parent_path());
  {
    AtomicFile f(path, Durability::fsync);
    f.write(encode_entry(entry));
    f.commit();
  }
  touch(address);
}

FileLock DiskCache::lock_entry(const Hash128& address, std::chrono::milliseconds timeout) const {
  const fs::path p = lock_path(address);
  std::error_code ec;
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
  const fs::path p = stamp_path(address);
  // Why a separate stamp file and not the entry's atime/mtime: atime is often
  // disabled (noatime/relatime), and rewriting the entry's mtime would make an
  // entry look fresh to a concurrent `verify` of a half-copied cache.
  if (::utimensat(AT_FDCWD, p.c_str(), nullptr, AT_SYMLINK_NOFOLLOW) == 0) return;
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) ::close(fd);
}

fs::path DiskCache::quarantine(const fs::path& path, std::string_view reason) const noexcept {
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
      util::logger()->warn("cache entry {} is bad ({}); moved to {}; it will be recompiled", path.string(), reason,
                           dest.string());
      return dest;
    }
    if (errno == ENOENT) return {};  // another process moved or replaced it first
    fs::remove_all(path, ec);
    util::logger()->warn("cache entry {} is bad ({}); could not move it to quarantine, {}; it will be recompiled",
                         path.string(), reason, ec ? "and could not remove it: " + ec.message() : "removed it");
  } catch (...) {
  }
  return {};
}

}  // namespace moejit::cache
