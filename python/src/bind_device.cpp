// Versions, the driver and device queries, device memory, synchronization.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "arrays.hpp"
#include "bindings.hpp"
#include "moejit/device.hpp"
#include "moejit/error.hpp"
#include "moejit/logging.hpp"
#include "moejit/version.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace moejit::python {

void bind_device(nb::module_& m) {
  m.def("version", [] { return std::string(version()); }, "The C++ library's version.");
  m.def("nvrtc_version", &nvrtc_version, "NVRTC's version ('13.0'); '' when libnvrtc cannot be opened.");
  m.def("nvrtc_error", &nvrtc_error, "Why libnvrtc cannot be opened; '' when it can.");
  m.def(
      "set_log_level",
      [](const std::string& level) {
        for (LogLevel l : {LogLevel::trace, LogLevel::debug, LogLevel::info, LogLevel::warn, LogLevel::error,
                           LogLevel::critical, LogLevel::off})
          if (level == to_string(l)) return set_log_level(l);
        throw InvalidArgument("set_log_level: level='" + level +
                              "' is not one of trace, debug, info, warn, error, critical, off");
      },
      "level"_a,
      "The library's log level (messages to stderr; overrides MOEJIT_LOG_LEVEL): trace, debug, info, warn, "
      "error, critical or off. Raises InvalidArgument naming any other value.");
  m.def(
      "log_level", [] { return std::string(to_string(log_level())); },
      "The library's log level: trace, debug, info, warn, error, critical or off.");

  nb::module_ d = m.def_submodule("device", "Driver and device utilities over the lazily opened libcuda.so.1.");
  d.def("available", &device::available, "True when libcuda loads, cuInit succeeds and a device exists.");
  d.def(
      "driver_status",
      [] {
        const device::DriverStatus s = device::driver_status();
        nb::dict r;
        r["loaded"] = s.loaded;
        r["library"] = s.library;
        r["driver_version"] = s.driver_version;
        r["device_count"] = s.device_count;
        r["error"] = s.error;
        return r;
      },
      "{'loaded', 'library', 'driver_version', 'device_count', 'error'}; never raises.");
  d.def(
      "device_info",
      [](int index) {
        const device::DeviceInfo i = device::device_info(index);
        nb::dict r;
        r["index"] = i.index;
        r["name"] = i.name;
        r["compute_capability"] = i.compute_capability;
        r["multiprocessors"] = i.multiprocessors;
        r["total_bytes"] = i.total_bytes;
        return r;
      },
      "index"_a = 0, "{'index', 'name', 'compute_capability' (90 = sm_90), 'multiprocessors', 'total_bytes'}.");
  d.def("make_current", [](int index) { return reinterpret_cast<std::uintptr_t>(device::make_current(index)); },
        "index"_a = 0, "Makes device index's primary context current if none is; returns the CUcontext.");
  d.def(
      "synchronize",
      [](std::optional<std::uintptr_t> stream) {
        nb::gil_scoped_release release;
        if (stream) device::synchronize(to_stream(*stream));
        else device::synchronize();
      },
      "stream"_a = nb::none(), "Waits for `stream` (an integer CUstream), or for the whole context when None.");

  nb::class_<device::Buffer>(d, "Buffer", "Device memory in the current context, freed when the object goes.")
      .def(nb::init<std::size_t>(), "bytes"_a)
      .def_prop_ro("ptr", [](const device::Buffer& b) { return static_cast<std::uintptr_t>(b.get()); },
                   "device address (integer)")
      .def_prop_ro("bytes", &device::Buffer::bytes)
      .def(
          "upload",
          [](device::Buffer& b, const AnyArray& src, std::size_t offset) {
            if (src.device_type() != nb::device::cpu::value)
              throw InvalidArgument("src: expected a CPU array, got DLPack device type " +
                                    std::to_string(src.device_type()));
            check_array_any_rank(src, "src", Where::cpu,
                                 {DType::f32, DType::bf16, DType::f16, DType::u8, DType::i32});
            b.upload(src.data(), src.nbytes(), offset);
          },
          "src"_a, "offset"_a = 0, "Copies a C-contiguous host array to byte `offset` (synchronous).")
      .def(
          "download",
          [](const device::Buffer& b, const AnyArray& dst, std::size_t offset) {
            if (dst.device_type() != nb::device::cpu::value)
              throw InvalidArgument("dst: expected a CPU array, got DLPack device type " +
                                    std::to_string(dst.device_type()));
            check_array_any_rank(dst, "dst", Where::cpu,
                                 {DType::f32, DType::bf16, DType::f16, DType::u8, DType::i32});
            b.download(dst.data(), dst.nbytes(), offset);
          },
          "dst"_a, "offset"_a = 0, "Copies bytes at `offset` into a C-contiguous host array (synchronous).")
      .def("fill_bytes", &device::Buffer::fill_bytes, "value"_a)
      .def("reset", &device::Buffer::reset, "Frees now.");
}

}  // namespace moejit::python
