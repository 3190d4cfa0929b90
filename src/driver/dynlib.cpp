#include "driver/dynlib.hpp"

#include <dlfcn.h>

namespace moejit::driver {

OpenedLibrary open_first(std::initializer_list<const char*> names) {
  OpenedLibrary out;
  for (const char* name : names) {
    if (void* h = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      out.handle = h;
      out.name = name;
      out.error.clear();
      return out;
    }
    const char* err = ::dlerror();
    if (!out.error.empty()) out.error += "; ";
    out.error += err ? err : (std::string(name) + ": unknown dlopen error");
  }
  return out;
}

void* find_symbol(void* handle, const char* name) noexcept {
  if (!handle) return nullptr;
  ::dlerror();
  return ::dlsym(handle, name);
}

}  // namespace moejit::driver
