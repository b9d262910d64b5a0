"""The fast ranking path (issue 19) returns exactly what the reference path returns:
features bit for bit, scores, kept indices and margin, on Inductor's real EXHAUSTIVE list."""
import math
import random

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

from test_hook_model import write_model_dir  # noqa: E402
from torch_diode.collect.enumerate import mm_configs  # noqa: E402
from torch_diode.features import FeatureSpec, raw_features  # noqa: E402
from reference_ranker import ReferenceRanker  # noqa: E402
from torch_diode.hook.ranking import (Options, Ranker, margin_of_distinct,  # noqa: E402
                                      raw_feature_matrix, select, select_array, top_margin)
from torch_diode.model import CASCADE_OFFSET, load_model_dir  # noqa: E402
from torch_diode.wire import KernelConfig, Problem  # noqa: E402


@pytest.fixture(scope="module")
def exhaustive():
    cfgs = []
    for i, kw in enumerate(mm_configs(2048, 2048, 2048, 2, "EXHAUSTIVE")):
        cfgs.append(KernelConfig(template="triton::mm" if i % 7 else "triton::bmm", block_m=kw["BLOCK_M"],
                                 block_n=kw["BLOCK_N"], block_k=kw["BLOCK_K"], group_m=kw.get("GROUP_M", 8),
                                 num_stages=kw["num_stages"], num_warps=kw["num_warps"],
                                 even_k=bool(kw.get("EVEN_K", False)), allow_tf32=i % 3 == 0))
    return cfgs


PROBLEMS = [
    Problem(op="mm", m=1024, n=2048, k=4096),
    Problem(op="mm", m=1, n=7, k=3, dtype_a="float32", dtype_b="float32", dtype_out="float32"),
    Problem(op="addmm", m=333, n=4097, k=100, dtype_a="bfloat16", dtype_b="bfloat16", dtype_out="bfloat16",
            trans_b=True, bias="row"),
    Problem(op="bmm", batch=12, m=77, n=129, k=8192, trans_a=True),
    Problem(op="mm", m=65536, n=65536, k=65536, dtype_out="float32"),
]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return load_model_dir(write_model_dir(str(tmp_path_factory.mktemp("m") / "model"), hidden=32))


@pytest.mark.parametrize("p", PROBLEMS)
def test_feature_matrix_is_bit_identical_to_features_py(exhaustive, p):
    odd = [KernelConfig(template="aten"), KernelConfig(template="decompose_k", block_m=0, block_n=64, block_k=32,
                                                       group_m=0, num_stages=0, num_warps=0),
           KernelConfig(template="triton::mm_persistent_tma", block_m=128, block_n=256, block_k=64, group_m=8,
                        num_stages=3, num_warps=8)]
    spec = FeatureSpec(sm_count=132)
    configs = exhaustive + odd
    got = raw_feature_matrix(spec, p, configs)
    want = np.asarray([raw_features(spec, p, c) for c in configs], dtype=np.float32)
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))  # bit for bit


def test_rank_equals_reference_on_several_problems(model, exhaustive):
    assert len(exhaustive) >= 1000
    opts = Options(top_k=5, threshold=0.05, max_kept=16)
    fast, ref = Ranker(model), ReferenceRanker(model)
    rng = random.Random(3)
    for p in PROBLEMS:
        # a subset first (later a partial cache hit), with a config offered twice
        part = rng.sample(exhaustive, 300)
        part.append(part[0])
        for configs in (part, exhaustive, exhaustive):
            r = fast.rank(p, configs, opts)
            scores, kept, margin = ref.rank(p, configs, opts)
            assert r.scores.tolist() == scores
            assert r.kept == kept
            assert r.margin == margin
    # the cache serves the last call: no forward
    assert fast.rank(PROBLEMS[0], exhaustive, opts).cache_hit


