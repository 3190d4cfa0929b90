#pragma once
// Every environment variable moejit reads is read here, and only here
// (docs/environment.md lists them). Values are read on each call (cheap; callers
// that need a stable value read once at construction).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "moejit/tuning.hpp"

namespace moejit::util::env {

// Raw value of a variable; nullopt when unset. Empty counts as unset.
std::optional<std::string> raw(const char* name);

// Cache directory: $MOEJIT_CACHE_DIR, else $XDG_CACHE_HOME/moejit, else
// $HOME/.cache/moejit, else (no HOME) /tmp/moejit-<uid>. Relative values of
// XDG_CACHE_HOME are ignored, as the XDG spec asks.
std::filesystem::path cache_dir();

// MOEJIT_STRICT: "1", "true", "yes", "on" -> true; "0", "false", "no", "off", unset -> false.
// Any other value: false, and one warning naming it.
bool strict();

// MOEJIT_LOG_LEVEL: trace, debug, info, warn, error, critical, off (spdlog names);
// nullopt when unset.
std::optional<std::string> log_level();

// MOEJIT_CACHE_MAX_BYTES: decimal bytes with an optional K/M/G/T suffix (powers of
// 1024), e.g. "512M". nullopt when unset or 0 (no cap). Bad text: nullopt + warning.
std::optional<std::uint64_t> cache_max_bytes();

// MOEJIT_CACHE_ALLOW_SHARED: true ("1", "true", "yes", "on") lets the cache use a
// directory other users can write to or own, and entries owned by other users.
// Unset or false: refused. Any other value: false, and one warning naming it.
bool cache_allow_shared();

// MOEJIT_CACHE_PACK: path of a read-only AOT pack; nullopt when unset.
std::optional<std::filesystem::path> cache_pack();

// MOEJIT_GEMM_TUNE: the MXFP4 grouped GEMM tuning as text, e.g.
// "decode.kw=2,decode.depth=3,prefill.stages=4" (moejit/tuning.hpp,
// parse_gemm_tuning); empty when unset. Unlike the other variables, read and
// parsed once per process: every key's kernel must stay the same. Throws
// InvalidArgument naming the first bad item (on every call, as long as it is bad).
const GemmTuning& gemm_tuning();

// MOEJIT_NVRTC_LIBRARY: the libnvrtc to open (a path, or a name the dynamic
// loader searches) instead of libnvrtc.so.13, .so.12, .so; unset = those.
std::optional<std::string> nvrtc_library();

// Parses "123", "64K", "512M", "2G", "1T" (suffix case-insensitive, optional "B"/"iB").
// nullopt on bad text or overflow.
std::optional<std::uint64_t> parse_byte_size(const std::string& text);

}  // namespace moejit::util::env
