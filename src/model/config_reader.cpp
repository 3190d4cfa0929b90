// Typed access to config.json fields with messages that name source, field, value.
#include "model/config_reader.hpp"

#include <cmath>

#include "moejit/error.hpp"

namespace moejit::model {

void ConfigReader::fail(const char* field, std::string_view what) const {
  std::string got = j_.contains(field) ? j_.at(field).dump() : std::string("nothing (missing)");
  if (got.size() > 80) got = got.substr(0, 77) + "...";
  throw InvalidArgument(std::string(source_) + ": field '" + field + "' " + std::string(what) +
                        ", got " + got);
}

void ConfigReader::fail_msg(const std::string& message) const {
  throw InvalidArgument(std::string(source_) + ": " + message);
}

std::optional<std::uint64_t> ConfigReader::integer(const char* field, std::uint64_t min) const {
  if (!has(field)) return std::nullopt;
  const auto& v = j_.at(field);
  const char* what = min == 0 ? "must be a non-negative integer below 2^32"
                              : "must be a positive integer below 2^32";
  if (!v.is_number_integer()) fail(field, what);
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u < min || u > UINT32_MAX) fail(field, what);
    return u;
  }
  const auto s = v.get<std::int64_t>();
  if (s < static_cast<std::int64_t>(min) || s > static_cast<std::int64_t>(UINT32_MAX))
    fail(field, what);
  return static_cast<std::uint64_t>(s);
}

std::uint32_t ConfigReader::positive(const char* field) const {
  const auto v = integer(field, 1);
  if (!v) fail(field, "is required (a positive integer)");
  return static_cast<std::uint32_t>(*v);
}

std::uint32_t ConfigReader::positive_or(const char* field, std::uint32_t fallback) const {
  return static_cast<std::uint32_t>(integer(field, 1).value_or(fallback));
}

std::uint32_t ConfigReader::count_or(const char* field, std::uint32_t fallback) const {
  return static_cast<std::uint32_t>(integer(field, 0).value_or(fallback));
}

float ConfigReader::positive_float_or(const char* field, float fallback) const {
  if (!has(field)) return fallback;
  const auto& v = j_.at(field);
  if (!v.is_number()) fail(field, "must be a positive number");
  const double d = v.get<double>();
  if (!std::isfinite(d) || d <= 0 || d > 3.0e38) fail(field, "must be a positive number");
  return static_cast<float>(d);
}

std::optional<std::string> ConfigReader::string_opt(const char* field) const {
  if (!has(field)) return std::nullopt;
  const auto& v = j_.at(field);
  if (!v.is_string()) fail(field, "must be a string");
  return v.get<std::string>();
}

}  // namespace moejit::model
