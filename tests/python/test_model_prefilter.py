"""An ensemble's pre-filter (model.json architecture.prefilter, the pre-filter contract of
docs/model-format.md): strict parsing and the `prefilter.` tensors, prefilter_scores, the set P (the
pre-filter's `keep` best and every ATen config) scored as the ensemble scores that list and
everything else float32(q + PREFILTER_OFFSET), Ranker equal to ReferenceRanker with the
prediction cache, and the C++ golden."""
import json
import math
import random

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

from test_hook_model import random_weights  # noqa: E402
from test_hook_rank_fast import exhaustive  # noqa: E402,F401  (a fixture)
from test_model_members import (ATEN, INPUTS, PROBLEMS, assert_rankers_agree, doc_forward,  # noqa: E402
                                member_weights, packed, write_ensemble_dir)
from torch_diode import wire  # noqa: E402
from reference_ranker import ReferenceRanker  # noqa: E402
from torch_diode.hook.ranking import Options, Ranker, config_key  # noqa: E402
from torch_diode.model import (CASCADE_OFFSET, MAX_KEEP, PREFILTER_OFFSET, ModelFormatError,  # noqa: E402
                               Prefilter, is_aten_template, load_model_dir, prefilter_scores,
                               prefilter_set)

from model_tools import ROOT  # noqa: E402

GOLDEN_PREFILTER = ROOT / "tests" / "golden" / "prefilter"
PF_HIDDEN, PF_BLOCKS = 8, 1


def prefilter_weights(hidden=PF_HIDDEN, blocks=PF_BLOCKS, seed=73) -> dict:
    """Random pre-filter weights; seed 73: on `configs` the ATen configs are not its best."""
    return random_weights(INPUTS, hidden, blocks, seed)


_DEFAULT = object()


def write_prefiltered(path, weights: list[dict], cascade: int, keep: int, pf: dict | None = None, *,
                      arch_pf=_DEFAULT, tensors=None):
    """write_ensemble_dir plus architecture.prefilter (`arch_pf` replaces the default
    {hidden, blocks, keep} object) and the `prefilter.` tensors of `pf` after the members'."""
    pf = prefilter_weights() if pf is None else pf
    if arch_pf is _DEFAULT:
        arch_pf = {"hidden": PF_HIDDEN, "blocks": PF_BLOCKS, "keep": keep}
    if tensors is None:
        tensors = [t for j, w in enumerate(weights) for t in packed(w, f"members.{j}.")] + packed(pf, "prefilter.")
    return write_ensemble_dir(path, weights, cascade=cascade, arch={"prefilter": arch_pf}, tensors=tensors)


@pytest.fixture(scope="module")
def configs(exhaustive):
    """200 Triton configs with the ATen ones among them (not first)."""
    c = random.Random(5).sample(exhaustive, 200)
    return c[:50] + ATEN[:1] + c[50:120] + ATEN[1:] + c[120:]


def count_forwards(m):
    """Rows each stage forwards: {"pf": [...], 0: [...], "others": [...]} (forward hooks)."""
    rows = {"pf": [], 0: [], "others": []}
    hooks = [mod.register_forward_hook(lambda mod, args, out, j=j: rows[j].append(args[0].shape[0]))
             for j, mod in (("pf", m.prefilter), (0, m.module), ("others", m.stacked_others))]
    return rows, hooks


# -- parsing ----------------------------------------------------------------------------------

