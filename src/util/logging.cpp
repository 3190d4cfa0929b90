#include "util/logging.hpp"

#include <mutex>
#include <spdlog/details/log_msg.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "moejit/logging.hpp"
#include "util/env.hpp"

namespace moejit::util {
namespace {

LogLevel public_level(spdlog::level::level_enum l) noexcept {
  switch (l) {
    case spdlog::level::trace: return LogLevel::trace;
    case spdlog::level::debug: return LogLevel::debug;
    case spdlog::level::info: return LogLevel::info;
    case spdlog::level::warn: return LogLevel::warn;
    case spdlog::level::err: return LogLevel::error;
    case spdlog::level::critical: return LogLevel::critical;
    default: return LogLevel::off;
  }
}

spdlog::level::level_enum spdlog_level(LogLevel l) noexcept {
  switch (l) {
    case LogLevel::trace: return spdlog::level::trace;
    case LogLevel::debug: return spdlog::level::debug;
    case LogLevel::info: return spdlog::level::info;
    case LogLevel::warn: return spdlog::level::warn;
    case LogLevel::error: return spdlog::level::err;
    case LogLevel::critical: return spdlog::level::critical;
    case LogLevel::off: break;
  }
  return spdlog::level::off;
}

// The logger's first sink: stderr, or the application's LogSink when one is
// installed. Why one switching sink and not replacing the logger's sinks: the
// sink list is not safe to change while other threads log; this sink's own
// mutex (the one spdlog takes around sink_it_) guards the switch.
class SwitchSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  SwitchSink() : stderr_(std::make_shared<spdlog::sinks::stderr_color_sink_mt>()) {}
  void set(LogSink sink) {
    std::lock_guard<std::mutex> lock(mutex_);
    app_ = std::move(sink);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!app_) {
      stderr_->log(msg);
      return;
    }
    try {
      app_(public_level(msg.level), std::string_view(msg.payload.data(), msg.payload.size()));
    } catch (...) {
      // logging never fails a library call
    }
  }
  void flush_() override { stderr_->flush(); }
  void set_pattern_(const std::string& pattern) override { stderr_->set_pattern(pattern); }
  void set_formatter_(std::unique_ptr<spdlog::formatter> f) override { stderr_->set_formatter(std::move(f)); }

 private:
  std::shared_ptr<spdlog::sinks::stderr_color_sink_mt> stderr_;
  LogSink app_;
};

std::shared_ptr<SwitchSink>& switch_sink() {
  static std::shared_ptr<SwitchSink> s = std::make_shared<SwitchSink>();
  return s;
}

std::shared_ptr<spdlog::logger> make_logger() {
  // Why not spdlog's registry: an application may register its own "moejit"
  // logger or drop_all(); the library keeps its own handle either way.
  auto log = std::make_shared<spdlog::logger>("moejit", switch_sink());
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

namespace moejit {

std::string_view to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::trace: return "trace";
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
    case LogLevel::critical: return "critical";
    case LogLevel::off: return "off";
  }
  return "off";
}

void set_log_level(LogLevel level) { util::logger()->set_level(util::spdlog_level(level)); }

LogLevel log_level() { return util::public_level(util::logger()->level()); }

void set_log_sink(LogSink sink) {
  util::logger();  // the switching sink belongs to the logger from its creation
  util::switch_sink()->set(std::move(sink));
}

}  // namespace moejit
