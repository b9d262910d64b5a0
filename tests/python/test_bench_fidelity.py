"""bench/collector_fidelity.py without a GPU: the stratified problem sample, the CUPTI trace
parsing that separates Inductor's template kernel from the other kernels of its call, the
summary, and joining parts with --merge."""
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import collector_fidelity as f  # noqa: E402
from torch_diode.wire import Problem  # noqa: E402


def _items():
    out = []
    for op in ("mm", "addmm", "bmm", "baddbmm"):
        for dt in ("float16", "bfloat16"):
            for m in (4, 8, 512, 1024, 2048):
                out.append((Problem(op=op, m=m, n=64, k=64, dtype_a=dt, dtype_b=dt, dtype_out=dt), []))
    return out


def test_sample_covers_every_stratum_before_repeating_one():
    items = _items()
    strata = {f.stratum(p) for p, _ in items}
    assert len(strata) == 16  # 4 ops x 2 dtypes x decode or not
    got = f.select_problems(items, 16, seed=3)
    assert {f.stratum(p) for p, _ in got} == strata
    got24 = f.select_problems(items, 24, seed=3)
    assert len(got24) == 24 and got24[:16] == got       # a bigger sample extends the smaller one
    assert len({id(x) for x in got24}) == 24             # no problem twice
    assert f.select_problems(items, 24, seed=3) == got24  # deterministic
    assert f.select_problems(items, 24, seed=4) != got24
    assert len(f.select_problems(items, 1000, seed=3)) == len(items)


def _ev(name, ts, dur, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}


def test_per_call_kernels_splits_calls_at_the_flush_and_names_each_kernel():
    events = [
        _ev("triton_tem_fused_baddbmm_0", 0, 99.0),          # before the first flush: ignored
        _ev("void at::native::bitwise_not_kernel", 10, 50.0),
        _ev("triton_poi_fused_expand_0", 70, 3.0),
        _ev("triton_tem_fused_baddbmm_0", 80, 20.0),
        _ev("Memcpy DtoD", 90, 1.0, cat="gpu_memcpy"),        # not a kernel
        _ev("void at::native::bitwise_not_kernel", 110, 50.0),
        _ev("triton_tem_fused_baddbmm_0", 170, 22.0),
        _ev("triton_poi_fused_expand_0", 160, 4.0),
    ]
    calls = f.per_call_kernels(events)
    assert calls == [{"triton_poi_fused_expand_0": 3.0, "triton_tem_fused_baddbmm_0": 20.0},
                     {"triton_poi_fused_expand_0": 4.0, "triton_tem_fused_baddbmm_0": 22.0}]
    assert f.template_kernel(calls[0]) == "triton_tem_fused_baddbmm_0"
    assert f.template_kernel({"my_kernel": 1.0}) == "my_kernel"
    assert f.template_kernel({"a": 1.0, "b": 2.0}) is None


def _parts(tmp_path):
    rows1 = [{"ratio": 1.0, "ratio_kernel": 1.0}, {"ratio": 0.5, "ratio_kernel": 0.98,
                                                   "inductor_other_kernels": {"triton_poi_x": 3.0}}]
    rows2 = [{"ratio": 1.1, "ratio_kernel": 1.02}, {"ratio": 1.2}]
    probs1 = [{"best_agrees_2pct": True, "maxautotune_over_collector_best": 2.0}]
    probs2 = [{"best_agrees_2pct": False, "maxautotune_over_collector_best": 0.5},
              {"best_agrees_2pct": None, "maxautotune_over_collector_best": 1.0}]
    p1, p2 = tmp_path / "p1.json", tmp_path / "p2.json"
    p1.write_text(json.dumps({"configs": rows1, "problems": probs1}))
    p2.write_text(json.dumps({"configs": rows2, "problems": probs2}))
    return rows1 + rows2, probs1 + probs2, p1, p2


