#pragma once
// Code shared by the command-line tools (moejit-prewarm, moejit-cache) and no
// part of the library: exit codes, size and duration parsing, human-readable
// formatting, cache directory checks.
// Library code never exits; the tools map exceptions to exit codes with exit_code_for().
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>

#include "moejit/error.hpp"

namespace moejit::tools {

// Documented in docs/exit-codes.md; stable, scripts depend on them.
enum class ExitCode : int {
  ok = 0,           // everything done
  failed = 1,       // the tool ran, but some kernels failed / some cache entries are bad
  usage = 2,        // bad arguments or a bad input file (one line on stderr)
  environment = 3,  // the machine cannot do it: NVRTC missing, cache directory unusable
  incomplete = 4,   // moejit-prewarm: the kernels were built, but some could not be written to the cache directory
};

// Bad command line or bad input file (exit code 2).
class UsageError : public Error {
 public:
  using Error::Error;
};
// The environment cannot do the job: NVRTC missing, cache directory unusable (exit code 3).
class EnvironmentError : public Error {
 public:
  using Error::Error;
};

// UsageError, InvalidArgument -> usage; EnvironmentError, DriverError,
// std::filesystem::filesystem_error -> environment; anything else -> failed.
ExitCode exit_code_for(const std::exception& e) noexcept;

// One line per error: moejit::one_line (moejit/error.hpp).
using moejit::one_line;

// A tool's main(): runs `run`, turns any exception into one line
// "<tool>: error: ..." on stderr and the exit code of exit_code_for().
int run_tool_main(const char* tool, int (*run)(int, char**), int argc, char** argv) noexcept;

// "4096", "512K", "10M", "1.5G", "2T", with an optional "B" / "iB" (case-insensitive);
// binary units (K = 1024). Throws UsageError naming `what` and the text.
std::uint64_t parse_byte_size(std::string_view text, std::string_view what = "size");

// "90s", "30m", "12h", "7d", "2w". A bare number is refused (is 7 seconds or
// days?). Throws UsageError naming `what` and the text.
std::chrono::seconds parse_duration(std::string_view text, std::string_view what = "duration");

// 1536 -> "1.5 KiB", 512 -> "512 B".
std::string format_bytes(std::uint64_t bytes);
// 950 -> "950 ms", 12500 -> "12.5 s", 125000 -> "2 min 5 s".
std::string format_ms(double ms);

// Creates `dir` (0700) if absent and checks that a file can be created in it
// and that every folder of it the cache uses (the root, entries/, quarantine/,
// each shard folder) is trusted (cache_admin::layout_trust_problem: owned by the
// user, not writable by others, no link below the root) unless
// MOEJIT_CACHE_ALLOW_SHARED=1. Throws EnvironmentError naming the folder and the reason.
void check_cache_dir_usable(const std::filesystem::path& dir);
// The same without creating or writing anything (moejit-prewarm --check): the
// directory must exist. Throws EnvironmentError.
void check_cache_dir_readable(const std::filesystem::path& dir);

}  // namespace moejit::tools
