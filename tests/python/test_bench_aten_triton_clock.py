"""bench/aten_triton_clock.py without a GPU: the derived figures (ratios under each clock,
events - CUPTI offsets, winner flips), the summary, joining parts with --merge, the CUPTI
trace parsing (launch counts, memcpy, span), and the whole driver with --dry-run (FAKE
timings) on a real dataset file."""
import json
import math
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import aten_triton_clock as c  # noqa: E402
from torch_diode.wire import KernelConfig, ShardRecord  # noqa: E402

SCRIPT = str(ROOT / "bench/aten_triton_clock.py")
DATA = ROOT / "datasets/nvidia-h100-80gb/2026-11-25-mix-2026112507-p004-015.msgpack.gz"


def _row(name, rec_a, rec_t, ev_a, cu_a, ev_t, cu_t, kernels_a=1, **kw):
    return c.derive({"problem": name, "aten_recorded_us": rec_a, "triton_recorded_us": rec_t,
                     "aten_events_us": ev_a, "aten_cupti_us": cu_a, "triton_events_us": ev_t,
                     "triton_cupti_us": cu_t, "aten_kernels": kernels_a, "triton_kernels": 1, **kw})


def test_derive_ratios_offsets_and_winners():
    # the dataset and the events say Triton wins (0.9); by kernel time cuBLAS wins
    r = _row("p", 10.0, 9.0, 10.0, 7.0, 9.0, 8.0)
    assert r["ratio_recorded"] == pytest.approx(0.9)
    assert r["ratio_events"] == pytest.approx(0.9)
    assert r["ratio_cupti"] == pytest.approx(8.0 / 7.0)
    assert r["aten_offset_us"] == pytest.approx(3.0) and r["triton_offset_us"] == pytest.approx(1.0)
    assert (r["winner_recorded"], r["winner_events"], r["winner_cupti"]) == ("triton", "triton", "aten")
    assert r["winner_flip"] is True and r["winner_flip_recorded"] is True
    same = _row("q", 10.0, 12.0, 10.0, 9.0, 12.0, 11.0)
    assert same["winner_flip"] is False and same["winner_flip_recorded"] is False
    tie = _row("t", 5.0, 5.0, 5.0, 4.0, 5.0, 4.0)
    assert tie["winner_events"] == "aten"                              # a tie goes to ATen
    bias = c.derive({"triton_recorded_us": 9.0, "aten_recorded_us": 10.0, "bias_addmm_recorded_us": 12.0})
    assert bias["ratio_recorded_bias_addmm"] == pytest.approx(0.75)
    assert bias["ratio_events"] is None and bias["aten_offset_us"] is None and bias["winner_flip"] is None
    assert bias["winner_flip_recorded"] is None                        # no CUPTI figure to compare with


def _rows():
    return [_row("a", 10.0, 5.0, 10.0, 7.0, 5.0, 4.0, kernels_a=2),    # ratios 0.5 / 0.5 / 4/7
            _row("b", 10.0, 20.0, 10.0, 6.0, 20.0, 19.0),              # 2.0 / 2.0 / 19/6
            _row("c", 40.0, 36.0, 40.0, 38.0, 36.0, 35.0),             # 0.9 / 0.9 / 35/38 (large)
            c.derive({"problem": "d", "aten_recorded_us": 3.0, "triton_recorded_us": 2.0, "error": "setup: boom"})]


