// Links the device utilities (moejit/device.hpp) from outside the project: on a
// machine without a driver, available() is false and a Buffer throws
// DriverError naming libcuda; with a GPU, a round trip through device memory.
#include <cstdio>
#include <cstring>
#include <vector>
#include <moejit/device.hpp>
#include <moejit/error.hpp>
#include <moejit/version.hpp>

int main() {
  std::printf("moejit %s, NVRTC %s\n", std::string(moejit::version()).c_str(),
              moejit::nvrtc_version().empty() ? "absent" : moejit::nvrtc_version().c_str());
  if (!moejit::device::available()) {
    try {
      moejit::device::Buffer b(64);
      std::puts("error: Buffer without a GPU did not throw");
      return 1;
    } catch (const moejit::DriverError& e) {
      std::printf("no GPU: %s\n", e.what());
      return 0;
    }
  }
  moejit::device::make_current(0);
  std::vector<int> in(1000), out(1000, -1);
  for (int i = 0; i < 1000; ++i) in[i] = i * 7;
  moejit::device::Buffer b(in.size() * sizeof(int));
  b.upload(in.data(), b.bytes());
  b.download(out.data(), b.bytes());
  moejit::device::synchronize(nullptr);
  const auto info = moejit::device::device_info(0);
  std::printf("%s sm_%d: round trip %s\n", info.name.c_str(), info.compute_capability,
              std::memcmp(in.data(), out.data(), b.bytes()) == 0 ? "ok" : "MISMATCH");
  return std::memcmp(in.data(), out.data(), b.bytes()) == 0 ? 0 : 1;
}
