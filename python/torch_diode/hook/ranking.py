"""Scoring a problem's template configs with the model, and choosing which to keep.

One batched forward per problem. The feature matrix of all configs is built with numpy
column operations (no per-config Python loop beyond reading each config's fields once):
the problem's features are computed once and broadcast; the config and mixed columns use
float64 +, -, *, / and ceil, which are correctly rounded in numpy as in Python, and every
log2 is taken with math.log2 on the *distinct* values of its column only (a few dozen),
so each feature is bit-identical to torch_diode.features (the C++ mirror). Standardising
by the model's feature_spec is elementwise, so it is applied where each column is made (once
per config for the config columns, on the distinct values for the problem-dependent ones),
with the same float64 expression and the same bits. The matrix runs through the MLP at
once; top-k / threshold selection is one np.partition and a stable sort of the kept prefix
(the order of one stable argsort). Predictions are cached per problem, so a GEMM that
appears many times in a graph (or again after a recompile) costs one forward.

An ensemble model (model.json architecture.members > 1) scores with model.cascade_scores:
member 0 predicts every config, the other members only its `cascade` best and the ATen
configs. Each member's predictions are cached per problem and config; the scores are
recomputed from them on every call, since the cascade set depends on the configs offered.
An ensemble with a pre-filter (model.json architecture.prefilter) scores with
model.prefilter_scores: the pre-filter predicts every config, member 0 only its `keep` best
and the ATen configs (the set P), the other members the cascade set drawn from P; the
pre-filter's predictions are cached as one more member's.

The previous implementation (torch_diode.features per config, one Python sort) is the test
oracle: tests/python/reference_ranker.py (ReferenceRanker); tests/python/test_hook_rank_fast.py
and the model tests check that `Ranker` returns exactly its scores and ranking.
`Ranker` implements protocols.Ranker, the interface the handler (choices.py) calls.

`Ranker` is the GEMM model's (the base features above). A model of another decision family
(model.json "family": scaled_mm, whose features add scale_rowwise and fast_accum) is ranked by
`FamilyRanker`, the same interface over torch_diode.features per config; `ranker_for_model`
picks the one for a loaded model.
"""
from __future__ import annotations

import contextlib
import itertools
import math
import operator
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import torch

from ..features import _DTYPE_BYTES, raw_features
from ..model import SELECTION_RULES, LoadedModel, cascade_scores, is_aten_template, lowest_mask, prefilter_scores
from ..wire import KernelConfig, Problem
from .zero_config import env_enabled as env_zero_config

DEFAULT_TOP_K = 5
DEFAULT_THRESHOLD = 0.05   # keep configs predicted within 5% of the best time
DEFAULT_MAX_KEPT = 16      # never keep more than this many Triton configs, whatever the threshold
# Predict mode hands over a Triton config instead of the op's ATen (cuBLAS) kernel only when
# the model predicts it faster by more than this share: time_triton x (1 + margin) < time_aten.
# Why a margin: nothing is benchmarked in predict mode, so a wrong Triton pick goes straight
# into the user's model; cuBLAS is rarely far from the best, while a confidently wrong Triton
# pick can cost 1.2-1.5x, and no workload may run more than 1.10x slower than cuBLAS
# (docs/decisions/007-aten-margin-in-predict-mode.md). Why 0.05: it is the smallest margin of
# the release's grid that keeps every validation GEMM of the shipped models within 1.10x of
# cuBLAS (worst 1.014x on the H100, 1.096x on the H200), while 0.10 costs a few percent of
# geomean speed (0.942x against 0.917x of cuBLAS on the H100); 0 is the plain lowest
# predicted time. Each model's own margin is chosen the same way on its validation split and
# signed in its model.json (selection.aten_margin,
# docs/decisions/010-per-model-aten-margin.md): Options.aten_margin None, the default, takes
# the model's, and this value only serves a model without one (HookState.aten_margin).
DEFAULT_ATEN_MARGIN = 0.05
# Top-k mode hands over the op's ATen kernel alone (nothing benchmarked) when the model predicts
# it fastest by the rule of predict mode (aten_margin included); otherwise Inductor benchmarks
# the top-k Triton configs and ATen. Why: in the H100 run of bench/hook_end_to_end.py of
# 2026-11-26 (model version 5) the model predicted ATen for every GEMM of 11 workloads, and on
# 10 of them top-k's GPU time was above predict's (Inductor's own benchmark, warm L2, chose a
# Triton config: vit_fc1_b8 20.67 against 14.32 us, l3_kv_m4 10.88 against 8.45, mlp_block
# 138.4 against 110.1); on one (attn_pv_32x2048) below it, 115.2 against 119.3 us.
DEFAULT_ATEN_SHORTCUT = True
CACHE_PROBLEMS = 4096
SEARCH_SPACES = ("default", "exhaustive")
# "topk": keep the top-k (+ threshold) Triton configs and every other choice; Inductor
#         benchmarks what is kept. "predict": hand Inductor the model's single best choice
#         (one Triton config, or the op's ATen kernel when the model predicts it fastest):
#         Inductor then benchmarks nothing (docs/hook.md, Modes).
MODES = ("topk", "predict")
# predict is the default since the H100 run of bench/hook_end_to_end.py (2026-11-25, 15
# workloads): against max-autotune DEFAULT, predict's GPU time geomean was 0.956x and its
# compile 1.32x plain torch.compile; topk's 0.982x and 2.57x (bench/RESULTS.md).
DEFAULT_MODE = "predict"
ENV_MODE = "TORCH_DIODE_MODE"


def env_mode() -> str:
    """TORCH_DIODE_MODE (topk | predict, any case); unset or invalid: DEFAULT_MODE (invalid is warned)."""
    import logging
    import os
    v = os.environ.get(ENV_MODE, "").strip().lower()
    if not v:
        return DEFAULT_MODE
    if v not in MODES:
        logging.getLogger("torch_diode").warning("torch_diode: ignoring %s=%r (expected one of %s); using %s",
                                                 ENV_MODE, v, "|".join(MODES), DEFAULT_MODE)
        return DEFAULT_MODE
    return v
MAX_LOG_MARGIN = math.log(1e3)  # top_margin() reports at most a predicted 1000x


# How predict mode reads its ATen margin for an ensemble: "mean" (the ensemble's score, the
# members' mean) or "every_member" (each member alone; bench/predict_member_agreement.py (script removed; git history):
# the picks the members disagree on are where the large misses are). One model: the same.
# One definition with model.json's selection.aten_rule (model.SELECTION_RULES).
ATEN_RULES = SELECTION_RULES