def test_ranker_features_match_reference_normalisation(model, exhaustive):
    p = PROBLEMS[2]
    got = Ranker(model).features(p, exhaustive[:200])
    want = ReferenceRanker(model).features(p, exhaustive[:200])
    assert torch.equal(got, want)


def test_select_array_and_margin_equal_python_versions():
    rng = random.Random(0)
    a, b, c = KernelConfig(block_m=16), KernelConfig(block_m=32), KernelConfig(block_m=64)
    for _ in range(200):
        n = rng.randint(1, 40)
        scores = [float(np.float32(rng.choice([0.5, 1.0, 1.01, 2.0]) + rng.random() * 0.1)) for _ in range(n)]
        opts = Options(top_k=rng.randint(1, 4), threshold=rng.choice([0.0, 0.02, 0.5]),
                       max_kept=rng.randint(4, 8))
        assert select_array(np.asarray(scores), opts) == select(scores, opts)
    assert select_array(np.asarray([]), Options()) == []
    assert margin_of_distinct(np.asarray([1.0, 1.5, 2.0])) == top_margin([1.0, 1.5, 2.0], [a, b, c])
    assert margin_of_distinct(np.asarray([1.0])) is None
    assert margin_of_distinct(np.asarray([0.0, 1e6])) == pytest.approx(math.expm1(math.log(1e3)))


def test_non_finite_prediction_raises(model, exhaustive):
    r = Ranker(model)
    r._forward(np.zeros((2, len(model.info.feature_spec.names)), dtype=np.float32))  # finite: fine
    with pytest.raises(FloatingPointError):
        r._forward(np.full((2, len(model.info.feature_spec.names)), np.nan, dtype=np.float32))


def test_config_key_from_ktc_equals_key_of_config_from_ktc():
    from test_hook_ranking import FakeKTC
    from torch_diode.hook import extract
    from torch_diode.hook.ranking import config_key

    kws = mm_configs(512, 512, 512, 2, "DEFAULT")
    ktcs = [FakeKTC("triton::mm", kw, {"ALLOW_TF32": i % 2 == 0}) for i, kw in enumerate(kws)]
    ktcs.append(FakeKTC("triton::mm_persistent_tma", {**kws[0], "ACC_TYPE": "tl.float32", "USE_FAST_ACCUM": True}))
    ktcs.append(FakeKTC("triton::bmm", {k: v for k, v in kws[1].items() if k != "GROUP_M"}))
    for k in ktcs:
        assert extract.config_key_from_ktc(k) == config_key(extract.config_from_ktc(k))
    assert extract.config_keys_from_ktcs(ktcs) == [config_key(extract.config_from_ktc(k)) for k in ktcs]
    with pytest.raises(extract.Unsupported):
        extract.config_key_from_ktc(FakeKTC("triton::mm", {"num_stages": 2}))
    with pytest.raises(extract.Unsupported):
        extract.config_keys_from_ktcs([FakeKTC("triton::mm", {"num_stages": 2})])
    # sizes as numpy integers (not converted): equal keys, same hash
    np_kw = {k: (np.int64(v) if k != "EVEN_K" else np.bool_(v)) for k, v in kws[0].items()}
    key = extract.config_keys_from_ktcs([FakeKTC("triton::mm", np_kw)])[0]
    want = config_key(extract.config_from_ktc(FakeKTC("triton::mm", kws[0])))
    assert key == want and hash(key) == hash(want)


def _inductor_ktcs(uid, kws, extra):
    """Real KernelTemplateChoices, as InductorChoices.get_ktc builds them: Inductor's
    make_ktc_generator over DictKernelTemplateParams (no layout / inputs needed on CPU)."""
    kc = pytest.importorskip("torch._inductor.kernel_template_choice")
    from torch._inductor.template_heuristics.params import DictKernelTemplateParams

    class Template:
        pass
    t = Template()
    t.uid = uid
    return list(kc.make_ktc_generator(t, (DictKernelTemplateParams(kw) for kw in kws), extra, {}, None, None))


