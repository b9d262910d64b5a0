"""Inductor's own config heuristics on concrete shapes (CPU torch: no Triton needed)."""
import pytest

pytest.importorskip("torch")

from torch_diode.collect.enumerate import mm_configs  # noqa: E402


def key(c):
    return (c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["num_stages"], c["num_warps"], c["GROUP_M"])


def npow2(x):
    return 1 << (x - 1).bit_length()


@pytest.mark.parametrize("m,n,k", [(512, 512, 512), (16, 4096, 64), (6544, 1416, 16), (48, 104, 872)])
def test_exhaustive_space_is_scaled_deduped_and_bounded(m, n, k):
    cs = mm_configs(m, n, k, 2)
    assert len({key(c) for c in cs}) == len(cs), "Inductor de-duplicates scaled configs"
    for c in cs:
        assert 16 <= c["BLOCK_M"] <= max(16, npow2(m))
        assert 16 <= c["BLOCK_N"] <= max(16, npow2(n))
        assert 16 <= c["BLOCK_K"] <= max(16, npow2(k))
        assert c["num_warps"] <= max(1, c["BLOCK_M"] * c["BLOCK_N"] // 256)
        assert c["EVEN_K"] == (k % c["BLOCK_K"] == 0)
        assert c["BLOCK_M"] * c["BLOCK_N"] / (c["num_warps"] * 32) <= 255  # register-spill prune


def test_sizes_seen_on_the_h100():
    # What Inductor offered on the H100 (torch 2.11) for the same shapes = Triton configs
    # + 1 ATen: mm 6544x1416x16 -> 281, bmm 64x48x104x872 -> 676, mm 128^3 -> 761.
    assert len(mm_configs(6544, 1416, 16, 2)) == 280
    assert len(mm_configs(48, 104, 872, 2)) == 675
    assert len(mm_configs(128, 128, 128, 2)) == 760
    assert len(mm_configs(512, 512, 512, 2)) == 1400


def test_default_space_is_the_small_list():
    d = mm_configs(1024, 2048, 4096, 2, "DEFAULT")
    e = mm_configs(1024, 2048, 4096, 2, "EXHAUSTIVE")
    assert 10 <= len(d) < 40 < len(e)
