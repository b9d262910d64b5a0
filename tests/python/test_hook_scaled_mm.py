"""The scaled_mm decision family in the hook: the problem of an FP8 `_scaled_mm` lowering,
its configs ranked by a scaled_mm model (hook/ranking.FamilyRanker), the one choice an
engaged lowering hands over, the fallbacks, and the scaled_mm model's staleness."""
import dataclasses
import json
import logging
import os
import pickle
import struct

import msgpack
import pytest

torch = pytest.importorskip("torch")

from test_hook_model import _reference_forward, random_weights  # noqa: E402
from test_hook_predict import Linear  # noqa: E402
from test_hook_ranking import FakeKTC, FakeMMInputs, FakeTemplate, finalize, make_choices  # noqa: E402,F401
from test_hook_zero_config import Node  # noqa: E402
from torch_diode.collect.enumerate import mm_configs  # noqa: E402
from torch_diode.features import FeatureSpec, features  # noqa: E402
from torch_diode.hook import extract, staleness, zero_config  # noqa: E402
from torch_diode.hook.choices import ChoicesFactory, HookState, choices_class  # noqa: E402
from torch_diode.hook.ranking import FamilyRanker, Options, Ranker, ranker_for_model  # noqa: E402
from torch_diode.hook.staleness import Running  # noqa: E402
from torch_diode.hook.stats import Stats  # noqa: E402
from torch_diode.model import LoadedModel, load_model_dir  # noqa: E402
from torch_diode.wire import KernelConfig, Problem  # noqa: E402

M, N, K = 2048, 4096, 4096
FP8 = torch.float8_e4m3fn
TEMPLATES = ["triton::mm", "aten"]


class FakeScaledInputs:
    """The part of MMKernelInputs an `aten._scaled_mm` lowering gives the hook: nodes
    (mat_a, mat_b, scale_a, scale_b[, bias]), mat1 at 0 and mat2 at 1, as tuned_scaled_mm
    builds them."""

    def __init__(self, m=M, n=N, k=K, scale="tensor", dtype=FP8, out=torch.bfloat16, bias=False,
                 scale_dtype=torch.float32, b_col_major=True):
        sa, sb = {"tensor": ((), ()), "row": ((m, 1), (1, n)), "column": ((1, k), (k, 1))}[scale]
        self._shapes = [(m, k), (k, n), sa, sb]
        self._strides = [(k, 1), (1, k) if b_col_major else (n, 1), (1,) * len(sa), (1,) * len(sb)]
        self._dtypes = [dtype, dtype, scale_dtype, scale_dtype]
        if bias:
            self._shapes.append((n,))
            self._strides.append((1,))
            self._dtypes.append(out)
        self._mat1_idx, self._mat2_idx, self._scalars = 0, 1, {}
        self._out, self.m, self.n, self.k = out, m, n, k
        self.device_type = "cuda"

    def mnk_hinted(self):
        return self.m, self.n, self.k

    def shapes_hinted(self):
        return tuple(self._shapes)

    def strides_hinted(self):
        return tuple(self._strides)

    def dtypes(self):
        return tuple(self._dtypes)

    def out_dtype(self):
        return self._out


def write_scaled_model_dir(path, seed=0, fitted=True, hidden=8, blocks=1, provenance=None):
    """A tiny scaled_mm model directory (model.json "family": "scaled_mm"), random weights."""
    os.makedirs(path, exist_ok=True)
    spec = FeatureSpec(templates=list(TEMPLATES), family="scaled_mm")
    n = len(spec.names)
    if fitted:
        spec.mean = [0.5 * (i % 7) for i in range(n)]
        spec.stddev = [1.0 + 0.25 * (i % 3) for i in range(n)]
    j = {"format": "diode-model", "version": 1, "hardware_key": "nvidia-h200", "family": "scaled_mm",
         "architecture": {"kind": "residual_mlp", "input": n, "hidden": hidden, "blocks": blocks,
                          "activation": "silu"},
         "feature_spec": spec.to_json(), "target": "log_us",
         "dataset": {"sha256": "00" * 32, "records": 1, "problems": 1, "hardware_key": "nvidia-h200"},
         "metrics": {}, "training": {"seed": seed, "ranks": 1, "epochs": 0, "loss": "none"}}
    if provenance is not None:
        j["provenance"] = provenance
    with open(os.path.join(path, "model.json"), "w") as f:
        json.dump(j, f)
    w = random_weights(n, hidden, blocks, seed)
    tensors = [[name, "float32", shape, struct.pack(f"<{len(v)}f", *v)] for name, (shape, v) in w.items()]
    with open(os.path.join(path, "weights.msgpack"), "wb") as f:
        f.write(msgpack.packb(["diode-weights", 1, tensors], use_bin_type=True))
    return path


