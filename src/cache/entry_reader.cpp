#include "cache/entry_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cache/entry_format.hpp"

namespace moejit::cache {
namespace fs = std::filesystem;

namespace {

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads exactly n bytes at the current offset into out (appending); false on
// error; a short read (file shrank) just stops: the decoder reports truncation.
bool read_n(int fd, std::string& out, std::size_t n, std::string& error) {
  const std::size_t start = out.size();
  out.resize(start + n);
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, out.data() + start + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return error = std::strerror(errno), false;
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  out.resize(start + got);
  return true;
}

// Opens folder `name` below `parent` without following a link and checks it.
// Returns -1 with status absent (missing, or a file where the folder should be)
// or bad_folder (error set).
int open_folder(int parent, const fs::path& path, const char* name, Ownership ownership, EntryRead& r) {
  int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return r.status = EntryReadStatus::absent, -1;
    struct stat lst{};
    if (e == ENOTDIR && ::fstatat(parent, name, &lst, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISLNK(lst.st_mode))
      return r.status = EntryReadStatus::absent, -1;  // a plain file: foreign debris, nothing to read through it
    r.status = EntryReadStatus::bad_folder;
    r.folder_path = path;
    r.error = (e == ELOOP || e == ENOTDIR) ? "it is a symbolic link (the cache never reads through a link below its root)"
                                           : std::strerror(e);
    return -1;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    r.status = EntryReadStatus::bad_folder;
    r.folder_path = path;
    r.error = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  if (std::string why = folder_trust_problem(st, ownership); !why.empty()) {
    r.status = EntryReadStatus::bad_folder;
    r.folder_path = path;
    r.error = why;
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

EntryRead read_entry_file(const fs::path& dir, const Hash128& address, Ownership ownership,
                          FormatVersions versions) {
  EntryRead r;
  const std::string hex = address.hex();
  const std::string shard = hex.substr(0, 2);
  const std::string name = hex + ".entry";
  Fd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) return r;  // absent
  Fd entries(open_folder(root.get(), dir / "entries", "entries", ownership, r));
  if (entries.get() < 0) return r;
  Fd sub(open_folder(entries.get(), dir / "entries" / shard, shard.c_str(), ownership, r));
  if (sub.get() < 0) return r;
  Fd fd(::openat(sub.get(), name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) {
    const int e = errno;
    if (e == ENOENT) return r;
    r.status = EntryReadStatus::bad;
    r.error = e == ELOOP ? "is a symbolic link" : std::strerror(e);
    return r;
  }
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) {
    r.status = EntryReadStatus::bad;
    r.error = std::strerror(errno);
    return r;
  }
  r.dev = st.st_dev;
  r.ino = st.st_ino;
  r.status = EntryReadStatus::bad;
  if (!S_ISREG(st.st_mode)) return r.error = S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file", r;
  if (std::string why = owner_problem(st.st_uid, ownership); !why.empty()) return r.error = why, r;
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  // Why the prefix first: a file of any size (sparse, or a valid-looking prefix
  // declaring huge sizes) costs 40 bytes of memory until its declared sizes are
  // known to match the file and the limit.
  if (!read_n(fd.get(), r.bytes, kEntryPrefixBytes, r.error)) return r.error = "unreadable: " + r.error, r;
  r.format_version = entry_format_version(r.bytes);
  if (std::string why = entry_prefix_problem(r.bytes, size, versions); !why.empty()) return r.error = why, r;
  if (!read_n(fd.get(), r.bytes, static_cast<std::size_t>(size - kEntryPrefixBytes), r.error))
    return r.error = "unreadable: " + r.error, r;
  r.status = EntryReadStatus::ok;
  return r;
}

}  // namespace moejit::cache
