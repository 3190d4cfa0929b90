#pragma once
// Per-family source generators. codegen::generate(key) (src/codegen) dispatches
// on key.op to one of these; each returns the whole NVRTC translation unit, the
// kernel's name expression and its launch contract, or throws InvalidArgument
// naming the key field it cannot implement.
#include "codegen/kernel_source.hpp"
#include "moejit/key.hpp"

namespace moejit::codegen {

// op=quantize. Supported: quant=w4a16_mxfp4 (kernels/quantize_mxfp4.cuh) with
// weight_scale=e8m0_block32, out_dtype=u8, n = cols (a multiple of 32), k = 0,
// bias none, act none, router_weight false. The input dtype (fp32 / bf16) is a
// run-time kernel argument, not a key field: one compiled kernel serves both.
// Every such key (any n) yields the same source, so all share one cache entry.
// Kernel arguments, in order: (const void* in, int in_dtype /*0 fp32, 1 bf16*/,
// unsigned long long num_blocks /*rows*cols/32*/, unsigned char* data,
// unsigned char* scales); grid: any size (grid-stride), block: launch.block_threads.
KernelSource generate_quantize(const SpecKey& key);

}  // namespace moejit::codegen
