#include "util/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "util/env.hpp"

namespace moejit::util {
namespace {

std::shared_ptr<spdlog::logger> make_logger() {
  // Why not spdlog's registry: an application may register its own "moejit"
  // logger or drop_all(); the library keeps its own handle either way.
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto log = std::make_shared<spdlog::logger>("moejit", sink);
  log->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [moejit] [%^%l%$] %v");
  spdlog::level::level_enum level = spdlog::level::warn;
  // Why read the raw variable here and not env::log_level(): env's warnings go
  // through this logger; reading via env::raw keeps init free of recursion.
  if (auto v = env::raw("MOEJIT_LOG_LEVEL")) {
    auto parsed = spdlog::level::from_str(*v);
    // from_str returns off for unknown text; accept "off" only when spelled so.
    if (parsed != spdlog::level::off || *v == "off") {
      level = parsed;
    } else {
      log->set_level(spdlog::level::warn);
      log->warn("MOEJIT_LOG_LEVEL={} is not one of trace, debug, info, warn, error, critical, off; using warn", *v);
    }
  }
  log->set_level(level);
  log->flush_on(spdlog::level::warn);
  return log;
}

}  // namespace

std::shared_ptr<spdlog::logger>& logger() {
  static std::shared_ptr<spdlog::logger> log = make_logger();
  return log;
}

}  // namespace moejit::util
