#pragma once
// Test support: sets an environment variable for a scope and restores the
// previous value (or its absence) afterwards, so that a test cannot leak its
// setting into the tests after it (e.g. unset the runner's MOEJIT_CACHE_DIR).
#include <stdlib.h>

#include <optional>
#include <string>

namespace moejit::test {

class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~EnvGuard() { restore(); }
  void restore() {
    if (done_) return;
    done_ = true;
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
  bool done_ = false;
};

}  // namespace moejit::test
