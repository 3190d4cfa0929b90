#include "util/env.hpp"

#include <unistd.h>

#include <cctype>
#include <cstdlib>

#include "util/logging.hpp"

namespace moejit::util::env {

std::optional<std::string> raw(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::filesystem::path cache_dir() {
  if (auto v = raw("MOEJIT_CACHE_DIR")) return std::filesystem::path(*v);
  if (auto v = raw("XDG_CACHE_HOME"); v && std::filesystem::path(*v).is_absolute())
    return std::filesystem::path(*v) / "moejit";
  if (auto v = raw("HOME")) return std::filesystem::path(*v) / ".cache" / "moejit";
  return std::filesystem::path("/tmp") / ("moejit-" + std::to_string(::getuid()));
}

namespace {
std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

namespace {
bool flag(const char* name) {
  auto v = raw(name);
  if (!v) return false;
  std::string s = lower(*v);
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  logger()->warn("{}={} is not one of 1/0/true/false/yes/no/on/off; using 0", name, *v);
  return false;
}
}  // namespace

bool strict() { return flag("MOEJIT_STRICT"); }

bool cache_allow_shared() { return flag("MOEJIT_CACHE_ALLOW_SHARED"); }

std::optional<std::string> log_level() { return raw("MOEJIT_LOG_LEVEL"); }

std::optional<std::uint64_t> parse_byte_size(const std::string& text) {
  std::size_t i = 0;
  std::uint64_t v = 0;
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    std::uint64_t d = static_cast<std::uint64_t>(text[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
    ++i;
  }
  const std::string suffix = lower(text.substr(i));
  int shift = -1;
  if (suffix.empty() || suffix == "b") shift = 0;
  const char* units = "kmgt";
  for (int u = 0; u < 4; ++u) {
    const std::string c(1, units[u]);
    if (suffix == c || suffix == c + "b" || suffix == c + "ib") shift = 10 * (u + 1);
  }
  if (shift < 0) return std::nullopt;
  if (shift && v > (UINT64_MAX >> shift)) return std::nullopt;
  return v << shift;
}

std::optional<std::uint64_t> cache_max_bytes() {
  auto v = raw("MOEJIT_CACHE_MAX_BYTES");
  if (!v) return std::nullopt;
  auto n = parse_byte_size(*v);
  if (!n) {
    logger()->warn("MOEJIT_CACHE_MAX_BYTES={} is not a byte size (e.g. 2G, 512M, 1048576); no cap applied", *v);
    return std::nullopt;
  }
  if (*n == 0) return std::nullopt;
  return n;
}

const GemmTuning& gemm_tuning() {
  // Why a static: a key's kernel is a function of the key and the tuning; a
  // value that changed under a running process would give one key two kernels.
  static const GemmTuning tuning = [] {
    const auto text = raw("MOEJIT_GEMM_TUNE");
    return text ? parse_gemm_tuning(*text) : GemmTuning{};
  }();
  return tuning;
}

std::optional<std::string> nvrtc_library() { return raw("MOEJIT_NVRTC_LIBRARY"); }

std::optional<std::filesystem::path> cache_pack() {
  if (auto v = raw("MOEJIT_CACHE_PACK")) return std::filesystem::path(*v);
  return std::nullopt;
}

}  // namespace moejit::util::env
