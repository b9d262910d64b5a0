"""The ATen-margin replay (torch_diode/aten_margin.py) for a decision family other than gemm:
an FP8 scaled_mm model is replayed with its own family's features (FamilyRanker), on its own
family's problems only, and a problem's tensor-wise and row-wise twins stay two problems
(problem_key carries `scale`). Without this a scaled_mm model's margin was chosen on GEMM
features (1.7x cuBLAS at every margin) and each twin pair was merged into one problem."""
from pathlib import Path

import pytest

from torch_diode.aten_margin import margin_row, problems_of, replay_rows
from torch_diode.collect.respec import problem_key
from torch_diode.hook.ranking import FamilyRanker, Ranker, ranker_for_model
from torch_diode.model import load_model_dir

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "datasets" / "nvidia-h200-144gb"
FP8_DATA = H200 / "2026-11-29-fleet-fp8-2026112904-s000-005.msgpack.gz"
GEMM_DATA = sorted(p for p in H200.glob("*.msgpack.gz") if "fp8" not in p.name)[0]
BUNDLES = ROOT / "python" / "torch_diode" / "bundles" / "nvidia-h200-144gb"


def _newest(d: Path) -> Path:
    return max((p for p in d.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


@pytest.fixture(scope="module")
def fp8_model():
    return load_model_dir(str(_newest(BUNDLES / "families" / "scaled_mm")))


@pytest.fixture(scope="module")
def gemm_model():
    return load_model_dir(str(_newest(BUNDLES)))


def test_problem_key_tells_scale_twins_apart():
    base = dict(op="scaled_mm", batch=1, m=64, n=4096, k=4096, dtype_a="float8_e4m3fn",
                dtype_b="float8_e4m3fn", dtype_out="bfloat16", trans_a=False, trans_b=True, bias="none")
    assert problem_key(dict(base, scale="tensor")) != problem_key(dict(base, scale="row"))
    # a split list written before wire v3 has no `scale`: a GEMM problem's is "none"
    gemm = dict(base, op="mm", dtype_a="float16", dtype_b="float16", dtype_out="float16")
    assert problem_key(gemm) == problem_key(dict(gemm, scale="none"))


def test_the_fp8_file_keeps_its_72_problems():
    problems = [p for p, _ in problems_of([str(FP8_DATA)])]
    assert len(problems) == 72
    assert sorted({p.scale for p in problems}) == ["row", "tensor"]


def test_replay_ranks_with_the_model_family_features(fp8_model):
    ranker = ranker_for_model(fp8_model)
    assert isinstance(ranker, FamilyRanker)
    rows = replay_rows(fp8_model, [str(FP8_DATA)])
    assert len(rows) == 72
    by_key = {problem_key(p): rs for p, rs in problems_of([str(FP8_DATA)])}
    for row in rows:
        rs = by_key[problem_key(row["problem"])]
        assert row["aten"] == next(r.median_us for r in rs if r.config.template == "aten")
        assert row["best"] <= min(row["aten"], row["triton"])
    # The model was trained on these problems: at margin 0 its picks beat cuBLASLt alone
    # (GEMM features in its place read 1.7x cuBLAS on the validation split).
    at0 = margin_row(rows, 0.0)
    assert at0["vs_cublas_geomean"] < 0.97, at0
    assert at0["aten_chosen"] < len(rows)
    assert margin_row(rows, float("inf"))["vs_cublas_geomean"] == pytest.approx(1.0)


def test_replay_skips_the_other_family(fp8_model, gemm_model):
    # one hardware folder holds both families' shards; each model replays only its own
    assert replay_rows(fp8_model, [str(GEMM_DATA)]) == []
    assert isinstance(ranker_for_model(gemm_model), Ranker)
    assert replay_rows(gemm_model, [str(FP8_DATA)]) == []
