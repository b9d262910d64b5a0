"""bench/models.py (the model zoo): the report's ratios, goals and A/A rows from results,
the entry plan, the GPU lock; a tiny CPU run where transformers is installed."""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import models as zoo  # noqa: E402


def entry(label, us, compile_s=None, paths=None, correct=True):
    e = {"label": label, "gpu": {"us": us}}
    if compile_s is not None:
        e.update(compile_s=compile_s, rel_err=0.001, correct=correct)
    if paths is not None:
        e["gemm_paths"] = paths
    return e


def result(model, mode, entries):
    return {"model": model, "dtype": "bfloat16", "mode": mode, "status": "ok", "entries": entries}


def test_report_ratios_goals_and_same_kernel_rows(tmp_path):
    res = [result("llama3_8b", "eager", [entry("decode_b1", 700), entry("prefill_8x128", 3000)]),
           result("llama3_8b", "plain", [entry("decode_b1", 500, 4.0), entry("prefill_8x128", 2000, 5.0)]),
           result("llama3_8b", "diode", [entry("decode_b1", 440, 4.2, {"aten": 2, "gemv:reduction": 14}),
                                        entry("prefill_8x128", 2040, 6.0, {"aten": 16})]),
           result("llama3_8b", "default", [entry("prefill_8x128", 2100, 50.0)]),
           result("llama3_8b", "diode_ma", [entry("prefill_8x128", 1990, 10.0, {"aten": 16}, correct=False)])]
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"results": res}))
    assert zoo.main(["report", str(run), "--out", str(tmp_path / "r")]) == 0
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    rows = {r["entry"]: r for r in s["rows"]}
    assert rows["decode_b1"]["diode_gpu"] == pytest.approx(0.88)
    assert rows["decode_b1"]["notes"] == []                         # 0.88 <= 0.90 and compile 1.05
    assert rows["prefill_8x128"]["diode_gpu"] == pytest.approx(1.02)
    assert rows["prefill_8x128"]["ma_gpu"] == pytest.approx(1990 / 2000)
    assert rows["prefill_8x128"]["ma_compile"] == pytest.approx(0.2)
    notes = rows["prefill_8x128"]["notes"]
    assert "GPU>plain" in notes and "compile" in notes and any("diode_ma output off" in n for n in notes)
    assert rows["prefill_8x128"]["same_kernels"] and not rows["decode_b1"]["same_kernels"]
    assert s["summary"]["same_kernels_entries"] == 1
    assert s["summary"]["diode_gpu_vs_plain_geomean"] == pytest.approx((0.88 * 1.02) ** 0.5)
    assert s["summary"]["geomean_goal_met"] is True
    assert (tmp_path / "r" / "speedup_vs_compile.svg").read_text().startswith("<svg")


def test_entries_plan():
    assert [e["label"] for e in zoo.entries("llama3_8b")] == [
        "prefill_1x512", "prefill_8x128", "prefill_4x2048", "decode_b1", "decode_b8", "decode_b32"]
    assert [e["label"] for e in zoo.entries("bert_base")] == ["prefill_1x512", "prefill_8x128", "prefill_4x512"]
    assert [e["label"] for e in zoo.entries("resnet50")] == ["b1", "b8", "b32"]


def test_gpu_lock_timing_excludes_shared_work(tmp_path):
    lock = zoo.GpuLock(str(tmp_path / "gpu.lock"))
    events = []

    def reader():
        with lock.shared():
            events.append("r+")
            time.sleep(0.3)
            events.append("r-")

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.05)
    with lock.exclusive():
        events.append("w")
    t.join()
    assert events == ["r+", "r-", "w"]


def test_tiny_cpu_run(tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "z"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "models.py"), "run", "--tiny", "--device", "cpu",
                        "--models", "bert_base", "--only", "prefill_8x64", "--dtypes", "float32",
                        "--modes", "eager,plain", "--jobs", "1", "--reps", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "python")})
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((out / "results.json").read_text())["results"]
    plain = next(x for x in res if x["mode"] == "plain")
    assert plain["status"] == "ok" and plain["entries"][0]["correct"] is True
