"""bench/gemv_reduction.py's table rules, replayed on the committed H200 grids (no GPU): the
shipped GEMV table is exactly what its measurements give by the rule it was made with, and the
leave-one-out replay is consistent with its own definitions."""
import inspect
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
GRID = ROOT / "bench/data/gemv-2026-11-28-h200/run2-grid/gemv-results.json"
GRID3 = ROOT / "bench/data/gemv-2026-11-28-h200/run3-wider-bias/gemv-results.json"   # run2's + K 24,576
SHIPPED = ROOT / "python/torch_diode/hook/gemv_tables/nvidia-h200-144gb.json"
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import gemv_reduction as gr  # noqa: E402
from stats import geomean  # noqa: E402
from torch_diode.hook import gemv  # noqa: E402
from torch_diode.tools import gemv_table as gt  # noqa: E402


def grid():
    return json.loads(GRID.read_text())["grid"]


def test_the_shipped_table_is_the_robust_rule_on_the_committed_wider_grid():
    wider = json.loads(GRID3.read_text())
    assert len(wider["grid"]) == 50 and sum("reused_from" in r for r in wider["grid"]) == 40
    # the 40 reused rows are run2's, unchanged
    assert [{k: v for k, v in r.items() if k != "reused_from"} for r in wider["grid"][:40]] == grid()
    assert gr.table_entries(wider["grid"], "robust") == json.loads(SHIPPED.read_text())["entries"]
    assert json.loads(SHIPPED.read_text())["measured"]["rule"].startswith("robust")


def test_rules_give_valid_tables_whose_entries_are_measured_times():
    rows = {(r["dtype"], r["n"], r["k"]): r for r in grid()}
    for rule in gr.RULES:
        entries = gr.table_entries(grid(), rule)
        assert len(entries) == len(rows) == 40
        for e in entries:
            row = rows[(e["dtype"], e["n"], e["k"])]
            measured = {json.dumps(c["config"], sort_keys=True): c["us"] for c in row["configs"]}
            assert round(measured[json.dumps(e["config"], sort_keys=True)], 3) == e["reduction_us"]
            assert e["reduction_us"] >= round(min(measured.values()), 3)   # never faster than the fastest
        doc = {"format": gemv.TABLE_FORMAT, "hardware": "h", "measured": {}, "entries": entries}
        gemv.parse_table(json.dumps(doc).encode())                         # the hook reads it


def test_leave_one_out_is_at_least_the_fastest_and_robust_is_steadier():
    fastest, robust = gr.leave_one_out(grid(), "fastest"), gr.leave_one_out(grid(), "robust")
    for g, m in (fastest, robust):
        assert 1.0 <= g <= m
    # measured 2026-11-28 (bench/RESULTS.md): 1.026 / 1.20 against 1.015 / 1.07
    assert robust[0] < fastest[0] and robust[1] < fastest[1]


def test_replay_cli_writes_the_table_and_prints_both_rules(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "bench/gemv_reduction.py"), "--replay", str(GRID),
                        "--out", str(tmp_path), "--rule", "fastest"], capture_output=True, text=True, check=True)
    assert "rule fastest" in r.stdout and "rule robust" in r.stdout
    t = json.loads((tmp_path / "nvidia-h200-144gb.json").read_text())
    assert t["entries"] == gr.table_entries(grid(), "fastest")    # session 27's shipped table
    assert t["measured"]["replayed_from"] == "gemv-results.json"


def test_one_config_for_all_is_measured_on_every_shape_and_no_single_config_does_better():
    c, g, m, won = gr.one_config_for_all(grid())
    rel, _ = gt.rel_times(grid())
    assert all(c in r for r in rel.values())
    assert 1.0 <= g <= m and 1 <= won <= len(rel)
    for other in set().union(*rel.values()):
        assert gr.geomean([r.get(other, 10.0) for r in rel.values()]) >= g


def test_reuse_grid_takes_the_same_hardwares_rows_and_refuses_another(tmp_path):
    import pytest
    rows = gr.reused_grid(str(GRID), "nvidia-h200-144gb")
    assert len(rows) == 40 and {r["reused_from"] for r in rows} == {"run2-grid"}
    assert gr.table_entries(rows, "fastest") == gr.table_entries(grid(), "fastest")
    with pytest.raises(SystemExit, match="nvidia-h200-144gb, not nvidia-h100-80gb"):
        gr.reused_grid(str(GRID), "nvidia-h100-80gb")


def test_report_gives_each_kind_and_every_rule_its_geomean(capsys):
    def row(name, bias, us, us_fastest):
        return {"name": name, "dtype": "float16", "bias": bias, "cublas_us": 10.0, "cd_us": 8.0, "diode_us": us,
                "diode_us_fastest": us_fastest, "diode_s": 0.3, "plain_s": 0.1, "cd_s": 1.0}
    gr.report([row("a", False, 5.0, 10.0), row("b", False, 20.0, 10.0), row("c", True, 8.0, 4.0)], "robust")
    out = capsys.readouterr().out
    assert "| c | float16 | yes | 10.00 | 8.00 | 8.00 | 4.00 | 0.800 | 1.000 | 3.00 |" in out
    assert "mm (2): geomean diode (robust)/cuBLAS 1.000  fastest/cuBLAS 1.000" in out
    assert "addmm (1): geomean diode (robust)/cuBLAS 0.800  fastest/cuBLAS 0.400" in out


