"""Ensemble model directories (model.json architecture.members > 1) and their cascade ranking:
strict parsing of members / cascade and the `members.{j}.` tensors, scores equal to a hand
computation from the member weights, Ranker equal to ReferenceRanker, and the C++ golden."""
import dataclasses
import json
import math
import random
import struct

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

from test_hook_model import random_weights, write_model_dir  # noqa: E402
from test_hook_rank_fast import exhaustive  # noqa: E402,F401  (a fixture)
from test_hook_ranking import M, K, N, FakeMMInputs, finalize, make_choices, model, real_configs  # noqa: E402,F401
from torch_diode.hook.choices import HookState, choices_class  # noqa: E402
from torch_diode.hook.stats import Stats  # noqa: E402
from torch_diode import wire  # noqa: E402
from torch_diode.features import FeatureSpec  # noqa: E402
from reference_ranker import ReferenceRanker  # noqa: E402
from torch_diode.hook.ranking import Options, Ranker  # noqa: E402
from torch_diode.model import (CASCADE_OFFSET, LoadedModel, ModelFormatError, cascade_scores,  # noqa: E402
                               is_aten_template, load_model_dir)
from torch_diode.wire import KernelConfig, Problem  # noqa: E402

from model_tools import ROOT  # noqa: E402

GOLDEN_ENSEMBLE = ROOT / "tests" / "golden" / "ensemble"
HIDDEN, BLOCKS = 16, 2
INPUTS = len(FeatureSpec().names)
ATEN = [KernelConfig(template="aten"), KernelConfig(template="aten::mm"), KernelConfig(template="aten::bmm")]
PROBLEMS = [
    Problem(op="mm", m=1024, n=2048, k=4096),
    Problem(op="bmm", batch=12, m=77, n=129, k=8192, trans_a=True),
    Problem(op="addmm", m=333, n=4097, k=100, dtype_a="bfloat16", dtype_b="bfloat16", dtype_out="bfloat16",
            trans_b=True, bias="row"),
]


# -- writing ensembles ------------------------------------------------------------------------

def packed(weights: dict, prefix: str = "") -> list:
    """random_weights() as weights.msgpack tensor entries, names prefixed."""
    return [[prefix + name, "float32", shape, struct.pack(f"<{len(vals)}f", *vals)]
            for name, (shape, vals) in weights.items()]


def member_weights(members: int, seeds=None) -> list[dict]:
    """Each member's random_weights (distinct seeds unless given)."""
    seeds = list(range(10, 10 + members)) if seeds is None else seeds
    return [random_weights(INPUTS, HIDDEN, BLOCKS, seed) for seed in seeds]


def write_ensemble_dir(path, weights: list[dict], cascade=None, *, arch=None, tensors=None):
    """A model directory whose members are `weights` (one: the single-model names, unless
    `arch` sets members), architecture.members/cascade set (None: left out) and `arch` merged
    into model.json's architecture; `tensors` replaces the weights.msgpack entries."""
    fields = {} if len(weights) == 1 else {"members": len(weights)}
    if cascade is not None:
        fields["cascade"] = cascade
    fields.update(arch or {})
    if tensors is None:
        tensors = (packed(weights[0]) if len(weights) == 1 else
                   [t for j, w in enumerate(weights) for t in packed(w, f"members.{j}.")])
    return write_model_dir(str(path), hidden=HIDDEN, blocks=BLOCKS, tensors=tensors,
                           json_patch=lambda m: m["architecture"].update(fields))


def doc_forward(w: dict, x: torch.Tensor, blocks: int = BLOCKS) -> np.ndarray:
    """docs/model-format.md's residual_mlp (silu, write_model_dir's default) from the raw values
    (any hidden width; `blocks` residual blocks)."""
    t = {name: torch.tensor(vals, dtype=torch.float32).reshape(shape) for name, (shape, vals) in w.items()}
    lin = lambda name, v: torch.nn.functional.linear(v, t[f"{name}.weight"], t[f"{name}.bias"])  # noqa: E731
    act = torch.nn.functional.silu
    h = act(lin("input", x))
    for i in range(blocks):
        h = act(h + lin(f"blocks.{i}.fc2", act(lin(f"blocks.{i}.fc1", h))))
    return lin("head", h).squeeze(-1).numpy()


