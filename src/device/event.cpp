// Timing events of the public device utilities (moejit/device.hpp).
#include <utility>

#include "driver/cuda_api.hpp"
#include "moejit/device.hpp"
#include "moejit/error.hpp"

namespace moejit::device {
namespace {

void require(const Event& e, const char* what) {
  if (!e) throw InvalidArgument(std::string("device::Event::") + what + ": the event is empty (moved from)");
}

}  // namespace

// Why default flags: CU_EVENT_DISABLE_TIMING would make elapsed_ms fail, and
// blocking sync would change how synchronize() waits for every caller.
Event::Event() { MOEJIT_CU_CHECK(driver::cuda().cuEventCreate(&event_, CU_EVENT_DEFAULT)); }
Event::~Event() {
  if (event_ != nullptr) (void)driver::cuda().cuEventDestroy_v2(event_);
}
Event::Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (event_ != nullptr) (void)driver::cuda().cuEventDestroy_v2(event_);
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}

void Event::record(CUstream stream) {
  require(*this, "record");
  MOEJIT_CU_CHECK(driver::cuda().cuEventRecord(event_, stream));
}

void Event::synchronize() const {
  require(*this, "synchronize");
  MOEJIT_CU_CHECK(driver::cuda().cuEventSynchronize(event_));
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  if (!start) throw InvalidArgument("device::Event::elapsed_ms: start is empty (moved from)");
  if (!end) throw InvalidArgument("device::Event::elapsed_ms: end is empty (moved from)");
  end.synchronize();
  float ms = 0;
  MOEJIT_CU_CHECK(driver::cuda().cuEventElapsedTime_v2(&ms, start.event_, end.event_));
  return ms;
}

}  // namespace moejit::device
