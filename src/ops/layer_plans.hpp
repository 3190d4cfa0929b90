#pragma once
// The plans of one MoeLayer, one per token bucket it has run, built on first
// use and kept for the layer's lifetime: at most one per bucket of the default
// exponent (239 for 32-bit token counts), under 1 KB each. Lookups after the
// first are one atomic load; the first build of a bucket takes a mutex.
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "moejit/bucketing.hpp"
#include "ops/layer_plan.hpp"

namespace moejit {

class MoeLayerPlans {
 public:
  MoeLayerPlans(const MoeLayerShape& shape, QuantMode quant, WeightScale wscale, const Target& target,
                const GemmTuning& tuning)
      : shape_(shape), quant_(quant), wscale_(wscale), target_(target), tuning_(tuning) {}
  MoeLayerPlans(const MoeLayerPlans&) = delete;
  MoeLayerPlans& operator=(const MoeLayerPlans&) = delete;
  ~MoeLayerPlans() {
    for (auto& s : slots_) delete s.load(std::memory_order_relaxed);
  }

  // The plan of `bucket` (a value of round_up_tokens). Throws what
  // ops::make_layer_plan throws; nothing is cached then.
  const ops::MoeLayerPlan& get(std::uint32_t bucket) {
    const int i = slot(bucket);
    if (i >= 0) {
      if (const ops::MoeLayerPlan* p = slots_[i].load(std::memory_order_acquire)) return *p;
    }
    std::lock_guard lock(mu_);
    if (i >= 0) {
      if (const ops::MoeLayerPlan* p = slots_[i].load(std::memory_order_relaxed)) return *p;
      auto plan = std::make_unique<ops::MoeLayerPlan>(ops::make_layer_plan(shape_, quant_, wscale_, bucket, target_, tuning_));
      const ops::MoeLayerPlan* p = plan.release();
      slots_[i].store(p, std::memory_order_release);
      return *p;
    }
    auto& other = others_[bucket];
    if (!other) other = std::make_unique<ops::MoeLayerPlan>(ops::make_layer_plan(shape_, quant_, wscale_, bucket, target_, tuning_));
    return *other;
  }

  // Index of a bucket of the default exponent e = 3: 1..15 are all buckets
  // (slots 0..14); above, octave [2^j, 2^(j+1)) holds the 8 multiples of
  // 2^(j-3). -1 for any other value (kept in a map under the mutex).
  static int slot(std::uint32_t b) {
    static_assert(kDefaultBucketExponent == 3, "slot() assumes 8 buckets per octave");
    if (b == 0) return -1;
    if (b < 16) return static_cast<int>(b) - 1;
    const int j = 31 - __builtin_clz(b);
    const std::uint32_t g = 1u << (j - 3);
    if (b % g != 0) return -1;
    return 15 + (j - 4) * 8 + static_cast<int>(b / g - 8);
  }
  static constexpr int kSlots = 15 + 28 * 8;

 private:

  MoeLayerShape shape_;
  QuantMode quant_;
  WeightScale wscale_;
  Target target_;
  GemmTuning tuning_;  // the runtime's (Runtime::gemm_tuning)
  std::array<std::atomic<const ops::MoeLayerPlan*>, kSlots> slots_{};
  std::mutex mu_;
  std::map<std::uint32_t, std::unique_ptr<ops::MoeLayerPlan>> others_;
};

}  // namespace moejit
