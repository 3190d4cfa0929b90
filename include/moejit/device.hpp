#pragma once
// Small device utilities for programs and tests that do not bring their own CUDA
// runtime: is a GPU there, make a context current, allocate device memory
// (RAII), copy, synchronize, streams, events and graphs. They use the same lazily opened libcuda.so.1 as
// the rest of moejit (dlopen on first use; nothing links against libcuda), so
// a program using them still starts on a machine without a driver and can
// ask available() first.
//
//   if (!moejit::device::available()) return 77;           // skip without a GPU
//   moejit::device::make_current(0);                        // device 0's primary context
//   moejit::device::Buffer x(bytes);                        // cuMemAlloc, freed by the destructor
//   x.upload(host.data(), bytes);
//   layer.run(weights, args, stream);
//   moejit::device::synchronize(stream);
//
// Errors: DriverError naming the driver call and the CUresult (no driver, no
// device, allocation failure ...); InvalidArgument for a copy outside a buffer.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "moejit/types.hpp"

namespace moejit::device {

// True when libcuda.so.1 loads, cuInit succeeds and at least one device
// exists. Never throws.
bool available() noexcept;

// What the driver reports, for `info` commands. Never throws.
struct DriverStatus {
  bool loaded = false;       // libcuda opened and cuInit(0) succeeded
  std::string library;       // "libcuda.so.1" when loaded
  int driver_version = 0;    // cuDriverGetVersion, e.g. 13000 (CUDA 13.0)
  int device_count = 0;
  std::string error;         // why not loaded (dlopen / cuInit message); "" when loaded
};
DriverStatus driver_status() noexcept;

// Properties of device `index` (0-based). Throws DriverError (no driver, index
// out of range).
struct DeviceInfo {
  int index = 0;
  std::string name;               // "NVIDIA H200"
  int compute_capability = 0;     // 10 * major + minor: 90 for sm_90
  int multiprocessors = 0;
  std::uint64_t total_bytes = 0;  // global memory
};
DeviceInfo device_info(int index = 0);

// Makes a context current on the calling thread if none is: device `index`'s
// primary context (retained for the process lifetime). Returns the current
// context. Needed before Buffer, MoeLayer::run or Runtime::get on a thread
// that has none. Throws DriverError.
CUcontext make_current(int index = 0);

// Waits for `stream` (nullptr: the legacy default stream). Throws DriverError.
void synchronize(CUstream stream);
// Waits for all work of the current context. Throws DriverError.
void synchronize();

// Copies of `bytes` bytes. The plain ones are synchronous; the *_async ones are
// enqueued on `stream` (host memory must then stay valid until the copy ran,
// and be page-locked for the copy to overlap). bytes == 0 does nothing.
// Throws DriverError.
void copy_to_device(DevicePtr dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, DevicePtr src, std::size_t bytes);
void copy_device_to_device(DevicePtr dst, DevicePtr src, std::size_t bytes);
void copy_to_device_async(DevicePtr dst, const void* src, std::size_t bytes, CUstream stream);
void copy_to_host_async(void* dst, DevicePtr src, std::size_t bytes, CUstream stream);
void copy_device_to_device_async(DevicePtr dst, DevicePtr src, std::size_t bytes, CUstream stream);

// Device memory in the current context (cuMemAlloc: 256-byte aligned at least),
// freed by the destructor. Move-only.
class Buffer {
 public:
  Buffer() = default;
  // Allocates `bytes` bytes (0 allocates nothing). Needs a current context
  // (make_current()). Throws DriverError (for example out of memory).
  explicit Buffer(std::size_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  DevicePtr get() const noexcept { return ptr_; }
  std::size_t bytes() const noexcept { return bytes_; }
  explicit operator bool() const noexcept { return ptr_ != 0; }

  // Synchronous copies of n bytes at byte `offset` of this buffer. Throw
  // InvalidArgument when [offset, offset + n) leaves the buffer (names the
  // range and the size), DriverError.
  void upload(const void* src, std::size_t n, std::size_t offset = 0);
  void download(void* dst, std::size_t n, std::size_t offset = 0) const;
  // Sets every byte to `value` (synchronous). Throws DriverError.
  void fill_bytes(unsigned char value);
  // Frees now (never throws: a failed free at teardown is ignored).
  void reset() noexcept;

 private:
  void check_range(std::size_t n, std::size_t offset, const char* what) const;
  DevicePtr ptr_ = 0;
  std::size_t bytes_ = 0;
};

// A stream of the current context that does not synchronize with the legacy
// default stream (CU_STREAM_NON_BLOCKING), destroyed by the destructor.
// Move-only. Needs a current context. Throws DriverError.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const noexcept { return stream_; }

