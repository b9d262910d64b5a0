"""The selection logic of the handler, on fake KTC-like objects carrying Inductor's real
config lists (torch_diode.collect.enumerate runs Inductor's CUDAConfigHeuristic on CPU)."""
import math

import pytest

torch = pytest.importorskip("torch")

from test_hook_model import write_model_dir  # noqa: E402
from torch_diode.collect.enumerate import mm_configs  # noqa: E402
from torch_diode.features import features  # noqa: E402
from torch_diode.hook import extract  # noqa: E402
from torch_diode.hook.choices import HookState, choices_class  # noqa: E402
from torch_diode.hook.ranking import Options, Ranker, select  # noqa: E402
from torch_diode.hook.stats import Stats  # noqa: E402
from torch_diode.model import load_model_dir  # noqa: E402
from torch_diode.wire import KernelConfig, Problem  # noqa: E402


class FakeTemplate:
    def __init__(self, uid):
        self.uid = uid


class FakeParams:
    def __init__(self, kw):
        self._kw = dict(kw)

    def to_kwargs(self):
        return dict(self._kw)


class FakeKTC:
    def __init__(self, uid, kw, extra=None):
        self.template = FakeTemplate(uid)
        self.params = FakeParams(kw)
        self.extra_kwargs = extra or {}

    def __repr__(self):
        return f"KTC({self.template.uid}, {self.params.to_kwargs()})"


class FakeMMInputs:
    """The part of MMKernelInputs the hook reads (hinted sizes, strides, dtypes)."""

    def __init__(self, m, n, k, dtype=torch.float16, batch=None, bias=None, trans_b=False):
        a = (batch, m, k) if batch else (m, k)
        b = (batch, k, n) if batch else (k, n)
        sa = (m * k, k, 1) if batch else (k, 1)
        sb = ((k * n, 1, k) if trans_b else (k * n, n, 1)) if batch else ((1, k) if trans_b else (n, 1))
        self._shapes, self._strides, self._dtypes = [a, b], [sa, sb], [dtype, dtype]
        if bias is not None:
            self._shapes.insert(0, (m, n))
            self._strides.insert(0, bias)
            self._dtypes.insert(0, dtype)
        self._mat1_idx, self._mat2_idx, self._scalars = -2, -1, {}
        self.m, self.n, self.k, self.batch = m, n, k, batch or 1

    def mnk_hinted(self):
        return self.m, self.n, self.k

    def batch_hinted(self):
        return self.batch

    def shapes_hinted(self):
        return tuple(self._shapes)

    def strides_hinted(self):
        return tuple(self._strides)

    def dtypes(self):
        return tuple(self._dtypes)

    def out_dtype(self):
        return self._dtypes[-1]


M, N, K = 1024, 2048, 4096


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return load_model_dir(write_model_dir(str(tmp_path_factory.mktemp("m") / "model")))


@pytest.fixture(scope="module")
def real_configs():
    return mm_configs(M, N, K, 2, "DEFAULT")


def make_choices(real_configs, allow_tf32=False):
    triton = [FakeKTC("triton::mm", kw, {"ALLOW_TF32": allow_tf32}) for kw in real_configs]
    aten = FakeKTC("aten::mm", {})
    return aten, triton


def handler(model, **opts):
    opts.setdefault("mode", "topk")  # these tests are about top-k ranking; predict is the default mode
    # the fixture's model predicts ATen fastest for M x N x K: without this, top-k mode would hand
    # over ATen alone (test_hook_predict.py tests that shortcut)
    opts.setdefault("aten_shortcut", False)
    state = HookState(Ranker(model), Options(**opts), Stats())
    return choices_class()(state), state


def finalize(h, lists, inputs, op="mm", templates=None):
    return h._finalize_template_configs({uid: iter(v) for uid, v in lists.items()}, inputs,
                                        templates or [FakeTemplate(u) for u in lists], op)


def reference_scores(model, problem, ktcs):
    """Independent path: torch_diode.features per config, then the module."""
    spec = model.info.feature_spec
    x = torch.tensor([features(spec, problem, extract.config_from_ktc(k)) for k in ktcs])
    with torch.no_grad():
        return model.module(x).tolist()


