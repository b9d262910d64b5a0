"""Shared-memory and register pre-filter, applied before anything is compiled.

Compiling a config that cannot fit costs a full Triton compile (about a second of
CPU) only to fail with "out of resource: shared memory". We use the same estimate
as Inductor's `BaseConfigHeuristic.get_shared_memory_estimation` (num_stages
buffers of the A and B tiles plus 128 bytes of barriers) against the device's
opt-in limit per block, and Inductor's register-spill bound (accumulator registers
per thread > 255). Configs refused here are recorded as `out_of_resources`.
"""
from __future__ import annotations

NUM_REGS = 255
BARRIER_BYTES = 128


def smem_bytes(block_m: int, block_n: int, block_k: int, num_stages: int, dtype_size: int) -> int:
    return dtype_size * (block_m * block_k + block_n * block_k) * num_stages + BARRIER_BYTES


def acc_registers(block_m: int, block_n: int, num_warps: int) -> int:
    return -(-(block_m * block_n) // (num_warps * 32))


def refuse_reason(params: dict, dtype_size: int, smem_limit: int) -> str | None:
    """Why a Triton GEMM config cannot run on this device, or None if it may.

    `params` holds Inductor's template kwargs (BLOCK_M, BLOCK_N, BLOCK_K, num_stages,
    num_warps). `smem_limit` <= 0 disables the shared-memory check.
    """
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    need = smem_bytes(bm, bn, bk, params["num_stages"], dtype_size)
    if smem_limit > 0 and need > smem_limit:
        return f"shared memory {need} > {smem_limit} bytes"
    regs = acc_registers(bm, bn, params["num_warps"])
    if regs > NUM_REGS:
        return f"accumulator needs {regs} registers per thread > {NUM_REGS}"
    return None