@dataclass(frozen=True)
class Options:
    top_k: int = DEFAULT_TOP_K
    threshold: float = DEFAULT_THRESHOLD
    max_kept: int = DEFAULT_MAX_KEPT
    search_space: str = "default"   # "default" | "exhaustive" (any case): Triton configs the model scores
    prune_shared_mem: bool = True   # exhaustive only: let Inductor drop configs over the smem limit
    fallback: str = "default"       # "default" (Inductor's full list) | "raise" (debugging)
    mode: str = field(default_factory=env_mode)  # "topk" | "predict" (MODES)
    # predict mode: Triton must be predicted this much faster than ATen; None: the model's own
    # (model.json selection.aten_margin), else DEFAULT_ATEN_MARGIN (HookState.aten_margin)
    aten_margin: float | None = None
    # predict mode: how the margin is read for an ensemble (ATEN_RULES): "mean", the ensemble's
    # score; "every_member", each member alone must predict the Triton pick faster by more than
    # the margin; None: the model's own (model.json selection.aten_rule), else "mean"
    aten_rule: str | None = None
    aten_shortcut: bool = DEFAULT_ATEN_SHORTCUT  # topk mode: ATen alone when predict mode would pick it
    # predict mode: an M = 1 / N = 1 mm becomes Inductor's reduction with the launch config of
    # this hardware's measured table, where that table says it beats cuBLAS (hook/gemv.py)
    gemv_reduction: bool = True
    # predict mode under plain torch.compile: GEMM template lowering on for each GEMM the
    # hook chooses, one choice handed over, nothing benchmarked (hook/zero_config.py);
    # default: TORCH_DIODE_ZERO_CONFIG, on unless set to 0
    zero_config: bool = field(default_factory=env_zero_config)

    def __post_init__(self):
        if not isinstance(self.top_k, int) or self.top_k < 1:
            raise ValueError(f"top_k must be a positive int, got {self.top_k!r}")
        if not (isinstance(self.threshold, (int, float)) and math.isfinite(self.threshold)
                and self.threshold >= 0):
            raise ValueError(f"threshold must be a finite number >= 0, got {self.threshold!r}")
        if not isinstance(self.max_kept, int) or self.max_kept < self.top_k:
            raise ValueError(f"max_kept must be an int >= top_k, got {self.max_kept!r}")
        # Manifests and Inductor's own config spell it "EXHAUSTIVE"/"DEFAULT", the hook's API
        # "exhaustive"/"default": take either in any case, store lower case so that both
        # spellings give the same options and the same FX-graph cache key.
        space = self.search_space.strip().lower() if isinstance(self.search_space, str) else None
        if space not in SEARCH_SPACES:
            raise ValueError(f"search_space must be 'default' or 'exhaustive' (any case, e.g. 'EXHAUSTIVE' "
                             f"as in manifests), got {self.search_space!r}")
        object.__setattr__(self, "search_space", space)  # frozen dataclass: normalise in place
        if not isinstance(self.prune_shared_mem, bool):
            raise ValueError(f"prune_shared_mem must be a bool, got {self.prune_shared_mem!r}")
        if self.fallback not in ("default", "raise"):
            raise ValueError(f"fallback must be 'default' or 'raise', got {self.fallback!r}")
        mode = self.mode.strip().lower() if isinstance(self.mode, str) else None
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        object.__setattr__(self, "mode", mode)
        if self.aten_margin is not None and (
                isinstance(self.aten_margin, bool) or not isinstance(self.aten_margin, (int, float))
                or not math.isfinite(self.aten_margin) or self.aten_margin < 0):
            raise ValueError(f"aten_margin must be None (the model's own) or a finite number >= 0 (0.1: "
                             f"Triton only when predicted more than 10% faster than ATen), got {self.aten_margin!r}")
        if self.aten_rule is not None and self.aten_rule not in ATEN_RULES:
            raise ValueError(f"aten_rule must be None (the model's own) or one of {ATEN_RULES}, "
                             f"got {self.aten_rule!r}")
        if not isinstance(self.aten_shortcut, bool):
            raise ValueError(f"aten_shortcut must be a bool, got {self.aten_shortcut!r}")
        if not isinstance(self.gemv_reduction, bool):
            raise ValueError(f"gemv_reduction must be a bool, got {self.gemv_reduction!r}")
        if not isinstance(self.zero_config, bool):
            raise ValueError(f"zero_config must be a bool, got {self.zero_config!r}")

    def key(self) -> str:
        return (f"k{self.top_k}-t{self.threshold!r}-m{self.max_kept}-s{self.search_space}"
                f"-p{int(self.prune_shared_mem)}-f{self.fallback}-{self.mode}-a{self.aten_margin!r}"
                f"-c{int(self.aten_shortcut)}-g{int(self.gemv_reduction)}-z{int(self.zero_config)}"
                + (f"-r{self.aten_rule}" if self.aten_rule is not None else ""))


def select(scores: list[float], opts: Options) -> list[int]:
    """Indices to keep, best first: the top_k, plus any within `threshold` of the best.

    Scores are predicted log(time): "within 5%" means score <= best + log(1.05).
    """
    if len(scores) == 0:
        return []
    order = sorted(range(len(scores)), key=lambda i: (scores[i], i))
    best = scores[order[0]]
    limit = best + math.log1p(opts.threshold)
    kept = [i for r, i in enumerate(order) if r < opts.top_k or scores[i] <= limit]
    return kept[:opts.max_kept]


def _lowest(a: np.ndarray, k: int) -> np.ndarray:
    """np.argsort(a, kind="stable")[:k] (the k lowest, ties to the lower index, in that order)
    without sorting all of `a`: the set from model.lowest_mask (one np.partition), taken in
    index order, then only those k sorted stably (equal values stay in index order)."""
    if k >= len(a):
        return np.argsort(a, kind="stable")
    idx = np.flatnonzero(lowest_mask(a, k))
    return idx[np.argsort(a[idx], kind="stable")]


def select_array(scores: np.ndarray, opts: Options) -> list[int]:
    """select() on a numpy array: the same indices in the same order (ties by index).

    The kept configs are a prefix of the stable order (the threshold's are: the scores are
    sorted along it), of length min(max_kept, max(top_k, #within threshold)); only that
    prefix is sorted (_lowest)."""
    n = len(scores)
    if not n:
        return []
    best = float(scores.min())
    if best != best:   # a NaN (never from the model: predictions are checked finite)
        order = np.argsort(scores, kind="stable")
        s = scores[order]
        limit = float(s[0]) + math.log1p(opts.threshold)
        keep = s <= limit
        keep[:opts.top_k] = True
        return order[keep][:opts.max_kept].tolist()
    limit = best + math.log1p(opts.threshold)
    kept = min(opts.max_kept, max(opts.top_k, int(np.count_nonzero(scores <= limit))), n)
    return _lowest(scores, kept).tolist()