def hand_scores(weights: list[dict], x: torch.Tensor, configs: list, cascade: int) -> tuple[np.ndarray, set]:
    """The contract, by hand: S = member 0's `cascade` best (ties to the lower index) and the
    ATen configs; S: float32 of the float64 mean in member order; others: p0 + 1000."""
    p = [doc_forward(w, x) for w in weights]
    n = len(configs)
    best = sorted(range(n), key=lambda i: (float(p[0][i]), i))[:cascade]
    s = set(best) | {i for i, c in enumerate(configs) if c.template == "aten" or c.template.startswith("aten::")}
    out = []
    for i in range(n):
        if i in s:
            total = 0.0
            for pj in p:
                total += float(pj[i])
            out.append(float(np.float32(total / len(p))))
        else:
            out.append(float(np.float32(float(p[0][i]) + 1000.0)))
    return np.asarray(out), s


@pytest.fixture(scope="module")
def triton_configs(exhaustive):
    """Inductor's EXHAUSTIVE mm list as KernelConfigs (test_hook_rank_fast's fixture)."""
    return exhaustive


@pytest.fixture(scope="module")
def configs(triton_configs):
    """200 Triton configs with the ATen ones among them (not first: their place must not matter)."""
    c = random.Random(5).sample(triton_configs, 200)
    return c[:50] + ATEN[:1] + c[50:120] + ATEN[1:] + c[120:]


# -- parsing ----------------------------------------------------------------------------------

@pytest.mark.parametrize("members, cascade, where", [
    (0, 8, "architecture.members"),
    (17, 8, "architecture.members"),
    ("2", 8, "architecture.members"),
    (True, 8, "architecture.members"),
    (2, None, "architecture.cascade"),     # required with more than one member
    (2, 0, "architecture.cascade"),
    (2, 4097, "architecture.cascade"),
    (2, 2.5, "architecture.cascade"),
    (1, 8, "architecture.cascade"),        # must be absent with one member
])
def test_members_and_cascade_are_strict(tmp_path, members, cascade, where):
    fields = {"members": members}
    if cascade is not None:
        fields["cascade"] = cascade
    d = write_ensemble_dir(tmp_path / "m", member_weights(2), arch=fields)
    with pytest.raises(ModelFormatError, match=f"model.json {where}"):
        load_model_dir(d)


def test_cascade_without_members_is_refused(tmp_path):
    d = write_ensemble_dir(tmp_path / "m", member_weights(1), cascade=4)
    with pytest.raises(ModelFormatError, match="model.json architecture.cascade: must be absent"):
        load_model_dir(d)


def _tensors_of(weights):
    return [t for j, w in enumerate(weights) for t in packed(w, f"members.{j}.")]


def test_member_tensors_are_strict(tmp_path):
    w = member_weights(2)
    good = _tensors_of(w)
    cases = {
        "missing": ([t for t in good if t[0] != "members.1.blocks.1.fc2.weight"],
                    r"missing tensors \['members.1.blocks.1.fc2.weight'\]"),
        "shape": ([t if t[0] != "members.1.input.bias" else [t[0], "float32", [HIDDEN + 1], b"\0" * 4 * (HIDDEN + 1)]
                   for t in good], "'members.1.input.bias': shape"),
        "extra member": (good + packed(random_weights(INPUTS, HIDDEN, BLOCKS, 99), "members.2."),
                         "'members.2.input.weight': not part of"),
        "unprefixed": (packed(w[0]) + packed(w[1], "members.1."), "'input.weight': not part of"),
    }
    for name, (tensors, message) in cases.items():
        d = write_ensemble_dir(tmp_path / name.replace(" ", "_"), w, cascade=4, tensors=tensors)
        with pytest.raises(ModelFormatError, match=message):
            load_model_dir(d)
    # and a single model refuses member names
    d = write_ensemble_dir(tmp_path / "single", w[:1], tensors=packed(w[0], "members.0."))
    with pytest.raises(ModelFormatError, match="'members.0.input.weight': not part of"):
        load_model_dir(d)


def test_expected_shapes_prefix_every_member(tmp_path):
    m = load_model_dir(write_ensemble_dir(tmp_path / "m", member_weights(3), cascade=4))
    arch = m.info.architecture
    assert (arch.members, arch.cascade, m.cascade) == (3, 4, 4)
    one = arch.member_shapes()
    shapes = arch.expected_shapes()
    assert len(shapes) == 3 * len(one)
    assert shapes == {f"members.{j}.{k}": v for j in range(3) for k, v in one.items()}
    assert shapes["members.2.head.bias"] == (1,) and "input.weight" not in shapes
    assert len(m.others) == 2


