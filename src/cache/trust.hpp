#pragma once
// Which folders and files of a cache directory the cache trusts. The cache
// loads cubins that run on the GPU with the process's privileges, so every
// folder it reads or writes (the root, entries/, each shard folder,
// quarantine/) must be owned by the effective user and not writable by group
// or others, and no folder below the root may be a symbolic link
// (docs/cache-format.md, "Trust").
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace moejit::cache {

// Whose files the cache accepts.
enum class Ownership : unsigned char {
  private_only,  // folders and entries must be the effective user's, folders not writable by others (default)
  shared,        // any owner, any mode (MOEJIT_CACHE_ALLOW_SHARED=1, RuntimeOptions::allow_shared_cache)
};

// Why a cache directory cannot be trusted: "" when it is owned by the effective
// user and not writable by group or others; otherwise the reason, e.g.
// "it is writable by other users (mode 0777)". A missing directory is "".
// Follows a symbolic link (the root itself may be one).
std::string directory_trust_problem(const std::filesystem::path& dir);

// The same for a folder below the root, from its lstat()/fstat() result:
// a symbolic link or a non-directory is always refused; owner and mode only
// under Ownership::private_only.
std::string folder_trust_problem(const struct stat& st, Ownership ownership);

// Every folder of the layout that exists: the root (owner and mode under
// private_only), entries/ and quarantine/ (never a link or a non-directory;
// owner and mode under private_only) and each real shard folder entries/<xx>/
// (owner and mode under private_only; a shard that is a link is refused at
// load, entry by entry). "" when all are trusted, else "<path>: <why>" for the
// first refused one. The Runtime refuses the whole directory on it and
// moejit-prewarm exits 3.
std::string layout_trust_problem(const std::filesystem::path& dir, Ownership ownership);

// Problem of a file's owner under `ownership`: "" or "owned by uid 65534, not by
// the current user (uid 0)".
std::string owner_problem(std::uint32_t uid, Ownership ownership);

}  // namespace moejit::cache