@pytest.mark.parametrize("arch_pf, where", [
    (None, "architecture.prefilter"),                                   # null: not an object
    ([8, 1, 6], "architecture.prefilter"),
    ({"hidden": 8, "blocks": 1}, "architecture.prefilter"),            # keep missing
    ({"hidden": 8, "blocks": 1, "keep": 6, "kind": "residual_mlp"}, "architecture.prefilter"),
    ({"hidden": 8, "blocks": 1, "keep": 6, "activation": "relu"}, "architecture.prefilter"),
    ({"hidden": 0, "blocks": 1, "keep": 6}, "architecture.prefilter.hidden"),
    ({"hidden": 8193, "blocks": 1, "keep": 6}, "architecture.prefilter.hidden"),
    ({"hidden": 8.0, "blocks": 1, "keep": 6}, "architecture.prefilter.hidden"),
    ({"hidden": True, "blocks": 1, "keep": 6}, "architecture.prefilter.hidden"),
    ({"hidden": 8, "blocks": -1, "keep": 6}, "architecture.prefilter.blocks"),
    ({"hidden": 8, "blocks": 65, "keep": 6}, "architecture.prefilter.blocks"),
    ({"hidden": 8, "blocks": False, "keep": 6}, "architecture.prefilter.blocks"),
    ({"hidden": 8, "blocks": 1, "keep": 0}, "architecture.prefilter.keep"),
    ({"hidden": 8, "blocks": 1, "keep": MAX_KEEP + 1}, "architecture.prefilter.keep"),
    ({"hidden": 8, "blocks": 1, "keep": "6"}, "architecture.prefilter.keep"),
    ({"hidden": 8, "blocks": 1, "keep": True}, "architecture.prefilter.keep"),
])
def test_prefilter_is_strict(tmp_path, arch_pf, where):
    d = write_prefiltered(tmp_path / "m", member_weights(2), 4, 6, arch_pf=arch_pf)
    with pytest.raises(ModelFormatError, match=f"model.json {where}"):
        load_model_dir(d)


@pytest.mark.parametrize("members", [None, 1])
def test_prefilter_on_a_single_model_is_refused(tmp_path, members):
    w = member_weights(1)
    arch = {"prefilter": {"hidden": 8, "blocks": 1, "keep": 6}}
    if members is not None:
        arch["members"] = members
    d = write_ensemble_dir(tmp_path / "m", w, arch=arch,
                           tensors=packed(w[0]) + packed(prefilter_weights(), "prefilter."))
    with pytest.raises(ModelFormatError, match="model.json architecture.prefilter: must be absent"):
        load_model_dir(d)


def test_prefilter_bounds_are_accepted(tmp_path):
    # the inclusive ends of the ranges: blocks 0, keep 1 and MAX_KEEP
    for keep in (1, MAX_KEEP):
        pf = prefilter_weights(hidden=3, blocks=0)
        m = load_model_dir(write_prefiltered(tmp_path / f"m{keep}", member_weights(2), 4, keep, pf,
                                             arch_pf={"hidden": 3, "blocks": 0, "keep": keep}))
        assert m.info.architecture.prefilter == Prefilter(hidden=3, blocks=0, keep=keep) and m.keep == keep


def test_prefilter_tensors_are_strict(tmp_path):
    w = member_weights(2)
    members = [t for j, wj in enumerate(w) for t in packed(wj, f"members.{j}.")]
    pf = packed(prefilter_weights(), "prefilter.")
    cases = {
        "missing": (members + [t for t in pf if t[0] != "prefilter.head.bias"],
                    r"missing tensors \['prefilter.head.bias'\]"),
        "none": (members, r"missing tensors \['prefilter\."),
        "wider": (members + packed(prefilter_weights(hidden=PF_HIDDEN + 1), "prefilter."),
                  "'prefilter.input.weight': shape"),
        "extra block": (members + packed(prefilter_weights(blocks=PF_BLOCKS + 1), "prefilter."),
                        "'prefilter.blocks.1.fc1.weight': not part of"),
        "member names": (members + packed(prefilter_weights(), "members.2."), "'members.2.input.weight': not part of"),
    }
    for name, (tensors, message) in cases.items():
        d = write_prefiltered(tmp_path / name.replace(" ", "_"), w, 4, 6, tensors=tensors)
        with pytest.raises(ModelFormatError, match=message):
            load_model_dir(d)
    # `prefilter.` tensors without architecture.prefilter are refused
    d = write_ensemble_dir(tmp_path / "no_arch", w, cascade=4, tensors=members + pf)
    with pytest.raises(ModelFormatError, match="'prefilter.input.weight': not part of"):
        load_model_dir(d)