def test_members_load_their_own_weights(tmp_path):
    w = member_weights(3)
    m = load_model_dir(write_ensemble_dir(tmp_path / "m", w, cascade=4))
    x = torch.randn(9, INPUTS)
    with torch.no_grad():
        got = [m.module(x).numpy()] + [o(x).numpy() for o in m.others]
    for j in range(3):
        np.testing.assert_allclose(got[j], doc_forward(w[j], x), rtol=1e-5, atol=1e-6)
    assert not np.allclose(got[0], got[1])  # distinct members, not one member thrice


# -- scoring ----------------------------------------------------------------------------------

def test_single_model_unchanged(tmp_path, configs):
    w = member_weights(1)
    plain = load_model_dir(write_ensemble_dir(tmp_path / "plain", w))
    explicit = load_model_dir(write_ensemble_dir(tmp_path / "explicit", w, arch={"members": 1}))
    assert plain.others == () and plain.cascade is None and explicit.others == ()
    assert plain.info.architecture.expected_shapes() == plain.info.architecture.member_shapes()
    p = PROBLEMS[0]
    x = ReferenceRanker(plain).features(p, configs)
    with torch.no_grad():
        want = plain.module(x).tolist()
    for model in (plain, explicit):
        assert Ranker(model).rank(p, configs, Options()).scores.tolist() == want
        assert ReferenceRanker(model).score(p, configs)[0] == want


@pytest.mark.parametrize("members, cascade", [(2, 8), (3, 5), (3, 40)])
def test_scores_equal_hand_computation(tmp_path, configs, members, cascade):
    w = member_weights(members)
    m = load_model_dir(write_ensemble_dir(tmp_path / "m", w, cascade=cascade))
    for p in PROBLEMS:
        x = ReferenceRanker(m).features(p, configs)
        want, s = hand_scores(w, x, configs, cascade)
        got = Ranker(m).rank(p, configs, Options()).scores
        # the same set S (scored by the mean, far below the offset) ...
        assert {i for i, v in enumerate(got) if v < CASCADE_OFFSET / 2} == s
        assert cascade <= len(s) <= cascade + len(ATEN) < len(configs)
        # ... and the same values (torch's and the documented forward agree to rounding)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_members_beyond_the_first_run_on_the_cascade_set_only(tmp_path, configs):
    m = load_model_dir(write_ensemble_dir(tmp_path / "m", member_weights(3), cascade=8))
    for ranker in (Ranker(m), ReferenceRanker(m)):
        rows = {0: [], 1: []}
        hooks = [mod.register_forward_hook(lambda mod, args, out, j=j: rows[j].append(args[0].shape[0]))
                 for j, mod in enumerate((m.module, m.stacked_others))]
        try:
            ranker.score(PROBLEMS[0], configs)
            # members 1 and 2, stacked: one batch of S, member 0's 8 best and the 3 ATen configs
            # (some may be among them)
            assert rows[0] == [len(configs)]
            assert len(rows[1]) == 1 and 8 <= rows[1][0] <= 8 + len(ATEN)
            rows[0].clear(), rows[1].clear()
            scores, hit, seconds = ranker.score(PROBLEMS[0], configs)  # the cache: no forward at all
            assert hit and seconds == 0.0 and rows == {0: [], 1: []}
        finally:
            for h in hooks:
                h.remove()


def test_aten_outside_member_0_best_gets_the_mean(tmp_path, configs):
    w = member_weights(2)
    m = load_model_dir(write_ensemble_dir(tmp_path / "m", w, cascade=1))
    p = PROBLEMS[0]
    x = ReferenceRanker(m).features(p, configs)
    p0, p1 = doc_forward(w[0], x), doc_forward(w[1], x)
    best = int(np.argsort(p0, kind="stable")[0])
    aten = [i for i, c in enumerate(configs) if c.template.startswith("aten")]
    assert len(aten) == 3 and best not in aten   # the precondition: ATen is not member 0's best
    got = Ranker(m).rank(p, configs, Options()).scores
    for i in aten + [best]:
        np.testing.assert_allclose(got[i], (float(p0[i]) + float(p1[i])) / 2, rtol=1e-6)
    others = [i for i in range(len(configs)) if i not in aten and i != best]
    np.testing.assert_allclose(got[others], p0[others].astype(np.float64) + 1000.0, rtol=1e-6)