def margin_of_distinct(distinct_scores: np.ndarray) -> float | None:
    """top_margin() given one score per distinct config."""
    if len(distinct_scores) < 2:
        return None
    s1, s2 = np.partition(distinct_scores, 1)[:2].tolist()
    return math.expm1(min(s2 - s1, MAX_LOG_MARGIN))


def top_margin(scores: list[float], configs: list) -> float | None:
    """Predicted relative margin of the best config over the next-best *distinct* one:
    exp(score_2nd - score_best) - 1, e.g. 0.25 = predicted 25% faster than the runner-up.

    Scores are predicted log(time). The same config offered by two templates has one score
    and would give a meaningless margin of 0, so configs are de-duplicated first. None
    when fewer than two distinct configs were scored.
    """
    best: dict = {}
    for c, s in zip(configs, scores):
        best[c] = min(s, best.get(c, math.inf))
    if len(best) < 2:
        return None
    s1, s2 = sorted(best.values())[:2]
    # capped so that a wild model cannot overflow (or dominate the mean in get_prediction_stats)
    return math.expm1(min(s2 - s1, MAX_LOG_MARGIN))


_config_key = operator.attrgetter("template", "block_m", "block_n", "block_k", "group_m", "num_stages",
                                  "num_warps", "even_k", "allow_tf32", "use_fast_accum", "acc_type", "extra")


def config_key(c: KernelConfig) -> tuple:
    """Every field of a KernelConfig (what its __eq__ compares), as a plain tuple: hashing
    it is C code, several times cheaper than the dataclass's generated __hash__."""
    return _config_key(c)


def _lg(v: float) -> float:  # features._lg
    return math.log2(max(v, 1.0))


def _cdiv(a: float, b: float) -> float:  # features._ceil_div
    return float(math.ceil(a / b))


def _log2_distinct(x: np.ndarray, floor_one: bool = True) -> np.ndarray:
    """features._lg (or math.log2) of each element, computed once per distinct value with
    math.log2: bit-identical to the Python reference, which np.log2 need not be."""
    u, inv = np.unique(x, return_inverse=True)
    f = _lg if floor_one else math.log2
    return np.asarray([f(v) for v in u.tolist()], dtype=np.float64)[inv.reshape(-1)]


# columns of features.BASE_FEATURE_NAMES by what they depend on
_PROBLEM_COLS = slice(0, 12)     # log2_m .. log2_intensity: the problem only
_STATIC_COLS = slice(12, 20)     # log2_block_m .. allow_tf32: the config only
_SMEM, _TILES, _WAVES, _WAVE_EFF, _M_WASTE, _N_WASTE, _K_WASTE, _K_ITERS, _TILE_INT = range(20, 29)
_ONE_HOT = 29                    # template=<t>, one per spec.templates
_MIXED = slice(_TILES, _K_ITERS + 1)   # the 7 adjacent columns that depend on problem and config
_N_MIXED = _K_ITERS + 1 - _TILES
_PROBE = KernelConfig()          # raw_features' problem columns do not depend on the config
_V_PROBLEM = np.dtype((np.void, 4 * (_PROBLEM_COLS.stop - _PROBLEM_COLS.start)))   # 12 float32 as one item
_V_MIXED = np.dtype((np.void, 4 * _N_MIXED))          # the 7 mixed float32 as one item


def _lg_array(x: np.ndarray) -> np.ndarray:
    """features._lg of each element (math.log2, as the reference), same shape, float64."""
    return np.asarray(list(map(_lg, x.ravel().tolist())), dtype=np.float64).reshape(x.shape)