def test_expected_shapes_include_the_prefilter(tmp_path):
    w = member_weights(3)
    m = load_model_dir(write_prefiltered(tmp_path / "m", w, 4, 6))
    arch = m.info.architecture
    assert arch.prefilter == Prefilter(hidden=PF_HIDDEN, blocks=PF_BLOCKS, keep=6) and m.keep == 6
    h, d = PF_HIDDEN, INPUTS
    want_pf = {"prefilter.input.weight": (h, d), "prefilter.input.bias": (h,),
               "prefilter.blocks.0.fc1.weight": (h, h), "prefilter.blocks.0.fc1.bias": (h,),
               "prefilter.blocks.0.fc2.weight": (h, h), "prefilter.blocks.0.fc2.bias": (h,),
               "prefilter.head.weight": (1, h), "prefilter.head.bias": (1,)}
    shapes = arch.expected_shapes()
    assert {k: v for k, v in shapes.items() if k.startswith("prefilter.")} == want_pf
    assert len(shapes) == 3 * len(arch.member_shapes()) + len(want_pf)
    assert arch.prefilter_shapes() == {k[len("prefilter."):]: v for k, v in want_pf.items()}
    # without a pre-filter: no such names, and the model has none
    plain = load_model_dir(write_ensemble_dir(tmp_path / "plain", w, cascade=4))
    assert plain.prefilter is None and plain.keep is None and plain.info.architecture.prefilter is None
    assert not any(k.startswith("prefilter.") for k in plain.info.architecture.expected_shapes())


def test_prefilter_loads_its_own_weights(tmp_path):
    pf = prefilter_weights()
    m = load_model_dir(write_prefiltered(tmp_path / "m", member_weights(2), 4, 6, pf))
    x = torch.randn(11, INPUTS)
    with torch.no_grad():
        got = m.prefilter(x).numpy()
    np.testing.assert_allclose(got, doc_forward(pf, x, PF_BLOCKS), rtol=1e-5, atol=1e-6)
    assert m.prefilter.input.weight.shape == (PF_HIDDEN, INPUTS) and len(m.prefilter.blocks) == PF_BLOCKS


# -- prefilter_scores -------------------------------------------------------------------------

def test_prefilter_scores_function():
    q = np.asarray([3.0, 1.0, 2.0, 1.0, 5.0, 0.5], dtype=np.float32)
    aten = np.asarray([False, False, False, False, True, False])
    seen = []

    def inner(idx):
        seen.append(idx.tolist())
        return np.asarray([10.0 + i for i in idx.tolist()], dtype=np.float32)

    got = prefilter_scores(q, aten, 2, inner)
    assert seen == [[1, 4, 5]]   # the two lowest (0.5, then the first 1.0: ties to the lower index), ATen
    assert got.dtype == np.float32
    want = [np.float32(3.0 + 2000.0), 11.0, np.float32(2.0 + 2000.0), np.float32(1.0 + 2000.0), 14.0, 15.0]
    assert got.tolist() == np.asarray(want, dtype=np.float32).tolist()
    assert prefilter_set(q, aten, 2).tolist() == [False, True, False, False, True, True]
    # keep >= n: every candidate is in P, inner sees them all, no offset anywhere
    seen.clear()
    got = prefilter_scores(q, aten, 6, inner)
    assert seen == [list(range(6))] and got.max() < 100
    # float32(float64(q) + 2000): the offset is added in float64, then rounded once
    q = np.asarray([0.1, 1e-3, -7.3], dtype=np.float32)
    got = prefilter_scores(q, np.zeros(3, dtype=bool), 1, lambda idx: np.zeros(len(idx), dtype=np.float32))
    assert got.tolist() == [np.float32(np.float64(q[0]) + PREFILTER_OFFSET),
                            np.float32(np.float64(q[1]) + PREFILTER_OFFSET), 0.0]   # P = {2}: the lowest
    # many ties (numpy's default sort is not stable at this size): the lowest indices
    seen.clear()
    prefilter_scores(np.asarray([1.0, 0.0] * 50, dtype=np.float32), np.zeros(100, dtype=bool), 10, inner)
    assert seen == [list(range(1, 20, 2))]


# -- scoring ----------------------------------------------------------------------------------

@pytest.mark.parametrize("keep", ["n", MAX_KEEP])
def test_keep_at_least_n_scores_like_the_ensemble_without_prefilter(tmp_path, configs, keep):
    w = member_weights(3)
    keep = len(configs) if keep == "n" else keep
    plain = load_model_dir(write_ensemble_dir(tmp_path / "plain", w, cascade=8))
    pre = load_model_dir(write_prefiltered(tmp_path / "pre", w, 8, keep))
    for p in PROBLEMS:
        want = Ranker(plain).rank(p, configs, Options())
        for ranker in (Ranker(pre), ReferenceRanker(pre)):
            got = ranker.score(p, configs)[0]
            assert got == want.scores.tolist()   # bit for bit: P is every candidate
        assert Ranker(pre).rank(p, configs, Options()).kept == want.kept


