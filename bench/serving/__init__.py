"""Serving-trace replay of a gpt-oss-120b MoE layer stack on the GPU (bench/serving_replay.py).

Modules without torch (usable and tested on a machine without a GPU):
  trace          steps of a continuous-batching engine with chunked prefill, JSON files
  stats          per-step timings -> stall time, stall share, tokens/s, percentiles; Markdown
  shard          tensor-parallel sharding of the expert weights along the intermediate dimension
  prewarm_ranks  several processes prewarming one cache directory at the same moment
Modules that need torch and a CUDA GPU:
  systems        the replayed systems: triton_kernels matmul_ogs (exact T, padded to buckets), moejit
  worker         one system's replay in one process (one rank of a tensor-parallel group)
"""
