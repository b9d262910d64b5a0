"""bench/predict_member_agreement.py and predict_aten_margin's `every_member` rule, on a real
dataset file with the shipped ensembles: the per-member gaps are the members' own forwards,
the rule is the mean rule for a single member and never picks Triton where the mean rule
does not (the smallest member gap is at most the members' mean)."""
import dataclasses
import json
import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from model_tools import shipped_model

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

import predict_aten_margin as pam  # noqa: E402
from torch_diode.hook.ranking import Ranker  # noqa: E402
from torch_diode.model import load_model_dir  # noqa: E402

H200_DATA = ROOT / "datasets/nvidia-h200-144gb/2026-11-28-mix2-2026112542-p000-049.msgpack.gz"


@pytest.fixture(scope="module")
def h200_rows():
    model = load_model_dir(str(shipped_model("nvidia-h200-144gb")))
    assert model.others, "the shipped H200 model is an ensemble"
    return model, pam.replay_rows(model, [str(H200_DATA)], members=True)


def test_member_gaps_are_each_members_own_forward(h200_rows):
    model, _ = h200_rows
    ranker = Ranker(model)
    p, rs = next(iter(pam.problems_of([str(H200_DATA)])))
    aten = next(r for r in rs if r.config.template == "aten")
    triton = next(r for r in rs if r.config.is_triton)
    gaps = pam.member_gaps(ranker, p, triton.config, aten.config)
    assert len(gaps) == 1 + len(model.others)
    x = ranker.features(p, [triton.config, aten.config])
    p0 = ranker._forward(x)
    assert gaps[0] == float(np.float32(p0[1]) - np.float32(p0[0]))
    assert len(set(gaps)) > 1                    # members differ (else the rule could not matter)


def test_every_member_picks_are_a_subset_of_the_mean_rule_picks(h200_rows):
    _, rows = h200_rows
    assert len(rows) >= 20
    for r in rows:
        # the ensemble's score is the members' mean; their smallest gap is at most it (float32 slack)
        assert r["member_gap"] <= r["gap"] + 1e-5 or not r["inside"]
    for m in pam.MARGINS:
        mean = {i for i, r in enumerate(rows) if pam.predict_picks_triton(r, m, "mean")}
        every = {i for i, r in enumerate(rows) if pam.predict_picks_triton(r, m, "every_member")}
        assert every <= mean or all(abs(rows[i]["member_gap"] - rows[i]["gap"]) < 1e-5 for i in every - mean)
        assert pam.margin_row(rows, m, "every_member")["aten_chosen"] == len(rows) - len(every)


def test_a_single_model_reads_the_same_by_both_rules():
    h100 = load_model_dir(str(shipped_model("nvidia-h100-80gb")))
    data = ROOT / "datasets/nvidia-h100-80gb/2026-11-25-mix-2026112507-p004-015.msgpack.gz"
    # member 0 alone (no other members, no pre-filter): a single model
    single = dataclasses.replace(h100, others=(), stacked_others=None, prefilter=None)
    rows = pam.replay_rows(single, [str(data)], members=True)
    assert rows
    for r in rows:
        assert r["member_gap"] == pytest.approx(r["gap"], abs=1e-6) or (r["gap"] == r["member_gap"] == -math.inf)


def test_command_line_prints_both_rules_and_their_choices(tmp_path):
    model = shipped_model("nvidia-h200-144gb")
    every = [p for p, _ in pam.problems_of([str(H200_DATA)])]
    lst = tmp_path / "split.json"
    lst.write_text(json.dumps([dict(dataclasses.asdict(p), configs=[], us=[], problem="0" * 16) for p in every]))
    out = tmp_path / "a.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench/predict_member_agreement.py"), "--json", str(out),
                        "--case", "v8", str(model), str(H200_DATA), str(lst)],
                       capture_output=True, text=True, check=True)
    doc = json.loads(out.read_text())["cases"]["v8"]
    assert doc["members"] > 1 and set(doc["tables"]) == {"mean", "every_member"}
    for rule in ("mean", "every_member"):
        assert f"{rule}: " in r.stdout
        picks = [doc["problems"] - row["aten_chosen"] for row in doc["tables"][rule]]
        assert picks == sorted(picks, reverse=True)        # a larger margin never picks Triton more often
    for m, e in zip(doc["tables"]["mean"], doc["tables"]["every_member"]):
        assert e["aten_chosen"] >= m["aten_chosen"]
