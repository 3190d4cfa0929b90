#pragma once
// Internal: typed, error-reporting access to the fields of a config.json object.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace moejit::model {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, std::string_view source) : j_(j), source_(source) {}

  // Positive integer field that fits uint32; InvalidArgument when missing or not one.
  std::uint32_t positive(const char* field) const;
  // Same, but absent (or null) gives fallback.
  std::uint32_t positive_or(const char* field, std::uint32_t fallback) const;
  // Non-negative integer field; absent (or null) gives fallback.
  std::uint32_t count_or(const char* field, std::uint32_t fallback) const;
  // Finite positive number; absent gives fallback.
  float positive_float_or(const char* field, float fallback) const;
  // String field; absent (or null) gives nullopt.
  std::optional<std::string> string_opt(const char* field) const;
  bool has(const char* field) const { return j_.contains(field) && !j_.at(field).is_null(); }
  const nlohmann::json& at(const char* field) const { return j_.at(field); }

  // InvalidArgument "<source>: field '<field>' <what>, got <value as JSON>".
  [[noreturn]] void fail(const char* field, std::string_view what) const;
  // InvalidArgument "<source>: <message>".
  [[noreturn]] void fail_msg(const std::string& message) const;

 private:
  std::optional<std::uint64_t> integer(const char* field, std::uint64_t min) const;
  const nlohmann::json& j_;
  std::string_view source_;
};

}  // namespace moejit::model