def test_summary_exact_figures():
    rows = _rows()
    sm = c.summarize(rows, skipped=2)
    assert (sm["problems"], sm["measured"], sm["failed"], sm["skipped"]) == (4, 3, 1, 2)
    ev = sm["ratio"]["events"]
    assert ev["n"] == 3 and ev["geomean"] == pytest.approx(0.9 ** (1 / 3))   # 0.5 * 2.0 * 0.9
    assert ev["median"] == pytest.approx(0.9) and ev["p90"] == pytest.approx(2.0)
    cu = sm["ratio"]["cupti"]
    assert cu["geomean"] == pytest.approx(((4 / 7) * (19 / 6) * (35 / 38)) ** (1 / 3))
    assert sm["ratio"]["recorded"]["geomean"] == pytest.approx(ev["geomean"])  # the failed row is left out
    assert sm["ratio"]["recorded_bias_addmm"] is None
    assert sm["offset_us"]["aten"] == {"median": pytest.approx(3.0), "n": 3,
                                       "median_small": pytest.approx(3.5), "n_small": 2}   # 3, 4 (2 large)
    assert sm["offset_us"]["triton"]["median"] == pytest.approx(1.0)
    assert sm["offset_us"]["triton"]["median_small"] == pytest.approx(1.0)
    # a: triton by events (0.5), triton by CUPTI (0.57): no flip; b: aten both; c: triton both
    assert sm["winner_flip"] == {"yes": 0, "of": 3} and sm["winner_flip_recorded"] == {"yes": 0, "of": 3}
    flip = _row("e", 10.0, 9.5, 10.0, 6.0, 9.5, 8.0)
    assert c.summarize(rows + [flip])["winner_flip"] == {"yes": 1, "of": 4}
    assert sm["aten_multi_kernel"] == {"yes": 1, "of": 3} and sm["triton_multi_kernel"] == {"yes": 0, "of": 3}
    assert c.geomean([0.5, 2.0]) == pytest.approx(1.0) and c.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert "max_rel_err" not in sm
    errs = c.summarize([{**rows[0], "aten_rel_err": 0.0, "triton_rel_err": 1e-3}, {**rows[1], "triton_rel_err": 4e-3}])
    assert errs["max_rel_err"] == {"aten": 0.0, "triton": 4e-3}
    md = c.markdown(sm, rows, "H100")
    assert "FAKE" not in md and "| d | 3.00 | - | 2.00 | failed: setup: boom" in md
    assert "winner flips (faster of ATen / Triton differs, events now vs CUPTI now): 0/3" in md
    assert "FAKE" in c.markdown(sm, rows, "x", fake=True)


def test_merge_equals_one_run_and_refuses_fake_with_real(tmp_path):
    rows = _rows()
    p1 = {"rows": rows[:2], "skipped": 0, "device": "H100"}
    p2 = {"rows": rows[2:], "skipped": 3, "device": "H100"}
    doc = c.merge([json.loads(json.dumps(p1)), json.loads(json.dumps(p2))])
    assert doc["rows"] == json.loads(json.dumps(rows)) and doc["skipped"] == 3 and doc["fake"] is False
    assert doc["summary"] == c.summarize(rows, 3)
    with pytest.raises(ValueError, match="FAKE"):
        c.merge([p1, {**p2, "fake": True}])
    # the CLI: the same summary, written as JSON
    f1, f2, out = tmp_path / "1.json", tmp_path / "2.json", tmp_path / "all.json"
    f1.write_text(json.dumps(p1))
    f2.write_text(json.dumps(p2))
    r = subprocess.run([sys.executable, SCRIPT, "--merge", str(f1), str(f2), "--json", str(out)],
                       capture_output=True, text=True, check=True)
    assert "2 parts: H100" in r.stdout and "FAKE" not in r.stdout
    got = json.loads(out.read_text())
    assert got["summary"] == json.loads(json.dumps(c.summarize(rows, 3)))


def _ev(name, ts, dur, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}


