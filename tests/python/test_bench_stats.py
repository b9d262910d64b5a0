"""bench/stats.py (torch_diode/summary_stats.py, loaded from its file), the one geomean / quantile / p90 / median of every bench script: hand-checked
cases, every bench script using it, and agreement with the C++ reference (`regret_stats`,
models/src/metrics.cpp) through what `diode validate --report` writes."""
from __future__ import annotations

import importlib
import json
import math
import pathlib
import sys

import os

import pytest

from model_tools import DIODE, needs_model_tools, run

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import stats  # noqa: E402  (bench/stats.py)


# ---------------------------------------------------------------- hand-checked values

def test_one_value():
    assert stats.geomean([5.0]) == pytest.approx(5.0)
    assert stats.median([5.0]) == 5.0
    assert stats.p90([5.0]) == 5.0
    assert stats.quantile([5.0], 0.0) == stats.quantile([5.0], 0.1) == stats.quantile([5.0], 1.0) == 5.0


def test_six_values():
    xs = [4.0, 1.0, 6.0, 3.0, 5.0, 2.0]                 # unsorted on purpose
    assert stats.geomean(xs) == pytest.approx(720 ** (1 / 6))
    assert stats.median(xs) == 3.5                        # mean of the two middle values
    # nearest rank: ceil(0.9 * 6) = rank 6; the old round(0.9 * 5) = round(4.5) = 4 picked 5.0
    assert stats.p90(xs) == 6.0
    assert stats.quantile(xs, 0.1) == 1.0                 # ceil(0.6) = rank 1
    assert stats.quantile(xs, 0.5) == 3.0                 # ceil(3.0) = rank 3: a value, not 3.5


def test_ten_values():
    xs = [float(i) for i in range(10, 0, -1)]
    assert stats.geomean(xs) == pytest.approx(math.factorial(10) ** (1 / 10))
    assert stats.median(xs) == 5.5
    assert stats.p90(xs) == 9.0                           # ceil(9.0) = rank 9, not the maximum
    assert stats.quantile(xs, 0.1) == 1.0
    assert stats.quantile(xs, 1.0) == 10.0
    assert stats.quantile(xs, 0.0) == 1.0                 # rank 0 is taken as rank 1


def test_thirty_values():
    xs = [float(i) for i in range(1, 31)]
    xs = xs[::2] + xs[1::2]
    assert stats.geomean(xs) == pytest.approx(math.exp(math.lgamma(31) / 30))
    assert stats.median(xs) == 15.5
    assert stats.p90(xs) == 27.0                          # ceil(27.0) = rank 27
    assert stats.quantile(xs, 0.1) == 3.0
    assert stats.quantile(xs, 0.95) == 29.0               # ceil(28.5) = rank 29


def test_none_entries_are_left_out():
    assert stats.geomean([None, 2.0, None, 8.0]) == pytest.approx(4.0)
    assert stats.median([None, 1.0, 3.0]) == 2.0
    assert stats.p90([3.0, None, 1.0]) == 3.0            # n = 2: ceil(1.8) = rank 2
    assert stats.quantile([None, 7.0], 0.5) == 7.0


@pytest.mark.parametrize("xs", [[], [None], (x for x in [])])
def test_no_values_give_none(xs):
    xs = list(xs)
    assert stats.geomean(xs) is None
    assert stats.median(xs) is None
    assert stats.p90(xs) is None
    assert stats.quantile(xs, 0.5) is None


def test_generators_are_accepted():
    assert stats.geomean(x for x in (2.0, 8.0)) == pytest.approx(4.0)
    assert stats.p90(x for x in (1.0, 2.0)) == 2.0


# ---------------------------------------------------------------- every bench script uses it

@pytest.mark.parametrize("module, names", [
    ("collector_throughput", ("median", "p90", "quantile")),
    ("hook_end_to_end", ("geomean",)),
    ("models", ("geomean",)),
])
def test_bench_scripts_use_the_one_definition(module, names):
    m = importlib.import_module(module)
    for n in names:
        assert getattr(m, n) is getattr(stats, n), (module, n)