def test_small_keep_scores_p_as_the_ensemble_and_the_rest_after(tmp_path, configs):
    w, pf = member_weights(3), prefilter_weights()
    keep, cascade = 20, 6
    plain = load_model_dir(write_ensemble_dir(tmp_path / "plain", w, cascade=cascade))
    m = load_model_dir(write_prefiltered(tmp_path / "m", w, cascade, keep, pf))
    aten = [i for i, c in enumerate(configs) if is_aten_template(c.template)]
    assert len(aten) == 3
    for p in PROBLEMS:
        x = ReferenceRanker(m).features(p, configs)
        with torch.no_grad():
            q = m.prefilter(x).numpy()   # the batch the rankers forward: every candidate, in order
        np.testing.assert_allclose(q, doc_forward(pf, x, PF_BLOCKS), rtol=1e-5, atol=1e-5)
        best = sorted(range(len(configs)), key=lambda i: (float(q[i]), i))[:keep]
        assert not set(aten) <= set(best)   # the precondition: some ATen config is not among the keep best
        P = sorted(set(best) | set(aten))
        got = Ranker(m).rank(p, configs, Options()).scores
        outside = [i for i in range(len(configs)) if i not in set(P)]
        # P: exactly the scores below the pre-filter's offset; ATen always in P
        assert [i for i, v in enumerate(got) if v < (CASCADE_OFFSET + PREFILTER_OFFSET) / 2] == P
        assert len(P) == keep + len(set(aten) - set(best))
        # outside P: float32(float64(q) + 2000), bit for bit, after every candidate of P
        assert got[outside].tolist() == (q[outside].astype(np.float64) + PREFILTER_OFFSET).astype(np.float32).tolist()
        assert got[outside].min() > got[P].max()
        # P scored as the ensemble without pre-filter scores the list of P's configs alone
        sub = Ranker(plain).rank(p, [configs[i] for i in P], Options()).scores
        assert got[P].tolist() == sub.tolist()
        s = [i for i in P if got[i] < CASCADE_OFFSET / 2]
        assert cascade <= len(s) <= cascade + len(aten) and set(aten) <= set(s)
        # the ranking: P first, then the rest in the pre-filter's order (to float32 rounding
        # near 2000, about 1.2e-4: q that close tie, and the lower index goes first)
        order = np.argsort(got, kind="stable").tolist()
        rounded = (q.astype(np.float64) + PREFILTER_OFFSET).astype(np.float32)
        assert order[len(P):] == sorted(outside, key=lambda i: (float(rounded[i]), i))
        assert np.all(np.diff(q[order[len(P):]]) > -2.5e-4)


def test_each_stage_forwards_only_its_rows(tmp_path, configs):
    keep, cascade = 16, 5
    m = load_model_dir(write_prefiltered(tmp_path / "m", member_weights(3), cascade, keep))
    p = PROBLEMS[0]
    for ranker in (Ranker(m), ReferenceRanker(m)):
        rows, hooks = count_forwards(m)
        try:
            ranker.score(p, configs)
            assert rows["pf"] == [len(configs)]
            assert len(rows[0]) == 1 and keep <= rows[0][0] <= keep + len(ATEN)
            assert len(rows["others"]) == 1 and cascade <= rows["others"][0] <= cascade + len(ATEN)
            for j in rows:
                rows[j].clear()
            scores, hit, seconds = ranker.score(p, configs)   # the cache: no forward at all
            assert hit and seconds == 0.0 and rows == {"pf": [], 0: [], "others": []}
            # a sub-list: the pre-filter knows every config; P is drawn from the sub-list, so
            # member 0 forwards only those of its rows it had not predicted
            sub = configs[::2]
            ranker.score(p, sub)
            assert rows["pf"] == [] and sum(rows[0]) <= keep + len(ATEN)
            # a new problem: everything again
            for j in rows:
                rows[j].clear()
            ranker.score(PROBLEMS[1], configs + configs[:7])   # duplicates: one candidate each
            assert rows["pf"] == [len(configs)] and keep <= rows[0][0] <= keep + len(ATEN)
        finally:
            for h in hooks:
                h.remove()


