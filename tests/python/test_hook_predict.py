"""Predict mode (issue 20): the model's single best choice goes to Inductor, which then
benchmarks nothing; every failure still takes Inductor's default path with a counted reason."""
import dataclasses
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")

import torch_diode  # noqa: E402
from test_hook_model import write_model_dir  # noqa: E402
from test_hook_ranking import (M, K, N, FakeKTC, FakeMMInputs, finalize, make_choices,  # noqa: E402,F401
                               model, real_configs)
from torch._inductor import config as inductor_config  # noqa: E402
from torch_diode.features import FeatureSpec  # noqa: E402
from torch_diode.hook import api, compat, extract  # noqa: E402
from torch_diode.hook.choices import DiodeChoicesMixin, HookState, choices_class  # noqa: E402
from reference_ranker import ReferenceRanker  # noqa: E402
from torch_diode.hook.ranking import ENV_MODE, Options, Ranker  # noqa: E402
from torch_diode.hook.ranking import config_key as ranking_config_key  # noqa: E402
from torch_diode.hook.stats import Stats  # noqa: E402
from torch_diode.model import LoadedModel  # noqa: E402
from torch_diode.wire import Problem  # noqa: E402


class Linear(torch.nn.Module):
    """score = x . w: a model whose preferences the test sets."""

    def __init__(self, w):
        super().__init__()
        self.w = torch.tensor(w, dtype=torch.float32)

    def forward(self, x):
        return x @ self.w


def fake_model(model, spec=None, **weights):
    spec = spec or model.info.feature_spec
    names = spec.names
    w = [0.0] * len(names)
    for name, v in weights.items():
        w[names.index(name.replace("__", "="))] = v
    info = dataclasses.replace(model.info, feature_spec=spec)
    return LoadedModel(info=info, module=Linear(w))


def predicted_order(m, triton):
    """Indices of the Triton choices, best predicted first, by the independent reference ranker."""
    problem = Problem(op="mm", m=M, n=N, k=K)
    ref = ReferenceRanker(m).score(problem, [extract.config_from_ktc(k) for k in triton])[0]
    return sorted(range(len(triton)), key=lambda i: (ref[i], i))


def predict_handler(m):
    state = HookState(Ranker(m), Options(mode="predict"), Stats())
    return choices_class()(state), state


def test_predict_hands_over_the_best_triton_config_alone(model, real_configs):
    # ATen predicted slow (its one-hot feature costs a lot), then smaller BLOCK_M is faster
    m = fake_model(model, **{"template__aten": 100.0, "log2_block_m": 1.0, "log2_block_n": 0.5})
    aten, triton = make_choices(real_configs)
    h, state = predict_handler(m)
    out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    assert out == [triton[predicted_order(m, triton)[0]]]
    s = state.stats.snapshot()
    assert s["predicted"] == {"triton": 1} and s["model_selections"] == 1 and s["configs_kept"] == 1


def test_predict_hands_over_aten_alone_when_it_is_predicted_fastest(model, real_configs):
    m = fake_model(model, **{"template__aten": -100.0, "log2_block_m": 1.0})
    aten, triton = make_choices(real_configs)
    h, state = predict_handler(m)
    out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    assert out == [aten]
    assert state.stats.snapshot()["predicted"] == {"aten": 1}


def test_model_without_aten_feature_keeps_aten_and_top1(model, real_configs):
    spec = FeatureSpec(templates=["triton::mm", "triton::bmm"])
    m = fake_model(model, spec=spec, log2_block_m=1.0)
    aten, triton = make_choices(real_configs)
    h, state = predict_handler(m)
    out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    assert len(out) == 2 and out[0] is aten and out[1] in triton
    assert out[1].params.to_kwargs()["BLOCK_M"] == min(c["BLOCK_M"] for c in real_configs)
    assert state.stats.snapshot()["predicted"] == {"aten+triton": 1}


class Unbuildable(FakeKTC):
    choice = None  # Inductor's KTC.choice is None when codegen failed


class BrokenTriton(FakeKTC):
    @property
    def choice(self):  # a real code generation error: Inductor would raise it again
        raise RuntimeError("template rendering failed")


