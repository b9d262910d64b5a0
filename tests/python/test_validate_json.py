"""`diode validate --json` (issue 19) on a model trained quickly on synthetic data:
the schema, regrets >= 1, the split listing, rankings baselines (including the
torch-diode 0.1.1 harness when its anchors are present) and --report --compare."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from model_tools import DIODE, ROOT, needs_model_tools, run

ANCHORS = ROOT.parent / "shared" / "anchors" / "torch-diode-0.1.1"

pytestmark = needs_model_tools


@pytest.fixture(scope="module")
def trained(synthetic_models):
    return synthetic_models


def all_stats(node, path=""):
    """Every {"geomean", "p90"} object under node, with its path."""
    if isinstance(node, dict):
        if "geomean" in node:
            yield path, node
        for k, v in node.items():
            if isinstance(v, dict):
                yield from all_stats(v, f"{path}/{k}")


def check_schema(j, baselines):
    assert set(j) == {"problems", "model", "baselines"}
    assert j["problems"] > 0
    assert set(j["model"]) == {"top1", "top5", "top10", "per_op", "per_dtype"}
    for grp in ("per_op", "per_dtype"):
        assert j["model"][grp]
        for v in j["model"][grp].values():
            assert set(v) == {"top1", "top5", "top10"}
    assert set(j["baselines"]) == set(baselines)
    for b in j["baselines"].values():
        assert set(b) == {"geomean", "p90", "per_op", "per_dtype"}
        assert set(b["per_op"]) == set(j["model"]["per_op"])
        assert set(b["per_dtype"]) == set(j["model"]["per_dtype"])
    stats = list(all_stats(j))
    assert len(stats) > 10
    for path, s in stats:
        assert set(s) - {"per_op", "per_dtype"} == {"geomean", "p90"}, path
        assert s["geomean"] >= 1.0 and s["p90"] >= 1.0, (path, s)
    # Top-k regret can only fall as k grows.
    m = j["model"]
    assert m["top1"]["geomean"] >= m["top5"]["geomean"] >= m["top10"]["geomean"]


def test_validate_json_schema(trained):
    work, data, (model, _) = trained
    out = run(DIODE, "validate", "--model", model, "--dataset", data, "--json")
    j = json.loads(out)  # stdout is the JSON document and nothing else
    check_schema(j, {"cublas", "inductor_default"})


def test_list_split_matches_json_listing(trained):
    _, data, _ = trained
    hashes = run(DIODE, "validate", "--dataset", data, "--list-split", "test").split()
    listing = json.loads(run(DIODE, "validate", "--dataset", data, "--list-split", "test", "--json"))
    assert hashes == [p["problem"] for p in listing] and hashes
    assert all(len(h) == 16 for h in hashes)
    for p in listing:
        assert len(p["configs"]) == len(p["us"]) > 0
    everything = run(DIODE, "validate", "--dataset", data, "--list-split", "all").split()
    assert set(hashes) < set(everything)


def test_rankings_baseline(trained, tmp_path):
    work, data, (model, _) = trained
    listing = json.loads(run(DIODE, "validate", "--dataset", data, "--list-split", "test", "--json"))
    # A ranker that knows only triton::mm on mm problems and prefers the biggest tiles.
    problems = {}
    for p in listing:
        if p["op"] != "mm":
            continue
        scores = [-(c["block_m"] * c["block_n"]) if c["template"] == "triton::mm" else None for c in p["configs"]]
        if any(s is not None for s in scores):
            problems[p["problem"]] = {"configs": len(scores), "scores": scores}
    assert problems
    f = tmp_path / "big.rankings.json"
    f.write_text(json.dumps({"format": "diode-baseline-rankings", "version": 1, "name": "big_tiles", "k": 5,
                             "ops": ["mm"], "problems": problems}))
    j = json.loads(run(DIODE, "validate", "--model", model, "--dataset", data, "--json",
                       "--baseline-rankings", f))
    check_schema(j, {"cublas", "inductor_default", "big_tiles"})
    text = run(DIODE, "validate", "--model", model, "--dataset", data, "--baseline-rankings", f)
    assert f"big_tiles: its top-5 plus ATen on the {len(problems)} problems it ranks (ops mm)" in text
    # Rankings made for other configs are refused.
    first = next(iter(problems))
    problems[first] = {"configs": 1, "scores": [0.0]}
    f.write_text(json.dumps({"format": "diode-baseline-rankings", "version": 1, "name": "big_tiles",
                             "problems": problems}))
    r = subprocess.run([str(DIODE), "validate", "--model", str(model), "--dataset", str(data),
                        "--baseline-rankings", str(f)], capture_output=True, text=True)
    assert r.returncode != 0 and "were made for 1 configs" in r.stderr


def test_report_and_compare(trained):
    work, data, (model, model_b) = trained
    rep = work / "report"
    out = run(DIODE, "validate", "--model", model, "--dataset", data, "--report", rep, "--compare", model_b,
              "--json")
    j = json.loads(out)
    assert set(j) == {"problems", "model", "baselines", "compare"}
    assert set(j["compare"]) == {"top1", "top5", "top10", "per_op", "per_dtype"}
    # The report is one page, index.html: its figures are inline SVG and it loads nothing.
    html = (rep / "index.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html
    for s in ("<link", "<script", 'src="http', 'href="http', "url(http"):
        assert s not in html, f"the page loads an external resource: {s}"
    # Its overall CDFs carry every series: the model, both baselines and the compared model.
    for s in ("model top-1", "model top-5", "compared top-1", "compared top-5", "cublas (alone)",
              "inductor_default (+ cuBLAS)", str(model_b)):
        assert s in html, s
    # Its headline holds the --json figures exactly (data-value round-trips the double).
    values = {k: float(v) for k, v in re.findall(r'data-key="([a-z0-9_]+)" data-value="([^"]+)"', html)}
    assert values["model_top1"] == j["model"]["top1"]["geomean"]
    assert values["model_top5"] == j["model"]["top5"]["geomean"]
    assert values["cublas"] == j["baselines"]["cublas"]["geomean"]
    assert values["inductor_default"] == j["baselines"]["inductor_default"]["geomean"]
    assert values["compare_top1"] == j["compare"]["top1"]["compared"]["geomean"] if isinstance(
        j["compare"]["top1"], dict) and "compared" in j["compare"]["top1"] else "compare_top1" in values
    assert f'<span data-key="problems">{j["problems"]}</span>' in html
    summary = json.loads((rep / "summary.json").read_text())
    assert summary["overall"] == {k: v for k, v in j.items() if k != "compare"}


def test_gate_applies_the_hubs_publish_rule(trained):
    _, data, (model, model_b) = trained

    def gate(cand, pub):
        r = subprocess.run([str(DIODE), "validate", "--model", str(cand), "--dataset", str(data), "--compare", str(pub),
                            "--gate", "--json"], capture_output=True, text=True)
        assert r.returncode in (0, 3), r.stderr
        j = json.loads(r.stdout)
        assert j["gate"]["rule"] == "better_or_equal"
        assert (r.returncode == 0) == j["gate"]["passes"]               # the exit code is the verdict
        assert ("is better than or equal to" if j["gate"]["passes"] else "is WORSE than") in r.stderr
        return j["gate"]["passes"]

    assert gate(model, model)                                            # a model never loses to itself
    assert gate(model_b, model_b)
    gate(model, model_b)
    r = subprocess.run([str(DIODE), "validate", "--model", str(model), "--dataset", str(data), "--gate"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "--gate needs --compare" in r.stderr


def test_max_spread_scores_without_disturbed_records(trained):
    _, data, (model, _) = trained
    base = json.loads(run(DIODE, "validate", "--model", model, "--dataset", data, "--json"))
    # The synthetic data has no spread above 1000x a median: nothing is left out.
    same = json.loads(run(DIODE, "validate", "--model", model, "--dataset", data, "--json", "--max-spread", 1000))
    assert same == base
    r = subprocess.run([str(DIODE), "validate", "--model", str(model), "--dataset", str(data), "--max-spread", "-1"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "max-spread" in (r.stderr + r.stdout)


def test_list_split_leaves_out_what_max_spread_leaves_out():
    """A rankings file follows the listing, so the listing drops the records --max-spread
    drops from the scoring: on a real collector 2.0.0 shard (about 1% of its records
    disturbed) fewer configs, the same problems."""
    shard = ROOT / "datasets" / "nvidia-h100-80gb" / "2026-11-25-lognormal-2026112503-p00-18.msgpack.gz"

    def listing(ms):
        return json.loads(run(DIODE, "validate", "--dataset", shard, "--list-split", "all", "--json",
                              "--max-spread", ms))

    full, kept = listing(0), listing(0.5)
    assert [p["problem"] for p in full] == [p["problem"] for p in kept]
    n_full, n_kept = (sum(len(p["configs"]) for p in x) for x in (full, kept))
    assert n_kept < n_full and n_full - n_kept < 0.05 * n_full


def test_cross_hardware_scores_another_gpus_dataset(trained, tmp_path):
    """The same weights named for another GPU: refused on this dataset without
    --cross-hardware; with it, scored exactly as the original, both keys named."""
    import shutil
    _, data, (model, _) = trained
    other = tmp_path / "h200"
    shutil.copytree(model, other)
    mj = json.loads((other / "model.json").read_text())
    assert mj["hardware_key"] == "nvidia-h100-80gb"
    mj["hardware_key"] = "nvidia-h200-144gb"
    (other / "model.json").write_text(json.dumps(mj))
    r = subprocess.run([str(DIODE), "validate", "--model", str(other), "--dataset", str(data), "--json"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "nvidia-h200-144gb" in r.stderr and "nvidia-h100-80gb" in r.stderr
    base = json.loads(run(DIODE, "validate", "--model", model, "--dataset", data, "--json", "--split", "all"))
    cross = json.loads(run(DIODE, "validate", "--model", other, "--dataset", data, "--json", "--split", "all",
                           "--cross-hardware"))
    assert cross.pop("cross_hardware") == {"model": "nvidia-h200-144gb", "dataset": "nvidia-h100-80gb"}
    assert cross == base


@pytest.mark.skipif(not (ANCHORS / "v1_model.pt").exists(), reason="torch-diode 0.1.1 anchors absent")
def test_torch_diode_011_harness(trained, tmp_path):
    work, data, (model, _) = trained
    out = tmp_path / "r.json"
    msg = run(sys.executable, ROOT / "python" / "release" / "torch_diode_011_eval.py", "--dataset", data, "--anchors", ANCHORS,
              "--diode", DIODE, "--out", out)
    doc = json.loads(out.read_text())
    assert doc["name"] == "torch_diode_0_1_1" and doc["ops"] == ["mm"] and doc["k"] == 5
    listing = {p["problem"]: p for p in json.loads(
        run(DIODE, "validate", "--dataset", data, "--list-split", "test", "--json"))}
    for h, r in doc["problems"].items():
        p = listing[h]
        assert p["op"] == "mm" and r["configs"] == len(p["configs"])
        for c, s in zip(p["configs"], r["scores"]):
            assert (s is not None) == (c["template"] == "triton::mm")
    assert "ranked" in msg
    j = json.loads(run(DIODE, "validate", "--model", model, "--dataset", data, "--json",
                       "--baseline-rankings", out))
    check_schema(j, {"cublas", "inductor_default", "torch_diode_0_1_1"})
