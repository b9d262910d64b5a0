"""bench/models.py (the model zoo): the report's ratios, goals and A/A rows from results,
the entry plan, the GPU lock; a tiny CPU run where transformers is installed."""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

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


def _scaled_mm_on_cpu():
    import torch
    try:
        a = torch.zeros(16, 16).to(torch.float8_e4m3fn)
        torch._scaled_mm(a, a.t(), scale_a=torch.tensor(1.0), scale_b=torch.tensor(1.0), out_dtype=torch.bfloat16)
        return None
    except Exception as e:  # noqa: BLE001 - a torch whose CPU build has no FP8 GEMM
        return f"torch._scaled_mm is not supported on this CPU build: {type(e).__name__}: {e}"


@pytest.mark.parametrize("scale", ["tensor", "row"])
def test_fp8_linear_numerics(scale):
    torch = pytest.importorskip("torch")
    why = _scaled_mm_on_cpu()
    if why:
        pytest.skip(why)
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 48, bias=True)
    fp8 = zoo._fp8_linear_class()(lin, scale)
    # the stored weight: float8_e4m3fn, column-major [in, out], its scales float32 of the kind asked for
    assert fp8.weight_t.dtype == torch.float8_e4m3fn and fp8.weight_t.shape == (64, 48)
    assert fp8.weight_t.stride() == (1, 64)
    assert fp8.scale_b.dtype == torch.float32
    assert fp8.scale_b.shape == (() if scale == "tensor" else (1, 48))
    x = torch.randn(2, 5, 64, dtype=torch.bfloat16)
    with torch.no_grad():
        y = fp8(x)
        ref = lin(x.float())
    assert y.dtype == torch.bfloat16 and y.shape == (2, 5, 48)
    rel = float((y.float() - ref).norm() / ref.norm())
    assert rel < 0.06, rel   # e4m3 keeps 3 mantissa bits: a few percent on both operands
    # the dequantised weight is the weight within one e4m3 step
    deq = fp8.weight_t.float().t() * (fp8.scale_b if scale == "tensor" else fp8.scale_b.t())
    assert float((deq - lin.weight).abs().max()) <= float(lin.weight.abs().max()) / 8


def test_quantise_replaces_the_decoder_linears():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    model, _ = zoo.build_model("llama3_8b", 1, torch.bfloat16, "cpu", tiny=True)
    n = zoo.quantise_fp8(model, "tensor")
    assert n == 7   # q, k, v, o, gate, up, down
    kinds = {type(m).__name__ for m in model.model.layers[0].modules()}
    assert "FP8Linear" in kinds and "Linear" not in kinds
    assert type(model.lm_head).__name__ == "Linear"   # outside the decoder layers: as it was


def test_fp8_cli_flag(monkeypatch):
    seen = {}
    monkeypatch.setattr(zoo, "run", lambda a: seen.setdefault("dtypes", a.dtypes) and 0)
    assert zoo.main(["run", "--fp8", "--models", "llama3_8b,bert_base", "--out", "/tmp/unused"]) == 0
    assert seen.pop("dtypes") == ["fp8"]
    zoo.main(["run", "--fp8", "--fp8-scale", "row", "--models", "qwen2_5_1_5b", "--out", "/tmp/unused"])
    assert seen.pop("dtypes") == ["fp8_row"]
    zoo.main(["run", "--dtypes", "bfloat16,fp8_row", "--models", "mistral_7b", "--out", "/tmp/unused"])
    assert seen.pop("dtypes") == ["bfloat16", "fp8_row"]
    for argv in (["--fp8", "--models", "bert_base"], ["--dtypes", "fp16"]):
        with pytest.raises(SystemExit):
            zoo.main(["run", *argv, "--out", "/tmp/unused"])


