#include "driver/device_buffer.hpp"

#include <string>

#include "moejit/error.hpp"

namespace moejit::driver {

void DeviceBuffer::check_range(std::size_t n, std::size_t offset, const char* what) const {
  if (offset > bytes_ || n > bytes_ - offset)
    throw InvalidArgument(std::string("DeviceBuffer::") + what + ": range [" + std::to_string(offset) + ", " +
                          std::to_string(offset) + "+" + std::to_string(n) + ") exceeds buffer size " +
                          std::to_string(bytes_));
}

}  // namespace moejit::driver