def test_top_k_keeps_best_predicted_and_all_aten(model, real_configs):
    assert len(real_configs) >= 15  # Inductor's DEFAULT list for this shape
    aten, triton = make_choices(real_configs)
    h, state = handler(model, top_k=5, threshold=0.0)
    out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    problem = Problem(op="mm", m=M, n=N, k=K)
    ref = reference_scores(model, problem, triton)
    best5 = sorted(range(len(triton)), key=lambda i: ref[i])[:5]
    assert out[0] is aten
    assert [id(k) for k in out[1:]] == [id(triton[i]) for i in sorted(best5)]  # Inductor's order kept
    s = state.stats.snapshot()
    assert s["model_selections"] == 1 and s["configs_seen"] == len(triton) and s["configs_kept"] == 5


def test_threshold_and_cap(model, real_configs):
    aten, triton = make_choices(real_configs)
    problem = Problem(op="mm", m=M, n=N, k=K)
    ref = reference_scores(model, problem, triton)
    best = min(ref)
    # a threshold that admits exactly the configs within 3% of the best prediction
    t = 0.03
    within = [i for i in range(len(ref)) if ref[i] <= best + math.log1p(t)]
    h, _ = handler(model, top_k=1, threshold=t, max_kept=64)
    out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    assert {id(k) for k in out if k is not aten} == {id(triton[i]) for i in within}
    # a huge threshold keeps everything up to max_kept, best first
    h, _ = handler(model, top_k=2, threshold=1e6, max_kept=7)
    out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    assert len(out) == 1 + 7
    assert select([3.0, 1.0, 2.0, 1.0], Options(top_k=2, threshold=0.0)) == [1, 3]


def test_prediction_cache_hit_skips_forward(model, real_configs):
    aten, triton = make_choices(real_configs)
    h, state = handler(model)
    calls = []
    hook = model.module.register_forward_hook(lambda *a: calls.append(1))
    try:
        first = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
        # the same problem again, with fresh KTC objects for the same configs
        aten2, triton2 = make_choices(real_configs)
        second = finalize(h, {"aten::mm": [aten2], "triton::mm": triton2}, FakeMMInputs(M, N, K))
    finally:
        hook.remove()
    assert len(calls) == 1
    idx = {id(k): i for i, k in enumerate(triton)}
    idx2 = {id(k): i for i, k in enumerate(triton2)}
    assert [idx[id(k)] for k in first[1:]] == [idx2[id(k)] for k in second[1:]]
    assert state.stats.snapshot()["cache_hits"] == 1


def test_hook_features_equal_reference_features(model, real_configs):
    """Features the hook feeds the model == torch_diode.features on the same inputs."""
    inputs = FakeMMInputs(96, 40, 72, dtype=torch.bfloat16, bias=(0, 1), trans_b=True)
    p = extract.problem_from_inputs(inputs, "addmm")
    assert p == Problem(op="addmm", m=96, n=40, k=72, dtype_a="bfloat16", dtype_b="bfloat16",
                        dtype_out="bfloat16", trans_b=True, bias="row")
    _, triton = make_choices(real_configs, allow_tf32=True)
    configs = [extract.config_from_ktc(k) for k in triton]
    assert configs[0] == KernelConfig(template="triton::mm", block_m=real_configs[0]["BLOCK_M"],
                                      block_n=real_configs[0]["BLOCK_N"], block_k=real_configs[0]["BLOCK_K"],
                                      group_m=8, num_stages=real_configs[0]["num_stages"],
                                      num_warps=real_configs[0]["num_warps"],
                                      even_k=real_configs[0]["EVEN_K"], allow_tf32=True)
    got = Ranker(model).features(p, configs)
    ref = torch.tensor([features(model.info.feature_spec, p, c) for c in configs], dtype=torch.float32)
    assert torch.equal(got, ref)
    bmm = extract.problem_from_inputs(FakeMMInputs(8, 16, 32, batch=4), "bmm")
    assert (bmm.batch, bmm.trans_a, bmm.trans_b, bmm.bias) == (4, False, False, "none")