def test_report_labels_fp8_rows(tmp_path):
    res = [dict(result("llama3_8b", mode, [entry("prefill_8x128", us, 1.0)]), dtype="fp8")
           for mode, us in (("plain", 100), ("diode", 90))]
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"results": res}))
    assert zoo.main(["report", str(run), "--out", str(tmp_path / "r")]) == 0
    table = (tmp_path / "r" / "table.md").read_text()
    assert "| llama3_8b | FP8 e4m3 (tensor scales) | prefill_8x128 |" in table
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["rows"][0]["diode_gpu"] == pytest.approx(0.9)


def test_decode_steps_stay_at_their_position():
    # transformers 5's StaticCache counts written tokens per layer and indexes with the count;
    # the timed decode step is always the token at DECODE_PAST, so repeated steps must not
    # advance it (they did: an index-out-of-bounds assert after ~630 compiled steps).
    import torch
    model, cfg = zoo.build_model("llama3_8b", 1, torch.float32, "cpu", True)
    e = next(x for x in zoo.entries("llama3_8b", True) if x["kind"] == "decode")
    fn, args = zoo.make_call(model, cfg, "llama3_8b", e, torch.float32, "cpu")
    cache = next(c.cell_contents for c in fn.__closure__ if "Cache" in type(c.cell_contents).__name__)
    fn(*args)           # the first step initialises the cache's layers
    second = fn(*args)
    seen = {int(cache.get_seq_length())}
    for _ in range(5):
        again = fn(*args)
        seen.add(int(cache.get_seq_length()))
    assert seen == {zoo.DECODE_PAST + 1}, seen
    assert torch.equal(second, again)   # the same step, the same answer


def test_decode_reference_is_the_steady_step():
    # a decode step's first eager call ran before the static cache's layers were initialised
    # (transformers 5.24: query offset 0, the token attended to slot 0 alone); the reference
    # must be the step every later (compiled, timed) call computes
    import torch
    pytest.importorskip("transformers")
    model, cfg = zoo.build_model("qwen2_5_1_5b", 1, torch.bfloat16, "cpu", True)
    e = next(x for x in zoo.entries("qwen2_5_1_5b", True) if x["kind"] == "decode")
    fn, args, ref = zoo.eager_reference(model, cfg, "qwen2_5_1_5b", e, torch.bfloat16, "cpu")
    with torch.no_grad():
        assert torch.equal(ref, fn(*args).float())


def test_fp8_check_judges_against_the_unquantised_model():
    import torch
    g = torch.Generator().manual_seed(0)
    hp = torch.randn(64, 256, generator=g)
    ref = hp + 0.13 * torch.randn(hp.shape, generator=g)   # eager FP8: 0.13 off the bfloat16 model
    out = hp + 0.13 * torch.randn(hp.shape, generator=g)   # compiled: other roundings, as far off
    tol = zoo.TOLERANCE["fp8"]
    assert zoo.rel_l2(out, ref) > tol                       # the old check failed it
    ok = zoo.fp8_check(out, ref, hp, tol)
    assert ok["correct"] is True and ok["rel_err_bf16"] <= ok["eager_rel_err_bf16"] * (1 + tol)
    assert zoo.fp8_check(ref + 0.01 * hp, ref, hp, tol)["correct"] is True   # close to eager FP8: as before
    wrong_scale = 2 * out
    transposed = out.flip(0)
    for bad in (wrong_scale, transposed, torch.zeros_like(out)):
        assert zoo.fp8_check(bad, ref, hp, tol)["correct"] is False


def test_tiny_cpu_fp8_run_reports_the_bf16_reference(tmp_path):
    pytest.importorskip("transformers")
    why = _scaled_mm_on_cpu()
    if why:
        pytest.skip(why)
    out = tmp_path / "z"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "models.py"), "run", "--tiny", "--device", "cpu",
                        "--models", "llama3_8b", "--only", "decode_b1", "--fp8", "--modes", "eager,plain",
                        "--jobs", "1", "--reps", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "python")})
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((out / "results.json").read_text())["results"]
    e = next(x for x in res if x["mode"] == "plain")["entries"][0]
    assert "error" not in e, e
    assert 0 < e["eager_rel_err_bf16"] < 0.5 and e["rel_err_bf16"] <= e["eager_rel_err_bf16"] * 1.1
    assert e["correct"] is True and e["rel_err"] < zoo.TOLERANCE["fp8"]