def test_compat_params_views_equal_to_kwargs_on_real_ktcs():
    from torch_diode import inductor_compat as ic
    ktcs = _inductor_ktcs("triton::mm", mm_configs(1024, 1024, 1024, 2, "EXHAUSTIVE"), {"ALLOW_TF32": False})
    views = ic.ktc_params_views(ktcs)
    assert views is not None, "this torch's DictKernelTemplateParams is no longer read directly"
    assert views == [ic.ktc_params(k) for k in ktcs] == [k.params.to_kwargs() for k in ktcs]
    # another params class (here a subclass that could compute its kwargs): no views
    from torch._inductor.template_heuristics.params import DictKernelTemplateParams

    class Other(DictKernelTemplateParams):
        def to_kwargs(self):
            return {**self.kwargs, "GROUP_M": 4}
    ktcs[3].params = Other(ktcs[3].params.kwargs)
    assert ic.ktc_params_views(ktcs) is None
    assert ic.ktc_params_views([object()]) is None and ic.ktc_params_views([]) is None


def test_fast_config_keys_equal_to_kwargs_path_on_real_ktcs(monkeypatch):
    from torch_diode.hook import extract
    from torch_diode.hook.ranking import config_key

    def slow(ktcs):  # the reference: a KernelConfig per KTC, through to_kwargs()
        return [config_key(extract.config_from_ktc(k)) for k in ktcs]

    kws = mm_configs(1024, 1024, 1024, 2, "EXHAUSTIVE")
    mm = _inductor_ktcs("triton::mm", kws, {"ALLOW_TF32": False})
    tf = _inductor_ktcs("triton::mm", kws[:50], {"ALLOW_TF32": True, "epilogue_fn": None})
    bmm = _inductor_ktcs("triton::bmm", [{**kw, "ALLOW_TF32": True} for kw in kws[:40]], {})  # from params
    tma = _inductor_ktcs("triton::mm_persistent_tma",
                         [{**kw, "ACC_TYPE": "tl.float32", "USE_FAST_ACCUM": i % 2 == 0, "NUM_SMS": 132}
                          for i, kw in enumerate(kws[:30])], {"ALLOW_TF32": None})
    odd = _inductor_ktcs("triton::mm", [kws[0], {**kws[1], "ACC_TYPE": "tl.float16"},
                                        {k: v for k, v in kws[2].items() if k != "GROUP_M"},
                                        {k: np.int64(v) for k, v in kws[3].items() if k != "EVEN_K"},
                                        {"BLOCK_M": 64.0, **{k: v for k, v in kws[4].items() if k != "BLOCK_M"}}],
                         {"ALLOW_TF32": False})
    npy = _inductor_ktcs("triton::mm", [{k: (np.bool_(v) if k == "EVEN_K" else np.int64(v)) for k, v in kw.items()}
                                        for kw in kws[:20]], {"ALLOW_TF32": False})
    monkeypatch.setattr(extract, "_KEY_CACHE", {})
    for ktcs in (mm, mm, tf + mm + bmm, tma + mm + tma, odd, odd, mm[:1], bmm + odd, npy, mm + npy):
        want = slow(ktcs)
        got = extract.config_keys_from_ktcs(ktcs)
        assert got == want
        assert [hash(k) for k in got] == [hash(k) for k in want]
        assert extract._config_keys_slow(ktcs) == want
    # a config seen before is the very key object built the first time (cheap table lookups)
    again = _inductor_ktcs("triton::mm", kws, {"ALLOW_TF32": False})
    assert all(a is b for a, b in zip(extract.config_keys_from_ktcs(mm), extract.config_keys_from_ktcs(again)))
    with pytest.raises(extract.Unsupported):
        extract.config_keys_from_ktcs(mm[:3] + _inductor_ktcs("triton::mm", [{"num_stages": 2, "x": 1}], {}))
    # the cache is bounded: past _KEY_CACHE_MAX it starts again
    monkeypatch.setattr(extract, "_KEY_CACHE_MAX", 10)
    assert extract.config_keys_from_ktcs(mm) == slow(mm)   # all known: nothing added
    new = _inductor_ktcs("triton::mm_plus_mm", kws[:50], {})
    assert extract.config_keys_from_ktcs(new) == slow(new)
    assert sum(map(len, extract._KEY_CACHE.values())) == len(new)