@pytest.mark.parametrize("failing", [Unbuildable, BrokenTriton])
def test_predicted_choice_that_does_not_build_gives_way_to_the_next(model, real_configs, failing):
    m = fake_model(model, **{"template__aten": 100.0, "log2_block_m": 1.0, "log2_block_n": 0.5})
    aten, triton = make_choices(real_configs)
    order = predicted_order(m, triton)
    t = list(triton)
    t[order[0]] = failing("triton::mm", triton[order[0]].params.to_kwargs())
    h, state = predict_handler(m)
    out = finalize(h, {"aten::mm": [aten], "triton::mm": t}, FakeMMInputs(M, N, K))
    assert out == [t[order[1]]]
    assert state.stats.snapshot()["predict_retries"] == 1

    # none of the tries builds: Inductor's default lists, counted
    t = [failing("triton::mm", k.params.to_kwargs()) for k in triton]
    out = finalize(h, {"aten::mm": [aten], "triton::mm": t}, FakeMMInputs(M, N, K))
    assert out == [aten] + t
    assert state.stats.snapshot()["fallbacks"] == {"predicted_choice_failed": 1}


def test_predict_errors_fall_back_to_default_lists(model, real_configs):
    m = fake_model(model, **{"template__aten": 1.0})
    m.module.w[0] = float("nan")  # non-finite predictions
    aten, triton = make_choices(real_configs)
    h, state = predict_handler(m)
    out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    assert out == [aten] + triton
    snap = state.stats.snapshot()
    assert snap["fallbacks"] == {"non_finite_prediction": 1}
    # the error itself is kept for diagnosis (a GPU run showed only the counted reason)
    assert snap["fallback_errors"]["non_finite_prediction"].startswith("FloatingPointError")


class FlexibleLayoutATen(FakeKTC):
    @property
    def choice(self):  # torch 2.11: building an extern choice before Inductor fixes its layout
        raise AssertionError("convert FlexibleLayout to FixedLayout first")


def test_predicted_aten_is_handed_over_without_building_it(model, real_configs):
    m = fake_model(model, **{"template__aten": -100.0})
    _, triton = make_choices(real_configs)
    aten = FlexibleLayoutATen("aten::mm", {})
    h, state = predict_handler(m)
    out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(1, N, K))
    assert out == [aten]
    s = state.stats.snapshot()
    assert s["predicted"] == {"aten": 1} and s["fallbacks"] == {}


class FlexibleLayoutTriton(FakeKTC):
    @property
    def choice(self):  # torch 2.11: a template built before Inductor fixes the output layout
        raise AssertionError("convert FlexibleLayout to FixedLayout first")


def test_predicted_triton_that_cannot_be_built_yet_is_handed_over(model, real_configs):
    m = fake_model(model, **{"template__aten": 100.0, "log2_block_m": 1.0, "log2_block_n": 0.5})
    aten, triton = make_choices(real_configs)
    t = [FlexibleLayoutTriton("triton::mm", k.params.to_kwargs(), k.extra_kwargs) for k in triton]
    h, state = predict_handler(m)
    out = finalize(h, {"aten::mm": [aten], "triton::mm": t}, FakeMMInputs(M, N, K))
    assert out == [t[predicted_order(m, triton)[0]]]
    s = state.stats.snapshot()
    assert s["predicted"] == {"triton": 1} and s["fallbacks"] == {} and s["predict_retries"] == 0


def test_predicted_aten_for_addmm_hands_over_bias_addmm(model, real_configs):
    # Inductor's aten::addmm copies the expanded bias into the output first (+67% on a ViT
    # fc1 on an H100); aten::bias_addmm runs the cuBLASLt bias epilogue, as eager does
    m = fake_model(model, **{"template__aten": -100.0})
    aten, triton = make_choices(real_configs)
    own = FakeKTC("aten::addmm", {})
    bias = FakeKTC("aten::bias_addmm", {})
    tri = [FakeKTC("triton::mm", k.params.to_kwargs(), k.extra_kwargs) for k in triton]
    h, state = predict_handler(m)
    inputs = FakeMMInputs(M, N, K, bias=(0, 1))
    out = finalize(h, {"aten::addmm": [own], "aten::bias_addmm": [bias], "triton::mm": tri}, inputs, op="addmm")
    assert out == [bias]
    assert state.stats.snapshot()["predicted"] == {"aten": 1}
    # without a bias_addmm choice (a 2-D bias), the op's own ATen kernel
    out = finalize(h, {"aten::addmm": [own], "triton::mm": tri}, inputs, op="addmm")
    assert out == [own]