def test_summary(tmp_path):
    rows, probs, _, _ = _parts(tmp_path)
    sm = f.summarize(rows, probs)
    assert sm["problems"] == 3 and sm["configs"] == 4
    assert sm["ratio"]["median"] == pytest.approx(1.05) and sm["ratio"]["min"] == 0.5
    assert sm["ratio_kernel"]["n"] == 3 and sm["ratio_kernel"]["median"] == pytest.approx(1.0)
    assert sm["best_agrees"] == {"yes": 1, "of": 2}
    assert sm["maxautotune_over_collector_best_geomean"] == pytest.approx(1.0)
    assert sm["inductor_other_kernels"] == ["triton_poi_x"]
    assert "max_rel_err" not in sm                                       # older parts: not measured
    sm = f.summarize([{**rows[0], "ours_rel_err": 1e-3, "static_rel_err": 2e-3},
                      {**rows[1], "ours_rel_err": 4e-3}], probs)
    assert sm["max_rel_err"] == {"ours": 4e-3, "static": 2e-3}


def test_merge_cli_joins_parts_into_one_summary(tmp_path):
    rows, probs, p1, p2 = _parts(tmp_path)
    out = tmp_path / "all.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench/collector_fidelity.py"), "--merge", str(p1), str(p2),
                        "--json", str(out)], capture_output=True, text=True, check=True)
    assert "best config agrees within 2%: 1/2 problems" in r.stdout
    assert json.loads(out.read_text())["summary"] == f.summarize(rows, probs)


def test_list_cli_selects_from_a_real_dataset():
    data = ROOT / "datasets/nvidia-h100-80gb"
    r = subprocess.run([sys.executable, str(ROOT / "bench/collector_fidelity.py"), "--data", str(data),
                        "--sample", "24", "--seed", "1", "--start", "12", "--count", "12", "--list"],
                       capture_output=True, text=True, check=True)
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 13 and lines[-1].startswith("12 problems in ")


def test_importing_the_module_leaves_the_environment_alone(monkeypatch):
    # It once set TORCH_DIODE_AUTO_INSTALL=0 at import, which silenced the hook for every
    # later test of the same pytest process.
    import importlib
    import os
    monkeypatch.delenv("TORCH_DIODE_AUTO_INSTALL", raising=False)
    importlib.reload(f)
    assert "TORCH_DIODE_AUTO_INSTALL" not in os.environ


def test_backfill_recorded_judges_the_datasets_own_pick():
    rows = [{"problem": "p", "collector_recorded_us": 5.0, "inductor_us": 6.0},   # the dataset's pick...
            {"problem": "p", "collector_recorded_us": 5.5, "inductor_us": 5.0},   # ...but Inductor's best
            {"problem": "q", "collector_recorded_us": 2.0, "inductor_us": 2.0},
            {"problem": "q", "collector_recorded_us": 3.0, "inductor_us": 2.01}]
    probs = [{"problem": "p"}, {"problem": "q"}, {"problem": "r"}]
    f.backfill_recorded(rows, probs)
    assert rows[0]["ratio_recorded"] == pytest.approx(5.0 / 6.0)
    assert probs[0]["recorded_best_agrees_2pct"] is False                 # 6.0 > 1.02 x 5.0
    assert probs[1]["recorded_best_agrees_2pct"] is True
    assert "recorded_best_agrees_2pct" not in probs[2]                    # no rows: no verdict
    sm = f.summarize([{**x, "ratio": 1.0} for x in rows], probs)
    assert sm["recorded_best_agrees"] == {"yes": 1, "of": 2} and sm["ratio_recorded"]["n"] == 4


def test_pick_agrees_compares_a_pick_with_inductors_best_of_all_rows():
    rows = [{"ours_us": 4.0, "static_us": 5.0, "inductor_us": 5.0},
            {"ours_us": 5.0, "inductor_us": 4.0},                     # Inductor's best; no static time
            {"ours_us": 6.0, "static_us": 4.5, "inductor_us": 4.05}]
    assert f.pick_agrees(rows, "ours_us") is False                      # 5.0 > 1.02 x 4.0
    assert f.pick_agrees(rows, "static_us") is True                     # picks row 3: 4.05 <= 4.08
    assert f.pick_agrees(rows, "missing") is None and f.pick_agrees([], "ours_us") is None


def test_pick_agrees_by_inductors_template_kernel():
    # Inductor's events figure of row 1 is CPU-bound (its call, not its kernel): judged by
    # events the dataset's pick looks 20x off; by the template kernel it is Inductor's best.
    rows = [{"collector_recorded_us": 4.0, "inductor_us": 90.0, "inductor_kernel_us": 2.0},
            {"collector_recorded_us": 4.2, "inductor_us": 4.5, "inductor_kernel_us": 2.1},
            {"collector_recorded_us": 4.3, "inductor_us": 4.6}]              # not profiled
    assert f.pick_agrees(rows, "collector_recorded_us") is False
    assert f.pick_agrees(rows, "collector_recorded_us", "inductor_kernel_us") is True
    rows[1]["inductor_kernel_us"] = 1.9                                     # 2.0 > 1.02 x 1.9
    assert f.pick_agrees(rows, "collector_recorded_us", "inductor_kernel_us") is False
    assert f.pick_agrees(rows[2:], "collector_recorded_us", "inductor_kernel_us") is None


