"""Predict mode's aten_rule (bench/predict_member_agreement.py (script removed; git history)): with "every_member" an
ensemble hands a Triton config over only when every member alone predicts it faster than ATen
by more than the margin; the option, model.json selection.aten_rule and the default ("mean")."""
import dataclasses
import json
import math

import pytest

torch = pytest.importorskip("torch")

from test_hook_model import write_model_dir  # noqa: E402
from test_hook_predict import fake_model  # noqa: E402
from test_hook_ranking import M, K, N, FakeMMInputs, finalize, make_choices, model, real_configs  # noqa: E402,F401
from torch_diode.hook import extract  # noqa: E402
from torch_diode.hook.choices import HookState, choices_class  # noqa: E402
from torch_diode.hook.ranking import ATEN_RULES, Options, Ranker, config_key  # noqa: E402
from torch_diode.hook.stats import Stats  # noqa: E402
from torch_diode.model import (SELECTION_RULES, LoadedModel, ModelFormatError, load_model_dir,  # noqa: E402
                               parse_selection_rule)
from torch_diode.wire import Problem  # noqa: E402

PROBLEM = Problem(op="mm", m=M, n=N, k=K)
SHAPE = {"log2_block_m": 1.0, "log2_block_n": 0.5}   # both members prefer the same Triton config


def ensemble(model, aten_weights):
    """Linear members that differ only in how slow they predict ATen (template=aten's weight)."""
    members = [fake_model(model, **{"template__aten": w, **SHAPE}) for w in aten_weights]
    arch = dataclasses.replace(members[0].info.architecture, members=len(members), cascade=64)
    info = dataclasses.replace(members[0].info, architecture=arch)
    return LoadedModel(info=info, module=members[0].module, others=tuple(m.module for m in members[1:]))


def gaps_for(model, real_configs, aten_weights):
    m = ensemble(model, aten_weights)
    aten, triton = make_choices(real_configs)
    r = Ranker(m)
    cfgs = [extract.config_from_ktc(k) for k in triton]
    ranking = r.rank(PROBLEM, cfgs, Options(top_k=1, threshold=0.0))
    pick = cfgs[int(ranking.scores.argmin())]
    aten_key = config_key(extract.aten_config(aten, PROBLEM))
    return m, r.member_gaps(PROBLEM, config_key(pick), aten_key)


def weights_for(model, real_configs, targets):
    """ATen weights giving each member the wanted gap (the gap is linear in the weight)."""
    _, (g0, g1) = gaps_for(model, real_configs, [0.0, 1.0])
    slope = g1 - g0
    assert slope > 0                       # a slower predicted ATen widens the gap
    return [(t - g0) / slope for t in targets]


def handler(m, **opts):
    state = HookState(Ranker(m), Options(mode="predict", **opts), Stats())
    return choices_class()(state), state


def test_the_rules_are_one_definition_and_the_option_is_validated():
    assert ATEN_RULES is SELECTION_RULES == ("mean", "every_member")
    assert Options().aten_rule is None
    keys = {Options(aten_rule=r).key() for r in (None, "mean", "every_member")}
    assert len(keys) == 3                  # the FX-graph cache key tells them apart
    for bad in ("all", "", 1, True):
        with pytest.raises(ValueError, match="aten_rule"):
            Options(aten_rule=bad)


def test_member_gaps_are_each_members_own_prediction(model, real_configs):
    m, gaps = gaps_for(model, real_configs, [0.3, -0.2])
    assert len(gaps) == 2 and gaps[0] - gaps[1] > 0
    aten, triton = make_choices(real_configs)
    cfgs = [extract.config_from_ktc(k) for k in triton]
    pick = cfgs[int(Ranker(m).rank(PROBLEM, cfgs, Options(top_k=1, threshold=0.0)).scores.argmin())]
    for j, module in enumerate((m.module, *m.others)):
        arch = dataclasses.replace(m.info.architecture, members=1, cascade=None)
        single = LoadedModel(info=dataclasses.replace(m.info, architecture=arch), module=module)
        own = Ranker(single).member_gaps(PROBLEM, config_key(pick), config_key(extract.aten_config(aten, PROBLEM)))
        assert own == [gaps[j]]