def test_mode_option_and_environment(monkeypatch):
    monkeypatch.delenv(ENV_MODE, raising=False)
    assert Options().mode == "predict"  # the default since the H100 benchmark (docs/hook.md, Modes)
    monkeypatch.setenv(ENV_MODE, "TOPK")
    assert Options().mode == "topk"
    monkeypatch.setenv(ENV_MODE, "PREDICT")
    assert Options().mode == "predict"
    monkeypatch.setenv(ENV_MODE, "bogus")
    assert Options().mode == "predict"
    with pytest.raises(ValueError):
        Options(mode="fastest")
    assert Options(mode="predict").key() != Options(mode="topk").key()  # FX-graph cache key differs


def _count_benchmarks(monkeypatch):
    from torch._inductor import select_algorithm as sa
    n = {"benchmark_choice": 0, "autotune_calls": []}
    orig = sa.AlgorithmSelectorCache.__dict__["benchmark_choice"]
    inner = getattr(orig, "__func__", orig)

    def benchmark_choice(cls, choice, autotune_args):
        n["benchmark_choice"] += 1
        return inner(cls, choice, autotune_args)

    monkeypatch.setattr(sa.AlgorithmSelectorCache, "benchmark_choice", classmethod(benchmark_choice))
    orig_call = sa.AlgorithmSelectorCache.__call__

    def call(self, name, choices, *a, **kw):
        n["autotune_calls"].append(len(choices))
        return orig_call(self, name, choices, *a, **kw)

    monkeypatch.setattr(sa.AlgorithmSelectorCache, "__call__", call)
    return n


@pytest.mark.parametrize("mode", ["topk", "predict"])
def test_real_compile_predict_mode_benchmarks_nothing(tmp_path, monkeypatch, mode):
    """A real torch.compile(max-autotune) on CPU. Inductor offers only ATen here, so each
    GEMM is offered its ATen choice twice (two choices: Inductor would benchmark them).
    topk passes both through and Inductor benchmarks; predict hands over ATen alone and
    Inductor takes its single-choice path: no benchmark at all."""
    from torch._dynamo.utils import counters

    api.uninstall()
    cfg, tl = compat.get_choices_config(), compat.thread_handler()
    inductor_config.inductor_choices_class = None
    compat.set_thread_handler(compat.MISSING)
    assert torch_diode.install(write_model_dir(str(tmp_path / "m")), mode=mode)
    assert torch_diode.get_options()["mode"] == mode
    torch_diode.reset_prediction_stats()
    original = DiodeChoicesMixin._diode_finalize

    def doubled(self, args, kwargs):
        bound = compat.bind_finalize_args(self._diode_base_finalize, args, kwargs)
        bound["template_choices"] = {uid: iter(list(g) * 2) for uid, g in bound["template_choices"].items()}
        bound.pop("self", None)
        return original(self, (), bound)

    monkeypatch.setattr(DiodeChoicesMixin, "_diode_finalize", doubled)
    n = _count_benchmarks(monkeypatch)
    counters.clear()

    def f(x, w):
        return x @ w

    args = (torch.randn(32, 64), torch.randn(64, 16))
    torch._dynamo.reset()
    try:
        with inductor_config.patch(force_disable_caches=True, max_autotune_gemm_backends="ATEN"):
            got = torch.compile(f, mode="max-autotune")(*args)
    finally:
        torch._dynamo.reset()
        api.uninstall()
        torch_diode.set_options(mode="topk")
        inductor_config.inductor_choices_class = cfg
        compat.set_thread_handler(tl)
    torch.testing.assert_close(got, f(*args))
    s = torch_diode.get_prediction_stats()
    assert s["calls"] >= 1 and s["fallbacks"] == {}
    if mode == "predict":
        assert n["autotune_calls"] and set(n["autotune_calls"]) == {1}
        assert n["benchmark_choice"] == 0
        assert counters["inductor"]["select_algorithm_autotune"] == 0
        assert s["passthrough"] == {"predict_aten_only": s["calls"]} and s["predicted"] == {"aten": s["calls"]}
    else:
        assert 2 in n["autotune_calls"]
        assert n["benchmark_choice"] >= 2 or counters["inductor"]["select_algorithm_autotune"] >= 1
        assert s["passthrough"] == {"no_triton_configs": s["calls"]}


def with_domain(loaded, **ranges):
    """`loaded` with a training domain: every size [1, 2**20] except the ranges given."""
    dom = {k: (1, 1 << 20) for k in ("batch", "m", "n", "k")}
    dom.update(ranges)
    return dataclasses.replace(loaded, info=dataclasses.replace(loaded.info, domain=dom))


