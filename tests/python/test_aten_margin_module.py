"""The ATen-margin replay lives in the package (torch_diode/aten_margin.py): the release script
python/release/choose_aten_margin.py imports it without editing sys.path, and the bench scripts
use the same functions (one definition), with bench/ kept to its 12 scripts."""
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RELEASE_SCRIPT = ROOT / "python" / "release" / "choose_aten_margin.py"


def _sys_path_edits(tree: ast.AST) -> list[int]:
    """Line numbers of every `sys.path` use in a module."""
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr == "path" and isinstance(n.value, ast.Name)
            and n.value.id == "sys"]


def _imported_modules(tree: ast.AST) -> set[str]:
    mods = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            mods.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.module:
            mods.add(n.module)
    return mods


def test_release_script_imports_the_package_only():
    tree = ast.parse(RELEASE_SCRIPT.read_text())
    assert _sys_path_edits(tree) == []
    mods = _imported_modules(tree)
    assert "torch_diode.aten_margin" in mods
    assert not mods & {"predict_aten_margin", "aten_margin_choice", "static_pick_split", "stats"}, mods


def test_release_script_runs_from_anywhere(tmp_path):
    # Outside the checkout, with no path set up: the installed package is enough.
    r = subprocess.run([sys.executable, str(RELEASE_SCRIPT), "--help"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "--split-list" in r.stdout


def test_bench_scripts_use_the_package_definitions():
    from torch_diode import aten_margin
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import aten_margin_choice as amc
        import predict_aten_margin as pam
        import static_pick_split as sps
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert pam.replay_rows is aten_margin.replay_rows and pam.margin_row is aten_margin.margin_row
    assert pam.problems_of is aten_margin.problems_of and pam.MARGINS is aten_margin.MARGINS
    assert amc.choose is aten_margin.choose and amc.check_bound_and_spread is aten_margin.check_bound_and_spread
    assert sps.problems_of is aten_margin.problems_of
    for script in ("predict_aten_margin.py", "aten_margin_choice.py", "static_pick_split.py"):
        tree = ast.parse((ROOT / "bench" / script).read_text())
        assert _sys_path_edits(tree) == [], script
        assert "torch_diode.aten_margin" in _imported_modules(tree), script


def test_choose_takes_the_smallest_margin_within_the_bound_in_every_table():
    from torch_diode import aten_margin
    n = len(aten_margin.MARGINS)
    worst = {"a": [1.5, 1.2, 1.08, 1.05] + [1.0] * (n - 4), "b": [1.3, 1.09, 1.12, 1.01] + [1.0] * (n - 4)}
    tables = {k: [{"vs_cublas_max": v} for v in vs] for k, vs in worst.items()}
    assert aten_margin.choose(tables, 1.10) == aten_margin.MARGINS[3]
    assert aten_margin.choose(tables, 1.20) == aten_margin.MARGINS[1]
    assert aten_margin.choose(tables, 0.99) is None


def test_bench_keeps_at_most_twelve_scripts():
    bench = ROOT / "bench"
    scripts = [p for pat in ("*.py", "*.sh", "*.cpp") for p in bench.glob(pat)]
    assert len(scripts) <= 12, sorted(p.name for p in scripts)


def test_replay_statistics_are_the_packages_one_definition():
    from torch_diode import aten_margin, summary_stats
    assert aten_margin.geomean is summary_stats.geomean and aten_margin.p90 is summary_stats.p90
    xs = [4.0, 1.0, 6.0, 3.0, 5.0, 2.0]
    assert aten_margin.stats(xs) == (summary_stats.geomean(xs), 6.0, 6.0)