def test_profile_calls_counts_launches_memcpy_and_span():
    flush = "void at::native::vectorized_elementwise_kernel<bitwise_not_kernel_cuda>"
    events = [
        _ev("stray_gemm", 0, 99.0),                                   # before the first marker: ignored
        _ev(flush, 10, 50.0),
        _ev("Memcpy DtoD (Device -> Device)", 61, 2.0, cat="gpu_memcpy"),
        _ev("sm90_xmma_gemm_splitk", 64, 10.0),
        _ev("splitKreduce_kernel", 76, 2.0),                          # 2 us gap before it
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 65, "dur": 5},  # CPU side: ignored
        _ev(flush, 100, 50.0),
        _ev("sm90_xmma_gemm_splitk", 151, 11.0),
        _ev("splitKreduce_kernel", 162, 2.0),
        _ev("sm90_xmma_gemm_splitk", 164, 1.0),                       # same name twice: 2 launches, one sum
    ]
    calls = c.profile_calls(events)
    assert len(calls) == 2
    a, b = calls
    assert a["total_us"] == 12.0 and a["launches"] == 2 and a["memops"] == 1 and a["memops_us"] == 2.0
    assert a["names"] == ["sm90_xmma_gemm_splitk", "splitKreduce_kernel"] and a["span_us"] == 78 - 61
    assert b["kernels"] == {"sm90_xmma_gemm_splitk": 12.0, "splitKreduce_kernel": 2.0}
    assert b["launches"] == 3 and b["memops"] == 0 and b["span_us"] == 165 - 151
    s = c.profile_summary(calls)
    assert s["cupti_us"] == 13.0 and s["kernels"] == 2 and s["memops"] == 0 and s["calls"] == 2
    assert s["kernel_names"] == ["sm90_xmma_gemm_splitk", "splitKreduce_kernel"]
    assert s["kernels_us"] == {"sm90_xmma_gemm_splitk": 11.0, "splitKreduce_kernel": 2.0}
    assert c.profile_summary([]) == {"cupti_us": None}


def test_recorded_figures_of_a_problem():
    def rec(template, us, status="ok", **kw):
        return ShardRecord(0, KernelConfig(template=template, **kw), us, status=status)
    recs = [rec("aten", 10.0), rec("aten::bias_addmm", 9.5), rec("triton::mm", 8.0, block_m=64),
            rec("triton::mm", 7.0, block_m=128), rec("decompose_k", 1.0)]
    got = c.recorded(recs)
    assert got["aten_recorded_us"] == 10.0 and got["bias_addmm_recorded_us"] == 9.5
    assert got["triton_recorded_us"] == 7.0 and got["triton_config"]["block_m"] == 128
    assert c.best_triton(recs).config.block_m == 128
    none = c.recorded([rec("aten", 3.0)])
    assert none["triton_recorded_us"] is None and none["bias_addmm_recorded_us"] is None


def test_dry_run_on_a_real_dataset_file(tmp_path):
    out = tmp_path / "dry.json"
    r = subprocess.run([sys.executable, SCRIPT, "--data", str(DATA), "--sample", "6", "--seed", "1",
                        "--dry-run", "--json", str(out)], capture_output=True, text=True, check=True, timeout=120)
    assert "FAKE" in r.stdout.splitlines()[0]
    d = json.loads(out.read_text())
    assert d["fake"] is True and d["device"].startswith("FAKE") and "partial" not in d
    rows, sm = d["rows"], d["summary"]
    assert len(rows) == 6 and sm["problems"] == 6 and sm["measured"] == 6 and sm["skipped"] == 0
    for x in rows:
        for k in ("problem", "aten_recorded_us", "triton_recorded_us", "triton_config", "aten_events_us",
                  "aten_cupti_us", "triton_events_us", "triton_cupti_us", "ratio_recorded", "ratio_events",
                  "ratio_cupti", "aten_offset_us", "triton_offset_us", "winner_flip", "aten_kernels",
                  "aten_kernel_names"):
            assert x.get(k) is not None, (x["problem"], k)
        assert x["ratio_events"] == pytest.approx(x["triton_events_us"] / x["aten_events_us"])
        assert x["ratio_recorded"] == pytest.approx(x["triton_recorded_us"] / x["aten_recorded_us"])
        assert x["aten_offset_us"] == pytest.approx(x["aten_events_us"] - x["aten_cupti_us"])
        assert x["winner_flip"] == ((x["ratio_events"] < 1) != (x["ratio_cupti"] < 1))
    for clock in ("recorded", "events", "cupti"):
        rs = [x["ratio_" + clock] for x in rows]
        assert sm["ratio"][clock]["geomean"] == pytest.approx(math.exp(sum(map(math.log, rs)) / len(rs)))
    assert sm["winner_flip"] == {"yes": sum(x["winner_flip"] for x in rows), "of": 6}
    assert sm["aten_multi_kernel"]["yes"] == sum(x["aten_kernels"] > 1 for x in rows)
    assert sm == json.loads(json.dumps(c.summarize(rows, 0)))
    # the FAKE clock's made-up offsets (ATen 3 us, Triton 1 us) come out of the real plumbing
    assert sm["offset_us"]["aten"]["median"] == pytest.approx(3.0, abs=0.2)
    assert sm["offset_us"]["triton"]["median"] == pytest.approx(1.0, abs=0.2)
    # a budget already spent: no problem is started, every one is counted as skipped
    r = subprocess.run([sys.executable, SCRIPT, "--data", str(DATA), "--sample", "6", "--dry-run",
                        "--budget-s", "-1", "--json", str(out)], capture_output=True, text=True, check=True,
                       timeout=120)
    d = json.loads(out.read_text())
    assert "after 0 problems; 6 skipped" in r.stdout and d["summary"]["skipped"] == 6 and d["rows"] == []
    assert d["summary"]["ratio"]["events"] is None and "6 skipped for the budget" in r.stdout