def _report(tmp_path, res, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"results": res}))
    capsys.readouterr()
    assert zoo.main(["report", str(run), "--out", str(tmp_path / "r")]) == 0
    printed = capsys.readouterr().out.splitlines()
    return printed, json.loads((tmp_path / "r" / "summary.json").read_text())["summary"]


def test_report_per_dtype_phase_geomeans_and_summed_compile(tmp_path, capsys):
    def mode(dtype, m, entries):
        return dict(result("llama3_8b", m, entries), dtype=dtype)
    # bfloat16: prefill 0.5, decode 2.0 (geomean 1); compile 12 + 4 s against 10 + 4 s
    # fp8: prefill 0.9, decode 0.4 and 0.9 (decode geomean 0.6, all (0.324)^(1/3)); compile 3 + 6 + 6 against 5 + 5 + 5;
    # prefill_1x512 ran in plain only: in no ratio and no sum
    res = [mode("bfloat16", "plain", [entry("prefill_8x128", 200, 10.0), entry("decode_b1", 100, 4.0)]),
           mode("bfloat16", "diode", [entry("prefill_8x128", 100, 12.0), entry("decode_b1", 200, 4.0)]),
           mode("fp8", "plain", [entry("prefill_8x128", 1000, 5.0), entry("decode_b1", 500, 5.0),
                                 entry("decode_b8", 1000, 5.0), entry("prefill_1x512", 700, 100.0)]),
           mode("fp8", "diode", [entry("prefill_8x128", 900, 3.0), entry("decode_b1", 200, 6.0),
                                 entry("decode_b8", 900, 6.0)])]
    printed, s = _report(tmp_path, res, capsys)
    fp8 = 0.324 ** (1 / 3)
    assert s["diode_gpu_vs_plain_geomean"] == pytest.approx((0.5 * 2.0 * 0.324) ** (1 / 5))
    by_dtype = s["diode_gpu_vs_plain_geomean_by_dtype"]
    assert by_dtype["bfloat16"] == {"geomean": pytest.approx(1.0), "entries": 2}
    assert by_dtype["fp8"] == {"geomean": pytest.approx(fp8), "entries": 3}
    by_phase = s["diode_gpu_vs_plain_geomean_by_dtype_phase"]
    assert by_phase["bfloat16"] == {"prefill": {"geomean": pytest.approx(0.5), "entries": 1},
                                    "decode": {"geomean": pytest.approx(2.0), "entries": 1}}
    assert by_phase["fp8"] == {"prefill": {"geomean": pytest.approx(0.9), "entries": 1},
                               "decode": {"geomean": pytest.approx(0.6), "entries": 2}}
    # summed: 31 s / 29 s, not the mean of the per-entry ratios (1.04)
    c = s["diode_compile_vs_plain_summed"]
    assert c == {"ratio": pytest.approx(31 / 29), "diode_s": pytest.approx(31.0), "plain_s": pytest.approx(29.0),
                 "entries": 5}
    cd = s["diode_compile_vs_plain_summed_by_dtype"]
    assert cd["bfloat16"]["ratio"] == pytest.approx(16 / 14) and cd["fp8"]["ratio"] == pytest.approx(1.0)
    assert [(v["model"], v["dtype"], v["diode_s"], v["plain_s"])
            for v in s["diode_compile_vs_plain_summed_by_model_dtype"]] == [
        ("llama3_8b", "bfloat16", 16.0, 14.0), ("llama3_8b", "fp8", 15.0, 15.0)]
    assert "diode / plain GPU time, geomean per dtype: bfloat16 1.000 (2 entries), fp8 0.687 (3 entries)" in printed
    assert ("diode / plain GPU time, geomean per dtype and phase: bfloat16 prefill 0.500 (1 entries), "
            "bfloat16 decode 2.000 (1 entries), fp8 prefill 0.900 (1 entries), fp8 decode 0.600 (2 entries)") in printed
    assert ("diode / plain compile time, summed over 5 entries: 1.069 (31.0 / 29.0 s); per dtype: "
            "bfloat16 1.143 (16.0 / 14.0 s), fp8 1.000 (15.0 / 15.0 s)") in printed
    assert ("diode / plain compile time, summed per (model, dtype): llama3_8b bfloat16 1.143 (16.0 / 14.0 s), "
            "llama3_8b fp8 1.000 (15.0 / 15.0 s)") in printed
    # the existing keys are still there
    assert s["entries"] == 6 and s["decode_b1"] == [pytest.approx(2.0), pytest.approx(0.4)]


