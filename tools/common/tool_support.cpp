#include "common/tool_support.hpp"

#include "moejit/cache_admin.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace moejit::tools {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Parses a non-negative decimal number at the start of `text`; returns the rest.
bool leading_number(std::string_view text, double& value, std::string_view& rest) {
  std::size_t i = 0;
  bool digits = false, dot = false;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || (text[i] == '.' && !dot))) {
    if (text[i] == '.') dot = true; else digits = true;
    ++i;
  }
  if (!digits) return false;
  value = std::stod(std::string(text.substr(0, i)));
  rest = text.substr(i);
  return true;
}

}  // namespace

ExitCode exit_code_for(const std::exception& e) noexcept {
  if (dynamic_cast<const UsageError*>(&e) || dynamic_cast<const InvalidArgument*>(&e)) return ExitCode::usage;
  if (dynamic_cast<const EnvironmentError*>(&e) || dynamic_cast<const DriverError*>(&e) ||
      dynamic_cast<const std::filesystem::filesystem_error*>(&e))
    return ExitCode::environment;
  return ExitCode::failed;
}


int run_tool_main(const char* tool, int (*run)(int, char**), int argc, char** argv) noexcept {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool, one_line(e).c_str());
    return static_cast<int>(exit_code_for(e));
  } catch (...) {
    std::fprintf(stderr, "%s: error: unknown exception\n", tool);
    return static_cast<int>(ExitCode::failed);
  }
}

std::uint64_t parse_byte_size(std::string_view text, std::string_view what) {
  double value = 0;
  std::string_view rest;
  auto bad = [&] {
    return UsageError(std::string(what) + ": '" + std::string(text) +
                      "' is not a size (examples: 4096, 512K, 10M, 1.5G, 2T)");
  };
  if (!leading_number(text, value, rest)) throw bad();
  std::string unit = lower(rest);
  if (unit.size() >= 2 && unit.substr(unit.size() - 2) == "ib") unit.resize(unit.size() - 2);
  else if (unit.size() >= 1 && unit.back() == 'b') unit.pop_back();
  double scale = 1;
  if (unit == "") scale = 1;
  else if (unit == "k") scale = 1024.0;
  else if (unit == "m") scale = 1024.0 * 1024;
  else if (unit == "g") scale = 1024.0 * 1024 * 1024;
  else if (unit == "t") scale = 1024.0 * 1024 * 1024 * 1024;
  else throw bad();
  const double bytes = std::floor(value * scale);
  if (bytes > 1.8e19) throw bad();
  return static_cast<std::uint64_t>(bytes);
}

std::chrono::seconds parse_duration(std::string_view text, std::string_view what) {
  double value = 0;
  std::string_view rest;
  auto bad = [&] {
    return UsageError(std::string(what) + ": '" + std::string(text) +
                      "' is not a duration (examples: 90s, 30m, 12h, 7d, 2w)");
  };
  if (!leading_number(text, value, rest)) throw bad();
  const std::string unit = lower(rest);
  double scale = 0;
  if (unit.empty())
    throw UsageError(std::string(what) + ": '" + std::string(text) +
                     "' has no unit; add s, m, h, d or w (e.g. " + std::string(text) + "d for days)");
  if (unit == "s") scale = 1;
  else if (unit == "m" || unit == "min") scale = 60;
  else if (unit == "h") scale = 3600;
  else if (unit == "d") scale = 86400;
  else if (unit == "w") scale = 7 * 86400;
  else throw bad();
  const double secs = value * scale;
  if (secs > 1e15) throw bad();
  return std::chrono::seconds(static_cast<std::int64_t>(secs));
}

std::string format_bytes(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) { v /= 1024; ++u; }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::string format_ms(double ms) {
  char buf[48];
  if (ms < 1000) std::snprintf(buf, sizeof buf, "%.0f ms", ms);
  else if (ms < 60000) std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000);
  else {
    const long long s = static_cast<long long>(ms / 1000 + 0.5);
    std::snprintf(buf, sizeof buf, "%lld min %lld s", s / 60, s % 60);
  }
  return buf;
}

namespace {
void check_trust(const std::filesystem::path& dir) {
  const cache_admin::Ownership ownership = cache_admin::ownership_from_env();
  if (std::string why = cache_admin::layout_trust_problem(dir, ownership); !why.empty())
    throw EnvironmentError("cache directory '" + dir.string() + "' refused: " + why +
                           (ownership == cache_admin::Ownership::private_only
                                ? " (set MOEJIT_CACHE_ALLOW_SHARED=1 to share it on purpose)"
                                : ""));
}
}  // namespace

void check_cache_dir_readable(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (dir.empty()) throw EnvironmentError("cache directory: empty path");
  if (!fs::exists(dir, ec))
    throw EnvironmentError("cache directory '" + dir.string() + "' does not exist (--cache-dir or MOEJIT_CACHE_DIR)");
  if (!fs::is_directory(dir, ec))
    throw EnvironmentError("cache directory '" + dir.string() + "' exists and is not a directory");
  check_trust(dir);
}

void check_cache_dir_usable(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (dir.empty()) throw EnvironmentError("cache directory: empty path");
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw EnvironmentError("cache directory '" + dir.string() + "' exists and is not a directory");
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) throw EnvironmentError("cannot create cache directory '" + dir.string() + "': " + ec.message());
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  }
  check_trust(dir);
  // Why a real probe file and not access(W_OK): access() ignores read-only
  // mounts on some file systems and ACLs; creating a file is the real test.
  const fs::path probe = dir / (".probe-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0)
    throw EnvironmentError("cache directory '" + dir.string() + "' is not writable: " + std::strerror(errno) +
                           " (moejit-prewarm --check checks a read-only cache without writing)");
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace moejit::tools