@pytest.mark.parametrize("mode", ["predict", "topk"])
def test_outside_the_training_domain_the_model_does_not_choose(model, real_configs, mode):
    # A model that would pick Triton (ATen predicted slow), trained on M >= 4 only: at
    # M = 1024 it is inside and chooses; with M >= 2048 it is outside and Inductor gets
    # ATen alone (predict: what plain torch.compile runs) or its own lists (top-k).
    base = fake_model(model, **{"template__aten": 100.0, "log2_block_m": 1.0})
    aten, triton = make_choices(real_configs)
    lists = {"aten::mm": [aten], "triton::mm": triton}
    inside = with_domain(base, m=(4, 8192))
    outside = with_domain(base, m=(2048, 8192))
    for m, expect_model in ((inside, True), (outside, False)):
        state = HookState(Ranker(m), Options(mode=mode), Stats())
        out = finalize(choices_class()(state), dict(lists), FakeMMInputs(M, N, K))
        s = state.stats.snapshot()
        if expect_model:
            assert s["model_selections"] == 1 and s["passthrough"] == {}
            assert aten not in out or mode == "topk"
        else:
            assert s["model_selections"] == 0 and s["passthrough"] == {"outside_domain": 1}
            if mode == "predict":
                assert out == [aten] and s["predicted"] == {"aten": 1}
            else:
                assert out == [aten, *triton] and s["predicted"] == {}


def test_model_without_domain_is_used_at_any_size(model):
    assert model.info.domain is None or model.info.in_domain(1, 1024, 2048, 4096)
    m = with_domain(model, n=(16, 16))
    assert not m.info.in_domain(1, 1024, 2048, 4096) and m.info.in_domain(1, 1024, 16, 4096)


def predicted_gap(m, aten, triton):
    """log(time_aten) - log(best Triton time) as the model predicts them (> 0: Triton faster)."""
    problem = Problem(op="mm", m=M, n=N, k=K)
    cfgs = [extract.config_from_ktc(k) for k in triton] + [extract.aten_config(aten, problem)]
    ref = ReferenceRanker(m).score(problem, cfgs)[0]
    return float(ref[-1] - min(ref[:-1]))