def test_report_one_dtype_without_phases_prints_no_per_dtype_line(tmp_path, capsys):
    res = [result("resnet50", m, [entry("b1", us, c), entry("b8", 2 * us, c)])
           for m, us, c in (("plain", 100, 2.0), ("diode", 80, 3.0))]
    printed, s = _report(tmp_path, res, capsys)
    assert not any("per dtype" in l or "per dtype and phase" in l for l in printed)
    assert s["diode_gpu_vs_plain_geomean_by_dtype"] == {"bfloat16": {"geomean": pytest.approx(0.8), "entries": 2}}
    assert s["diode_gpu_vs_plain_geomean_by_dtype_phase"] == {}
    assert "diode / plain compile time, summed over 2 entries: 1.500 (6.0 / 4.0 s)" in printed


def test_report_sums_coordinate_descent_per_autotune_mode(tmp_path, capsys):
    def cd(kernels, improved, timed, tune_s, base, best):
        return {"kernels": kernels, "kernels_improved": improved, "configs_timed": timed, "tune_s": tune_s,
                "baseline_ms": base, "best_ms": best}

    def tuned(label, us, compile_s, c):
        return dict(entry(label, us, compile_s), coordesc=c)

    res = [result("llama3_8b", "plain", [entry("decode_b1", 500, 4.0), entry("prefill_8x128", 2000, 5.0)]),
           result("llama3_8b", "default", [tuned("decode_b1", 480, 30.0, cd(10, 4, 60, 12.0, 1.0, 0.9)),
                                          tuned("prefill_8x128", 1900, 50.0, cd(20, 5, 90, 28.0, 3.0, 2.7))]),
           result("llama3_8b", "diode_ma", [entry("decode_b1", 470, 9.0)])]   # not recorded: no line
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"results": res}))
    assert zoo.main(["report", str(run), "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert ("coordinate descent in default over 2 entries: 30 kernels (9 moved from the heuristics' config), "
            "150 configs timed, 40.0 of 80.0 s compile (50%); kernels' time at the winner / at the start, "
            "each launched once: 0.900") in out
    assert "coordinate descent in diode_ma" not in out


def test_run_passes_the_coordesc_recorder_to_autotune_modes_only(monkeypatch, tmp_path):
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        raise subprocess.TimeoutExpired(cmd, 1)

    monkeypatch.setattr(zoo.subprocess, "run", fake_run)
    a = SimpleNamespace(out=str(tmp_path), record_coordesc=True, layers=2, reps=1, device="cuda",
                        gpu_lock=str(tmp_path / "lock"), autotune_only=None, only=None, tiny=False, profile=False)
    for mode in ("plain", "default", "diode_ma"):
        zoo.run_job(a, "llama3_8b", "bfloat16", mode, time.time() + 100)
    flags = [c[c.index("--record-coordesc") + 1] if "--record-coordesc" in c else None for c in calls]
    assert flags == [None, str(tmp_path / "coordesc-llama3_8b-bfloat16-default.jsonl"),
                     str(tmp_path / "coordesc-llama3_8b-bfloat16-diode_ma.jsonl")]