def test_cascade_at_least_n_means_every_candidate(tmp_path, configs):
    w = member_weights(3)
    for cascade in (len(configs), 4096):
        m = load_model_dir(write_ensemble_dir(tmp_path / f"m{cascade}", w, cascade=cascade))
        x = ReferenceRanker(m).features(PROBLEMS[1], configs)
        want = np.mean([doc_forward(wj, x).astype(np.float64) for wj in w], axis=0)
        got = Ranker(m).rank(PROBLEMS[1], configs, Options()).scores
        assert got.max() < 100   # no offset anywhere
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_cascade_scores_function():
    p0 = np.asarray([3.0, 1.0, 2.0, 1.0, 5.0], dtype=np.float32)
    aten = np.asarray([False, False, False, False, True])
    seen = []

    def others_on(idx):
        seen.append(idx.tolist())
        return [np.asarray([10.0] * len(idx), dtype=np.float32), np.asarray([-1.0] * len(idx), dtype=np.float32)]

    got = cascade_scores(p0, aten, 2, others_on)
    assert seen == [[1, 3, 4]]   # the two lowest (the tie 1.0 / 1.0: both), then ATen; ascending
    assert got.dtype == np.float32
    # S: (1 + 10 - 1) / 3 and (5 + 10 - 1) / 3; outside: p0 + 1000
    assert got.tolist() == np.asarray([1003.0, 10.0 / 3, 1002.0, 10.0 / 3, 14.0 / 3], dtype=np.float32).tolist()
    # ties to the lower index: with cascade 1 only index 1 of the two 1.0s
    seen.clear()
    cascade_scores(p0, aten, 1, others_on)
    assert seen == [[1, 4]]
    # many ties (numpy's default sort is not stable at this size): the lowest indices
    seen.clear()
    cascade_scores(np.asarray([1.0, 0.0] * 50, dtype=np.float32), np.zeros(100, dtype=bool), 10, others_on)
    assert seen == [list(range(1, 20, 2))]
    assert [is_aten_template(t) for t in ("aten", "aten::mm", "aten::bias_addmm", "atenx", "triton::mm",
                                          "decompose_k", "x::aten")] == [True, True, True, False, False, False,
                                                                          False]


def assert_rankers_agree(fast: Ranker, ref: ReferenceRanker, problem, cfgs, opts: Options):
    """The fast Ranker and the ReferenceRanker rank `cfgs` alike: the same scores, kept
    indices, margin and score(); returns the fast result and the reference's scores."""
    r = fast.rank(problem, cfgs, opts)
    scores, kept, margin = ref.rank(problem, cfgs, opts)
    assert r.scores.tolist() == scores
    assert r.kept == kept
    assert r.margin == margin
    assert fast.score(problem, cfgs)[0] == ref.score(problem, cfgs)[0]
    return r, scores


def test_ranker_equals_reference_for_an_ensemble(tmp_path, triton_configs):
    m = load_model_dir(write_ensemble_dir(tmp_path / "m", member_weights(3), cascade=12))
    opts = Options(top_k=5, threshold=0.05, max_kept=16)
    fast, ref = Ranker(m), ReferenceRanker(m)
    rng = random.Random(7)
    every = triton_configs + ATEN
    for p in PROBLEMS:
        part = rng.sample(triton_configs, 300) + ATEN[1:2]
        part.append(part[0])   # a config offered twice: one candidate
        for cfgs in (part, every, every):   # then a partial cache hit, then a full one
            r, scores = assert_rankers_agree(fast, ref, p, cfgs, opts)
        assert r.cache_hit
        below = [v < CASCADE_OFFSET / 2 for v in scores]
        assert 12 <= sum(below) <= 12 + len(ATEN) and all(below[-len(ATEN):])   # ATen: always the mean