class _ConfigTable:
    """Per-config feature columns, computed once per distinct config (keyed by config_key)
    and kept for the life of the Ranker: the config-only columns, the two columns that
    depend on the config and the dtype's size only (smem, tile intensity) for every dtype
    size, and small codes of the block sizes into the distinct values seen, so that the
    columns that depend on the problem too (tiles, waves, waste, k iterations) are
    computed per distinct block size and gathered."""

    def __init__(self, spec, standardise: tuple[np.ndarray, np.ndarray] | None = None):
        self.spec = spec
        # (mean, stddev) float64 per column: every column is stored and returned already
        # standardised, f32((f64(f32 raw) - mean) / sd), the expression Ranker applied to the
        # whole matrix before (elementwise, so applying it to a column of the per-config table,
        # or to a small per-block-size table before gathering, gives the same bits). A miss
        # then standardises only the few dozen distinct per-problem values, not 1,400 x n.
        self._std = standardise
        self.index: dict[tuple, int] = {}
        self.n = 0
        self.sizes = sorted(set(float(v) for v in _DTYPE_BYTES.values()))
        # per dtype size, a full-width feature row per config, standardised if the table is:
        # the config-only columns, the two that depend on the dtype's size too (smem, tile
        # intensity), and 0 in the 12 problem columns and the 7 that depend on the problem too
        # (raw_features() overwrites them); one contiguous gather (np.take) per miss
        self.block = {b: np.empty((0, len(spec.names)), dtype=np.float32)
                      for b in self.sizes}
        self.values: list[list[float]] = [[], [], []]   # distinct BLOCK_M, BLOCK_N, BLOCK_K (as used)
        self._codes: list[dict[float, int]] = [{}, {}, {}]
        self.code = np.empty((0, 3), dtype=np.intp)
        self.arrays = tuple(np.empty(0, dtype=np.float64) for _ in range(3))   # self.values as arrays
        self.mnk = np.empty(0, dtype=np.intp)
        self._dims: dict[tuple, object] = {}   # _mixed: per M, N, K or (batch, M, N), standardised pieces
        self.aten = np.empty(0, dtype=bool)   # per row: an ATen config (model.is_aten_template)

    def _z(self, col, v) -> np.ndarray:
        """Raw values `v` of feature column(s) `col` (an index or a slice) -> float32,
        standardised if the table is."""
        v32 = np.asarray(v, dtype=np.float32)   # the raw feature is a float32 (features._f32)
        if self._std is None:
            return v32
        mean, sd = self._std
        return ((v32.astype(np.float64) - mean[col]) / sd[col]).astype(np.float32)

    def rows(self, configs: list) -> np.ndarray:
        """Row of each config, registering the new ones (one hash per config)."""
        return self.rows_for_keys(list(map(_config_key, configs)))  # C loops only: attrgetter

    def rows_for_keys(self, keys: list[tuple]) -> np.ndarray:
        """Row of each config_key, registering the new ones."""
        get = self.index.get
        try:  # all known (every call but a process's first few): one C loop, no list
            return np.fromiter(map(get, keys), dtype=np.intp, count=len(keys))
        except TypeError:  # None: a key not registered yet
            pass
        rows = list(map(get, keys))
        new = list(dict.fromkeys(k for k, r in zip(keys, rows) if r is None))
        self._register(new)
        return np.fromiter(map(get, keys), dtype=np.intp, count=len(keys))

    def _register(self, keys: list[tuple]) -> None:
        a = np.fromiter(itertools.chain.from_iterable(k[1:9] for k in keys), dtype=np.float64,
                        count=8 * len(keys)).reshape(len(keys), 8)  # bools -> 0.0 / 1.0
        bm, bn, bk, gm, st, nw, ek, tf = (a[:, i] for i in range(8))
        triton = (bm > 0) & (bn > 0) & (bk > 0)   # features.raw_features: else 128 x 128 x 64
        bm = np.where(triton, bm, 128.0)
        bn = np.where(triton, bn, 128.0)
        bk = np.where(triton, bk, 64.0)
        blk = np.zeros((len(keys), len(self.spec.names)), dtype=np.float32)
        static = blk[:, _STATIC_COLS]   # log2_block_m .. allow_tf32
        static[:, 0] = _log2_distinct(bm)
        static[:, 1] = _log2_distinct(bn)
        static[:, 2] = _log2_distinct(bk)
        static[:, 3] = _log2_distinct(gm)
        static[:, 4] = st
        static[:, 5] = _log2_distinct(nw)
        static[:, 6] = ek
        static[:, 7] = tf
        blk[:, _STATIC_COLS] = self._z(_STATIC_COLS, static)
        one_hot = blk[:, _ONE_HOT:]
        tcol = {t: j for j, t in enumerate(self.spec.templates)}
        col = np.fromiter((tcol.get(k[0], -1) for k in keys), dtype=np.intp, count=len(keys))
        known = col >= 0
        one_hot[np.flatnonzero(known), col[known]] = 1.0
        one_hot[:] = self._z(slice(_ONE_HOT, None), one_hot)
        for b in self.sizes:  # same expressions, same order of operations as features.raw_features
            smem = (bm * bk + bk * bn) * b * np.maximum(1.0, st)
            ti = (2.0 * bm * bn * bk) / ((bm * bk + bk * bn) * b)
            blk[:, _SMEM] = self._z(_SMEM, _log2_distinct(smem))
            blk[:, _TILE_INT] = self._z(_TILE_INT, _log2_distinct(ti, floor_one=False))
            self.block[b] = np.concatenate([self.block[b], blk])   # a copy: blk is reused
        code = np.empty((len(keys), 3), dtype=np.intp)
        for j, col in enumerate((bm, bn, bk)):
            d, vals = self._codes[j], self.values[j]
            u, inv = np.unique(col, return_inverse=True)
            ucode = []
            for v in u.tolist():
                c = d.get(v)
                if c is None:
                    c = d[v] = len(vals)
                    vals.append(v)
                ucode.append(c)
            code[:, j] = np.asarray(ucode, dtype=np.intp)[inv.reshape(-1)]
        self.code = np.concatenate([self.code, code])
        self.arrays = tuple(np.asarray(v, dtype=np.float64) for v in self.values)
        self._dims.clear()   # _mixed's pieces follow self.arrays
        # one index per row into raw_features' [BLOCK_M, BLOCK_N, BLOCK_K] code triples
        self.mnk = (self.code[:, 0] * len(self.values[1]) + self.code[:, 1]) * len(self.values[2]) + self.code[:, 2]
        self.aten = np.concatenate([self.aten, np.fromiter((is_aten_template(k[0]) for k in keys), dtype=bool,
                                                           count=len(keys))])
        self.index.update(zip(keys, range(self.n, self.n + len(keys))))
        self.n += len(keys)

    def _mixed(self, m: float, n: float, k: float, b: float, sms: float) -> np.ndarray:
        """The 7 columns that depend on problem and config (log2_tiles .. log2_k_iters,
        adjacent), standardised, per (BLOCK_M, BLOCK_N, BLOCK_K) code triple: float32
        [codes, 7], indexed by self.mnk. Exactly features.raw_features' expressions on float64
        arrays of the distinct block sizes (+, -, *, /, ceil: correctly rounded, as in
        Python; every log2 through _lg, math.log2 on each value). The pieces that depend on
        one of M, N, K (or on batch, M, N) only are kept per value (_dims, cleared when the
        table grows), so a miss on a new problem recomputes only the dimensions not seen yet."""
        bms, bns, bks = self.arrays
        c = self._dims
        if len(c) > 4096:   # a bound (distinct dimensions, not problems)
            c.clear()
        z = self._z
        pm = c.get(("m", m))
        if pm is None:
            cdm = np.ceil(m / bms)
            pm = c[("m", m)] = (cdm, z(_M_WASTE, cdm * bms / m - 1.0))
        pn = c.get(("n", n))
        if pn is None:
            cdn = np.ceil(n / bns)
            pn = c[("n", n)] = (cdn, z(_N_WASTE, cdn * bns / n - 1.0))
        pk = c.get(("k", k))
        if pk is None:
            k_iters = np.ceil(k / bks)
            pk = c[("k", k)] = (z(_K_WASTE, k_iters * bks / k - 1.0), z(_K_ITERS, _lg_array(k_iters)))
        pt = c.get(("t", b, m, n))
        if pt is None:
            tiles = (b * pm[0])[:, None] * pn[0][None, :]   # b * x * y
            waves = np.ceil(tiles / sms)
            raw = np.empty(tiles.shape + (3,), dtype=np.float64)
            raw[..., 0] = _lg_array(tiles)
            raw[..., 1] = _lg_array(waves)
            raw[..., 2] = tiles / (waves * sms)
            pt = c[("t", b, m, n)] = z(slice(_TILES, _WAVE_EFF + 1), raw)
        t = np.empty((len(bms), len(bns), len(bks), _N_MIXED), dtype=np.float32)
        t[..., 0:3] = pt[:, :, None, :]
        t[..., 3] = pm[1][:, None, None]
        t[..., 4] = pn[1][None, :, None]
        t[..., 5] = pk[0][None, None, :]
        t[..., 6] = pk[1][None, None, :]
        return t.reshape(-1, _N_MIXED)

    def raw_features(self, p: Problem, rows: np.ndarray) -> np.ndarray:
        """features.raw_features of the configs at `rows` for problem p, float32 [len(rows), n]
        (standardised if the table is)."""
        spec = self.spec
        z = self._z
        out = np.empty((len(rows), len(spec.names)), dtype=np.float32)
        # the problem's 12 features: computed by the reference itself, broadcast
        problem = z(_PROBLEM_COLS, raw_features(spec, p, _PROBE)[_PROBLEM_COLS])
        if not len(rows):
            out[:, _PROBLEM_COLS] = problem
            return out
        m, n, k, b = float(p.m), float(p.n), float(p.k), float(p.batch)
        in_bytes = float(_DTYPE_BYTES[p.dtype_a])
        sms = max(1.0, float(spec.sm_count))
        mixed = self._mixed(m, n, k, b, sms)   # per block-size code triple
        # the config's columns: one contiguous gather of whole rows (np.take into `out`; clip:
        # no bounds buffer, the rows are the table's); then the problem's 12 columns and the 7
        # that depend on it, each as one item of 48 / 28 bytes per row (void views)
        np.take(self.block[in_bytes], rows, axis=0, out=out, mode="clip")
        out[:, _PROBLEM_COLS].view(_V_PROBLEM)[:, 0] = np.ascontiguousarray(problem).view(_V_PROBLEM)[0]
        np.take(np.ascontiguousarray(mixed).view(_V_MIXED)[:, 0], self.mnk[rows],
                out=out[:, _MIXED].view(_V_MIXED)[:, 0], mode="clip")
        return out


