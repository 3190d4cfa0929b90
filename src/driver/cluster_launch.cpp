#include "driver/cluster_launch.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

namespace moejit::driver {
namespace {

CUlaunchConfig config_of(const ClusterLaunch& l, CUlaunchAttribute& attr, CUstream stream) {
  attr = CUlaunchAttribute{};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = l.cluster_x;
  attr.value.clusterDim.y = 1;
  attr.value.clusterDim.z = 1;
  CUlaunchConfig cfg{};
  cfg.gridDimX = l.clusters * l.cluster_x, cfg.gridDimY = 1, cfg.gridDimZ = 1;
  cfg.blockDimX = l.block_threads, cfg.blockDimY = 1, cfg.blockDimZ = 1;
  cfg.sharedMemBytes = l.dynamic_smem_bytes;
  cfg.hStream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cfg;
}

}  // namespace

unsigned max_active_clusters(CUfunction function, const ClusterLaunch& l) {
  // The driver's occupancy query costs host time on every launch path that
  // asks; its answer depends only on the function, the launch shape and the
  // device, so it is asked once per (context, function, shape). A handle that
  // the driver reuses after a module unload can only get a stale count, which
  // changes how many CTAs a persistent grid starts, not what they compute.
  struct Entry {
    CUcontext context;
    CUfunction function;
    unsigned cluster_x, block_threads, dynamic_smem_bytes, clusters;
  };
  static std::mutex mutex;
  static std::vector<Entry> known;
  CUcontext context = nullptr;
  MOEJIT_CU_CHECK(cuda().cuCtxGetCurrent(&context));
  auto same = [&](const Entry& e) {
    return e.context == context && e.function == function && e.cluster_x == l.cluster_x &&
           e.block_threads == l.block_threads && e.dynamic_smem_bytes == l.dynamic_smem_bytes;
  };
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (const Entry& e : known)
      if (same(e)) return e.clusters;
  }
  CUlaunchAttribute attr;
  const CUlaunchConfig cfg = config_of(l, attr, nullptr);
  int n = 0;
  MOEJIT_CU_CHECK(cuda().cuOccupancyMaxActiveClusters(&n, function, &cfg));
  const unsigned clusters = static_cast<unsigned>(std::max(n, 1));
  std::lock_guard<std::mutex> lock(mutex);
  if (std::none_of(known.begin(), known.end(), same))
    known.push_back({context, function, l.cluster_x, l.block_threads, l.dynamic_smem_bytes, clusters});
  return clusters;
}

void launch_cluster(CUfunction function, const ClusterLaunch& l, CUstream stream, void** args) {
  CUlaunchAttribute attr;
  const CUlaunchConfig cfg = config_of(l, attr, stream);
  MOEJIT_CU_CHECK(cuda().cuLaunchKernelEx(&cfg, function, args, nullptr));
}

}  // namespace moejit::driver
