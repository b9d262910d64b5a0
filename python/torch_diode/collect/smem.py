"""Shared-memory and register pre-filter, applied before anything is compiled.

Compiling a config that cannot fit costs a full Triton compile (about a second of
CPU) only to fail with "out of resource: shared memory". Inductor's own estimate
(`BaseConfigHeuristic.get_shared_memory_estimation`: num_stages buffers of the A and
B tiles plus 128 bytes) over-prunes, as its comment says (on the H100, Inductor's
EXHAUSTIVE pass of a 128x128x128 fp16 mm reported timings for all 761 choices,
including 10 this estimate refuses). So we refuse only what cannot fit even with one buffer fewer
(max(num_stages - 1, 1) buffers) - a lower bound on what Triton allocates - against
the device's opt-in limit per block, and apply Inductor's register-spill bound
(accumulator registers per thread > 255). Refused configs are recorded as
`out_of_resources`; anything between the bounds is compiled and, if Triton then
refuses it at launch, recorded as `out_of_resources` from its error.
"""
from __future__ import annotations

NUM_REGS = 255
BARRIER_BYTES = 128


def smem_bytes(block_m: int, block_n: int, block_k: int, num_stages: int, dtype_size: int) -> int:
    """Inductor's upper-bound estimate (num_stages buffers + barriers)."""
    return dtype_size * (block_m * block_k + block_n * block_k) * num_stages + BARRIER_BYTES


def smem_lower_bound(block_m: int, block_n: int, block_k: int, num_stages: int, dtype_size: int) -> int:
    """Shared memory no pipelined Triton GEMM of this config can go below."""
    return dtype_size * (block_m * block_k + block_n * block_k) * max(num_stages - 1, 1)


def acc_registers(block_m: int, block_n: int, num_warps: int) -> int:
    return -(-(block_m * block_n) // (num_warps * 32))


def refuse_reason(params: dict, dtype_size: int, smem_limit: int) -> str | None:
    """Why a Triton GEMM config cannot run on this device, or None if it may.

    `params` holds Inductor's template kwargs (BLOCK_M, BLOCK_N, BLOCK_K, num_stages,
    num_warps). `smem_limit` <= 0 disables the shared-memory check.
    """
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    need = smem_lower_bound(bm, bn, bk, params["num_stages"], dtype_size)
    if smem_limit > 0 and need > smem_limit:
        return f"shared memory >= {need} > {smem_limit} bytes"
    regs = acc_registers(bm, bn, params["num_warps"])
    if regs > NUM_REGS:
        return f"accumulator needs {regs} registers per thread > {NUM_REGS}"
    return None
