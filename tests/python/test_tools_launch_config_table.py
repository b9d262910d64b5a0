"""python -m torch_diode.tools.launch_config_table: tables from real recorder files (torch's
own CoordescTuner walking simulated kernels), and their held-out replay."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from torch_diode.collect import coordesc  # noqa: E402
from torch_diode.hook import launch_configs as lc  # noqa: E402
from torch_diode.tools import launch_config_table as tool  # noqa: E402

from _coordesc_fakes import Cfg, Kernel, tune  # noqa: E402


def kernel_ms(best_x: int):
    """A kernel whose best launch is XBLOCK=best_x, num_warps=4 (from XBLOCK=8, warps 4)."""
    return lambda c: 1.0 + abs(c.kwargs["XBLOCK"].bit_length() - best_x.bit_length()) * 0.5 + \
        abs(c.num_warps.bit_length() - 3) * 0.1


def record(path, model, kernels):
    with coordesc.CoordescRecorder(str(path)) as rec:
        rec.tags = {"model": model}
        for k, best_x in kernels:
            k.ms = kernel_ms(best_x)
            tune(k, Cfg({"XBLOCK": 8, "R0_BLOCK": 512}))
    return str(path)


@pytest.fixture
def files(tmp_path):
    shared = Kernel()                                           # in both models
    a = record(tmp_path / "a.jsonl", "llama", [(shared, 32), (Kernel(size_hints={"x": 2048, "r0_": 8192},
                                                                      src_extra="#a"), 16)])
    b = record(tmp_path / "b.jsonl", "qwen", [(Kernel(name="triton_red_fused_sum_3"), 32),
                                              (Kernel(size_hints={"x": 4096, "r0_": 4096}, src_extra="#b"), 64)])
    return a, b


def test_build_writes_a_table_the_hook_accepts(files, tmp_path, capsys):
    out = tmp_path / "table.json"
    assert tool.main(["build", *files, "--hardware", "nvidia-h200-144gb", "--out", str(out)]) == 0
    t = lc.parse_table(out.read_bytes(), str(out))
    # Three distinct sources: the shared kernel (twice, renamed) is one entry.
    assert len(t.entries) == 3
    shared = t.lookup(coordesc.kernel_features(Kernel()))[0]
    assert shared.config_dict() == {"XBLOCK": 32, "R0_BLOCK": 512, "num_warps": 4, "num_stages": 1}
    assert shared.ms == pytest.approx(1.0) and shared.baseline_ms == pytest.approx(2.0)
    assert json.loads(out.read_text())["measured"] == {"records": 4, "files": 2}
    assert "3 kernels from 4 records" in capsys.readouterr().out


def test_replay_holds_each_model_out(files, capsys):
    res = tool.replay([r for f in files for r in coordesc.load(f)], "model")
    q = res["per"]["qwen"]
    # Held out qwen: its renamed shared kernel is found by source (XBLOCK=32 measured: the
    # winner itself); its 4096x4096 kernel is nearest to llama's 4096x8192 one (XBLOCK=32),
    # which qwen's walk timed on its way to 64.
    assert (q["kernels"], q["source"], q["nearest"], q["untimed"]) == (2, 1, 1, 0)
    assert q["vs_best"] == [pytest.approx(1.0), pytest.approx(1.5 / 1.0)]
    assert q["vs_baseline"][0] == pytest.approx(1.0 / 2.0)
    assert tool.main(["replay", *files]) == 0
    out = capsys.readouterr().out
    assert "model=qwen: 2 kernels, hits 1 by source + 1 nearest (0 untimed)" in out
    assert out.strip().splitlines()[-1].startswith("all: 4 kernels")


def test_errors_name_the_file(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{nope\n{}\n")
    assert tool.main(["replay", str(bad)]) == 2
    assert f"{bad}:1: not a JSON record" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert tool.main(["build", str(empty), "--hardware", "h", "--out", str(tmp_path / "t.json")]) == 2
    assert "nothing to tabulate" in capsys.readouterr().err


def rec(model, sha, base, best, trials):
    return {"format": coordesc.FORMAT, "name": "k", "tags": {"model": model}, "tune_s": 1.0,
            "features": dict(coordesc.kernel_features(Kernel()), source_sha256=sha),
            "baseline": {"config": base, "ms": trials[0][1]}, "best": {"config": best, "ms": min(m for _, m in trials)},
            "trials": [{"config": c, "ms": m} for c, m in trials]}


def test_a_winner_that_moved_a_field_no_table_holds_is_not_tabulated():
    base = {"XBLOCK": 8, "NUM_STAGES": 1, "num_warps": 4, "num_stages": 1}
    moved = {"XBLOCK": 16, "NUM_STAGES": 2, "num_warps": 4, "num_stages": 1}   # a mix-order reduction's field
    r = rec("a", "a" * 64, base, moved, [(base, 2.0), (moved, 1.0)])
    # Its trial XBLOCK=16 with NUM_STAGES=2 is not "the start plus table fields": left out,
    # and the record itself is not tabulable, so nothing is built.
    assert not tool.tabulable(r)
    assert tool.build_entries([r]) == []
    same = dict(r, best={"config": {**base, "XBLOCK": 16}, "ms": 1.5},
                trials=[{"config": base, "ms": 2.0}, {"config": {**base, "XBLOCK": 16}, "ms": 1.5},
                        {"config": moved, "ms": 1.0}])
    [e] = tool.build_entries([same])
    assert e["config"] == {"XBLOCK": 16, "num_warps": 4, "num_stages": 1} and e["ms"] == 1.5


def test_replay_gives_no_verdict_when_most_hits_are_untimed(capsys):
    base = {"XBLOCK": 8, "num_warps": 4, "num_stages": 1}
    a = rec("a", "b" * 64, base, {**base, "XBLOCK": 64}, [(base, 2.0), ({**base, "XBLOCK": 64}, 1.0)])
    # Held out "b": the same kernel, whose walk never timed XBLOCK=64 (it went down, not up).
    b = rec("b", "b" * 64, base, {**base, "XBLOCK": 4}, [(base, 2.0), ({**base, "XBLOCK": 4}, 1.8)])
    s = tool.replay([a, b])["per"]["b"]
    assert (s["source"], s["untimed"], s["vs_best"]) == (1, 1, [])
    assert "no verdict" in tool._line("model=b", s)
