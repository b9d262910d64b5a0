"""bench/hook_end_to_end.py without a GPU: the goal/table logic on known numbers, the
collector's shard parsing, the part planning, and the whole driver in --dry-run."""
import gzip
import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import hook_end_to_end as b  # noqa: E402


def _r(w, mode, compile_s, gpu_us, eager_us=None, status="ok"):
    r = {"workload": w, "mode": mode, "status": status, "compile_s": compile_s, "gpu": {"us": gpu_us}}
    if eager_us is not None:
        r["eager"] = {"us": eager_us}
    return r


def _synthetic():
    # two GEMMs, one model; numbers chosen so every ratio is known
    res = []
    for w, e in (("l3_kv_m4", 10.0), ("vit_fc1_b8", 20.0)):
        res += [_r(w, "plain", 2.0, 12.0, eager_us=e), _r(w, "default", 10.0, 10.0),
                _r(w, "diode_predict", 2.4, 8.0), _r(w, "diode_top5", 5.0, 9.0),
                _r(w, "collector", 30.0, 8.5 if w == "l3_kv_m4" else 25.0)]
    res += [_r("mlp_block", "plain", 4.0, 100.0, eager_us=100.0), _r("mlp_block", "default", 20.0, 100.0),
            _r("mlp_block", "diode_predict", 4.0, 115.0), _r("mlp_block", "diode_top5", 8.0, 95.0)]
    return res


def test_geomean():
    assert b.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert b.geomean([None, 3.0]) == pytest.approx(3.0)
    assert b.geomean([]) is None


def test_summary_and_goals_on_known_numbers():
    ws = ["l3_kv_m4", "vit_fc1_b8", "mlp_block"]
    s = b.summarize(_synthetic(), ws)
    rows = s["rows"]
    # best = min(collector, eager cuBLAS); a model has no best
    assert rows["l3_kv_m4"]["best_us"] == 8.5 and rows["l3_kv_m4"]["best_source"] == "collector"
    assert rows["vit_fc1_b8"]["best_us"] == 20.0 and rows["vit_fc1_b8"]["best_source"] == "cublas"
    assert rows["mlp_block"]["best_us"] is None
    p = rows["l3_kv_m4"]["modes"]["diode_predict"]
    assert p["compile_x_plain"] == pytest.approx(1.2) and p["compile_x_default"] == pytest.approx(0.24)
    assert p["gpu_x_default"] == pytest.approx(0.8) and p["gpu_x_best"] == pytest.approx(8 / 8.5)
    assert rows["l3_kv_m4"]["modes"]["collector"]["compile_x_plain"] is None  # collection wall is no compile
    g = {x["goal"]: x for x in s["goals"]}
    assert g["predict_compile_vs_plain"]["value"] == pytest.approx(b.geomean([1.2, 1.2, 1.0]))
    assert g["predict_compile_vs_plain"]["result"] == "PASS"
    assert g["predict_compile_vs_default"]["value"] == pytest.approx(b.geomean([0.24, 0.24, 0.2]))
    assert g["predict_compile_vs_default"]["result"] == "PASS"
    # GPU goals over the GEMM workloads only
    assert g["predict_gpu_vs_default"]["n"] == 2
    assert g["predict_gpu_vs_default"]["value"] == pytest.approx(0.8) and g["predict_gpu_vs_default"]["result"] == "PASS"
    v = math.sqrt((8 / 8.5) * (8 / 20))
    assert g["predict_gpu_vs_best"]["value"] == pytest.approx(v) and g["predict_gpu_vs_best"]["result"] == "PASS"
    # worst workload vs cuBLAS: the model at 115/100
    assert g["predict_gpu_vs_cublas_max"]["value"] == pytest.approx(1.15)
    assert g["predict_gpu_vs_cublas_max"]["result"] == "FAIL"
    assert g["top5_gpu_vs_cublas_max"]["value"] == pytest.approx(0.95)
    assert g["top5_gpu_vs_best"]["value"] == pytest.approx(math.sqrt((9 / 8.5) * (9 / 20)))
    md = b.table_md(_synthetic(), ws, list(b.DEFAULT_MODES), {})
    assert "| predict_gpu_vs_cublas_max | 1.150 (max) | <= 1.1 | 3/3 | **FAIL** |" in md
    assert "FAKE" not in md
    assert md.count("**PASS**") + md.count("**FAIL**") + md.count("**N/A**") == len(b.GOALS)
    # the mode comparison behind the default mode: every workload, models included
    mg = s["modes"]["diode_predict"]
    assert mg["compile_x_plain"]["n"] == 3
    assert mg["compile_x_plain"]["geomean"] == pytest.approx(b.geomean([1.2, 1.2, 1.0]))
    assert s["modes"]["plain"]["compile_x_plain"]["geomean"] == pytest.approx(1.0)
    assert "| mode (all workloads, geomean) |" in md