def test_derive_row_and_judge_picks():
    row = {"inductor_template_kernel": "triton_tem_fused_mm_0",
           "inductor_kernels_us": {"triton_tem_fused_mm_0": 2.3, "triton_poi_x": 1.0},
           "inductor_us": 208.8, "static_us": 5.2, "ours_us": 5.5, "collector_recorded_us": 4.9}
    f.derive_row(row)
    assert row["inductor_kernel_us"] == 2.3 and row["inductor_cpu_bound"] is True
    plain = {"inductor_us": 5.0, "static_us": 4.9}
    f.derive_row(plain)
    assert plain["inductor_cpu_bound"] is False and "inductor_kernel_us" not in plain
    other = {"ours_us": 5.0, "static_us": 4.8, "collector_recorded_us": 5.0, "inductor_us": 5.0,
             "inductor_kernel_us": 2.34}                                     # within 2% of 2.3
    v = f.judge_picks([row, other])
    assert v["recorded_best_agrees_2pct"] is False and v["recorded_best_agrees_kernel_2pct"] is True
    assert v["static_best_agrees_2pct"] is True and v["static_best_agrees_kernel_2pct"] is True
    assert v["best_agrees_2pct"] is True and v["best_agrees_kernel_2pct"] is True  # ours picks `other`
    probs = [{"problem": "p", **v}]
    sm = f.summarize([{**row, "ratio": 1.0}, {**other, "ratio": 1.0}], probs)
    assert sm["recorded_best_agrees"] == {"yes": 0, "of": 1}
    assert sm["recorded_best_agrees_kernel"] == {"yes": 1, "of": 1}
    assert sm["inductor_cpu_bound"] == {"yes": 1, "of": 1}


def test_backfill_adds_kernel_verdicts_to_old_parts():
    rows = [{"problem": "p", "collector_recorded_us": 4.0, "ours_us": 5.0, "inductor_us": 90.0, "static_us": 4.1,
             "inductor_template_kernel": "k", "inductor_kernels_us": {"k": 2.0}},
            {"problem": "p", "collector_recorded_us": 4.4, "ours_us": 5.2, "inductor_us": 4.5, "static_us": 4.3,
             "inductor_template_kernel": "k", "inductor_kernels_us": {"k": 2.2}}]
    probs = [{"problem": "p", "recorded_best_agrees_2pct": False}]      # written by an older version
    f.backfill_recorded(rows, probs)
    assert probs[0]["recorded_best_agrees_2pct"] is False              # kept as measured
    assert probs[0]["recorded_best_agrees_kernel_2pct"] is True
    assert rows[0]["inductor_cpu_bound"] is True and rows[1]["inductor_cpu_bound"] is False


def test_static_kernel_time_is_derived_for_old_parts_and_judged():
    rows = [{"problem": "p", "static_us": 5.0, "inductor_us": 5.0, "inductor_template_kernel": "k",
             "inductor_kernels_us": {"k": 2.0}, "ratio_static_kernel": 1.05},       # static kernel 2.1 us
            {"problem": "p", "static_us": 5.1, "inductor_us": 5.1, "inductor_template_kernel": "k",
             "inductor_kernels_us": {"k": 2.1}, "static_kernel_us": 2.05}]          # measured directly
    probs = [{"problem": "p"}]
    f.backfill_recorded(rows, probs)
    assert rows[0]["static_kernel_us"] == pytest.approx(2.1) and rows[1]["static_kernel_us"] == 2.05
    # the static kernels' own CUPTI time picks row 2, whose Inductor kernel is 2.1 > 1.02 x 2.0
    assert probs[0]["static_kernel_best_agrees_kernel_2pct"] is False
    assert probs[0]["static_best_agrees_kernel_2pct"] is True                # events pick row 1
    assert "static_kernel_best_agrees_kernel" in f.summarize([{**x, "ratio": 1.0} for x in rows], probs)

