#include "ops/tensor_map.hpp"

namespace moejit::ops {
namespace {

// One tiled map of `rank` dimensions (innermost first; strides in bytes of
// dimensions 1..rank-1), unit element strides, no interleave, out-of-range
// elements read as zero (and not written by stores).
CUtensorMap encode_tiled(CUtensorMapDataType dtype, std::uint32_t rank, std::uint64_t base, const cuuint64_t* dims,
                         const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle,
                         CUtensorMapL2promotion l2) {
  const cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
  CUtensorMap map;
  MOEJIT_CU_CHECK(driver::cuda().cuTensorMapEncodeTiled(&map, dtype, rank, reinterpret_cast<void*>(base), dims, strides,
                                                        box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, l2,
                                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

}  // namespace

CUtensorMap weight_map(std::uint64_t w, std::uint32_t experts, std::uint32_t n, std::uint32_t k, std::uint32_t elem_bytes,
                       Activation act, std::uint32_t block_n) {
  // Dimensions innermost first, strides in bytes of dimensions 1..3.
  const std::uint64_t row = std::uint64_t(k) * elem_bytes;
  cuuint64_t dims[4];
  cuuint64_t strides[3];
  cuuint32_t box[4];
  switch (act) {
    case Activation::none:  // {K, N, 1, E}
      dims[1] = n, dims[2] = 1;
      strides[0] = row, strides[1] = row * n;
      box[1] = block_n, box[2] = 1;
      break;
    case Activation::silu_gated:  // {K, N / 2, 2, E}: gate rows first, then up rows
      dims[1] = n / 2, dims[2] = 2;
      strides[0] = row, strides[1] = row * (n / 2);
      box[1] = block_n / 2, box[2] = 1;
      break;
    case Activation::swiglu_oai:  // {K, 2, N / 2, E}: gate and up rows interleaved
      dims[1] = 2, dims[2] = n / 2;
      strides[0] = row, strides[1] = row * 2;
      box[1] = 1, box[2] = block_n / 2;
      break;
  }
  dims[0] = k, dims[3] = experts;
  strides[2] = row * n;
  box[0] = 128 / elem_bytes, box[3] = 1;
  return encode_tiled(elem_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, w, dims,
                      strides, box, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

CUtensorMap packed_weight_map(std::uint64_t w, std::uint32_t experts, std::uint32_t n, std::uint32_t k, Activation act,
                              std::uint32_t block_n) {
  // Dimensions innermost first: bytes of k, u (8 rows), h (2), q (n / 16 groups), expert.
  const std::uint64_t row = k / 2;
  cuuint64_t dims[5] = {row, 8, 2, n / 16, experts};
  cuuint64_t strides[4];
  switch (act) {
    case Activation::none:  // physical row 16 q + 8 h + u
      strides[0] = row, strides[1] = 8 * row, strides[2] = 16 * row;
      break;
    case Activation::silu_gated:  // gate rows [0, n / 2), up rows [n / 2, n): h * n / 2 + 8 q + u
      strides[0] = row, strides[1] = row * (n / 2), strides[2] = 8 * row;
      break;
    case Activation::swiglu_oai:  // gate and up interleaved: 2 (8 q + u) + h
      strides[0] = 2 * row, strides[1] = row, strides[2] = 16 * row;
      break;
  }
  strides[3] = row * n;
  const cuuint32_t box[5] = {32, 8, 2, block_n / 16, 1};
  return encode_tiled(CU_TENSOR_MAP_DATA_TYPE_UINT8, 5, w, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

CUtensorMap rows_map(std::uint64_t base, std::uint64_t rows, std::uint32_t cols, std::int64_t row_stride) {
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_stride) * 2};
  const cuuint32_t box[2] = {64, 64};
  return encode_tiled(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

CUtensorMap expert_output_map(std::uint64_t base, std::uint32_t experts, std::uint32_t n, std::uint32_t k,
                              std::uint32_t elem_bytes) {
  const cuuint64_t dims[3] = {k, n, experts};
  const cuuint64_t strides[2] = {std::uint64_t(k) * elem_bytes, std::uint64_t(k) * elem_bytes * n};
  const cuuint32_t box[3] = {128 / elem_bytes, 32, 1};
  return encode_tiled(elem_bytes == 4 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, base, dims,
                      strides, box, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE);
}

}  // namespace moejit::ops
