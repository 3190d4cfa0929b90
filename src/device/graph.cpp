// Streams and CUDA graph capture of the public device utilities (moejit/device.hpp).
#include <exception>
#include <utility>

#include "driver/cuda_api.hpp"
#include "moejit/device.hpp"
#include "moejit/error.hpp"

namespace moejit::device {

Stream::Stream() { MOEJIT_CU_CHECK(driver::cuda().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING)); }
Stream::~Stream() {
  if (stream_ != nullptr) (void)driver::cuda().cuStreamDestroy_v2(stream_);
}
Stream::Stream(Stream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (stream_ != nullptr) (void)driver::cuda().cuStreamDestroy_v2(stream_);
    stream_ = std::exchange(o.stream_, nullptr);
  }
  return *this;
}

Graph::~Graph() {
  if (exec_ != nullptr) (void)driver::cuda().cuGraphExecDestroy(exec_);
  if (graph_ != nullptr) (void)driver::cuda().cuGraphDestroy(graph_);
}
Graph::Graph(Graph&& o) noexcept
    : graph_(std::exchange(o.graph_, nullptr)), exec_(std::exchange(o.exec_, nullptr)) {}
Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    Graph dead(std::move(*this));
    graph_ = std::exchange(o.graph_, nullptr);
    exec_ = std::exchange(o.exec_, nullptr);
  }
  return *this;
}

Graph Graph::capture(CUstream stream, const std::function<void()>& enqueue) {
  if (stream == nullptr)
    throw InvalidArgument("device::Graph::capture: stream=nullptr: the legacy default stream cannot be captured "
                          "(use a device::Stream)");
  const driver::CudaApi& cu = driver::cuda();
  MOEJIT_CU_CHECK(cu.cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  Graph g;
  try {
    enqueue();
  } catch (...) {
    // End the capture so the stream is usable again; the partial graph is discarded.
    CUgraph partial = nullptr;
    if (cu.cuStreamEndCapture(stream, &partial) == CUDA_SUCCESS && partial != nullptr) (void)cu.cuGraphDestroy(partial);
    throw;
  }
  MOEJIT_CU_CHECK(cu.cuStreamEndCapture(stream, &g.graph_));
  MOEJIT_CU_CHECK(cu.cuGraphInstantiateWithFlags(&g.exec_, g.graph_, 0));
  return g;
}

void Graph::launch(CUstream stream) const {
  if (exec_ == nullptr) throw InvalidArgument("device::Graph::launch: the graph is empty (default-constructed or moved from)");
  MOEJIT_CU_CHECK(driver::cuda().cuGraphLaunch(exec_, stream));
}

}  // namespace moejit::device