@pytest.fixture(scope="module")
def scaled_dir(tmp_path_factory):
    return write_scaled_model_dir(str(tmp_path_factory.mktemp("s") / "scaled_mm"))


@pytest.fixture(scope="module")
def scaled_model(scaled_dir):
    return load_model_dir(scaled_dir)


@pytest.fixture(scope="module")
def scaled_configs():
    """Inductor's DEFAULT triton::mm configs of this FP8 GEMM (its scaled_mm heuristic), with the
    scale epilogue's USE_FAST_ACCUM override as tuned_scaled_mm passes it."""
    return [{**kw, "USE_FAST_ACCUM": True} for kw in mm_configs(M, N, K, 1, "DEFAULT", op="scaled_mm")]


def scaled_choices(configs):
    triton = [FakeKTC("triton::mm", kw) for kw in configs]
    aten = FakeKTC("aten::_scaled_mm", {"use_fast_accum": True})
    return aten, triton


def linear_model(model, **weights):
    """`model` with a linear scorer (score = features . w) of the given feature weights; the
    spec is made unfitted so that the weights apply to the raw features."""
    spec = dataclasses.replace(model.info.feature_spec, mean=[], stddev=[])
    w = [0.0] * len(spec.names)
    for name, v in weights.items():
        w[spec.names.index(name.replace("__", "="))] = v
    return LoadedModel(info=dataclasses.replace(model.info, feature_spec=spec), module=Linear(w))


def scaled_state(model, gemm=None, **opts):
    return HookState(Ranker(gemm) if gemm else None, Options(mode=opts.pop("mode", "predict"), **opts), Stats(),
                     family_rankers={"scaled_mm": ranker_for_model(model)} if model else None)


# ---------------------------------------------------------------- the problem

@pytest.mark.parametrize("scale", ["tensor", "row"])
def test_problem_of_a_scaled_mm_lowering(scale):
    p = extract.problem_from_inputs(FakeScaledInputs(scale=scale), "scaled_mm")
    assert p == Problem(op="scaled_mm", batch=1, m=M, n=N, k=K, dtype_a="float8_e4m3fn",
                        dtype_b="float8_e4m3fn", dtype_out="bfloat16", trans_a=False, trans_b=True,
                        bias="none", alpha=1.0, beta=1.0, scale=scale)


@pytest.mark.parametrize("inputs, reason", [
    (dict(bias=True), "scaled_mm_bias"),
    (dict(scale="column"), "unsupported_scale"),
    (dict(dtype=torch.float16), "unsupported_dtype"),
    (dict(scale_dtype=torch.bfloat16), "unsupported_scale_dtype"),
])
def test_problems_outside_the_family_are_unsupported(inputs, reason):
    with pytest.raises(extract.Unsupported, match=reason):
        extract.problem_from_inputs(FakeScaledInputs(**inputs), "scaled_mm")


def test_scale_kind():
    assert extract.scale_kind((), (1,), 8, 16) == "tensor"
    assert extract.scale_kind((8, 1), (1, 16), 8, 16) == "row"
    with pytest.raises(extract.Unsupported):
        extract.scale_kind((8, 1), (), 8, 16)


def test_aten_config_carries_fast_accum():
    p = extract.problem_from_inputs(FakeScaledInputs(), "scaled_mm")
    assert extract.aten_config(FakeKTC("aten::_scaled_mm", {"use_fast_accum": True}), p) == \
        KernelConfig(template="aten", use_fast_accum=True)
    assert extract.is_own_aten(FakeKTC("aten::_scaled_mm", {}))


# ---------------------------------------------------------------- the ranking

def test_scaled_mm_model_loads_into_a_family_ranker(scaled_model, scaled_dir):
    assert scaled_model.info.feature_spec.family == "scaled_mm"
    r = ranker_for_model(scaled_model)
    assert isinstance(r, FamilyRanker) and r.family == "scaled_mm"
    assert set(r.spec.names[-4:]) == {"scale_rowwise", "fast_accum", "template=triton::mm", "template=aten"}