 private:
  CUstream stream_ = nullptr;
};

// A CUDA event of the current context for timing GPU work (timing enabled),
// destroyed by the destructor. Move-only; a moved-from Event is empty.
//
//   moejit::device::Event start, stop;
//   start.record(stream);
//   layer.run(weights, args, stream);
//   stop.record(stream);
//   float ms = moejit::device::Event::elapsed_ms(start, stop);  // waits for stop
//
// Needs a current context (make_current()). Throws DriverError.
class Event {
 public:
  Event();
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Enqueues the event on `stream` (nullptr: the legacy default stream): it
  // completes when the work enqueued before it has run. Throws
  // InvalidArgument on an empty Event, DriverError.
  void record(CUstream stream);
  // Waits until the last record() completed. Throws InvalidArgument on an
  // empty Event, DriverError.
  void synchronize() const;
  // GPU time in milliseconds from `start` to `end` (resolution about 0.5 us),
  // after waiting for `end`. Both must have been recorded, `start` first.
  // Throws InvalidArgument when either is empty (naming it), DriverError (an
  // event never recorded: CUDA_ERROR_INVALID_HANDLE).
  static float elapsed_ms(const Event& start, const Event& end);

  CUevent get() const noexcept { return event_; }
  explicit operator bool() const noexcept { return event_ != nullptr; }

 private:
  CUevent event_ = nullptr;
};

// A one-thread kernel that keeps a stream busy for a given time, so that the
// launches the host enqueues behind it are queued on the GPU before the first
// of them starts: an Event pair around those launches then measures their GPU
// execution without the host's launch latency (nvbench's "blocking kernel").
// The constructor compiles it with NVRTC (once per StreamHold, well under a
// second; nothing is cached) and loads it in the current context; the
// destructor unloads it. Move-only.
//
//   moejit::device::StreamHold hold;
//   hold.launch(stream, std::chrono::microseconds(100));  // the host enqueues the layer meanwhile
//   start.record(stream); layer.run(weights, args, stream); stop.record(stream);
//
// Throws DriverError (libnvrtc or libcuda missing, no current context),
// CompileError.
class StreamHold {
 public:
  StreamHold();
  ~StreamHold();
  StreamHold(StreamHold&& other) noexcept;
  StreamHold& operator=(StreamHold&& other) noexcept;
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;

  // Enqueues the hold on `stream` (nullptr: the legacy default stream) and
  // returns at once; the kernel spins on the GPU's nanosecond timer for
  // `duration`. Throws InvalidArgument on a negative duration or an empty
  // StreamHold, DriverError.
  void launch(CUstream stream, std::chrono::nanoseconds duration) const;

 private:
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
};

// A CUDA graph of the work that one function enqueues on a stream, captured
// and instantiated once, then replayed with launch(): what serving engines do
// with a decode step. Move-only; the destructor frees it.
//
//   moejit::device::Stream s;
//   auto g = moejit::device::Graph::capture(s.get(), [&] { layer.run(weights, args, s.get()); });
//   g.launch(s.get());                       // replays every launch of run(), same pointers
//   moejit::device::synchronize(s.get());
//
// A replay reads and writes the same device memory as the captured calls did
// (the arguments are baked in, the token count too: an engine that replays
// several batch sizes captures one graph per size, and two graphs sharing one
// workspace must not run at the same time). MoeLayer::run captures once its
// kernels are loaded in this context: after prewarm() with
// PrewarmOptions::load_on_gpu on this thread's context, or after one eager run
// of the same bucket (what tests/gpu/test_graph_capture_gpu.cpp does), it
// allocates, synchronizes, compiles and loads nothing. The capture mode is
// global: while it lasts, an illegal call on any thread of the process (a
// cuMemAlloc, a synchronization) fails, so other threads should not allocate,
// synchronize or load kernels (prewarm with load_on_gpu) meanwhile.
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Puts `stream` in capture mode (CU_STREAM_CAPTURE_MODE_GLOBAL: a call that
  // is illegal while any stream captures, such as an allocation or a
  // synchronization, fails with the driver's error), runs enqueue(), ends the
  // capture and instantiates the graph. The legacy default stream cannot be
  // captured: stream == nullptr throws InvalidArgument. If enqueue() throws,
  // the capture is ended and discarded and the exception propagates.
  // Throws DriverError.
  static Graph capture(CUstream stream, const std::function<void()>& enqueue);

  // Enqueues one replay on `stream` (any stream of the context; nullptr: the
  // legacy default stream). Throws InvalidArgument on an empty Graph, DriverError.
  void launch(CUstream stream) const;

  explicit operator bool() const noexcept { return exec_ != nullptr; }

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

}  // namespace moejit::device