def raw_feature_matrix(spec, p: Problem, configs: list[KernelConfig]) -> np.ndarray:
    """features.raw_features of every config at once, float32 [len(configs), n]; bit-identical
    to stacking raw_features (tests/python/test_hook_rank_fast.py checks it)."""
    table = _ConfigTable(spec)
    return table.raw_features(p, table.rows(configs))


@dataclass
class Ranking:
    """One problem's ranking: scores per offered config, what select() keeps, the margin."""
    scores: np.ndarray          # float64 (exact float32 scores: predictions, or an ensemble's
                                # model.cascade_scores / model.prefilter_scores), one per config offered
    kept: list[int]             # indices into the configs, best first (select())
    margin: float | None        # top_margin() of the offered configs
    cache_hit: bool
    seconds: float              # features + forward (0 on a cache hit)
    breakdown: dict             # seconds per stage: extract (rank_ktcs: reading the KTCs; with the
                                # lock's wait), keys (table rows), features, forward, select, total
    extra_scores: np.ndarray | None = None  # rank_ktcs(extra_keys=...): their scores, in order;
                                            # not in scores, kept or margin


def _standardisation(spec) -> tuple[list[float], list[float]]:
    """The feature spec's mean and stddev (a zero stddev divides by 1), as both rankers use them."""
    n = len(spec.names)
    return spec.mean or [0.0] * n, [s if s > 0 else 1.0 for s in (spec.stddev or [1.0] * n)]


class _Features:
    """Feature rows of one problem during one ranking (under Ranker._lock): the first batch
    is computed (_ConfigTable.raw_features) and kept, and a later batch whose rows are all
    in it (member 0's or the cascade's rows, among the rows the pre-filter or member 0 just
    predicted) is gathered from it instead of computed again: the same bits, since each
    row's features depend on its config and the problem only."""

    __slots__ = ("table", "problem", "x", "where")

    def __init__(self, table: _ConfigTable, problem: Problem):
        self.table, self.problem = table, problem
        self.x: np.ndarray | None = None
        self.where: np.ndarray | None = None   # table row -> its row in x, -1: not in x

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        if self.where is not None:
            pos = self.where[rows]
            if (pos >= 0).all():
                return self.x[pos]
        x = self.table.raw_features(self.problem, rows)
        if self.x is None:
            self.x = x
            self.where = np.full(self.table.n, -1, dtype=np.intp)
            self.where[rows] = np.arange(len(rows), dtype=np.intp)
        return x


_PRE_DISPATCH_LEN = None   # torch._ops._len_torch_dispatch_stack_pre_dispatch, imported once


class _OneIntraOpThread:
    """ATen's intra-op threads set to one for the model's forwards, restored when the last
    forward in flight ends (a process-wide count: Inductor may lower in several threads).

    Why: the hook ranks inside torch.compile while Inductor's compile workers keep the cores
    busy, and an OpenMP region with one thread per core then waits at every op's barrier for
    threads the OS has descheduled. On an H200 host (16 threads on 16 busy cores) a ranking of
    Inductor's DEFAULT mm list took 48 ms with 16 threads and 1.1 ms with one (median,
    bench/hook_rank_threads.py (script removed; git history) --load 16, 2026-11-28): ~50 ms per GEMM of predict mode's compile. The hook's batches (20 to ~1,400
    rows through a 256-wide MLP) gain little from more threads on an idle machine. Setting
    the count costs ~4 us each way."""

    _lock = threading.Lock()
    _depth = 0
    _saved = 1

    def __enter__(self):
        cls = _OneIntraOpThread
        with cls._lock:
            if cls._depth == 0:
                cls._saved = torch.get_num_threads()
                if cls._saved != 1:
                    torch.set_num_threads(1)
            cls._depth += 1
        return self

    def __exit__(self, *exc):
        cls = _OneIntraOpThread
        with cls._lock:
            cls._depth -= 1
            if cls._depth == 0 and cls._saved != 1:
                torch.set_num_threads(cls._saved)
        return False


def _real_tensors():
    """The context of every model forward: one intra-op thread (_OneIntraOpThread),
    torch.no_grad(), and _disable_current_modes() when a dispatch mode is active (Inductor
    lowers under FakeTensorMode)."""
    global _PRE_DISPATCH_LEN
    if _PRE_DISPATCH_LEN is None:
        from torch._ops import _len_torch_dispatch_stack_pre_dispatch
        _PRE_DISPATCH_LEN = _len_torch_dispatch_stack_pre_dispatch
    stack = contextlib.ExitStack()
    stack.enter_context(_OneIntraOpThread())
    if torch._C._len_torch_dispatch_stack() or _PRE_DISPATCH_LEN():
        from torch.utils._python_dispatch import _disable_current_modes
        stack.enter_context(_disable_current_modes())
    stack.enter_context(torch.no_grad())
    return stack


class _ForwardScope:
    """The context the model runs in (_real_tensors), entered at a ranking's first forward
    and left when that ranking ends: one entry per cache miss, not one per forward (member 0,
    then members 1.. of an ensemble; with a pre-filter one more)."""
    __slots__ = ("ctx",)

    def __init__(self):
        self.ctx = None

    def enter(self) -> None:
        if self.ctx is None:
            ctx = _real_tensors()
            ctx.__enter__()
            self.ctx = ctx

    def close(self) -> None:
        if self.ctx is not None:
            ctx, self.ctx = self.ctx, None
            ctx.__exit__(None, None, None)