def test_ranking_breakdown_counts_the_prefilter(tmp_path, configs):
    m = load_model_dir(write_prefiltered(tmp_path / "m", member_weights(2), 4, 10))
    r = Ranker(m).rank(PROBLEMS[2], configs, Options())
    assert not r.cache_hit and r.seconds > 0
    assert r.breakdown["features"] > 0 and r.breakdown["forward"] > 0
    assert r.seconds == pytest.approx(r.breakdown["features"] + r.breakdown["forward"], rel=1e-9, abs=1e-12)


def test_ranker_equals_reference_with_a_prefilter(tmp_path, exhaustive):
    m = load_model_dir(write_prefiltered(tmp_path / "m", member_weights(3), 12, 64))
    opts = Options(top_k=5, threshold=0.05, max_kept=16)
    fast, ref = Ranker(m), ReferenceRanker(m)
    rng = random.Random(7)
    every = exhaustive + ATEN
    assert len(every) > 64
    for p in PROBLEMS:
        part = rng.sample(exhaustive, 300) + ATEN[1:2]
        part.append(part[0])   # a config offered twice: one candidate
        part.insert(5, part[10])
        other = rng.sample(exhaustive, 90) + ATEN[:1]   # re-offered with another list
        for cfgs in (part, every, every, other, part):   # partial cache hit, full hit, another list, back
            r, scores = assert_rankers_agree(fast, ref, p, cfgs, opts)
            n = len(dict.fromkeys(cfgs))
            in_p = [v < (CASCADE_OFFSET + PREFILTER_OFFSET) / 2 for v in dict(zip(cfgs, scores)).values()]
            n_aten = sum(is_aten_template(c.template) for c in dict.fromkeys(cfgs))
            assert 64 <= sum(in_p) <= min(n, 64 + n_aten)
        assert fast.rank(p, part, opts).cache_hit and ref.score(p, part)[1]
    # the hook's entry point rank_keys (config_key tuples) scores as rank (both cold)
    keys = Ranker(m).rank(PROBLEMS[0], every, opts)
    again = Ranker(m).rank_keys(PROBLEMS[0], [config_key(c) for c in every], opts)
    assert again.scores.tolist() == keys.scores.tolist() and again.kept == keys.kept


def test_prefilter_with_duplicates_only_in_first_offered_order(tmp_path, configs):
    """The candidates are the distinct offered configs in first-offered order: a list and
    the same list with every config repeated score every copy alike."""
    m = load_model_dir(write_prefiltered(tmp_path / "m", member_weights(2), 4, 10))
    p = PROBLEMS[1]
    once = Ranker(m).rank(p, configs, Options()).scores.tolist()
    twice = Ranker(m).rank(p, configs + configs[::-1], Options()).scores.tolist()
    assert twice[:len(configs)] == once and twice[len(configs):] == once[::-1]
    assert ReferenceRanker(m).score(p, configs + configs[::-1])[0] == twice


# -- the C++ golden ---------------------------------------------------------------------------

def test_prefilter_golden():
    if not all((GOLDEN_PREFILTER / f).exists() for f in ("model.json", "weights.msgpack", "scores.json")):
        pytest.skip("tests/golden/prefilter (model.json, weights.msgpack, scores.json) is not committed yet: "
                    "the C++ side writes it (DIODE_WRITE_GOLDEN=1)")
    m = load_model_dir(GOLDEN_PREFILTER)
    j = json.loads((GOLDEN_PREFILTER / "scores.json").read_text())
    arch = m.info.architecture
    assert (arch.members, arch.cascade) == (j["members"], j["cascade"])
    assert arch.prefilter == Prefilter(**j["prefilter"])
    problem = wire.problem_from_json(j["problem"])
    cfgs = [wire.config_from_json(c) for c in j["configs"]]
    want = j["scores"]
    assert len(cfgs) == len(want) and all(math.isfinite(v) for v in want)
    assert len(dict.fromkeys(cfgs)) > arch.prefilter.keep   # the case exercises the pre-filter
    got = Ranker(m).rank(problem, cfgs, Options()).scores
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    # the sets S, P \ S and outside P are exact, not within a tolerance
    def band(v):
        return 0 if v < CASCADE_OFFSET / 2 else 1 if v < (CASCADE_OFFSET + PREFILTER_OFFSET) / 2 else 2

    assert [band(v) for v in got.tolist()] == [band(v) for v in want]
    assert any(band(v) == 2 for v in want) and any(band(v) == 1 for v in want)
    assert ReferenceRanker(m).score(problem, cfgs)[0] == got.tolist()