def test_every_member_hands_over_aten_when_one_member_doubts_the_triton_pick(model, real_configs):
    w = weights_for(model, real_configs, [0.20, -0.05])   # mean gap ~0.075 > 0, one member < 0
    m, gaps = gaps_for(model, real_configs, w)
    assert gaps[0] == pytest.approx(0.20, abs=1e-3) and gaps[1] == pytest.approx(-0.05, abs=1e-3)
    aten, triton = make_choices(real_configs)
    lists = {"aten::mm": [aten], "triton::mm": triton}
    h, state = handler(m, aten_margin=0.0)                 # the ensemble's mean: Triton
    out = finalize(h, lists, FakeMMInputs(M, N, K))
    assert out != [aten] and len(out) == 1 and state.stats.snapshot()["predicted"] == {"triton": 1}
    h, state = handler(m, aten_margin=0.0, aten_rule="every_member")
    assert state.aten_rule == "every_member"
    calls = []
    state.stats.add_profile(calls)
    out = finalize(h, lists, FakeMMInputs(M, N, K))
    assert out == [aten] and state.stats.snapshot()["predicted"] == {"aten": 1}
    assert len(calls) == 1 and calls[0].member_disagreed and calls[0].predicted == "aten"


def test_every_member_keeps_the_triton_pick_when_every_member_agrees(model, real_configs):
    m, gaps = gaps_for(model, real_configs, weights_for(model, real_configs, [0.20, 0.08]))
    aten, triton = make_choices(real_configs)
    lists = {"aten::mm": [aten], "triton::mm": triton}
    for margin, expect_triton in ((0.0, True), (0.05, True), (0.10, False)):   # min gap 0.08 = log1p(0.083)
        h, state = handler(m, aten_margin=margin, aten_rule="every_member")
        out = finalize(h, lists, FakeMMInputs(M, N, K))
        assert (out != [aten]) == expect_triton, margin
    # a single model reads the same by both rules (its one gap is the score's)
    single = fake_model(model, **{"template__aten": weights_for(model, real_configs, [0.03, 0.03])[0], **SHAPE})
    for rule in ATEN_RULES:
        h, state = handler(single, aten_margin=0.0, aten_rule=rule)
        assert finalize(h, lists, FakeMMInputs(M, N, K)) != [aten]


def test_the_rule_comes_from_the_option_then_the_model_then_mean(model, tmp_path):
    assert parse_selection_rule(None) is None and parse_selection_rule({"aten_margin": 0.05}) is None
    for r in SELECTION_RULES:
        assert parse_selection_rule({"aten_rule": r}) == r
    for bad in ("EVERY_MEMBER", None, 1, ["mean"]):
        with pytest.raises(ModelFormatError, match="selection.aten_rule"):
            parse_selection_rule({"aten_rule": bad})
    write_model_dir(tmp_path / "own", json_patch=lambda j: j.update(
        selection={"aten_margin": 0.0, "aten_rule": "every_member"}))
    own = load_model_dir(tmp_path / "own")
    assert own.info.aten_rule == "every_member" and own.info.aten_margin == 0.0
    assert HookState(Ranker(own), Options(), Stats()).aten_rule == "every_member"
    assert HookState(Ranker(own), Options(aten_rule="mean"), Stats()).aten_rule == "mean"
    assert HookState(Ranker(model), Options(), Stats()).aten_rule == "mean"
    write_model_dir(tmp_path / "bad", json_patch=lambda j: j.update(selection={"aten_rule": "all"}))
    with pytest.raises(ModelFormatError, match="selection.aten_rule"):
        load_model_dir(tmp_path / "bad")
    assert json.loads((tmp_path / "own" / "model.json").read_text())["selection"]["aten_rule"] == "every_member"


def test_topk_shortcut_follows_the_every_member_rule(model, real_configs):
    m, _ = gaps_for(model, real_configs, weights_for(model, real_configs, [0.20, -0.05]))
    aten, triton = make_choices(real_configs)
    lists = {"aten::mm": [aten], "triton::mm": triton}
    for rule, aten_alone in (("mean", False), ("every_member", True)):
        state = HookState(Ranker(m), Options(mode="topk", top_k=5, threshold=0.0, aten_margin=0.0,
                                             aten_rule=rule), Stats())
        out = finalize(choices_class()(state), lists, FakeMMInputs(M, N, K))
        assert (out == [aten]) == aten_alone, rule
        assert state.stats.snapshot()["predicted"] == ({"aten": 1} if aten_alone else {})
