#pragma once
// A mounted AOT pack (format: pack_format.hpp) and writing one.
// Reading uses pread on an fd kept open (no mmap: a pack truncated under a
// reader gives an error, never SIGBUS); thread-safe after open().
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cache/cache_admin.hpp"
#include "cache/pack_format.hpp"

namespace moejit::cache {

class Pack {
 public:
  // Opens `path` and checks prefix, manifest and index (blobs are checked when
  // loaded). Throws Error "AOT pack <path>: <reason>".
  static std::shared_ptr<const Pack> open(const std::filesystem::path& path);
  ~Pack();
  Pack(const Pack&) = delete;
  Pack& operator=(const Pack&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }
  const PackHead& head() const noexcept { return head_; }
  const PackManifest& manifest() const noexcept { return head_.manifest; }

  // Why this pack cannot serve this process: "" when it can, else e.g.
  // "built by moejit 0.1.0, this is moejit 0.2.0". nvrtc_version / target:
  // nullopt = not checked (no NVRTC on this machine; target unknown).
  std::string mismatch(std::string_view library_version, const std::optional<std::string>& nvrtc_version,
                       const std::optional<std::string>& target) const;

  enum class Status : unsigned char { absent, hit, bad };
  struct [[nodiscard]] Lookup {
    Status status = Status::absent;
    std::optional<Entry> entry;  // hit
    std::string reason;          // bad: why
  };
  // The entry at `address`, verified (blob checksum, entry format, payload ==
  // expected when given). Never throws except bad_alloc.
  Lookup load(const Hash128& address, const AddressPayload* expected) const;

 private:
  Pack() = default;
  std::filesystem::path path_;
  PackHead head_;
  int fd_ = -1;
};

// Throws InvalidArgument naming the path when a pack cannot be written at
// `out`: empty, a directory, its folder missing (none is created), not a
// directory or not writable. Called before the work that fills a pack.
void check_pack_destination(const std::filesystem::path& out);

// Writes `entries` as a pack at `out` (AtomicFile + fsync, then mode 0444).
// Throws InvalidArgument (entries of mixed versions/targets, a destination
// check_pack_destination refuses), Error (I/O).
void write_pack(const std::filesystem::path& out, const PackManifest& manifest, const std::vector<Entry>& entries);

// Every verified entry of a cache directory (corrupt ones are skipped and
// listed in `skipped`), for `moejit-cache export`.
std::vector<Entry> collect_entries(const std::filesystem::path& dir, std::vector<std::string>* skipped);

// Checks every blob and the key coverage of a pack. Never throws except bad_alloc
// (an unopenable pack is one problem).
VerifyReport verify_pack(const std::filesystem::path& path);

}  // namespace moejit::cache
