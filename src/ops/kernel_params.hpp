#pragma once
// The launch parameter structs of the routing, grouped GEMM and combine
// kernels (RouteParams, GroupedGemmParams, CombineParams, f8::Fp8GemmParams):
// the one definition in kernels/kernel_params.cuh, which NVRTC compiles into
// the kernels and the host compiles here, so the layouts cannot drift apart
// (its static_asserts pin them). dptr() fills their typed pointer fields from
// device addresses.
#include <cstdint>

#include "../../kernels/kernel_params.cuh"
#include "moejit/types.hpp"

namespace moejit::ops {

// A device address that converts to whichever pointer type the field has.
struct DeviceAddress {
  DevicePtr value;
  template <class T>
  operator T*() const {
    return reinterpret_cast<T*>(static_cast<std::uintptr_t>(value));
  }
};
inline DeviceAddress dptr(DevicePtr p) { return DeviceAddress{p}; }

}  // namespace moejit::ops