@pytest.mark.parametrize("scale", ["tensor", "row"])
def test_family_ranker_scores_are_the_documented_forward_of_the_reference_features(
        scaled_model, scaled_dir, scaled_configs, scale):
    p = extract.problem_from_inputs(FakeScaledInputs(scale=scale), "scaled_mm")
    aten, triton = scaled_choices(scaled_configs)
    cfgs = [extract.config_from_ktc(k) for k in triton] + [extract.aten_config(aten, p)]
    r = ranker_for_model(scaled_model)
    ranking = r.rank(p, cfgs, Options(top_k=3, threshold=0.0))
    x = torch.tensor([features(scaled_model.info.feature_spec, p, c) for c in cfgs])
    want = _reference_forward(scaled_dir, x).numpy()
    assert ranking.scores.tolist() == pytest.approx(want.tolist(), abs=1e-5)
    assert ranking.kept == sorted(range(len(cfgs)), key=lambda i: (ranking.scores[i], i))[:3]
    assert not ranking.cache_hit and r.rank(p, cfgs, Options()).cache_hit
    # the scale and fast accumulation are features: the rowwise problem scores differently
    if scale == "row":
        t = extract.problem_from_inputs(FakeScaledInputs(scale="tensor"), "scaled_mm")
        assert r.rank(t, cfgs, Options()).scores.tolist() != ranking.scores.tolist()


def test_gemm_ranker_refuses_a_scaled_mm_problem(scaled_model):
    with pytest.raises(ValueError, match="family"):
        features(FeatureSpec(), extract.problem_from_inputs(FakeScaledInputs(), "scaled_mm"), KernelConfig())


# ---------------------------------------------------------------- the handler

def test_predict_hands_over_the_predicted_triton_config(scaled_model, scaled_configs):
    # larger BLOCK_M predicted faster, ATen slow: the first config of the largest BLOCK_M
    m = linear_model(scaled_model, log2_block_m=-1.0, template__aten=5.0)
    aten, triton = scaled_choices(scaled_configs)
    state = scaled_state(m)
    out = finalize(choices_class()(state), {"aten::_scaled_mm": [aten], "triton::mm": triton},
                   FakeScaledInputs(), op="scaled_mm")
    best = max(kw["BLOCK_M"] for kw in scaled_configs)
    assert out == [next(k for k in triton if k.params.to_kwargs()["BLOCK_M"] == best)]
    s = state.stats.snapshot()
    assert s["model_selections"] == 1 and s["predicted"] == {"triton": 1}


def test_predict_hands_over_cublaslt_when_predicted_fastest(scaled_model, scaled_configs):
    m = linear_model(scaled_model, template__aten=-5.0)
    aten, triton = scaled_choices(scaled_configs)
    state = scaled_state(m)
    out = finalize(choices_class()(state), {"aten::_scaled_mm": [aten], "triton::mm": triton},
                   FakeScaledInputs(scale="row"), op="scaled_mm")
    assert out == [aten] and state.stats.snapshot()["predicted"] == {"aten": 1}


def test_engaged_lowering_hands_one_choice_and_never_benchmarks(scaled_model, scaled_configs):
    m = linear_model(scaled_model, log2_block_n=-1.0, template__aten=5.0)
    aten, triton = scaled_choices(scaled_configs)
    h = choices_class()(scaled_state(m))
    with zero_config._engaged("scaled_mm"):
        first = finalize(h, {"aten::_scaled_mm": [aten], "triton::mm": triton}, FakeScaledInputs(), op="scaled_mm")
        again = finalize(h, {"aten::_scaled_mm": [aten], "triton::mm": triton}, FakeScaledInputs(), op="scaled_mm")
    assert len(first) == 1 and first[0] in triton and again == []


def test_gemm_model_does_not_rank_scaled_mm(scaled_configs, tmp_path, caplog):
    from test_hook_model import write_model_dir
    gemm = load_model_dir(write_model_dir(str(tmp_path / "gemm")))
    aten, triton = scaled_choices(scaled_configs)
    state = scaled_state(None, gemm=gemm)
    lists = {"aten::_scaled_mm": [aten], "triton::mm": triton}
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        for _ in range(2):
            out = finalize(choices_class()(state), dict(lists), FakeScaledInputs(), op="scaled_mm")
            assert out == [aten] + triton   # Inductor's own list, as without the hook
    s = state.stats.snapshot()
    assert s["fallbacks"] == {"no_scaled_mm_model": 2}
    warns = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warns) == 1 and "no_scaled_mm_model" in warns[0]
    # and a mm still goes to the GEMM model
    assert state.ranker_for("mm") is state.ranker and state.ranker_for("scaled_mm") is None