def test_without_a_gpu_it_says_so():
    r = subprocess.run([sys.executable, SCRIPT, "--data", str(DATA), "--sample", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "no CUDA GPU" in r.stderr and "--dry-run" in r.stderr


def test_importing_the_module_leaves_the_environment_alone(monkeypatch):
    import importlib
    import os
    monkeypatch.delenv("TORCH_DIODE_AUTO_INSTALL", raising=False)
    importlib.reload(c)
    assert "TORCH_DIODE_AUTO_INSTALL" not in os.environ


def test_measure_keeps_events_when_cupti_fails_and_reports_setup_errors():
    import types
    from torch_diode.wire import Problem
    p = Problem(op="addmm", m=64, n=128, k=256, dtype_a="float16", dtype_b="float16", dtype_out="float16",
                bias="row")
    recs = [ShardRecord(0, KernelConfig(template="aten"), 10.0),
            ShardRecord(0, KernelConfig(template="triton::mm", block_m=64), 8.0)]
    a = types.SimpleNamespace(rounds=2, repeats=3, profile_reps=4, profile_rounds=2)
    ok = c.measure(c.FakeClock(0), p, recs, a)
    assert ok["aten_kernels"] == 2 and ok["aten_calls"] == 4 and ok["triton_calls"] == 4
    assert ok["aten_kernel_names"] == ["fake_bias_copy", "fake_aten_gemm"] and "error" not in ok

    class NoCupti(c.FakeClock):
        def profile(self, fn, reps):
            raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")
    row = c.measure(NoCupti(0), p, recs, a)
    assert "error" not in row and row["profile_error"].startswith("RuntimeError: CUPTI")
    assert row["ratio_events"] == pytest.approx(row["triton_events_us"] / row["aten_events_us"])
    assert row["ratio_cupti"] is None and row["winner_flip"] is None
    sm = c.summarize([row, ok])
    assert sm["measured"] == 2 and sm["profile_failed"] == 1
    assert sm["ratio"]["events"]["n"] == 2 and sm["ratio"]["cupti"]["n"] == 1 and sm["winner_flip"]["of"] == 1

    class NoKernel(c.FakeClock):
        def setup(self, p, recs, cfg):
            raise RuntimeError("out of resource: shared memory\nmore")
    bad = c.measure(NoKernel(0), p, recs, a)
    assert bad["error"] == "setup: RuntimeError: out of resource: shared memory"
    assert bad["ratio_recorded"] == pytest.approx(0.8) and c.summarize([bad])["failed"] == 1
