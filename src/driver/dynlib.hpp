#pragma once
// dlopen()/dlsym() wrappers shared by the libcuda and libnvrtc tables.
// Why dlopen: moejit must run (tools, CPU tests, cache administration) on a
// machine with no NVIDIA driver, and a node that only loads prebuilt cubins must
// not need NVRTC. Nothing links against libcuda or libnvrtc.
#include <initializer_list>
#include <string>

namespace moejit::driver {

struct OpenedLibrary {
  void* handle = nullptr;  // nullptr when no name could be opened
  std::string name;        // the name that was opened
  std::string error;       // when handle == nullptr: the dlerror() text of each attempt
};

// Tries each name in order with dlopen(RTLD_NOW | RTLD_LOCAL). Never throws.
OpenedLibrary open_first(std::initializer_list<const char*> names);

// dlsym(handle, name); nullptr when absent. Never throws.
void* find_symbol(void* handle, const char* name) noexcept;

}  // namespace moejit::driver
