// The public device utilities on a GPU: properties, a context, synchronous and
// asynchronous copies through device::Buffer, fill, synchronize.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "moejit/device.hpp"
#include "moejit/error.hpp"

using namespace moejit;

TEST_CASE("gpu: device utilities round-trip data and report the device", "[gpu][device]") {
  REQUIRE(device::available());
  const device::DeviceInfo info = device::device_info(0);
  CHECK_FALSE(info.name.empty());
  CHECK(info.compute_capability >= 70);
  CHECK(info.multiprocessors > 0);
  CHECK(info.total_bytes > (1ull << 30));
  CHECK(device::make_current(0) != nullptr);
  CHECK_THROWS_AS(device::device_info(device::driver_status().device_count), DriverError);

  std::vector<std::uint32_t> in(1 << 20), out(in.size(), 0), back(in.size(), 0);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint32_t>(i * 2654435761u);
  const std::size_t bytes = in.size() * sizeof(in[0]);
  device::Buffer a(bytes), b(bytes);
  CHECK(a.get() % 256 == 0);
  a.upload(in.data(), bytes);
  device::copy_device_to_device(b.get(), a.get(), bytes);
  b.download(out.data(), bytes);
  CHECK(std::memcmp(in.data(), out.data(), bytes) == 0);

  a.fill_bytes(0xAB);
  device::copy_to_host_async(back.data(), a.get() + 4, 8, nullptr);
  device::synchronize(nullptr);
  CHECK(back[0] == 0xABABABABu);
  CHECK(back[1] == 0xABABABABu);
  device::copy_to_device_async(a.get(), in.data(), bytes, nullptr);
  device::copy_device_to_device_async(b.get(), a.get(), bytes, nullptr);
  device::copy_to_host(out.data(), b.get(), bytes);
  device::synchronize();
  CHECK(std::memcmp(in.data(), out.data(), bytes) == 0);
  CHECK_THROWS_AS(a.upload(in.data(), bytes, 1), InvalidArgument);
  a.reset();
  CHECK_FALSE(a);
}