def test_info_rows_only_count_workloads_default_autotuned():
    res = _synthetic()
    for r in res:
        if r["mode"] == "default":
            r["gemm_autotuned"] = 0 if r["workload"] == "vit_fc1_b8" else 1
    g = {x["goal"]: x for x in b.summarize(res, ["l3_kv_m4", "vit_fc1_b8", "mlp_block"])["goals"]}
    x = g["predict_gpu_vs_best@autotuned"]
    assert x["n"] == 1 and x["value"] == pytest.approx(8 / 8.5) and x["result"] == "info: pass"
    assert g["predict_gpu_vs_best"]["n"] == 2  # the goal itself keeps every GEMM


def test_oracle_info_row_bounds_predict_vs_default():
    """oracle_gpu_vs_default@info: geomean over the GEMMs of min(best, DEFAULT) / DEFAULT, the
    lowest predict_gpu_vs_default any selector could reach; information, never PASS/FAIL."""
    ws = ["l3_kv_m4", "vit_fc1_b8", "mlp_block"]
    res = _synthetic()
    # best 8.5 (collector) < DEFAULT 10 on l3_kv_m4; on vit_fc1_b8 DEFAULT 10 < best 20 (cuBLAS)
    g = {x["goal"]: x for x in b.summarize(res, ws)["goals"]}
    o = g[b.ORACLE]
    assert o["n"] == o["of"] == 2  # the GEMM workloads only, not the model
    assert o["value"] == pytest.approx(math.sqrt(0.85 * 1.0)) and o["result"] == "info"
    assert o["threshold"] == g["predict_gpu_vs_default"]["threshold"]
    # a GEMM without a DEFAULT row is left out of the geomean but counted in "of"
    g2 = {x["goal"]: x for x in b.summarize([r for r in res if not (r["workload"] == "vit_fc1_b8" and
                                                                     r["mode"] == "default")], ws)["goals"]}
    assert g2[b.ORACLE]["n"] == 1 and g2[b.ORACLE]["of"] == 2
    assert g2[b.ORACLE]["value"] == pytest.approx(0.85)
    # no DEFAULT at all: no value, still no PASS/FAIL
    g3 = {x["goal"]: x for x in b.summarize([r for r in res if r["mode"] != "default"], ws)["goals"]}
    assert g3[b.ORACLE]["value"] is None and g3[b.ORACLE]["result"] == "info"
    md = b.table_md(res, ws, list(b.DEFAULT_MODES), {})
    assert (f"| {b.ORACLE} | {math.sqrt(0.85):.3f} (geomean) | (goal <= 0.9) | 2/2 | **info** |") in md


