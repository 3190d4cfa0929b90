#include "cache/pack.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cache/atomic_file.hpp"
#include "cache/disk_cache.hpp"
#include "moejit/error.hpp"

namespace moejit::cache {
namespace fs = std::filesystem;

namespace {

// pread of exactly n bytes at off; false on error or short file.
bool read_at(int fd, std::string& out, std::uint64_t off, std::uint64_t n, std::string& error) {
  out.resize(static_cast<std::size_t>(n));
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return error = std::strerror(errno), false;
    if (r == 0) return error = "file shorter than its index says (truncated?)", false;
    got += static_cast<std::size_t>(r);
  }
  return true;
}

const PackRecord* find_record(const PackHead& h, const Hash128& a) {
  auto it = std::lower_bound(h.index.begin(), h.index.end(), a, [](const PackRecord& r, const Hash128& x) {
    return r.address.hi < x.hi || (r.address.hi == x.hi && r.address.lo < x.lo);
  });
  return it != h.index.end() && it->address == a ? &*it : nullptr;
}

}  // namespace

std::shared_ptr<const Pack> Pack::open(const fs::path& path) {
  auto fail = [&](const std::string& why) { return Error("AOT pack " + path.string() + ": " + why); };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw fail(std::strerror(errno));
  std::shared_ptr<Pack> p(new Pack());
  p->fd_ = fd;
  p->path_ = path;
  struct stat st{};
  if (::fstat(fd, &st) != 0) throw fail(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw fail("not a regular file");
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  std::string bytes, error;
  if (!read_at(fd, bytes, 0, std::min<std::uint64_t>(size, kPackPrefixBytes), error)) throw fail(error);
  PackPrefix prefix;
  if (!parse_pack_prefix(bytes, size, prefix, error)) throw fail(error);
  if (!read_at(fd, bytes, 0, prefix.head_bytes(), error)) throw fail(error);
  if (!parse_pack_head(bytes, size, p->head_, error)) throw fail(error);
  return p;
}

Pack::~Pack() {
  if (fd_ >= 0) ::close(fd_);
}

std::string Pack::mismatch(std::string_view library_version, const std::optional<std::string>& nvrtc_version,
                           const std::optional<std::string>& target) const {
  const PackManifest& m = head_.manifest;
  if (m.moejit_version != library_version)
    return "library version: built by moejit " + m.moejit_version + ", this is moejit " + std::string(library_version);
  if (nvrtc_version && m.nvrtc_version != *nvrtc_version)
    return "NVRTC version: built with NVRTC " + m.nvrtc_version + ", this machine has NVRTC " + *nvrtc_version;
  if (target && m.target != *target) return "target: built for " + m.target + ", this process runs " + *target;
  return {};
}

Pack::Lookup Pack::load(const Hash128& address, const AddressPayload* expected) const {
  Lookup out;
  const PackRecord* r = find_record(head_, address);
  if (!r) return out;
  std::string blob, error;
  if (!read_at(fd_, blob, head_.blobs_offset + r->offset, r->length, error)) {
    out.status = Status::bad;
    out.reason = error;
    return out;
  }
  DecodeResult d = decode_pack_blob(head_, *r, blob);
  if (!d.entry) {
    out.status = Status::bad;
    out.reason = d.error;
    return out;
  }
  if (std::string why = check_entry(*d.entry, address, expected); !why.empty()) {
    out.status = Status::bad;
    out.reason = why;
    return out;
  }
  out.status = Status::hit;
  out.entry = std::move(d.entry);
  return out;
}

void check_pack_destination(const fs::path& out) {
  if (out.empty()) throw InvalidArgument("pack output: an empty path");
  std::error_code ec;
  if (fs::is_directory(out, ec)) throw InvalidArgument("pack output '" + out.string() + "' is a directory");
  // Why no create_directories: a typo in the output path must not silently make folders.
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  if (!fs::exists(parent, ec))
    throw InvalidArgument("pack output folder '" + parent.string() + "' does not exist");
  if (!fs::is_directory(parent, ec))
    throw InvalidArgument("pack output folder '" + parent.string() + "' is not a directory");
  // The pack is published by a rename in its folder: the folder must be writable.
  if (::access(parent.c_str(), W_OK | X_OK) != 0)
    throw InvalidArgument("pack output folder '" + parent.string() + "' is not writable: " + std::strerror(errno));
}

void write_pack(const fs::path& out, const PackManifest& manifest, const std::vector<Entry>& entries) {
  check_pack_destination(out);
  const std::string bytes = encode_pack(manifest, entries);
  AtomicFile f(out, Durability::fsync);
  f.write(bytes);
  // Why 0444 before the rename: the pack is immutable; a reader never sees it writable.
  ::chmod(f.temp_path().c_str(), 0444);
  f.commit();
}

std::vector<Entry> collect_entries(const fs::path& dir, std::vector<std::string>* skipped) {
  std::vector<Entry> out;
  const DiskCache dc(dir);
  const std::string refused = layout_trust_problem(dir, Ownership::private_only);
  for (const EntryInfo& info : list_entries(dir)) {
    std::string why;
    if (!refused.empty()) why = "cache directory refused: " + refused;
    else {
      EntryCheck c = dc.inspect(info.address);
      if (c.entry) out.push_back(std::move(*c.entry));
      else why = c.found ? c.problem : "vanished while reading";
    }
    if (!why.empty() && skipped) skipped->push_back(info.path.string() + ": " + why);
  }
  return out;
}

VerifyReport verify_pack(const fs::path& path) {
  VerifyReport report;
  std::shared_ptr<const Pack> pack;
  try {
    pack = Pack::open(path);
  } catch (const std::exception& e) {
    report.problems.push_back({path, ProblemKind::corrupt, e.what()});
    return report;
  }
  for (const PackRecord& r : pack->head().index) {
    Pack::Lookup l = pack->load(r.address, nullptr);
    if (l.status == Pack::Status::hit) ++report.entries_ok;
    else report.problems.push_back({path.string() + "#" + r.address.hex(), ProblemKind::corrupt, l.reason});
  }
  return report;
}

}  // namespace moejit::cache
