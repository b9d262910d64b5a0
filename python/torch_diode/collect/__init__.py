"""The GPU collector: `python -m torch_diode.collect --spec SPEC.json --out SHARD.msgpack`.

It drives Inductor's own GEMM templates and config heuristics under max-autotune
and records the time of every config in the search space as a wire.Shard.
See docs/collector.md. Modules, one job each:

  spec       the shard spec (JSON) and its validation
  sample     log-normal problem sampler for datasets
  smem       shared-memory pre-filter (Inductor's own estimate)
  stats      median / IQR of repeats
  records    Inductor choices -> wire.KernelConfig / ShardRecord; shard building
  timing     the GPU timer (CUDA events, L2 flush, warm-up, timeout)
  problems   wire.Problem -> input tensors and the function torch.compile sees
  fingerprint  wire.HardwareId of the running GPU
  driver     one problem through Inductor's max-autotune with our hooks
  cli        argument parsing, progress lines, exit codes
"""