def test_thin_wrappers():
    import predict_aten_margin
    xs = [4.0, 1.0, 6.0, 3.0, 5.0, 2.0]
    assert predict_aten_margin.stats(xs) == (stats.geomean(xs), 6.0, 6.0)


# ---------------------------------------------------------------- the C++ reference

@pytest.fixture(scope="module")
def report(synthetic_models, tmp_path_factory):
    """summary.json of `diode validate --report` on the synthetic dataset (17 test problems)."""
    _, data, (model, _) = synthetic_models
    rep = tmp_path_factory.mktemp("stats_report") / "report"
    run(DIODE, "validate", "--model", model, "--dataset", data, "--report", rep, "--json")
    return json.loads((rep / "summary.json").read_text())


def _same(got: dict, want: dict, what: str) -> None:
    assert got["geomean"] == pytest.approx(want["geomean"], rel=1e-9), what
    assert got["p90"] == pytest.approx(want["p90"], rel=1e-9), what


def _ours(xs: list[float]) -> dict:
    return {"geomean": stats.geomean(xs), "p90": stats.p90(xs)}


@needs_model_tools
def test_agrees_with_diode_validate_overall(report):
    """The overall table (`diode validate --json`'s "model" and "baselines", every candidate,
    ATen included) recomputed from summary.json's per-problem regrets. Each problem's
    "overall" holds its top-1, top-5 and top-10 regret in that order (kRegretK)."""
    probs, overall = report["problems"], report["overall"]
    assert len(probs) == overall["problems"] > 0
    for j, k in enumerate(("top1", "top5", "top10")):
        _same(_ours([p["overall"][j] for p in probs]), overall["model"][k], f"model {k}")
        # per op and per dtype: a problem's label is "<op> <dtype>"
        for grp, part in (("per_op", 0), ("per_dtype", 1)):
            for key, want in overall["model"][grp].items():
                xs = [p["overall"][j] for p in probs if p["label"].split()[part] == key]
                _same(_ours(xs), want[k], f"model {grp} {key} {k}")
    for name, field in (("cublas", "cublas"), ("inductor_default", "inductor_default_overall")):
        _same(_ours([p[field] for p in probs]), overall["baselines"][name], name)


@needs_model_tools
def test_agrees_with_diode_validate_triton_metrics(report):
    """The Triton-only regrets of the model's metrics (model.json's `metrics`) and of every
    op/dtype label, from the same per-problem figures."""
    probs, m = report["problems"], report["metrics"]
    for j, k in enumerate(("top1", "top5", "top10")):
        _same(_ours([p["regret"][j] for p in probs]), m["regret"][k], f"regret {k}")
        _same(_ours([p["regret_with_aten"][j] for p in probs]), m["regret_with_aten"][k], f"regret_with_aten {k}")
        _same(_ours([p["overall"][j] for p in probs]), m["regret_overall"][k], f"regret_overall {k}")
        for label, want in report["by_op_dtype"].items():
            _same(_ours([p["regret"][j] for p in probs if p["label"] == label]), want[k], f"{label} {k}")
    _same(_ours([p["inductor_default"] for p in probs]), m["inductor_default"], "inductor_default")


def test_bench_stats_is_the_package_module_loaded_without_the_package_or_torch():
    """bench/stats.py re-exports torch_diode/summary_stats.py (the one definition, which the
    package's GEMV tool uses too) without importing torch_diode, whose import loads torch and
    installs the hook: a bench script that reads JSON pays for neither."""
    import subprocess
    code = ("import sys; sys.path.insert(0, 'bench'); import stats, inspect; "
            "print(inspect.getsourcefile(stats.geomean)); "
            "print('torch_diode' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert pathlib.Path(out[0]).resolve() == ROOT / "python/torch_diode/summary_stats.py"
    assert out[1] == "False False"


def test_release_recipe_cv_uses_the_packages_definition():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "python" / "release" / "recipe_cv.py"
    spec = importlib.util.spec_from_file_location("recipe_cv", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    assert m.geomean is stats.geomean and m.p90 is stats.p90   # the same module object as bench's
    assert "TORCH_DIODE_AUTO_INSTALL" not in os.environ           # importing it changes no environment
