#pragma once
// Administration of a cache directory (the layout: docs/cache-format.md), what
// `moejit-cache` is built on. None of these needs NVRTC or a GPU.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace moejit::cache_admin {

// Whose folders and entries a cache directory may hold (docs/cache-format.md,
// "Trust"): the cache loads cubins that run with the process's privileges.
enum class Ownership : std::uint8_t {
  // Every folder owned by the effective user and not writable by group or
  // others, no link below the root, entries owned by the user (the default).
  private_only,
  // Any owner and mode (MOEJIT_CACHE_ALLOW_SHARED=1, RuntimeOptions::allow_shared_cache).
  shared,
};
std::string_view to_string(Ownership);

// The rule a Runtime built without RuntimeOptions::allow_shared_cache applies:
// shared when MOEJIT_CACHE_ALLOW_SHARED is 1 / true / yes / on, else
// private_only. Read on each call. Never throws.
Ownership ownership_from_env() noexcept;

// Why the Runtime would refuse the cache directory `dir`: "" when every folder
// of its layout that exists (the root, entries/, quarantine/, each shard
// folder) is trusted under `ownership`, else "<folder>: <reason>" for the first
// refused one, e.g. "/c/entries: it is a symbolic link". A missing directory
// is "". Follows a link at the root itself. Never throws except bad_alloc.
std::string layout_trust_problem(const std::filesystem::path& dir, Ownership ownership);

}  // namespace moejit::cache_admin
