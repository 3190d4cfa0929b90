#pragma once
// In-memory cache slots of the Runtime.
//
// KeySlot: one per specialization key seen; resolves (single-flight) to a
// KernelSlot. KernelSlot: one per content address (many keys share one); holds
// the compiled kernel and the per-context loaded CUfunction.
//
// Lifetime: slots are held by shared_ptr. A slot that reached `ready` is never
// removed while the Runtime lives, so the hot path may use raw pointers to it
// under the map's shared lock and after it. A failed slot is removed from its map
// (later calls retry) and kept alive by the waiters that still hold it.
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "driver/cuda_api.hpp"
#include "moejit/key.hpp"
#include "moejit/runtime.hpp"

namespace moejit::runtime {

enum class SlotState : int { pending = 0, ready = 1, failed = 2 };

// Waitable single-flight state shared by both slot kinds.
struct Flight {
  std::atomic<SlotState> state{SlotState::pending};
  std::mutex mu;
  std::condition_variable cv;
  std::exception_ptr error;  // when failed

  void finish(SlotState s, std::exception_ptr e = nullptr) {
    {
      std::lock_guard lock(mu);
      error = std::move(e);
      state.store(s, std::memory_order_release);
    }
    cv.notify_all();
  }
  // Blocks until not pending; rethrows the owner's error when failed.
  void wait() {
    if (state.load(std::memory_order_acquire) == SlotState::pending) {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return state.load(std::memory_order_acquire) != SlotState::pending; });
    }
    if (state.load(std::memory_order_acquire) == SlotState::failed) std::rethrow_exception(error);
  }
};

inline constexpr std::size_t kMaxContexts = 8;

struct LoadedModule {
  std::atomic<CUcontext> context{nullptr};
  CUmodule module = nullptr;
  CUfunction function = nullptr;
};

struct KernelSlot {
  Hash128 address;
  Flight flight;
  std::shared_ptr<const CompiledKernel> kernel;  // set before flight becomes ready
  // Per-context modules: entries [0, loaded_count) are complete and immutable.
  std::array<LoadedModule, kMaxContexts> loaded;
  std::atomic<std::uint32_t> loaded_count{0};
  std::mutex load_mu;  // serializes module loads (slow path only)
};

struct KeySlot {
  SpecKey key;
  Flight flight;
  KernelSlot* kernel = nullptr;  // set before flight becomes ready; owned by the kernel map
};

struct Hash128Hasher {
  std::size_t operator()(const Hash128& h) const noexcept { return static_cast<std::size_t>(h.lo ^ (h.hi * 0x9E3779B97F4A7C15ull)); }
};

// key hash -> slots with that hash (normally one; more only on a 128-bit collision).
using KeyMap = std::unordered_map<Hash128, std::vector<std::shared_ptr<KeySlot>>, Hash128Hasher>;
using KernelMap = std::unordered_map<Hash128, std::shared_ptr<KernelSlot>, Hash128Hasher>;

}  // namespace moejit::runtime