def test_rank_ktcs_equals_rank_keys_of_the_keys(model, monkeypatch):
    """Ranker.rank_ktcs (kwargs values -> table rows) ranks exactly as rank_keys of
    config_keys_from_ktcs, on real Inductor KTCs: one template, several, ALLOW_TF32 from the
    extra kwargs or the params, configs offered twice, and the to_kwargs() fallback."""
    from test_hook_ranking import FakeKTC
    from torch_diode.hook import extract

    monkeypatch.setattr(extract, "_KEY_CACHE", {})
    kws = mm_configs(1024, 1024, 1024, 2, "EXHAUSTIVE")
    mm = _inductor_ktcs("triton::mm", kws, {"ALLOW_TF32": False})
    tf = _inductor_ktcs("triton::mm", kws[:60], {"ALLOW_TF32": True})
    bmm = _inductor_ktcs("triton::bmm", [{**kw, "ALLOW_TF32": i % 2 == 0} for i, kw in enumerate(kws[:40])], {})
    dup = _inductor_ktcs("triton::mm", kws[:5], {"ALLOW_TF32": False})   # the same configs again
    fakes = [FakeKTC("triton::mm", kw, {"ALLOW_TF32": True}) for kw in kws[:30]]
    opts = Options(top_k=4, threshold=0.02, max_kept=12)
    fast, ref = Ranker(model), Ranker(model)
    for p in PROBLEMS[:3]:
        for ktcs in (mm[:200], mm, tf + mm + bmm, bmm + dup + tf, fakes, mm):
            got = fast.rank_ktcs(p, ktcs, opts)
            want = ref.rank_keys(p, extract.config_keys_from_ktcs(ktcs), opts)
            assert got.scores.tolist() == want.scores.tolist()
            assert got.kept == want.kept and got.margin == want.margin and got.cache_hit == want.cache_hit
            assert got.breakdown["extract"] >= 0.0
    with pytest.raises(extract.Unsupported):
        fast.rank_ktcs(PROBLEMS[0], mm[:3] + _inductor_ktcs("triton::mm", [{"num_stages": 2, "x": 1}], {}), opts)
    with pytest.raises(extract.Unsupported):
        fast.rank_ktcs(PROBLEMS[0], [FakeKTC("triton::mm", {"num_stages": 2})], opts)


def test_value_runs_fall_back_when_extra_kwargs_refuse_comparison():
    from torch_diode.hook import extract

    class Ambiguous:   # like a tensor: == gives something without a truth value
        def __eq__(self, other):
            raise RuntimeError("ambiguous")
        __hash__ = object.__hash__

    kws = mm_configs(512, 512, 512, 2, "DEFAULT")
    a = _inductor_ktcs("triton::mm", kws[:3], {"ALLOW_TF32": False, "x": Ambiguous()})
    b = _inductor_ktcs("triton::mm", kws[3:6], {"ALLOW_TF32": False, "x": Ambiguous()})
    for k in b:
        k.template = a[0].template   # same template, two extra dicts: compared by content
    assert extract.value_runs(a + b) is None
    want = [extract.config_key_from_ktc(k) for k in a + b]
    assert extract.config_keys_from_ktcs(a + b) == want


def _sorting_cascade_scores(p0, aten, cascade, others_on):
    """model.cascade_scores as it was before lowest_mask: the set from a stable argsort of
    every candidate, each member converted on its own (the reference for the bits)."""
    p0 = np.asarray(p0, dtype=np.float32)
    s = np.asarray(aten, dtype=bool).copy()
    s[np.argsort(p0, kind="stable")[:cascade]] = True
    idx = np.flatnonzero(s)
    scores = (p0.astype(np.float64) + CASCADE_OFFSET).astype(np.float32)
    total = p0[idx].astype(np.float64)
    others = others_on(idx)
    for p in others:
        total = total + np.asarray(p, dtype=np.float32).astype(np.float64)
    scores[idx] = (total / (len(others) + 1)).astype(np.float32)
    return scores