def test_predict_cd_goals_only_where_that_mode_ran():
    """The predict goals judged again on diode_predict_cd (predict + coordinate descent), as
    rows of their own, only when that opt-in mode ran; the diode_predict goals are unchanged."""
    ws = ["l3_kv_m4", "vit_fc1_b8", "mlp_block"]
    base = {x["goal"]: x for x in b.summarize(_synthetic(), ws)["goals"]}
    assert not any(g.startswith(b.CD_PREFIX) for g in base)
    # predict_cd: compile 3.0 s on the GEMMs (1.5x plain, 0.3x DEFAULT), 6.0 s on the model
    # (1.5x plain, 0.3x DEFAULT); GPU 7.0 us on the GEMMs (0.7x DEFAULT), 90 us on the model
    res = _synthetic() + [_r("l3_kv_m4", "diode_predict_cd", 3.0, 7.0), _r("vit_fc1_b8", "diode_predict_cd", 3.0, 7.0),
                          _r("mlp_block", "diode_predict_cd", 6.0, 90.0)]
    g = {x["goal"]: x for x in b.summarize(res, ws)["goals"]}
    assert {k: g[k]["value"] for k in base} == pytest.approx({k: v["value"] for k, v in base.items()})
    cd = {k[len(b.CD_PREFIX):]: v for k, v in g.items() if k.startswith(b.CD_PREFIX)}
    assert set(cd) == {"compile_vs_plain", "compile_vs_default", "gpu_vs_default", "gpu_vs_best", "gpu_vs_cublas_max"}
    assert cd["compile_vs_plain"]["value"] == pytest.approx(1.5) and cd["compile_vs_plain"]["result"] == "FAIL"
    assert cd["compile_vs_default"]["value"] == pytest.approx(0.3) and cd["compile_vs_default"]["result"] == "PASS"
    assert cd["gpu_vs_default"]["n"] == 2 and cd["gpu_vs_default"]["value"] == pytest.approx(0.7)
    assert cd["gpu_vs_best"]["value"] == pytest.approx(math.sqrt((7 / 8.5) * (7 / 20)))
    assert cd["gpu_vs_cublas_max"]["value"] == pytest.approx(0.9) and cd["gpu_vs_cublas_max"]["n"] == 3
    assert "diode_predict_cd GPU / DEFAULT GPU" in cd["gpu_vs_default"]["what"]
    md = b.table_md(res, ws, list(b.DEFAULT_MODES) + ["diode_predict_cd"], {})
    assert "| predict_cd_compile_vs_plain | 1.500 (geomean) | <= 1.3 | 3/3 | **FAIL** |" in md


def test_goal_without_data_is_na_and_failed_runs_do_not_count():
    res = [_r("l3_kv_m4", "plain", 2.0, 12.0, eager_us=10.0), _r("l3_kv_m4", "default", 10.0, 10.0),
           _r("l3_kv_m4", "diode_predict", None, None, status="error")]
    g = {x["goal"]: x for x in b.summarize(res, ["l3_kv_m4"])["goals"]}
    assert g["predict_compile_vs_plain"]["result"] == "N/A" and g["predict_compile_vs_plain"]["n"] == 0


