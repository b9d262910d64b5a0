"""bench/ensemble_rankings.py: a seed ensemble's mean predicted log time as a rankings
baseline of `diode validate`, on models trained quickly on synthetic data. The check that
the scores are the models' own: one model's rankings reproduce that model's top-1 (and,
with --k 5, top-5) regret as `diode validate --model SAME --json` reports it."""
from __future__ import annotations

import json
import sys

import pytest

from model_tools import DIODE, ROOT, needs_model_tools, run

SCRIPT = ROOT / "bench" / "ensemble_rankings.py"

pytestmark = needs_model_tools


@pytest.fixture(scope="module")
def trained(synthetic_models):
    return synthetic_models


def rankings(data, models, out, *extra) -> str:
    return run(sys.executable, SCRIPT, "--dataset", data, "--split", "test", "--diode", DIODE, "--models", *models,
               "--out", out, *extra)


def validate(model, data, *files) -> dict:
    args = [a for f in files for a in ("--baseline-rankings", f)]
    return json.loads(run(DIODE, "validate", "--model", model, "--dataset", data, "--split", "test", "--json", *args))


@pytest.mark.parametrize("k", [1, 5])
def test_one_model_reproduces_its_own_topk(trained, tmp_path, k):
    _, data, models = trained
    for model in models:
        f = tmp_path / f"{model.name}.json"
        msg = rankings(data, [model], f, "--k", k, "--name", "self")
        assert "ranked" in msg and "with 1 models" in msg
        j = validate(model, data, f)
        own, base = j["model"][f"top{k}"], j["baselines"]["self"]
        assert abs(base["geomean"] - own["geomean"]) <= 1e-9, (model, k, base, own)
        assert abs(base["p90"] - own["p90"]) <= 1e-9, (model, k, base, own)
        for op, v in j["model"]["per_op"].items():
            assert abs(base["per_op"][op]["geomean"] - v[f"top{k}"]["geomean"]) <= 1e-9, op


def test_two_model_ensemble_is_well_formed_and_scored(trained, tmp_path):
    _, data, models = trained
    listing = {p["problem"]: p for p in json.loads(
        run(DIODE, "validate", "--dataset", data, "--list-split", "test", "--json"))}
    ens, singles = tmp_path / "ens.json", [tmp_path / "a.json", tmp_path / "b.json"]
    msg = rankings(data, models, ens)
    assert "ensemble2: ranked" in msg and "with 2 models" in msg
    for m, f in zip(models, singles):
        rankings(data, [m], f)
    doc = json.loads(ens.read_text())
    assert doc["format"] == "diode-baseline-rankings" and doc["version"] == 1
    assert doc["name"] == "ensemble2" and doc["k"] == 1 and doc["with_aten"] is False
    assert doc["fallback"] == "inductor_default" and doc["ops"] == ["mm", "addmm", "bmm", "baddbmm"]
    assert [m["path"] for m in doc["models"]] == [str(m) for m in models]
    assert set(doc["problems"]) == {h for h, p in listing.items() if p["configs"]}
    one = [json.loads(f.read_text())["problems"] for f in singles]
    for h, r in doc["problems"].items():
        assert r["configs"] == len(listing[h]["configs"]) == len(r["scores"])
        assert all(isinstance(s, float) for s in r["scores"])        # every config scored, ATen too
        # the mean of the two models' predicted log times
        for s, a, b in zip(r["scores"], one[0][h]["scores"], one[1][h]["scores"]):
            assert s == pytest.approx((a + b) / 2, rel=0, abs=1e-12)
    j = validate(models[0], data, ens)
    assert set(j["baselines"]) == {"cublas", "inductor_default", "ensemble2"}
    b = j["baselines"]["ensemble2"]
    assert b["geomean"] >= 1.0 and b["p90"] >= 1.0
    assert set(b["per_op"]) == set(j["model"]["per_op"])
    # --k 5 under its default name; both files side by side
    ens5 = tmp_path / "ens5.json"
    rankings(data, models, ens5, "--k", 5)
    assert json.loads(ens5.read_text())["name"] == "ensemble2_top5"
    j = validate(models[1], data, ens, ens5)
    assert j["baselines"]["ensemble2_top5"]["geomean"] <= j["baselines"]["ensemble2"]["geomean"]
    text = run(DIODE, "validate", "--model", models[0], "--dataset", data, "--split", "test",
               "--baseline-rankings", ens)
    assert "ensemble2: its top-1 (no ATen) on" in text and "(ops mm,addmm,bmm,baddbmm)" in text


def test_cascade_rankings_match_the_ensemble_model_diode_validate_ranks(trained, tmp_path):
    """--cascade K scores as an ensemble model directory (`diode ensemble --cascade K`,
    docs/model-format.md, Members) ranks in C++: the same top-1 and top-5 regret, so the
    bench's measurements of a cascade are those of the shipped format."""
    _, data, models = trained
    ens_dir = tmp_path / "ens-model"
    run(DIODE, "ensemble", *[a for m in models for a in ("--member", m)], "--cascade", 3, "--out", ens_dir)
    for k in (1, 5):
        f = tmp_path / f"cascade{k}.json"
        rankings(data, models, f, "--cascade", 3, "--k", k, "--name", "cascade")
        assert json.loads(f.read_text())["cascade"] == 3
        j = validate(ens_dir, data, f)
        own, base = j["model"][f"top{k}"], j["baselines"]["cascade"]
        assert base["geomean"] == pytest.approx(own["geomean"], abs=1e-6), (k, base, own)
