#include "driver/cluster_launch.hpp"

#include <algorithm>

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
  CUlaunchAttribute attr;
  const CUlaunchConfig cfg = config_of(l, attr, nullptr);
  int n = 0;
  MOEJIT_CU_CHECK(cuda().cuOccupancyMaxActiveClusters(&n, function, &cfg));
  return static_cast<unsigned>(std::max(n, 1));
}

void launch_cluster(CUfunction function, const ClusterLaunch& l, CUstream stream, void** args) {
  CUlaunchAttribute attr;
  const CUlaunchConfig cfg = config_of(l, attr, stream);
  MOEJIT_CU_CHECK(cuda().cuLaunchKernelEx(&cfg, function, args, nullptr));
}

}  // namespace moejit::driver