def test_lowest_and_cascade_helpers_equal_the_sorting_versions():
    """ranking._lowest / model.lowest_mask (one partition) give the stable argsort's k lowest
    (ties to the lower index, NaN last), and model.cascade_scores / model.prefilter_scores (the
    hook's and the reference's) the bits of the stable-argsort versions, with many ties, k at
    and past the length, ATen rows, the other members as one array or as a list."""
    from torch_diode.hook.ranking import _lowest
    from torch_diode.model import PREFILTER_OFFSET, cascade_scores, lowest_mask, prefilter_scores

    rng = np.random.default_rng(7)
    for trial in range(400):
        n = int(rng.integers(1, 60))
        dtype = np.float32 if trial % 2 else np.float64
        a = rng.choice(rng.standard_normal(max(1, n // int(rng.integers(1, 5)))), size=n).astype(dtype)
        if trial % 5 == 0:
            a[rng.integers(0, n)] = -0.0
        for k in (0, 1, int(rng.integers(1, n + 1)), n, n + 3):
            want = np.argsort(a, kind="stable")[:k]
            assert _lowest(a, k).tolist() == want.tolist()
            mask = np.zeros(n, dtype=bool)
            mask[want] = True
            assert lowest_mask(a, k).tolist() == mask.tolist()
        if trial % 7 == 0:   # NaN (never from the model) sorts last, as in the stable argsort
            b = a.copy()
            b[rng.integers(0, n, size=int(rng.integers(1, n + 1)))] = np.nan
            for k in (1, int(rng.integers(1, n + 1)), n):
                want = np.argsort(b, kind="stable")[:k]
                assert _lowest(b, k).tolist() == want.tolist()
                assert np.flatnonzero(lowest_mask(b, k)).tolist() == sorted(want.tolist())
        p0 = a.astype(np.float32)
        aten = rng.random(n) < 0.1
        others = rng.standard_normal((3, n)).astype(np.float32)
        k = int(rng.integers(0, n + 2))
        seen = []

        def on(idx, seen=seen):
            seen.append(idx.tolist())
            return others[:, idx]

        def on_list(idx, seen=seen):
            seen.append(idx.tolist())
            return [o[idx] for o in others]
        want = _sorting_cascade_scores(p0, aten, k, on)
        for got in (cascade_scores(p0, aten, k, on), cascade_scores(p0, aten, k, on_list)):
            assert np.array_equal(want.view(np.uint32), got.view(np.uint32))
        assert seen[0] == seen[1] == seen[2]
        inner = lambda idx: others[0, idx] * 0.5   # noqa: E731
        kept = aten.copy()   # the set P as a stable argsort finds it
        kept[np.argsort(p0, kind="stable")[:k]] = True
        want = (p0.astype(np.float64) + PREFILTER_OFFSET).astype(np.float32)
        want[kept] = inner(np.flatnonzero(kept))
        got = prefilter_scores(p0, aten, k, inner)
        assert np.array_equal(want.view(np.uint32), got.view(np.uint32))


def test_select_array_on_long_lists_with_ties():
    """select_array sorts only the kept prefix: the same indices as select() on 1,400 scores
    with many ties, every threshold regime, and a NaN (the plain sort)."""
    rng = random.Random(11)
    for _ in range(100):
        n = rng.choice([2, 17, 1400])
        levels = [float(np.float32(rng.uniform(-3, 3))) for _ in range(rng.randint(1, 50))]
        scores = [rng.choice(levels) for _ in range(n)]
        opts = Options(top_k=rng.randint(1, 6), threshold=rng.choice([0.0, 0.01, 0.05, 1.0, 100.0]),
                       max_kept=rng.choice([6, 16, 64, 2000]))
        assert select_array(np.asarray(scores), opts) == select(scores, opts)
    # a NaN (never from the model) takes the plain stable sort: NaN last
    assert select_array(np.asarray([1.0, float("nan"), 0.5, 0.5]), Options(top_k=4, max_kept=4)) == [2, 3, 0, 1]


def test_feature_rows_stay_exact_across_problems_sharing_dimensions(model, exhaustive):
    """The per-dimension pieces (_ConfigTable._mixed, kept per M, N, K and batch x M x N) and
    the last-rows cache serve later problems and tables that grew: features bit for bit and
    rankings equal to the reference's, problem after problem in one Ranker."""
    spec = model.info.feature_spec
    fast, ref = Ranker(model), ReferenceRanker(model)
    opts = Options()
    rng = random.Random(5)
    dims = [1, 7, 64, 100, 333, 4096]
    odd = [KernelConfig(template="triton::mm", block_m=48, block_n=80, block_k=24, group_m=4, num_stages=2,
                        num_warps=4)]   # new block sizes: the table's codes grow mid-way
    for i in range(24):
        dt = rng.choice(["float16", "bfloat16", "float32"])
        p = Problem(op="bmm" if i % 3 == 0 else "mm", batch=rng.choice([2, 3]) if i % 3 == 0 else 1,
                    m=rng.choice(dims), n=rng.choice(dims), k=rng.choice(dims), dtype_a=dt, dtype_b=dt, dtype_out=dt)
        configs = exhaustive + (odd if i >= 12 else [])
        got = fast.features(p, configs)
        want = ref.features(p, configs)
        assert torch.equal(got, want)
        r = fast.rank(p, configs, opts)
        scores, kept, margin = ref.rank(p, configs, opts)
        assert r.scores.tolist() == scores and r.kept == kept and r.margin == margin


def test_rank_ktcs_last_rows_cache_follows_changed_lists(model):
    """A run whose values equal the last ones of its cache id reuses their rows; a changed
    list (other configs, another order, one value changed) is looked up again."""
    from torch_diode.hook import extract

    kws = mm_configs(1024, 1024, 1024, 2, "EXHAUSTIVE")
    fast, ref = Ranker(model), Ranker(model)
    opts = Options(top_k=3, threshold=0.0, max_kept=8)
    changed = [dict(kw) for kw in kws[:50]]
    changed[10]["num_warps"] = 2 if changed[10]["num_warps"] != 2 else 4
    for p in PROBLEMS[:2]:
        for part in (kws, kws, kws[:50], changed, list(reversed(kws[:300])), kws):
            ktcs = _inductor_ktcs("triton::mm", [dict(kw) for kw in part], {"ALLOW_TF32": False})
            got = fast.rank_ktcs(p, ktcs, opts)
            want = ref.rank_keys(p, extract.config_keys_from_ktcs(ktcs), opts)
            assert got.scores.tolist() == want.scores.tolist()
            assert got.kept == want.kept and got.margin == want.margin


def test_rank_runs_the_model_on_real_tensors_under_a_dispatch_mode(model, exhaustive):
    """Inductor lowers under FakeTensorMode: the forwards of a ranking run outside it (one
    context per ranking, _ForwardScope), and grad mode and the mode are restored after."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    want = ReferenceRanker(model).rank(PROBLEMS[0], exhaustive, Options())
    fast = Ranker(model)
    assert torch.is_grad_enabled()
    with FakeTensorMode() as mode:
        r = fast.rank(PROBLEMS[0], exhaustive, Options())
        assert torch._C._len_torch_dispatch_stack() == 1
        assert isinstance(torch.empty(1), torch._subclasses.fake_tensor.FakeTensor) and mode is not None
    assert torch.is_grad_enabled() and fast._scope is None
    assert (r.scores.tolist(), r.kept, r.margin) == want
