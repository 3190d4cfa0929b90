// The public device utilities and versions (moejit/device.hpp, moejit/version.hpp)
// on whatever machine runs the CPU suite: without a driver every call that
// needs one throws DriverError naming libcuda, and nothing crashes.
#include <catch2/catch.hpp>

#include <string>

#include "moejit/device.hpp"
#include "moejit/error.hpp"
#include "moejit/version.hpp"

using namespace moejit;

TEST_CASE("device api: available() agrees with driver_status()", "[device]") {
  const device::DriverStatus s = device::driver_status();
  CHECK(device::available() == (s.loaded && s.device_count > 0));
  if (s.loaded) {
    CHECK(s.error.empty());
    CHECK(s.library == "libcuda.so.1");
    CHECK(s.driver_version > 0);
  } else {
    CHECK(s.error.find("libcuda") != std::string::npos);
    CHECK(s.device_count == 0);
    CHECK_THROWS_AS(device::device_info(0), DriverError);
    CHECK_THROWS_AS(device::make_current(0), DriverError);
    CHECK_THROWS_AS(device::synchronize(), DriverError);
    try {
      device::Buffer b(256);
      FAIL("Buffer(256) without a driver must throw");
    } catch (const DriverError& e) {
      CHECK(std::string(e.what()).find("libcuda") != std::string::npos);
    }
  }
}

TEST_CASE("device api: without a driver, Event and StreamHold throw DriverError naming the cause", "[device]") {
  if (device::driver_status().loaded) return;  // a machine with a driver: the GPU suite covers them
  try {
    device::Event e;
    FAIL("Event() without a driver must throw");
  } catch (const DriverError& e) {
    CHECK(std::string(e.what()).find("libcuda") != std::string::npos);
  }
  // NVRTC compiles the hold kernel where it is present; loading it needs libcuda.
  try {
    device::StreamHold hold;
    FAIL("StreamHold() without a driver must throw");
  } catch (const DriverError& e) {
    const std::string what = e.what();
    CHECK((what.find("libcuda") != std::string::npos || what.find("libnvrtc") != std::string::npos));
  }
}

TEST_CASE("device api: an empty Buffer needs no driver and refuses copies outside it", "[device]") {
  device::Buffer b(0);
  CHECK_FALSE(b);
  CHECK(b.bytes() == 0);
  char c = 0;
  try {
    b.upload(&c, 1);
    FAIL("upload past the end must throw");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.what()).find("exceeds the buffer size 0") != std::string::npos);
  }
  CHECK_THROWS_AS(b.download(&c, 1, 0), InvalidArgument);
  b.upload(&c, 0);  // nothing to copy: no driver call
  device::Buffer moved(std::move(b));
  CHECK(moved.bytes() == 0);
}

TEST_CASE("device api: versions", "[device][nvrtc]") {
  CHECK(version() == MOEJIT_TEST_VERSION);
  const std::string v = nvrtc_version(), err = nvrtc_error();
  CHECK(v.empty() != err.empty());
  if (!v.empty()) CHECK(v.find('.') != std::string::npos);
}