def test_matvec_fn_is_the_gemm_of_each_layout_with_and_without_bias():
    import torch
    torch.manual_seed(0)
    x, w_nk, bias = torch.randn(1, 64), torch.randn(32, 64), torch.randn(32)
    w_kn = w_nk.t().contiguous()
    torch.testing.assert_close(gr.matvec_fn(torch, "inner")(x, w_nk), x @ w_nk.t())
    torch.testing.assert_close(gr.matvec_fn(torch, "inner", bias)(x, w_nk), x @ w_nk.t() + bias)
    torch.testing.assert_close(gr.matvec_fn(torch, "outer")(x, w_kn), x @ w_nk.t())
    torch.testing.assert_close(gr.matvec_fn(torch, "outer", bias)(x, w_kn), x @ w_nk.t() + bias)


def test_layouts_get_their_own_entries_and_never_borrow_each_others_configs():
    outer = [dict(r, layout="outer", configs=[dict(c, us=c["us"] * (2.0 if i == 0 else 1.0))
                                               for i, c in enumerate(r["configs"])]) for r in grid()]
    rows = grid() + outer                                      # rows without "layout" are inner
    for rule in gr.RULES:
        entries = gr.table_entries(rows, rule)
        inner = [e for e in entries if e["layout"] == "inner"]
        assert len(inner) == len([e for e in entries if e["layout"] == "outer"]) == 40
        assert inner == gr.table_entries(grid(), rule)          # the outer rows change nothing
        doc = {"format": gemv.TABLE_FORMAT, "hardware": "h", "measured": {}, "entries": entries}
        assert len(gemv.parse_table(json.dumps(doc).encode()).entries) == 80
    keys = lambda cs: {json.dumps(c, sort_keys=True) for c in cs}  # noqa: E731
    assert len(keys(gr.CONFIGS_OUTER)) == len(gr.CONFIGS_OUTER) and not keys(gr.CONFIGS_OUTER) & keys(gr.CONFIGS)
    for c in gr.CONFIGS_OUTER + gr.CONFIGS:
        gemv.parse_config(c, "test")                           # every config is one the hook accepts


def test_the_packaged_tool_and_the_bench_share_one_definition_of_the_grid_and_the_rules():
    assert gr.table_entries is gt.table_entries and gr.RULES is gt.RULES and gr.make_inputs is gt.make_inputs
    assert len(gt.grid_shapes("inner")) == 50 and len(gt.grid_shapes("outer")) == 40
    assert len(gt.LAYOUT_CONFIGS["inner"]) == 22 and len(gt.LAYOUT_CONFIGS["outer"]) == 20
    # the robust rule's geomean is bench/stats.geomean's (a near-tie must break the same way):
    # one definition, torch_diode/summary_stats.py, which bench/stats.py loads from its file
    assert inspect.getsourcefile(gt.geomean) == inspect.getsourcefile(geomean)
    assert pathlib.Path(inspect.getsourcefile(geomean)).resolve() == ROOT / "python/torch_diode/summary_stats.py"
    rel, _ = gt.rel_times(grid())
    for shape in rel:
        v = list(rel[shape].values())
        assert gt.geomean(v) == geomean(v)


def test_table_doc_is_a_table_the_hook_reads_and_names_its_rule():
    doc = gt.table_doc("nvidia-h200-144gb", json.loads(GRID3.read_text())["grid"], "robust", {"date": "d"})
    t = gemv.parse_table(json.dumps(doc).encode(), "doc")
    assert len(t.entries) == 50 and doc["measured"] == {"date": "d", "rule": f"robust: {gt.RULES['robust']}"}
    assert doc["entries"] == json.loads(SHIPPED.read_text())["entries"]