def test_aten_margin_keeps_atens_unless_triton_is_predicted_clearly_faster(model, real_configs):
    # ATen predicted slower than the best Triton config
    m = fake_model(model, **{"template__aten": 0.05, "log2_block_m": 1.0, "log2_block_n": 0.5})
    aten, triton = make_choices(real_configs)
    gap = predicted_gap(m, aten, triton)
    assert gap > 0  # Triton predicted faster: margin 0 picks it
    best = triton[predicted_order(m, triton)[0]]
    for margin, expect in ((0.0, best), (math.expm1(gap) * 0.9, best), (math.expm1(gap) * 1.1, aten),
                           (0.5 + math.expm1(gap), aten)):
        state = HookState(Ranker(m), Options(mode="predict", aten_margin=margin), Stats())
        out = finalize(choices_class()(state), {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
        assert out == [expect], margin
        assert state.stats.snapshot()["predicted"] == {"aten" if expect is aten else "triton": 1}
    # the replay of bench/predict_aten_margin.py decides by the same rule
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
    import predict_aten_margin as replay
    assert replay.predict_picks_triton({"gap": gap}, math.expm1(gap) * 0.9)
    assert not replay.predict_picks_triton({"gap": gap}, math.expm1(gap) * 1.1)


def test_aten_margin_option_is_validated_and_in_the_cache_key():
    assert Options().aten_margin is None  # the model's own (model.json selection), else DEFAULT_ATEN_MARGIN
    assert Options(aten_margin=0.0).key() != Options().key()  # FX-graph cache key differs
    assert Options(aten_margin=0.0).key() != Options(aten_margin=0.05).key()
    for bad in (-0.01, float("nan"), float("inf"), "0.05", True):
        with pytest.raises(ValueError, match="aten_margin"):
            Options(aten_margin=bad)
    before = torch_diode.get_options()
    try:
        assert torch_diode.set_options(aten_margin=0.1)["aten_margin"] == 0.1
        with pytest.raises(ValueError):
            torch_diode.set_options(aten_margin=-1)
        assert torch_diode.get_options()["aten_margin"] == 0.1  # a refused value changes nothing
    finally:
        torch_diode.set_options(**before)


def topk_handler(m, **opts):
    state = HookState(Ranker(m), Options(mode="topk", top_k=5, threshold=0.0, **opts), Stats())
    return choices_class()(state), state


def test_topk_hands_over_aten_alone_when_predict_would(model, real_configs):
    # ATen predicted fastest: top-k mode decides as predict mode and benchmarks nothing
    m = fake_model(model, **{"template__aten": -100.0, "log2_block_m": 1.0})
    aten, triton = make_choices(real_configs)
    h, state = topk_handler(m)
    out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    assert out == [aten]
    s = state.stats.snapshot()
    assert s["predicted"] == {"aten": 1} and s["model_selections"] == 1 and s["configs_kept"] == 0
    # aten_shortcut=False: Inductor benchmarks ATen against the model's top 5, as before
    h, state = topk_handler(m, aten_shortcut=False)
    out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    assert out[0] is aten and len(out) == 6
    assert {id(k) for k in out[1:]} == {id(triton[i]) for i in predicted_order(m, triton)[:5]}
    assert state.stats.snapshot()["predicted"] == {}


def test_topk_shortcut_follows_predict_modes_margin(model, real_configs):
    # ATen predicted slower than the best Triton config by `gap`: the shortcut takes ATen exactly
    # where predict mode would, i.e. when the margin exceeds the gap
    m = fake_model(model, **{"template__aten": 0.05, "log2_block_m": 1.0, "log2_block_n": 0.5})
    aten, triton = make_choices(real_configs)
    gap = predicted_gap(m, aten, triton)
    assert gap > 0
    top5 = {id(triton[i]) for i in predicted_order(m, triton)[:5]}
    for margin in (0.0, math.expm1(gap) * 0.9, math.expm1(gap) * 1.1, 0.5 + math.expm1(gap)):
        h, _ = topk_handler(m, aten_margin=margin)
        out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
        state = HookState(Ranker(m), Options(mode="predict", aten_margin=margin), Stats())
        pick = finalize(choices_class()(state), {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
        if pick == [aten]:
            assert out == [aten], margin
        else:
            assert out[0] is aten and {id(k) for k in out[1:]} == top5, margin
    assert margin > math.expm1(gap) and out == [aten]  # the last margin took the shortcut


def test_topk_shortcut_for_addmm_hands_over_bias_addmm(model, real_configs):
    m = fake_model(model, **{"template__aten": -100.0})
    _, triton = make_choices(real_configs)
    own = FakeKTC("aten::addmm", {})
    bias = FakeKTC("aten::bias_addmm", {})
    tri = [FakeKTC("triton::mm", k.params.to_kwargs(), k.extra_kwargs) for k in triton]
    h, state = topk_handler(m)
    out = finalize(h, {"aten::addmm": [own], "aten::bias_addmm": [bias], "triton::mm": tri},
                   FakeMMInputs(M, N, K, bias=(0, 1)), op="addmm")
    assert out == [bias]
    assert state.stats.snapshot()["predicted"] == {"aten": 1}


def test_rank_ktcs_scores_extra_keys_apart_in_one_forward(model, real_configs):
    aten, triton = make_choices(real_configs)
    problem = Problem(op="mm", m=M, n=N, k=K)
    akey = ranking_config_key(extract.aten_config(aten, problem))
    opts = Options(mode="topk", top_k=3, threshold=0.0)
    calls = []
    hook = model.module.register_forward_hook(lambda *a: calls.append(1))
    try:
        r = Ranker(model).rank_ktcs(problem, triton, opts, extra_keys=[akey])
    finally:
        hook.remove()
    assert len(calls) == 1
    plain = Ranker(model).rank_ktcs(problem, triton, opts)
    assert r.scores.tolist() == plain.scores.tolist() and r.kept == plain.kept and r.margin == plain.margin
    both = Ranker(model).rank_keys(problem, extract.config_keys_from_ktcs(triton) + [akey], opts)
    assert r.extra_scores.tolist() == both.scores[-1:].tolist()


def test_aten_shortcut_option_is_validated_and_in_the_cache_key():
    assert Options().aten_shortcut is True
    assert Options(aten_shortcut=False).key() != Options().key()
    for bad in (1, "yes", None):
        with pytest.raises(ValueError, match="aten_shortcut"):
            Options(aten_shortcut=bad)
    before = torch_diode.get_options()
    try:
        assert torch_diode.set_options(aten_shortcut=False)["aten_shortcut"] is False
    finally:
        torch_diode.set_options(**before)
