#pragma once
// Plans kept per token (or row) bucket, built on first use and kept for the
// owner's lifetime: at most one per bucket of the default exponent (239 for
// 32-bit counts). Lookups after the first are one atomic load; the first build
// of a bucket takes a mutex. MoeLayer (MoeLayerPlans) and GroupedGemm use it.
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "moejit/bucketing.hpp"

namespace moejit::ops {

template <class Plan>
class BucketPlans {
 public:
  explicit BucketPlans(std::function<Plan(std::uint32_t bucket)> build) : build_(std::move(build)) {}
  BucketPlans(const BucketPlans&) = delete;
  BucketPlans& operator=(const BucketPlans&) = delete;
  ~BucketPlans() {
    for (auto& s : slots_) delete s.load(std::memory_order_relaxed);
  }

  // The plan of `bucket` (a value of round_up_tokens). Throws what the build
  // function throws; nothing is cached then.
  const Plan& get(std::uint32_t bucket) {
    const int i = slot(bucket);
    if (i >= 0) {
      if (const Plan* p = slots_[i].load(std::memory_order_acquire)) return *p;
    }
    std::lock_guard lock(mu_);
    if (i >= 0) {
      if (const Plan* p = slots_[i].load(std::memory_order_relaxed)) return *p;
      const Plan* p = std::make_unique<Plan>(build_(bucket)).release();
      slots_[i].store(p, std::memory_order_release);
      return *p;
    }
    auto& other = others_[bucket];
    if (!other) other = std::make_unique<Plan>(build_(bucket));
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
  std::function<Plan(std::uint32_t)> build_;
  std::array<std::atomic<const Plan*>, kSlots> slots_{};
  std::mutex mu_;
  std::map<std::uint32_t, std::unique_ptr<Plan>> others_;
};

}  // namespace moejit::ops