def test_identical_members_rank_like_the_single_model(tmp_path, triton_configs):
    w = member_weights(1)
    single = load_model_dir(write_ensemble_dir(tmp_path / "single", w))
    opts = Options()   # top_k 5, threshold 5%, at most 16 kept: all within the cascade of 16
    cfgs = triton_configs + ATEN
    for members in (2, 3):
        same = load_model_dir(write_ensemble_dir(tmp_path / f"same{members}", w * members, cascade=16))
        for p in PROBLEMS:
            a, b = Ranker(single).rank(p, cfgs, opts), Ranker(same).rank(p, cfgs, opts)
            assert b.kept == a.kept and len(a.kept) >= 5
            assert a.margin == pytest.approx(b.margin, rel=1e-5, abs=1e-6)
            # S (the 16 best and ATen) scored by the mean of equal predictions: the prediction
            s = b.scores < CASCADE_OFFSET / 2
            assert 16 <= s.sum() <= 16 + len(ATEN)
            np.testing.assert_allclose(b.scores[s], a.scores[s], rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(b.scores[~s], a.scores[~s] + 1000.0, rtol=1e-6)
            best16 = [np.argsort(r.scores, kind="stable")[:16].tolist() for r in (a, b)]
            assert best16[0] == best16[1]


# -- through the hook -------------------------------------------------------------------------

def _aten_vote(hook_model, members_say: float):
    """An ensemble of three score = x . w models (test_hook_predict's Linear) on raw features
    (no standardisation: ATen's one-hot is 1, a Triton config's 0): member 0 predicts ATen
    100 slower, members 1 and 2 `members_say`; log2_block_m orders the Triton configs."""
    from test_hook_predict import Linear

    spec = FeatureSpec()

    def w(aten):
        v = [0.0] * len(spec.names)
        v[spec.names.index("template=aten")] = aten
        v[spec.names.index("log2_block_m")] = 1.0
        return Linear(v)
    arch = dataclasses.replace(hook_model.info.architecture, members=3, cascade=2)
    info = dataclasses.replace(hook_model.info, feature_spec=spec, architecture=arch)
    return LoadedModel(info=info, module=w(100.0), others=(w(members_say), w(members_say)))


@pytest.mark.parametrize("mode", ["predict", "topk"])
def test_hook_decides_aten_by_the_ensemble_mean(model, real_configs, mode):
    """ATen, last by member 0 (outside its cascade of 2), is still scored by every member:
    members that predict it far faster make the ensemble hand over ATen alone, in predict
    mode (ATen among the ranked keys) and in top-k mode's shortcut (ATen as an extra key)."""
    aten, triton = make_choices(real_configs)
    handed = {}
    for members_say in (100.0, -1000.0):
        opts = Options(mode=mode, aten_shortcut=True, top_k=1, threshold=0.0)
        state = HookState(Ranker(_aten_vote(model, members_say)), opts, Stats())
        out = finalize(choices_class()(state), {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
        handed[members_say] = out
    # every member agrees that ATen is slow: a Triton config (top-k mode also keeps ATen to benchmark)
    assert handed[100.0] != [aten] and any(k is c for k in handed[100.0] for c in triton)
    assert handed[-1000.0] == [aten]     # the mean of (100, -1000, -1000) on ATen wins


# -- the C++ golden ---------------------------------------------------------------------------

def test_ensemble_golden():
    if not (GOLDEN_ENSEMBLE / "scores.json").exists():
        pytest.skip("tests/golden/ensemble (model.json, weights.msgpack, scores.json) is not committed yet: "
                    "the C++ side writes it")
    m = load_model_dir(GOLDEN_ENSEMBLE)
    j = json.loads((GOLDEN_ENSEMBLE / "scores.json").read_text())
    assert (m.info.architecture.members, m.info.architecture.cascade) == (j["members"], j["cascade"])
    problem = wire.problem_from_json(j["problem"])
    cfgs = [wire.config_from_json(c) for c in j["configs"]]
    assert len(cfgs) == len(j["scores"]) and all(math.isfinite(v) for v in j["scores"])
    got = Ranker(m).rank(problem, cfgs, Options()).scores
    np.testing.assert_allclose(got, j["scores"], rtol=1e-5, atol=1e-5)
    # the cascade set itself is exact, not within a tolerance
    assert (got < CASCADE_OFFSET / 2).tolist() == [v < CASCADE_OFFSET / 2 for v in j["scores"]]
    assert ReferenceRanker(m).score(problem, cfgs)[0] == got.tolist()


def test_stacked_members_predict_as_each_member_alone(tmp_path):
    """hook._mlp.StackedMLP (what the rankers run for members 1..N-1) gives each member's own
    forward, to float32 rounding (one batched matmul per layer instead of one per member)."""
    import torch
    m = load_model_dir(write_ensemble_dir(tmp_path / "m", member_weights(4), cascade=8))
    assert len(m.others) == 3
    for rows in (1, 5, 64):
        x = torch.randn(rows, m.info.architecture.input)
        want = torch.stack([o(x) for o in m.others])
        got = m.stacked_others(x)
        assert got.shape == (3, rows)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
