#pragma once
// Launches of thread-block clusters (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
// clusters along x) for the persistent kernels whose CTAs share tiles through
// TMA multicast. A persistent grid must not ask for more clusters than can be
// resident at once, and fewer clusters than SMs / cluster size may fit (an SM
// left over in a GPC hosts no cluster): max_active_clusters() says how many.
// Throws DriverError.
#include "driver/cuda_api.hpp"

namespace moejit::driver {

struct ClusterLaunch {
  unsigned clusters = 1;      // grid: clusters * cluster_x CTAs along x
  unsigned cluster_x = 1;     // CTAs per cluster
  unsigned block_threads = 0;
  unsigned dynamic_smem_bytes = 0;
};

// Clusters of `l.cluster_x` CTAs of `function` (block_threads, dynamic_smem_bytes
// as in l) that the device of the current context runs at once; at least 1.
// The driver is asked once per (context, function, launch shape); later calls
// answer from memory (thread-safe).
unsigned max_active_clusters(CUfunction function, const ClusterLaunch& l);

void launch_cluster(CUfunction function, const ClusterLaunch& l, CUstream stream, void** args);

}  // namespace moejit::driver