def test_engaged_fallbacks_get_cublaslt_alone(scaled_model, scaled_configs, monkeypatch):
    aten, triton = scaled_choices(scaled_configs)
    lists = {"aten::_scaled_mm": [aten], "triton::mm": triton}
    # a scale the family does not cover, then a prediction error
    state = scaled_state(scaled_model)
    with zero_config._engaged("scaled_mm"):
        out = finalize(choices_class()(state), dict(lists), FakeScaledInputs(scale="column"), op="scaled_mm")
    assert out == [aten] and state.stats.snapshot()["passthrough"] == {"unsupported_scale": 1}
    state = scaled_state(scaled_model)
    r = state.family_rankers["scaled_mm"]
    monkeypatch.setattr(r, "rank_keys", lambda *a, **k: (_ for _ in ()).throw(FloatingPointError("nan")))
    with zero_config._engaged("scaled_mm"):
        out = finalize(choices_class()(state), dict(lists), FakeScaledInputs(), op="scaled_mm")
    assert out == [aten] and state.stats.snapshot()["fallbacks"] == {"non_finite_prediction": 1}
    # not engaged (the user's max-autotune): Inductor's own list
    out = finalize(choices_class()(state), dict(lists), FakeScaledInputs(), op="scaled_mm")
    assert out == [aten] + triton


def test_should_engage_follows_the_scaled_mm_model(scaled_model, tmp_path):
    from test_hook_model import write_model_dir
    gemm = load_model_dir(write_model_dir(str(tmp_path / "gemm")))
    cuda = (Node("cuda"), Node("cuda"), Node("cuda"), Node("cuda"))
    assert zero_config.should_engage(scaled_state(scaled_model), "scaled_mm", cuda)
    assert not zero_config.should_engage(scaled_state(scaled_model), "mm", cuda[:2])   # no GEMM model
    assert not zero_config.should_engage(scaled_state(None, gemm=gemm), "scaled_mm", cuda)
    assert zero_config.should_engage(scaled_state(None, gemm=gemm), "mm", cuda[:2])
    assert not zero_config.should_engage(scaled_state(scaled_model), "scaled_mm", (Node("cpu"),) * 4)


def test_install_wraps_the_scaled_mm_lowering():
    from torch._inductor.lowering import lowerings
    import torch._inductor.kernel.mm  # noqa: F401 - registers the _scaled_mm lowering
    keys = [k for k in lowerings if getattr(k, "overloadpacket", None) is torch.ops.aten._scaled_mm]
    assert keys
    was = zero_config.lowerings_installed()
    zero_config.uninstall_lowerings()
    originals = {k: lowerings[k] for k in keys}
    try:
        assert zero_config.install_lowerings(lambda: None)
        for k in keys:
            assert lowerings[k].__wrapped__ is originals[k]
    finally:
        zero_config.uninstall_lowerings()
    assert all(lowerings[k] is originals[k] for k in keys)
    if was:
        zero_config.install_lowerings(lambda: None)


def test_cache_key_and_pickled_factory_carry_the_scaled_mm_model(scaled_model, scaled_dir):
    state = scaled_state(scaled_model)
    assert f"scaled_mm={scaled_model.info.model_id[:32]}" in state.uuid()
    assert HookState(None, Options(), Stats()).uuid() != state.uuid()
    rebuilt = pickle.loads(pickle.dumps(ChoicesFactory(state)))
    r = rebuilt.state.family_rankers["scaled_mm"]
    assert r.model.info.path == os.path.abspath(scaled_dir) and rebuilt.uuid() == state.uuid()


# ---------------------------------------------------------------- staleness

H_MM, H_OLD = "a" * 64, "c" * 64
RUN = Running("2.13.0+cu130", "3.7.0", {"triton_mm": H_MM, "triton_bmm": "b" * 64})


def scaled_with(tmp_path, provenance):
    return load_model_dir(write_scaled_model_dir(str(tmp_path / "m"), provenance=provenance))


