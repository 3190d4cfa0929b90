#pragma once
// moejit's exceptions. The library throws; it never exits or aborts.
// Every message names the parameter (or file, or key) and the offending value.
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

namespace moejit {

// Base of every exception moejit throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller passed a value outside the documented domain (shape, dtype, option).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// NVRTC rejected a generated kernel. what() holds the key's canonical text and
// the full NVRTC log; key_text() and log() return them separately.
class CompileError : public Error {
 public:
  CompileError(std::string key_text, std::string log)
      : Error("NVRTC compile failed for key " + key_text + ":\n" + log),
        key_text_(std::move(key_text)), log_(std::move(log)) {}
  const std::string& key_text() const noexcept { return key_text_; }
  const std::string& log() const noexcept { return log_; }

 private:
  std::string key_text_, log_;
};

// libcuda / libnvrtc could not be opened, a symbol is missing, or a driver call
// failed. The message names the library or the call and the CUresult.
class DriverError : public Error {
 public:
  using Error::Error;
};

// A kernel was requested after seal() under the strict policy.
class SealedMiss : public Error {
 public:
  using Error::Error;
};

// One line for a multi-line message (what the tools and cache_admin::explain
// print per error): the first line with leading blanks and trailing blanks and
// ':' removed, followed, when a later line names an error (a compiler log's
// "file(line): error: ..."), by that line: "NVRTC compile failed:
// moejit_kernel.cu(635): error: identifier ... is undefined".
std::string one_line(std::string_view message);
std::string one_line(const std::exception& e);

}  // namespace moejit
