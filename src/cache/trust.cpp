#include "cache/trust.hpp"

#include <unistd.h>

#include <cstdio>

namespace moejit::cache {
namespace fs = std::filesystem;

namespace {

std::string mode_text(const struct stat& st) {
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return mode;
}

// Owner and mode of a folder; "" when trusted.
std::string owner_and_mode(const struct stat& st) {
  // Why refuse: whoever can write into the folder can plant a cubin that this
  // process would load and run on the GPU with its privileges.
  if (st.st_uid != ::geteuid())
    return "it is owned by uid " + std::to_string(st.st_uid) + ", not by the current user (uid " +
           std::to_string(::geteuid()) + ")";
  if (st.st_mode & 022) return "it is writable by other users (mode " + mode_text(st) + ")";
  return {};
}

bool is_shard_name(const std::string& s) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  return s.size() == 2 && hex(s[0]) && hex(s[1]);
}

}  // namespace

std::string owner_problem(std::uint32_t uid, Ownership ownership) {
  if (ownership == Ownership::shared || uid == ::geteuid()) return {};
  return "owned by uid " + std::to_string(uid) + ", not by the current user (uid " + std::to_string(::geteuid()) +
         "); set MOEJIT_CACHE_ALLOW_SHARED=1 to accept other users' entries";
}

std::string directory_trust_problem(const fs::path& dir) {
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0) return {};
  return owner_and_mode(st);
}

std::string folder_trust_problem(const struct stat& st, Ownership ownership) {
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link (the cache never reads through a link below its root)";
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (ownership == Ownership::shared) return {};
  return owner_and_mode(st);
}

std::string layout_trust_problem(const fs::path& dir, Ownership ownership) {
  if (ownership == Ownership::private_only) {
    if (std::string why = directory_trust_problem(dir); !why.empty()) return dir.string() + ": " + why;
  }
  for (const char* sub : {"entries", "quarantine"}) {
    struct stat st{};
    const fs::path p = dir / sub;
    if (::lstat(p.c_str(), &st) != 0) continue;
    if (std::string why = folder_trust_problem(st, ownership); !why.empty()) return p.string() + ": " + why;
  }
  if (ownership == Ownership::shared) return {};
  std::error_code ec;
  for (fs::directory_iterator it(dir / "entries", ec), end; !ec && it != end; it.increment(ec)) {
    // Only real shard folders: anything else under entries/ is foreign (verify
    // reports it) and a shard that is a link is refused entry by entry (the
    // load moves it to quarantine), so neither is a way in.
    if (!is_shard_name(it->path().filename().string())) continue;
    struct stat st{};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (std::string why = owner_and_mode(st); !why.empty()) return it->path().string() + ": " + why;
  }
  return {};
}

}  // namespace moejit::cache
