"""bench/kernel_source_diff.py without a GPU: finding Inductor's template kernels in its
output code, and the CPU path (our static kernel's source for a committed problem)."""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import kernel_source_diff as ksd  # noqa: E402

# The shape of torch 2.11's output code: one template kernel, one pointwise kernel.
OUTPUT_CODE = '''
triton_tem_fused_baddbmm_0 = async_compile.triton('triton_tem_fused_baddbmm_0', \'\'\'
import triton
@triton.jit
def triton_tem_fused_baddbmm_0(in_ptr0, arg_A, arg_B, out_ptr0):
    BLOCK_M : tl.constexpr = 32
    tl.store(out_ptr0 + (xindex), tmp1, mask)
\'\'\', device_str='cuda')

triton_poi_fused_add_1 = async_compile.triton('triton_poi_fused_add_1', \'\'\'
@triton.jit
def triton_poi_fused_add_1(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    pass
\'\'\', device_str='cuda')
'''


def test_template_kernels_keeps_only_gemm_templates_with_their_source():
    got = ksd.template_kernels(OUTPUT_CODE)
    assert list(got) == ["triton_tem_fused_baddbmm_0"]
    src = got["triton_tem_fused_baddbmm_0"]
    assert src.lstrip().startswith("import triton") and "BLOCK_M : tl.constexpr = 32" in src
    assert "triton_poi" not in src and "async_compile" not in src
    assert ksd.template_kernels("no kernels here") == {}


def test_cpu_run_writes_our_static_kernel_for_a_committed_problem(tmp_path, capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip("with CUDA the script compiles Inductor's kernel too (the GPU path)")
    data = ROOT / "datasets/nvidia-h100-80gb/2026-11-25-lognormal-2026112513-p00-19.msgpack.gz"
    name = "baddbmm 2x296x40x80 float16 NN bias=row"
    p, recs = ksd.find_problem([str(data)], name)
    assert recs and recs == sorted(recs, key=lambda r: r.median_us)
    assert ksd.main(["--data", str(data), "--problem", name, "--rank", "1", "--out", str(tmp_path)]) == 0
    ours = (tmp_path / "ours.py").read_text()
    cfg = recs[1].config
    # the static kernel class: sizes as literals, the config's tile in the launch
    assert "M = 296" in ours and "N = 40" in ours and "K = 80" in ours and "BATCH = 2" in ours
    assert "BIAS" in ours and "@triton.jit" in ours
    out = capsys.readouterr().out
    assert f'"block_m": {cfg.block_m}' in out and "no CUDA device" in out
    assert not (tmp_path / "inductor.py").exists()


def test_unknown_problem_and_rank_are_clear_errors(tmp_path):
    data = str(ROOT / "datasets/nvidia-h100-80gb/2026-11-25-lognormal-2026112513-p00-19.msgpack.gz")
    with pytest.raises(SystemExit, match="no problem named"):
        ksd.main(["--data", data, "--problem", "mm 1x1x1 float16 NN", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="ok Triton records"):
        ksd.main(["--data", data, "--problem", "baddbmm 2x296x40x80 float16 NN bias=row", "--rank", "100000",
                  "--out", str(tmp_path)])
