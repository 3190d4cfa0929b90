// The public logging controls (moejit/logging.hpp): level, and an application
// sink that takes the messages instead of stderr.
#include <catch2/catch.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "moejit/logging.hpp"
#include "util/logging.hpp"

using namespace moejit;

namespace {
// Restores the level and stderr when a test ends, however it ends.
struct LogStateGuard {
  LogLevel level = log_level();
  ~LogStateGuard() {
    set_log_sink({});
    set_log_level(level);
  }
};
}  // namespace

TEST_CASE("logging: the application's sink takes messages at or above the level, without prefix", "[logging]") {
  std::vector<std::pair<LogLevel, std::string>> got;
  LogStateGuard guard;  // after `got`: the sink that captures it is removed first
  set_log_sink([&](LogLevel l, std::string_view m) { got.emplace_back(l, std::string(m)); });
  set_log_level(LogLevel::warn);
  CHECK(log_level() == LogLevel::warn);
  util::logger()->info("dropped {}", 1);
  util::logger()->warn("cache entry {} is bad", 7);
  util::logger()->error("boom");
  REQUIRE(got.size() == 2);
  CHECK(got[0] == std::pair<LogLevel, std::string>{LogLevel::warn, "cache entry 7 is bad"});
  CHECK(got[1] == std::pair<LogLevel, std::string>{LogLevel::error, "boom"});

  set_log_level(LogLevel::error);
  CHECK(log_level() == LogLevel::error);
  util::logger()->warn("dropped too");
  CHECK(got.size() == 2);
  set_log_level(LogLevel::off);
  util::logger()->critical("dropped: off");
  CHECK(got.size() == 2);
  set_log_level(LogLevel::debug);
  util::logger()->debug("kept at debug");
  REQUIRE(got.size() == 3);
  CHECK(got[2].first == LogLevel::debug);

  // An empty function restores stderr: the sink sees nothing more.
  set_log_sink({});
  util::logger()->error("to stderr");
  CHECK(got.size() == 3);
}

TEST_CASE("logging: a sink that throws never fails the call that logs; level names", "[logging]") {
  int calls = 0, handler_calls = 0;
  LogStateGuard guard;
  // The library's sink swallows the exception itself: spdlog's own error
  // handler (which would also keep it from the caller) is never reached.
  util::logger()->set_error_handler([&](const std::string&) { ++handler_calls; });
  set_log_sink([&](LogLevel, std::string_view) {
    ++calls;
    throw std::runtime_error("sink failed");
  });
  set_log_level(LogLevel::warn);
  CHECK_NOTHROW(util::logger()->warn("x"));
  CHECK(calls == 1);
  CHECK(handler_calls == 0);
  util::logger()->set_error_handler(
      [](const std::string& m) { std::fprintf(stderr, "[moejit] logging failed: %s\n", m.c_str()); });
  CHECK(to_string(LogLevel::trace) == "trace");
  CHECK(to_string(LogLevel::error) == "error");
  CHECK(to_string(LogLevel::off) == "off");
}