def _first_offered(rows: np.ndarray) -> np.ndarray:
    """The distinct values of `rows`, in the order of their first occurrence."""
    u, first = np.unique(rows, return_index=True)
    return u[np.argsort(first, kind="stable")]


class Ranker:
    """Model + per-config feature table + prediction cache. Thread-safe: Inductor may lower
    graphs in several threads."""

    def __init__(self, model: LoadedModel):
        self.model = model
        self.spec = model.info.feature_spec
        mean, sd = _standardisation(self.spec)
        std = (np.asarray(mean, dtype=np.float64), np.asarray(sd, dtype=np.float64)) if self.spec.mean else None
        self._table = _ConfigTable(self.spec, std)   # features come out standardised
        # rank_ktcs: (uid, ALLOW_TF32, kwargs names) -> {kwargs values: table row}
        self._rows_by_values: dict[tuple, dict[tuple, int]] = {}
        # _rows_of_runs: cache id -> (the last values of that run, their rows; read-only)
        self._last_rows: dict[tuple, tuple[list, np.ndarray]] = {}
        # problem -> each member's prediction (float32, as the model computes it) per table row,
        # [members, rows] (NaN: not predicted yet); with a pre-filter, its predictions are one
        # more row, the last ([members + 1, rows])
        self._members = 1 + len(model.others)
        self._pf = self._members if model.prefilter is not None else None   # its cached row
        self._cached_rows = self._members + (model.prefilter is not None)
        self._cache: OrderedDict[Problem, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._scope: _ForwardScope | None = None   # during _rank (under _lock): the forwards' context

    def features(self, problem: Problem, configs: list[KernelConfig]) -> torch.Tensor:
        """Normalised float32 features, [len(configs), n]: (raw - mean) / stddev as in features.py."""
        with self._lock:
            x = self._table.raw_features(problem, self._table.rows(configs))
        return torch.from_numpy(x)

    def _forward(self, x: np.ndarray | torch.Tensor, module=None) -> np.ndarray:
        """Predictions of `module` (default: the model's, or an ensemble's member 0)."""
        # Inductor lowers under FakeTensorMode and other dispatch modes; the model must
        # run on real tensors, outside autograd.
        scope = self._scope
        if scope is None:   # outside _rank
            with _real_tensors():
                t = x if isinstance(x, torch.Tensor) else torch.from_numpy(x)
                y = (self.model.module if module is None else module)(t).numpy()
        else:
            scope.enter()   # left at the end of _rank
            t = x if isinstance(x, torch.Tensor) else torch.from_numpy(x)
            y = (self.model.module if module is None else module)(t).numpy()
        if not np.isfinite(y).all():
            raise FloatingPointError("model produced a non-finite prediction")
        return y

    def member_gaps(self, problem: Problem, pick_key: tuple, aten_key: tuple) -> list[float]:
        """Each member's own predicted log time of `aten_key` minus that of `pick_key`
        (config_key tuples; member 0 first, one value for a single model): the gaps predict
        mode's every_member rule reads. One forward of the two rows per member; the
        ensemble's cascade and pre-filter play no part (both configs are scored by all)."""
        with self._lock:
            x = self._table.raw_features(problem, self._table.rows_for_keys([pick_key, aten_key]))
        t = torch.from_numpy(x)
        with _real_tensors():
            preds = [self.model.module(t).numpy()]
            if self.model.others:
                preds += list(np.asarray(self.model.run_others(t)))
        out = [float(np.float32(p[1]) - np.float32(p[0])) for p in preds]
        if not all(math.isfinite(g) for g in out):
            raise FloatingPointError("model produced a non-finite prediction")
        return out

    def rank(self, problem: Problem, configs: list[KernelConfig], opts: Options) -> Ranking:
        """Scores (cached per problem), the kept indices and the margin, in one pass."""
        return self.rank_keys(problem, list(map(_config_key, configs)), opts)

    def rank_keys(self, problem: Problem, keys: list[tuple], opts: Options) -> Ranking:
        """rank() of the configs given as config_key tuples (extract.config_key_from_ktc)."""
        t0 = time.perf_counter()
        return self._rank(problem, lambda: self._table.rows_for_keys(keys), opts, t0)

    def rank_ktcs(self, problem: Problem, ktcs: list, opts: Options, extra_keys: list[tuple] = ()) -> Ranking:
        """rank_keys(problem, extract.config_keys_from_ktcs(ktcs), opts) of Inductor's
        KernelTemplateChoices, where each KTC's kwargs values lead straight to its table row
        (one dict lookup per KTC instead of two: values -> key -> row); breakdown["extract"]
        is the time reading the KTCs. `extra_keys` (e.g. the op's ATen config) are scored in
        the same forward and returned apart (Ranking.extra_scores), outside the selection.
        Raises extract.Unsupported as config_keys_from_ktcs."""
        from . import extract
        t0 = time.perf_counter()
        runs = extract.value_runs(ktcs)
        if runs is None:
            keys = extract.config_keys_from_ktcs(ktcs)
            rows_of = lambda: self._table.rows_for_keys(keys)  # noqa: E731
        else:
            rows_of = lambda: self._rows_of_runs(runs)  # noqa: E731
        if not extra_keys:
            return self._rank(problem, rows_of, opts, t0)
        extra = list(extra_keys)
        return self._rank(problem, lambda: np.concatenate([rows_of(), self._table.rows_for_keys(extra)]),
                          opts, t0, n_extra=len(extra))

    def _rows_of_runs(self, runs: list) -> np.ndarray:
        """Table rows of extract.ValueRuns (under _lock): _rows_by_values maps a run's cache
        id and one KTC's kwargs values to the row of the config key they determine
        (extract._KEY_CACHE's contract), filled from the keys on a miss."""
        parts = []
        for run in runs:
            # Inductor offers the same list for many GEMMs (new objects, equal values): a run
            # whose values equal the last ones of its cache id has the same rows (list == is
            # one C loop, identity first per value; cheaper than a lookup per KTC)
            last = self._last_rows.get(run.cid)
            if last is not None:
                try:
                    same = last[0] == run.values
                except Exception:  # noqa: BLE001 - a value refusing ==: look the values up
                    same = False
                if same:
                    parts.append(last[1])
                    continue
            rows = self._rows_of_values(run)
            rows.flags.writeable = False   # shared by later calls: nobody may change it
            self._last_rows[run.cid] = (run.values, rows)
            parts.append(rows)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _rows_of_values(self, run) -> np.ndarray:
        """Table rows of one extract.ValueRun (under _lock)."""
        d = self._rows_by_values.get(run.cid)
        if d is not None:
            try:
                return np.fromiter(map(d.get, run.values), dtype=np.intp, count=len(run.values))
            except TypeError:  # None: values not seen yet (or unhashable: the keys decide)
                pass
        rows = self._table.rows_for_keys(run.keys())
        try:
            self._rows_by_values.setdefault(run.cid, {}).update(zip(run.values, rows.tolist()))
        except TypeError:
            pass
        return rows

    def _predictions(self, problem: Problem) -> np.ndarray:
        """The problem's cached predictions, [members, table rows] (grown to the table's rows;
        NaN: not predicted yet), made the most recently used (under _lock)."""
        cached = self._cache.get(problem)
        if cached is None or cached.shape[1] < self._table.n:
            grown = np.full((self._cached_rows, self._table.n), np.nan, dtype=np.float32)  # predictions are float32
            if cached is not None:
                grown[:, :cached.shape[1]] = cached
            cached = grown
        self._cache[problem] = cached
        self._cache.move_to_end(problem)
        while len(self._cache) > CACHE_PROBLEMS:
            self._cache.popitem(last=False)
        return cached

    def _cascade(self, problem: Problem, cached: np.ndarray, cand: np.ndarray,
                 feats: _Features) -> tuple[np.ndarray, bool]:
        """An ensemble's scores of the candidates `cand` (table rows), float32 per candidate:
        model.cascade_scores of member 0's cached predictions, members 1.. forwarding the rows
        of the cascade set they have not predicted for this problem yet. `cand` is the distinct
        offered rows in first-offered order (the reference's candidates), or a pre-filter's set
        P of them. Also returns whether members 1.. forwarded any (under _lock)."""
        ran = False
        members = self._members

        def others_on(idx: np.ndarray) -> np.ndarray:
            nonlocal ran
            need = cand[idx]
            if members == 1:   # a pre-filter before a single member (a model built by hand)
                return cached[1:1, need]
            todo = need[np.isnan(cached[1, need])]   # members 1.. always predict together
            if len(todo):
                ran = True
                # members 1.. in one batched forward (model.run_others); a failure stores nothing
                cached[1:members, todo] = self._forward(feats(todo), self.model.run_others)
            return cached[1:members, need]

        return cascade_scores(cached[0, cand], self._table.aten[cand], self.model.cascade, others_on), ran

    def _prefiltered(self, problem: Problem, cached: np.ndarray, cand: np.ndarray, feats: _Features,
                     t1: float) -> tuple[np.ndarray, bool, float, float]:
        """An ensemble with a pre-filter: scores per table row (NaN where not offered),
        model.prefilter_scores of the candidates `cand` (the distinct offered rows in
        first-offered order). The pre-filter forwards the candidates it has not predicted
        for this problem yet, member 0 the rows of P it has not, members 1.. the cascade set
        drawn from P (_cascade). Returns (scores, cache hit: nothing forwarded, end of the
        features, end of the forwards); the pre-filter's features are the features' time,
        everything after (member 0's and the others' gathered features too) forward time."""
        q = cached[self._pf]   # views, filled in place
        p0 = cached[0]
        t2 = t3 = t1
        todo = cand[np.isnan(q[cand])]
        ran = bool(len(todo))
        if ran:
            x = feats(todo)
            t2 = time.perf_counter()
            q[todo] = self._forward(x, self.model.prefilter)

        def inner(idx: np.ndarray) -> np.ndarray:
            nonlocal ran
            sub = cand[idx]   # P, in candidate order
            need = sub[np.isnan(p0[sub])]
            if len(need):
                ran = True
                p0[need] = self._forward(feats(need))
            s, ran_others = self._cascade(problem, cached, sub, feats)
            ran = ran or ran_others
            return s

        scored = np.full(cached.shape[1], np.nan, dtype=np.float32)
        scored[cand] = prefilter_scores(q[cand], self._table.aten[cand], self.model.keep, inner)
        if ran:
            t3 = time.perf_counter()
        return scored, not ran, t2, t3

    def _rank(self, problem: Problem, rows_of, opts: Options, t0: float, n_extra: int = 0) -> Ranking:
        with self._lock:
            self._scope = _ForwardScope()
            try:
                te = time.perf_counter()
                rows = rows_of()
                t1 = time.perf_counter()
                cached = self._predictions(problem)
                p0 = cached[0]   # the model's (member 0's) predictions: a view, filled in place
                offered = np.zeros(len(p0), dtype=bool)
                offered[rows] = True
                distinct = int(offered.sum())
                feats = _Features(self._table, problem)
                if self._pf is not None:   # the ATen extra rows are candidates, as in predict mode
                    scored, hit, t2, t3 = self._prefiltered(
                        problem, cached, rows if distinct == len(rows) else _first_offered(rows), feats, t1)
                else:
                    missing = rows[np.isnan(p0[rows])]
                    t2 = t3 = t1
                    if len(missing):
                        # a config offered twice is forwarded once, in first-offered order (the batch
                        # the reference forwards)
                        todo = _first_offered(missing) if distinct < len(rows) else missing
                        x = feats(todo)
                        t2 = time.perf_counter()
                        p0[todo] = self._forward(x)
                        t3 = time.perf_counter()
                    hit = not len(missing)
                    scored = p0
                    if self.model.others:  # an ensemble (the ATen extra rows are candidates, as in predict mode)
                        cand = rows if distinct == len(rows) else _first_offered(rows)
                        scored = np.full(len(p0), np.nan, dtype=np.float32)
                        scored[cand], ran = self._cascade(problem, cached, cand, feats)
                        if ran:  # the members' features and forwards count as forward time
                            hit, t3 = False, time.perf_counter()
                all_scores = scored[rows].astype(np.float64)
                extra = all_scores[len(rows) - n_extra:] if n_extra else None
                if n_extra:  # the extra rows leave the selection and the margin
                    rows = rows[:len(rows) - n_extra]
                    offered[:] = False
                    offered[rows] = True
                    distinct = int(offered.sum())
                scores = all_scores[:len(rows)]
                dscores = scored[offered].astype(np.float64) if distinct < len(rows) else scores
            finally:
                scope, self._scope = self._scope, None
                scope.close()
        kept = select_array(scores, opts)
        if dscores is scores and len(kept) >= 2:
            # every offered config distinct: the two lowest scores are the first two kept
            # (select_array's stable order), what margin_of_distinct's partition finds
            margin = math.expm1(min(float(scores[kept[1]]) - float(scores[kept[0]]), MAX_LOG_MARGIN))
        else:
            margin = margin_of_distinct(dscores)
        t4 = time.perf_counter()
        return Ranking(scores, kept, margin, hit, 0.0 if hit else t3 - t1,
                       {"extract": te - t0, "keys": t1 - te, "features": t2 - t1, "forward": t3 - t2,
                        "select": t4 - (t1 if hit else t3), "total": t4 - t0}, extra)

    def score(self, problem: Problem, configs: list[KernelConfig]) -> tuple[list[float], bool, float]:
        """(scores, cache_hit, seconds spent in features + forward)."""
        r = self.rank(problem, configs, Options())
        return r.scores.tolist(), r.cache_hit, r.seconds

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()


def model_family(model: LoadedModel) -> str:
    """The decision family of a loaded model: its feature spec's `family` (model.json
    "family"; absent: "gemm")."""
    return getattr(model.info.feature_spec, "family", None) or getattr(model.info, "family", None) or "gemm"


class FamilyRanker:
    """The ranker of a decision family other than gemm (scaled_mm): the same interface as
    Ranker (protocols.Ranker), with each config's features computed by
    torch_diode.features.features, the reference definition of every family's features
    (Inductor offers a scaled_mm lowering about a hundred configs, so the per-config Python
    path costs a few milliseconds per distinct problem). The model's scores follow the same
    rules as Ranker's: member 0's prediction for a single model, model.cascade_scores for
    an ensemble, model.prefilter_scores with a pre-filter; the scores of one problem and
    one offered list are cached (Inductor lowers the same FP8 GEMM of every decoder layer
    with the same list). Thread-safe."""

    def __init__(self, model: LoadedModel):
        self.model = model
        self.spec = model.info.feature_spec
        self.family = model_family(model)
        self._lock = threading.Lock()
        # (problem, distinct keys in first-offered order) -> float32 scores of those keys
        self._cache: OrderedDict[tuple, np.ndarray] = OrderedDict()

    def _features(self, problem: Problem, keys: list[tuple]) -> np.ndarray:
        from ..features import features
        x = np.empty((len(keys), len(self.spec.names)), dtype=np.float32)
        for i, k in enumerate(keys):
            x[i] = features(self.spec, problem, KernelConfig(*k))
        return x

    def _forward(self, x: np.ndarray, module) -> np.ndarray:
        with _real_tensors():
            y = np.asarray(module(torch.from_numpy(x)).numpy(), dtype=np.float32)
        if not np.isfinite(y).all():
            raise FloatingPointError("model produced a non-finite prediction")
        return y

    def _score_distinct(self, problem: Problem, keys: list[tuple]) -> np.ndarray:
        """Float32 scores of distinct config keys (the candidate list, in order)."""
        x = self._features(problem, keys)
        aten = np.fromiter((is_aten_template(k[0]) for k in keys), dtype=bool, count=len(keys))
        model = self.model

        def ensemble(idx: np.ndarray) -> np.ndarray:
            sub = x[idx]
            p0 = self._forward(sub, model.module)
            if not model.others:
                return p0
            return cascade_scores(p0, aten[idx], model.cascade,
                                  lambda j: self._forward(sub[j], model.run_others) if len(j)
                                  else np.empty((len(model.others), 0), dtype=np.float32))

        everything = np.arange(len(keys), dtype=np.intp)
        if model.prefilter is not None:
            q = self._forward(x, model.prefilter)
            return prefilter_scores(q, aten, model.keep, ensemble)
        return ensemble(everything)

    def rank_keys(self, problem: Problem, keys: list[tuple], opts: Options) -> Ranking:
        t0 = time.perf_counter()
        distinct = list(dict.fromkeys(keys))
        ck = (problem, tuple(distinct))
        with self._lock:
            cached = self._cache.get(ck)
            if cached is not None:
                self._cache.move_to_end(ck)
        hit = cached is not None
        t1 = time.perf_counter()
        if not hit:
            cached = self._score_distinct(problem, distinct) if distinct else np.empty(0, dtype=np.float32)
            with self._lock:
                self._cache[ck] = cached
                while len(self._cache) > CACHE_PROBLEMS:
                    self._cache.popitem(last=False)
        t2 = time.perf_counter()
        pos = {k: i for i, k in enumerate(distinct)}
        scores = cached[[pos[k] for k in keys]].astype(np.float64) if keys else np.empty(0)
        kept = select_array(scores, opts)
        margin = margin_of_distinct(cached.astype(np.float64))
        t3 = time.perf_counter()
        return Ranking(scores, kept, margin, hit, 0.0 if hit else t2 - t1,
                       {"extract": 0.0, "keys": t1 - t0, "features": 0.0 if hit else t2 - t1, "forward": 0.0,
                        "select": t3 - t2, "total": t3 - t0})

    def rank(self, problem: Problem, configs: list[KernelConfig], opts: Options) -> Ranking:
        return self.rank_keys(problem, list(map(_config_key, configs)), opts)

    def rank_ktcs(self, problem: Problem, ktcs: list, opts: Options, extra_keys=()) -> Ranking:
        from . import extract
        t0 = time.perf_counter()
        keys = extract.config_keys_from_ktcs(ktcs)
        t1 = time.perf_counter()
        extra = list(extra_keys)
        r = self.rank_keys(problem, keys + extra, opts)
        if not extra:
            r.breakdown["extract"] = t1 - t0
            return r
        scores = r.scores[:len(keys)]
        r2 = Ranking(scores, select_array(scores, opts),
                     margin_of_distinct(np.unique(scores)) if len(scores) else None, r.cache_hit, r.seconds,
                     {**r.breakdown, "extract": t1 - t0}, r.scores[len(keys):])
        return r2

    def member_gaps(self, problem: Problem, pick_key: tuple, aten_key: tuple) -> list[float]:
        x = self._features(problem, [pick_key, aten_key])
        preds = [self._forward(x, self.model.module)]
        if self.model.others:
            preds += list(self._forward(x, self.model.run_others))
        out = [float(np.float32(p[1]) - np.float32(p[0])) for p in preds]
        if not all(math.isfinite(g) for g in out):
            raise FloatingPointError("model produced a non-finite prediction")
        return out

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()


def ranker_for_model(model: LoadedModel):
    """The ranker of a loaded model: Ranker (the vectorised GEMM features) for a gemm model,
    FamilyRanker for a model of another decision family."""
    return Ranker(model) if model_family(model) == "gemm" else FamilyRanker(model)