def test_scaled_mm_model_same_template_is_used(tmp_path):
    m = scaled_with(tmp_path, {"templates": {"triton_mm": [H_MM]}})
    assert staleness.check(m.info, RUN) == []
    assert staleness.apply(m, RUN) == frozenset() and staleness.disabled_ops(m) == frozenset()


def test_scaled_mm_model_changed_template_is_not_used(tmp_path, caplog, scaled_configs):
    m = scaled_with(tmp_path, {"templates": {"triton_mm": [H_OLD]}})
    with caplog.at_level(logging.INFO, logger="torch_diode"):
        assert staleness.apply(m, RUN) == frozenset({"scaled_mm"})
        staleness.apply(m, RUN)
    warns = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warns) == 1 and "'triton_mm'" in warns[0] and "scaled_mm" in warns[0] and H_OLD[:16] in warns[0]
    assert staleness.disabled_ops(m) == frozenset({"scaled_mm"})
    # the handler: cuBLASLt alone in predict mode, counted
    aten, triton = scaled_choices(scaled_configs)
    state = scaled_state(m)
    out = finalize(choices_class()(state), {"aten::_scaled_mm": [aten], "triton::mm": triton},
                   FakeScaledInputs(), op="scaled_mm")
    assert out == [aten] and state.stats.snapshot()["passthrough"] == {"stale_template": 1}


def test_scaled_mm_model_without_templates_info(tmp_path, caplog):
    for i, prov in enumerate((None, {"torch_versions": ["2.13.0+cu130"]})):
        m = scaled_with(tmp_path / str(i), prov)
        with caplog.at_level(logging.INFO, logger="torch_diode"):
            assert staleness.apply(m, RUN) == frozenset()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert sum("staleness cannot be checked" in r.getMessage() for r in caplog.records) == 2


def test_gemm_model_template_names_of_shards_are_checked():
    # a GEMM model whose provenance names templates as shards do (triton_mm), against a
    # running torch read either way
    class Info:
        provenance = {"templates": {"triton_mm": [H_OLD], "triton_bmm": ["b" * 64]}}
    for run in (RUN, Running("t", "r", {"mm": H_MM, "bmm": "b" * 64})):
        fs = staleness.check(Info(), run)
        assert [f.family for f in fs if f.stale] == ["mm"]


def test_family_ranker_has_the_protocols_interface(scaled_model):
    from torch_diode.hook import protocols
    methods = [n for n, v in vars(protocols.Ranker).items() if callable(v) and not n.startswith("_")]
    assert methods and all(callable(getattr(FamilyRanker, n, None)) for n in methods)
    r = ranker_for_model(scaled_model)
    assert all(hasattr(r, n) for n in protocols.Ranker.__annotations__)   # model, spec
    assert r.model is scaled_model and r.spec.family == "scaled_mm"


def test_member_gaps_of_a_single_scaled_mm_model(scaled_model):
    m = linear_model(scaled_model, template__aten=2.0)
    r = ranker_for_model(m)
    p = extract.problem_from_inputs(FakeScaledInputs(), "scaled_mm")
    pick = (("triton::mm", 128, 128, 64, 8, 3, 4, True, False, True, "float32", ()))
    aten = ("aten", 0, 0, 0, 0, 0, 0, False, False, True, "", ())
    gaps = r.member_gaps(p, pick, aten)
    x = [features(m.info.feature_spec, p, KernelConfig(*k)) for k in (pick, aten)]
    w = m.module.w.tolist()
    want = sum(a * b for a, b in zip(x[1], w)) - sum(a * b for a, b in zip(x[0], w))
    assert len(gaps) == 1 and gaps[0] == pytest.approx(want, rel=1e-5)


def test_a_scaled_mm_model_in_the_gemm_models_place_is_refused(scaled_dir):
    # DIODE_MODEL (the GEMM model's place) pointing at a scaled_mm model directory: the GEMM
    # ranker would read its features in the wrong columns, so the load is refused, naming why.
    from torch_diode.hook import api, sources
    c = sources.Candidate(path=scaled_dir, source="env", is_bundle=False)
    with pytest.raises(sources.SourceError) as e:
        api._load_candidate(c, None)
    assert e.value.args[0] == "model_invalid" or "model_invalid" in str(e.value)
    assert "scaled_mm" in str(e.value) and "DIODE_MODEL_<FAMILY>" in str(e.value)