def test_non_gemm_ops_and_dtypes_pass_through_untouched(model, real_configs):
    aten, triton = make_choices(real_configs)
    h, state = handler(model)
    lists = {"aten::mm": [aten], "triton::mm": triton}
    out = finalize(h, lists, FakeMMInputs(M, N, K), op="mm_plus_mm")
    assert out == [aten] + triton
    out = finalize(h, lists, FakeMMInputs(M, N, K, dtype=torch.int8), op="mm")
    assert out == [aten] + triton
    out = finalize(h, {"aten::mm": [aten]}, FakeMMInputs(M, N, K), op="mm")
    assert out == [aten]
    s = state.stats.snapshot()
    assert s["passthrough"] == {"unsupported_op": 1, "unsupported_dtype": 1, "no_triton_configs": 1}
    assert s["fallbacks"] == {} and s["model_selections"] == 0


def test_exhaustive_space_is_enumerated_only_inside_the_hook(model, real_configs):
    from torch._inductor import config

    exhaustive = mm_configs(M, N, K, 2, "EXHAUSTIVE")
    seen_space = []

    def fake_get_ktc(kernel_inputs, template, op_name, overrides):
        def gen():  # like Inductor's: reads the search space when iterated
            seen_space.append((config.max_autotune_gemm_search_space,
                               config.max_autotune_prune_choices_based_on_shared_mem))
            src = exhaustive if config.max_autotune_gemm_search_space == "EXHAUSTIVE" else real_configs
            for kw in src:
                yield FakeKTC(template.uid, kw)
        return gen()

    aten, triton = make_choices(real_configs)
    h, state = handler(model, top_k=5, threshold=0.0, search_space="exhaustive")
    h.get_ktc = fake_get_ktc
    before = (config.max_autotune_gemm_search_space, config.max_autotune_prune_choices_based_on_shared_mem)
    out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    assert (config.max_autotune_gemm_search_space,
            config.max_autotune_prune_choices_based_on_shared_mem) == before == ("DEFAULT", False)
    assert seen_space == [("EXHAUSTIVE", True)]  # only while the hook enumerates
    assert out[0] is aten and len(out) == 6
    assert state.stats.snapshot()["configs_seen"] == len(exhaustive) > len(real_configs)
    assert not any(k in triton for k in out)  # the kept Triton configs came from the exhaustive list


def test_pre_sept_2025_finalize_signature(model, real_configs, monkeypatch):
    """`_finalize_mm_configs(template_choices, kernel_inputs, layout, templates, op_name, ...)`
    and KTCs with `.kwargs`: arguments are bound by name, so the same handler works."""
    from torch_diode.hook import compat

    class OldChoices:
        def _finalize_mm_configs(self, template_choices, kernel_inputs, layout, templates, op_name,
                                 kwarg_overrides=None):
            return [k for gen in template_choices.values() for k in gen]

    class OldKTC:
        def __init__(self, uid, kw):
            self.template, self.kwargs, self.extra_kwargs = FakeTemplate(uid), dict(kw), {}

    monkeypatch.setattr(compat, "finalize_hook_name", lambda: "_finalize_mm_configs")
    cls = choices_class(OldChoices)
    h = cls(HookState(Ranker(model), Options(top_k=3, threshold=0.0, mode="topk", aten_shortcut=False), Stats()))
    triton = [OldKTC("triton::mm", kw) for kw in real_configs]
    aten = OldKTC("aten::mm", {})
    out = h._finalize_mm_configs({"aten::mm": iter([aten]), "triton::mm": iter(triton)},
                                 FakeMMInputs(M, N, K), "LAYOUT", [], "mm")
    assert out[0] is aten and len(out) == 4
    ref = reference_scores(model, Problem(op="mm", m=M, n=N, k=K), triton)
    assert {id(k) for k in out[1:]} == {id(triton[i]) for i in sorted(range(len(ref)), key=ref.__getitem__)[:3]}
