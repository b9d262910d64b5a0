import itertools

import pytest

from torch_diode.collect import smem

H100_SMEM = 232448


def cfg(bm, bn, bk, s, w):
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_stages": s, "num_warps": w}


def test_refusals_match_triton_errors_seen_on_the_h100():
    # Triton reported "Required: 262144" for 128x128x128 at 5 stages fp16 (4 buffers of 64 KiB).
    assert smem.refuse_reason(cfg(128, 128, 128, 5, 4), 2, H100_SMEM) is not None
    # 128x128x128 at 4 stages: 3 buffers fit, so it must be compiled and tried, not refused.
    assert smem.refuse_reason(cfg(128, 128, 128, 4, 4), 2, H100_SMEM) is None
    assert smem.refuse_reason(cfg(16, 16, 16, 1, 1), 4, H100_SMEM) is None


def test_register_bound_is_inductors():
    assert smem.acc_registers(256, 256, 8) == 256
    assert "registers" in smem.refuse_reason(cfg(256, 256, 16, 1, 8), 2, 0)
    assert smem.refuse_reason(cfg(256, 128, 16, 1, 8), 2, 0) is None


def test_no_limit_disables_smem_check():
    assert smem.refuse_reason(cfg(256, 256, 256, 5, 8), 2, 0) is not None  # registers still apply
    assert smem.refuse_reason(cfg(128, 128, 256, 5, 8), 2, 0) is None


def test_lower_bound_never_exceeds_inductors_estimate():
    for bm, bn, bk, s in itertools.product((16, 64, 256), (16, 128), (16, 128), range(1, 6)):
        assert smem.smem_lower_bound(bm, bn, bk, s, 2) <= smem.smem_bytes(bm, bn, bk, s, 2)


def test_matches_inductors_own_estimate():
    tri = pytest.importorskip("torch._inductor.template_heuristics.triton")
    h = tri.CUDAConfigHeuristic()
    for bm, bn, bk, s in [(64, 64, 32, 3), (128, 256, 64, 4), (16, 16, 16, 1)]:
        g = tri.GemmConfig(bm, bn, bk, s, 4)
        assert h.get_shared_memory_estimation(g, 2, False, 0) == smem.smem_bytes(bm, bn, bk, s, 2)
