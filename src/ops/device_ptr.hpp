#pragma once
// A device address (CUdeviceptr) as a typed pointer for kernel parameter structs.
#include <cstdint>

#include "moejit/types.hpp"

namespace moejit::ops {

template <class T>
T* ptr(DevicePtr p) {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(p));
}

}  // namespace moejit::ops
