"""bench/gemv_table_transfer.py: a GEMV table's configs looked up on another run's grid (no GPU)."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUN5 = ROOT / "bench/data/gemv-2026-11-28-h200/run5-tool"
SHIPPED = ROOT / "python/torch_diode/hook/gemv_tables/nvidia-h200-144gb.json"
sys.path.insert(0, str(ROOT / "bench"))

import gemv_table_transfer as gtt  # noqa: E402
from stats import geomean  # noqa: E402

A = {"XBLOCK": 1, "R0_BLOCK": 512, "num_warps": 4, "num_stages": 1}
B = {"XBLOCK": 2, "R0_BLOCK": 2048, "num_warps": 8, "num_stages": 1}
C = {"XBLOCK": 4, "R0_BLOCK": 1024, "num_warps": 8, "num_stages": 1}


def row(n, k, cublas, times):
    return {"dtype": "float16", "layout": "inner", "n": n, "k": k, "cublas_us": cublas,
            "configs": [{"config": c, "us": t} for c, t in times]}


def test_transfer_sets_each_config_against_the_fastest_and_cublas_and_counts_what_it_cannot_look_up():
    grid = [row(1536, 1536, 6.0, [(A, 3.0), (B, 3.3)]),
            row(3072, 1536, 8.0, [(A, 4.4), (B, 4.0)]),
            row(6144, 1536, 9.0, [(A, 7.0)]),           # the table's config C was not timed here
            row(12288, 1536, 14.0, [(A, 11.0)])]        # the table has no entry for it
    table = {("float16", 1536, 1536, "inner"): B, ("float16", 3072, 1536, "inner"): B,
             ("float16", 6144, 1536, "inner"): C}
    own = {("float16", 1536, 1536, "inner"): A, ("float16", 3072, 1536, "inner"): B}
    r = gtt.transfer(grid, table, own)
    assert (r["shapes"], r["missing"], r["untimed"], r["agree"]) == (2, 1, 1, 1)
    assert r["to_best_geomean"] == geomean([3.3 / 3.0, 1.0]) and r["to_best_worst"] == 3.3 / 3.0
    assert r["to_cublas_geomean"] == geomean([3.3 / 6.0, 4.0 / 8.0]) and r["to_cublas_worst"] == 3.3 / 6.0


def test_a_table_on_its_own_grid_agrees_everywhere_and_its_picks_are_near_the_fastest():
    grid = gtt.grid_rows(json.loads((RUN5 / "nvidia-h200-144gb.grid.json").read_text()))
    own = gtt.table_configs(json.loads((RUN5 / "nvidia-h200-144gb.json").read_text()))
    r = gtt.transfer(grid, own, own)
    assert r["shapes"] == r["agree"] == len(grid) == 44 and r["missing"] == r["untimed"] == 0
    assert 1.0 <= r["to_best_geomean"] < 1.05     # the robust rule trades a little for stability
    assert r["to_cublas_worst"] < 1.0             # every entry beat cuBLAS (the table's own rule)


def test_the_shipped_h200_table_on_session_30s_fresh_grid_via_the_command_line():
    out = subprocess.run([sys.executable, str(ROOT / "bench/gemv_table_transfer.py"),
                          str(RUN5 / "nvidia-h200-144gb.grid.json"), str(RUN5 / "nvidia-h200-144gb.json"),
                          str(SHIPPED)], capture_output=True, text=True, check=True).stdout
    lines = [ln for ln in out.splitlines() if ln.startswith(f"| {SHIPPED}")]
    assert len(lines) == 1
    cells = [c.strip() for c in lines[0].strip("|").split("|")]
    assert cells[1].startswith("44 (missing 0, untimed 0)")
    to_best, to_cublas = (tuple(float(x) for x in cells[i].split(",")) for i in (3, 4))
    assert to_best[0] < 1.03 and to_cublas[1] < 1.0   # the shipped configs still beat cuBLAS on every shape


def test_a_grid_file_without_shapes_is_refused_with_its_reason():
    try:
        gtt.grid_rows({"hardware": "x"})
    except SystemExit as e:
        assert "neither 'grid' nor 'shapes'" in str(e)
    else:
        raise AssertionError("no error")