def test_the_tool_says_it_needs_a_gpu_and_writes_nothing_without_one(tmp_path):
    import os
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), CUDA_VISIBLE_DEVICES="", TORCH_DIODE_AUTO_INSTALL="0")
    r = subprocess.run([sys.executable, "-m", "torch_diode.tools.gemv_table", "--out", str(tmp_path / "t.json")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "needs a CUDA GPU" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_measure_grid_keeps_the_configs_that_ran_fixed_and_right_fastest_first(monkeypatch):
    """The grid loop's bookkeeping, with the GPU parts (inputs, timing, compiling) replaced:
    a config whose kernel lacks the fixed config or whose result is wrong is left out with
    why, the rest are sorted fastest first, done shapes are skipped, the budget stops it."""
    import torch_diode
    cfgs = [{"XBLOCK": x, "R0_BLOCK": 1024, "num_warps": 8, "num_stages": 1} for x in (1, 2, 4)]
    speed = {1: 9.0, 2: 7.0, 4: 8.0}                       # us per XBLOCK

    class Hook:                                            # HookWithOneConfig's interface
        def table_for(self, dt, n, k, cfg, layout):
            self.shape, self.cfg = (dt, n, k, layout), cfg
            return "table.json"

        def install(self, table_path):
            assert table_path == "table.json"

    class Compiled:
        def __init__(self, cfg):
            self.cfg = cfg

        def __call__(self, x, w):
            return self.cfg

    hook = Hook()
    monkeypatch.setattr(gt, "make_inputs", lambda torch, dtype, n, k, layout: ("x", ["w"]))
    monkeypatch.setattr(gt, "matvec_fn", lambda torch, layout: lambda x, w: "eager")
    monkeypatch.setattr(gt, "gpu_us", lambda torch, fn, x, ws: speed[fn.cfg["XBLOCK"]] if isinstance(fn, Compiled)
                        else 10.0)
    # XBLOCK 2 compiles without the fixed config at N = 6144 (Inductor wrote that kernel its own way)
    monkeypatch.setattr(gt, "compiled", lambda torch, fn, x, w, **patches: (
        Compiled(hook.cfg), 0.1,
        "" if hook.cfg["XBLOCK"] == 2 and hook.shape[1] == 6144 else "... fixed_config(...) ..."))
    monkeypatch.setattr(gt, "check", lambda ref, got: 0.5 if got["XBLOCK"] == 4 else 0.0)   # XBLOCK 4: wrong
    monkeypatch.setattr(torch_diode, "uninstall", lambda: None)
    budget = iter([1000.0, 1000.0, 10.0])                  # the third shape to start finds 10 s left
    shapes = [("float16", 3072, 1536), ("float16", 6144, 1536), ("float16", 12288, 1536), ("float16", 24576, 1536)]
    logged = []
    rows = gt.measure_grid(type("FakeTorch", (), {"float16": "f16"}), shapes, "inner", cfgs, hook,
                           lambda: next(budget), reused=[{"dtype": "float16", "n": 3072, "k": 1536, "layout": "inner"}],
                           log=logged.append)
    assert [(r["n"], r["k"]) for r in rows] == [(6144, 1536), (12288, 1536)]   # 3072 done; no budget for 24576
    a, b = rows
    assert a["cublas_us"] == 10.0 and a["layout"] == "inner"
    assert [c["config"]["XBLOCK"] for c in a["configs"]] == [1]
    assert {(x["config"]["XBLOCK"], x["fixed"], x["err"]) for x in a["bad"]} == {(2, False, 0.0), (4, True, 0.5)}
    assert [(c["config"]["XBLOCK"], c["us"]) for c in b["configs"]] == [(2, 7.0), (1, 9.0)]   # fastest first
    assert logged[0] == "grid: 1 shapes reused, 3 to measure x 3 configs"
    assert "budget: grid stops before float16 24576x1536" in logged[-1]


def test_the_tool_writes_no_table_when_nothing_could_be_measured(tmp_path, monkeypatch, capsys):
    """A GPU (pretended) whose grid yields nothing (the budget, or no config ran): the
    measured rows are kept, no table file is written, exit 1 with the reason."""
    import torch
    from torch_diode.hook import api
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "Pretend GPU")
    monkeypatch.setitem(api._hw_cache, "hw", {"device_name": "Pretend GPU", "hardware_key": "pretend-gpu"})
    monkeypatch.setattr(api, "resolve_model", lambda quiet=False: (None, "no_model"))
    no_config_ran = {"dtype": "float16", "n": 1536, "k": 1536, "layout": "inner", "cublas_us": 5.0,
                     "configs": [], "bad": [{"config": gt.CONFIGS[0], "fixed": False, "err": 0.0}]}
    monkeypatch.setattr(gt, "measure_grid", lambda *a, **k: [no_config_ran])
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    from torch._inductor import config
    out = tmp_path / "t.json"
    with config.patch(fx_graph_cache=config.fx_graph_cache):    # main() turns it off: restored after
        assert gt.main(["--out", str(out), "--quick"]) == 1
    assert not out.exists()
    assert json.loads((tmp_path / "t.grid.json").read_text())["grid"] == [no_config_ran]
    assert "no table written" in capsys.readouterr().err


def test_measured_block_names_how_many_shapes_this_run_measured_and_where_the_rest_came_from():
    class Cuda:
        @staticmethod
        def get_device_name(i):
            return "Pretend GPU"
    torch = type("FakeTorch", (), {"cuda": Cuda, "__version__": "2.x"})
    rows = gr.reused_grid(str(GRID), "nvidia-h200-144gb")[:2] + [{"dtype": "float16", "n": 1, "k": 1}]
    m = gt.measured_block(torch, "cmd", gt.CONFIGS, ["--budget-s", "9"], rows, str(GRID))
    assert m["grid"] == "1 shapes measured now, 2 from run2-grid/gemv-results.json"
    assert m["gpu"] == "Pretend GPU" and m["argv"] == "--budget-s 9" and "22 configs" in m["method"]
    assert gt.measured_block(torch, "cmd", gt.CONFIGS, [], rows[2:], None)["grid"] == "1 shapes measured now"
