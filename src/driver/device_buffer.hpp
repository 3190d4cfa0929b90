#pragma once
// RAII device allocation (cuMemAlloc_v2 / cuMemFree_v2) in the current context.
#include <cstddef>
#include <cstdint>
#include <utility>

#include "driver/cuda_api.hpp"

namespace moejit::driver {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Allocates `bytes` bytes (0 allocates nothing). Needs a current context
  // (ensure_context()). Throws DriverError.
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes) MOEJIT_CU_CHECK(cuda().cuMemAlloc_v2(&ptr_, bytes));
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, 0);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr get() const noexcept { return ptr_; }
  std::size_t bytes() const noexcept { return bytes_; }
  template <class T = void>
  T* as() const noexcept { return reinterpret_cast<T*>(static_cast<std::uintptr_t>(ptr_)); }

  // Host -> device copy of `n` bytes at byte offset `offset`; synchronous. Throws DriverError.
  void upload(const void* src, std::size_t n, std::size_t offset = 0) {
    check_range(n, offset, "upload");
    if (n) MOEJIT_CU_CHECK(cuda().cuMemcpyHtoD_v2(ptr_ + offset, src, n));
  }
  // Device -> host copy; synchronous. Throws DriverError.
  void download(void* dst, std::size_t n, std::size_t offset = 0) const {
    check_range(n, offset, "download");
    if (n) MOEJIT_CU_CHECK(cuda().cuMemcpyDtoH_v2(dst, ptr_ + offset, n));
  }
  // Sets every byte to `value`; synchronous. Throws DriverError.
  void fill_bytes(unsigned char value) {
    if (bytes_) MOEJIT_CU_CHECK(cuda().cuMemsetD8_v2(ptr_, value, bytes_));
  }

  void reset() noexcept {
    // Why ignore the result: a destructor must not throw, and a failed free at
    // teardown (context already destroyed) leaves nothing to recover.
    if (ptr_) (void)cuda().cuMemFree_v2(ptr_);
    ptr_ = 0;
    bytes_ = 0;
  }

 private:
  void check_range(std::size_t n, std::size_t offset, const char* what) const;
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace moejit::driver