def test_per_call_kernel_sums_from_trace():
    flush = "void at::native::vectorized_elementwise_kernel<4, at::native::bitwise_not_kernel_cuda(...)>"
    ev = [{"ph": "X", "cat": "kernel", "name": "early", "ts": 0, "dur": 99.0}]  # before the first marker
    for i in range(3):
        t = 100 * (i + 1)
        ev += [{"ph": "X", "cat": "kernel", "name": flush, "ts": t, "dur": 30.0},
               {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": t + 31, "dur": 2.0},
               {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, "
                "at::native::FillFunctor<long>, ...>", "ts": t + 35, "dur": 1.5},
               {"ph": "X", "cat": "kernel", "name": "triton_tem_fused_mm_0", "ts": t + 40, "dur": 5.0 + i},
               {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_1", "ts": t + 50, "dur": 1.0},
               {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": t + 1, "dur": 9.0}]
    calls, copies, names = b.per_call(list(reversed(ev)))  # order comes from ts, not the list
    assert calls == [6.0, 7.0, 8.0] and copies == [3.5, 3.5, 3.5]
    assert names == {"triton_tem_fused_mm_0": 3, "triton_poi_fused_add_1": 3}
    assert b.per_call([]) == ([], [], {})
    # the same calls, per kernel: median us per call, the costliest first, no fills or copies
    assert b.kernel_breakdown(ev) == {"triton_tem_fused_mm_0": 6.0, "triton_poi_fused_add_1": 1.0}
    assert list(b.kernel_breakdown(ev, top=1)) == ["triton_tem_fused_mm_0"]
    assert b.kernel_breakdown([]) == {}


def test_workloads_cover_issue_20():
    gemms = [w for w, s in b.WORKLOADS.items() if s["kind"] == "gemm"]
    assert len(gemms) >= 12
    assert {s["kind"] for s in b.WORKLOADS.values()} >= {"mlp", "attn", "vit"}
    assert {s["dtype"] for s in b.WORKLOADS.values()} == {"fp16", "bf16"}
    ms = [b.WORKLOADS[w]["m"] for w in gemms if b.WORKLOADS[w]["op"] == "linear"]
    assert any(m <= 16 for m in ms) and any(m >= 2048 for m in ms) and 1 in ms
    assert {b.WORKLOADS[w]["op"] for w in gemms} == {"linear", "addmm", "bmm", "bmm_nt"}


def test_collector_spec_is_valid():
    from torch_diode.collect.spec import parse_spec
    spec, ws = b.collector_spec(list(b.DEFAULT_WORKLOADS), "bench-e2e/x", 90)
    parsed = parse_spec(spec)
    assert len(parsed.problems) == len(ws) == sum(s["kind"] == "gemm" for s in b.WORKLOADS.values())
    p = {w: q for w, q in zip(ws, parsed.problems)}
    assert (p["l3_q_m1"].op, p["l3_q_m1"].m, p["l3_q_m1"].trans_b) == ("mm", 1, True)
    assert (p["vit_fc1_b8"].op, p["vit_fc1_b8"].bias) == ("addmm", "row")
    assert (p["attn_qk_32x2048"].batch, p["attn_qk_32x2048"].trans_b) == (32, True)
    assert parsed.search_space == "EXHAUSTIVE"


def test_parse_collector_shard(tmp_path):
    from torch_diode import wire
    from torch_diode.collect import records
    from torch_diode.collect.engine import FLAG_DEFAULT
    assert b.FLAG_DEFAULT == FLAG_DEFAULT  # the bench keeps its own copy (no engine import in the driver)
    ws = ["l3_kv_m4", "vit_fc1_b8"]
    from torch_diode.collect.spec import parse_spec
    spec, sws = b.collector_spec(ws, "s/1", 90)
    by = dict(zip(sws, parse_spec(spec).problems))  # the spec orders problems by kernel class
    probs = [by[w] for w in ws]
    t = wire.KernelConfig(template="triton::mm", block_m=16, block_n=64, block_k=128, group_m=8, num_stages=4,
                          num_warps=4, even_k=True)
    t2 = wire.KernelConfig(template="triton::mm", block_m=32, block_n=64, block_k=64, group_m=8, num_stages=3,
                           num_warps=4, even_k=True)
    aten = wire.KernelConfig(template="aten")
    recs = [wire.ShardRecord(0, t, 7.0, 0.1, 10, "ok", FLAG_DEFAULT), wire.ShardRecord(0, t2, 6.0, 0.1, 10, "ok"),
            wire.ShardRecord(0, aten, 6.5, 0.1, 10, "ok"),
            wire.ShardRecord(1, t, 30.0, 0.1, 10, "ok", FLAG_DEFAULT), wire.ShardRecord(1, aten, 20.0, 0.1, 10, "ok"),
            wire.ShardRecord(1, t2, 1.0, 0.0, 0, "compile_error")]
    hw = wire.HardwareId(vendor="nvidia", device_name="NVIDIA H100 80GB HBM3")
    shard = tmp_path / "collector.msgpack.gz"
    shard.write_bytes(gzip.compress(records.build_shard("s/1", "", hw, "t", "", probs, recs)))
    (tmp_path / "collector.msgpack.gz.stats.json").write_text(json.dumps(
        {"problems": [{"index": 0, "wall_s": 41.0}, {"index": 1, "wall_s": 3.0}]}))
    out = {r["workload"]: r for r in b.parse_collector(str(shard), ws, 0, 50.0, "")}
    a, v = out["l3_kv_m4"], out["vit_fc1_b8"]
    assert a["status"] == "ok" and a["gpu"]["us"] == 6.0 and not a["best_is_aten"] and a["compile_s"] == 41.0
    assert a["default_best_us"] == 7.0 and a["aten_us"] == 6.5 and a["configs_ok"] == 3
    assert "32x64x64" in a["best_config"]
    assert v["gpu"]["us"] == 20.0 and v["best_is_aten"] and v["best_config"] == "aten" and v["configs_ok"] == 2
    # a workload the shard does not hold (deadline) is not_finished, not silently dropped
    out = b.parse_collector(str(shard), ws + ["attn_pv_32x2048"], 5, 50.0, "")
    assert out[-1]["workload"] == "attn_pv_32x2048" and out[-1]["status"] == "not_finished"


def test_plan_parts_covers_everything_and_keeps_classes_together(monkeypatch):
    monkeypatch.setattr(b, "JOBS", 4)  # --jobs 4, as the docstring runs it on the GPU
    ws, ms = list(b.DEFAULT_WORKLOADS), list(b.DEFAULT_MODES)
    for n in (1, 2, 3):
        parts = b.plan_parts(ws, ms, n)
        assert sorted(sum(parts, [])) == sorted(ws)
        for cls in {b.collector_class(b.WORKLOADS[w]) for w in ws} - {None}:
            assert sum(any(b.collector_class(b.WORKLOADS[w]) == cls for w in p) for p in parts) == 1
    # the default two-part split is balanced and each part is near one 10-minute call
    est = [b.estimate_part_s(p, ms) for p in b.plan_parts(ws, ms, 2)]
    assert max(est) < 600 and max(est) / min(est) < 1.15
    # M = 1 is a reduction under max-autotune: nothing is autotuned, DEFAULT costs ~plain
    assert b.estimate_s("default", b.WORKLOADS["l3_q_m1"]) < b.estimate_s("default", b.WORKLOADS["l3_kv_m4"])


def test_dry_run_end_to_end(tmp_path):
    """The whole driver on CPU: preflight (torch, hook, model, workloads on meta), one
    subprocess per (mode, workload), the collector's --dry-run on the spec, table, goals."""
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "hook_end_to_end.py"), "--dry-run", "--workloads",
                        "l3_q_m1,vit_fc1_b8,mlp_block", "--out", str(out)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "dry run: OK" in p.stdout
    d = json.loads((out / "results.json").read_text())
    assert d["complete"] and d["meta"]["model_id"]
    got = {(r["workload"], r["mode"]) for r in d["results"]}
    for w in ("l3_q_m1", "vit_fc1_b8", "mlp_block"):
        for m in ("plain", "default", "diode_predict", "diode_top5"):
            assert (w, m) in got
    assert ("l3_q_m1", "collector") in got and ("mlp_block", "collector") not in got
    assert next(r for r in d["results"] if r["mode"] == "collector")["configs_offered"] > 0
    md = (out / "table.md").read_text()
    assert md.startswith("**DRY RUN") and md.count("**PASS**") + md.count("**FAIL**") == len(b.GOALS)
    assert "predict_gpu_vs_default@autotuned" in md and "**info: " in md
    o = next(x for x in d["summary"]["goals"] if x["goal"] == b.ORACLE)
    assert o["result"] == "info" and o["n"] == 2 and 0 < o["value"] <= 1.0  # two GEMMs with DEFAULT + best
    assert f"| {b.ORACLE} | {o['value']:.3f} (geomean) |" in md
    # merge: the parts' JSON joined again gives the same goals
    half = [dict(d, results=[r for r in d["results"] if r["workload"] == "l3_q_m1"]),
            dict(d, results=[r for r in d["results"] if r["workload"] != "l3_q_m1"])]
    paths = []
    for i, h in enumerate(half):
        paths.append(str(tmp_path / f"r{i}.json"))
        pathlib.Path(paths[-1]).write_text(json.dumps(h))
    assert b.merge(paths, str(tmp_path / "merged")) == 0
    m = json.loads((tmp_path / "merged" / "results.json").read_text())
    assert m["summary"]["goals"] == d["summary"]["goals"]


def test_predict_cd_mode_is_opt_in_and_summarized_when_it_ran():
    """diode_predict_cd (predict + coordinate descent, so M = 1 GEMMs become reductions) is not a
    default mode, compiles with the predict options plus coordinate_descent_tuning, is costed
    like a compile that tunes (not like predict's plain-speed compile) on an M = 1 GEMM, and
    gets its own row in the per-mode geomeans only when it ran."""
    assert "diode_predict_cd" in b.COMPILE_MODES and "diode_predict_cd" not in b.DEFAULT_MODES
    assert b.PREDICT_CD_OPTIONS == dict(b.PREDICT_OPTIONS, coordinate_descent_tuning=True)
    m1 = b.WORKLOADS["l3_q_m1"]
    assert b.estimate_s("diode_predict_cd", m1) > b.estimate_s("diode_predict", m1)
    res = _synthetic()
    ws = ["l3_kv_m4", "vit_fc1_b8", "mlp_block"]
    assert "diode_predict_cd" not in b.summarize(res, ws)["modes"]
    res.append(_r("l3_kv_m4", "diode_predict_cd", 6.0, 7.5))
    s = b.summarize(res, ws)
    cd = s["modes"]["diode_predict_cd"]
    assert cd["gpu_x_default"]["n"] == 1 and cd["gpu_x_default"]["geomean"] == pytest.approx(0.75)
    assert cd["compile_x_plain"]["geomean"] == pytest.approx(3.0)
    # the goals still judge diode_predict alone
    g = {x["goal"]: x for x in s["goals"]}
    assert g["predict_gpu_vs_default"]["value"] == pytest.approx(b.geomean([0.8, 0.8]))


def test_autotune_summary_keeps_aten_time_when_triton_wins():
    """The feedback saver's record of one autotune keeps the fastest extern (ATen) choice's time
    and the four fastest choices, so a run where Inductor's benchmark preferred a Triton config
    to ATen shows by how much (2026-11-26: top-5 mlp_block kept ATen and lost it to Triton)."""
    class ExternKernelCaller:
        def __init__(self, d):
            self.description = d

    class TritonTemplateCaller:
        def __init__(self, d):
            self.description = d

    tri = [TritonTemplateCaller(f"BLOCK_M={m}") for m in (64, 128, 32, 16, 256)]
    aten = ExternKernelCaller("aten.mm")
    timings = {tri[0]: 0.050, tri[1]: 0.049, aten: 0.0512, tri[2]: 0.06, tri[3]: 0.07, tri[4]: 0.08}
    s = b.autotune_summary("mm", timings)
    assert s["op"] == "mm" and s["choices"] == 6
    assert s["best"] == "BLOCK_M=128" and s["best_ms"] == pytest.approx(0.049)
    assert s["extern_best"] == "aten.mm" and s["extern_best_ms"] == pytest.approx(0.0512)
    assert [f[0] for f in s["fastest"]] == ["BLOCK_M=128", "BLOCK_M=64", "aten.mm", "BLOCK_M=32"]
    none = b.autotune_summary("bmm", {tri[0]: 0.01})
    assert none["extern_best_ms"] is None and none["extern_best"] is None and none["choices"] == 1
    assert b.autotune_summary("mm", {})["best_ms"] is None
    assert b.autotune_note(s) == "mm: 6 choices (Triton won, 49.0 us against ATen's 51.2 us as timed)"
    assert b.autotune_note(none) == "bmm: 1 choices"                           # no ATen among them
    aten_won = b.autotune_summary("mm", {aten: 0.01, tri[0]: 0.02})
    assert b.autotune_note(aten_won) == "mm: 2 choices"


def test_the_table_shows_a_mis_timed_aten_of_a_committed_run():
    """2026-11-28, H200: DEFAULT's autotune timed cuBLAS at 44.7 us on l3_kv_m4 (eager: 7.4)."""
    import json
    res = json.loads((ROOT / "bench/data/hook-e2e-2026-11-28-h200-robust/results.json").read_text())
    (r,) = [x for x in res["results"] if x["mode"] == "default" and x["workload"] == "l3_kv_m4"]
    assert b.autotune_note(r["autotunes"][0]) == "mm: 19 choices (Triton won, 22.2 us against ATen's 44.7 us as timed)"


def test_shipped_model_follows_the_detected_hardware(monkeypatch):
    """--model shipped takes the package's newest bundle for the hardware import torch_diode
    detects (here named by DIODE_HARDWARE_KEY), never one hardware's model for every GPU."""
    shipped = ROOT / "python" / "torch_diode" / "bundles"
    keys = sorted(p.name for p in shipped.iterdir() if p.is_dir() and any(v.name.isdigit() for v in p.iterdir()))
    assert keys, "the package ships bundles"
    for key in keys:
        monkeypatch.setenv("DIODE_HARDWARE_KEY", key)
        assert b.detected_hardware_key() == key
        newest = max(int(v.name) for v in (shipped / key).iterdir() if v.name.isdigit())
        assert b.shipped_model_dir(key) == str(shipped / key / str(newest))
    assert b.shipped_model_dir("nvidia-a100-80gb") is None


def test_goals_are_a_data_constant_at_the_top():
    src = (ROOT / "bench" / "hook_end_to_end.py").read_text()
    assert src.index("\nGOALS = {") < src.index("\ndef ")
    assert all(m in ("geomean", "max") and isinstance(t, float) and w for m, t, w in b.GOALS.values())
    assert b.GOALS["predict_gpu_vs_best"][1] == 1.03 and b.GOALS["top5_gpu_vs_cublas_max"][1] == 1.10
