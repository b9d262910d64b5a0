"""The test oracle of hook/ranking.py: the ranking path before issue 19, moved out of the
product module. torch_diode.features per config, a torch tensor built from Python lists, a
Python sort; the same cache semantics as ranking.Ranker. tests/python/test_hook_rank_fast.py,
test_hook_predict.py, test_model_members.py and test_model_prefilter.py check that the fast
ranking.Ranker returns exactly its features, scores, kept indices and margin."""
from __future__ import annotations

import time
from collections import OrderedDict

import numpy as np
import torch

from torch_diode.features import raw_features
from torch_diode.hook.ranking import Options, _real_tensors, _standardisation, select, top_margin
from torch_diode.model import LoadedModel, cascade_scores, is_aten_template, prefilter_scores
from torch_diode.wire import KernelConfig, Problem


class ReferenceRanker:
    """The ranking path before issue 19, the reference of the equality tests:
    torch_diode.features per config, a torch tensor built from Python lists, Python sort.
    Same cache semantics as ranking.Ranker."""

    def __init__(self, model: LoadedModel):
        self.model = model
        self.spec = model.info.feature_spec
        mean, sd = _standardisation(self.spec)
        self._mean = torch.tensor(mean, dtype=torch.float64)
        self._sd = torch.tensor(sd, dtype=torch.float64)
        # problem -> per member (model.module, then model.others), then the pre-filter's if
        # the model has one (model.prefilter): config -> prediction
        self._members = 1 + len(model.others)
        self._pf = self._members if model.prefilter is not None else None
        self._cache: OrderedDict[Problem, list[dict[KernelConfig, float]]] = OrderedDict()
        self.last_breakdown: dict = {}

    def features(self, problem: Problem, configs: list[KernelConfig]) -> torch.Tensor:
        raw = torch.tensor([raw_features(self.spec, problem, c) for c in configs], dtype=torch.float32)
        if not self.spec.mean:
            return raw
        return ((raw.to(torch.float64) - self._mean) / self._sd).to(torch.float32)

    def score(self, problem: Problem, configs: list[KernelConfig]) -> tuple[list[float], bool, float]:
        preds = self._cache.setdefault(problem, [{} for _ in range(self._members + (self._pf is not None))])
        timing = {"features": 0.0, "forward": 0.0}
        if self._pf is not None:
            by_config, ran = self._prefiltered(problem, configs, timing)
            if not ran:
                return [by_config[c] for c in configs], True, 0.0
            self.last_breakdown = timing
            return [by_config[c] for c in configs], False, timing["features"] + timing["forward"]
        ran = self._predict(problem, configs, 0, timing)
        if self.model.others:
            by_config, ran_others = self._cascade(problem, configs, timing)
            ran = ran or ran_others
        else:
            by_config = preds[0]
        if not ran:
            return [by_config[c] for c in configs], True, 0.0
        self.last_breakdown = timing
        return [by_config[c] for c in configs], False, timing["features"] + timing["forward"]

    def _predict(self, problem: Problem, configs: list[KernelConfig], member: int, timing: dict) -> bool:
        """Predictions of the configs not predicted for `problem` yet, one batch in
        first-offered order, into the cache; whether it ran. member 0: model.module; member 1:
        an ensemble's members 1..N-1 together (model.run_others, as Ranker runs them);
        member N (self._pf): the pre-filter (model.prefilter)."""
        known = self._cache[problem][member]
        todo = list(dict.fromkeys(c for c in configs if c not in known))
        if not todo:
            return False
        t0 = time.perf_counter()
        x = self.features(problem, todo)
        t1 = time.perf_counter()
        module = (self.model.module if member == 0 else
                  self.model.prefilter if member == self._pf else self.model.run_others)
        with _real_tensors():   # the fast path's context (one thread): the same bits
            out = module(x)
        if not bool(torch.isfinite(out).all()):
            raise FloatingPointError("model produced a non-finite prediction")
        if member == 0 or member == self._pf:
            known.update(zip(todo, out.tolist()))
        else:  # members 1.. predict together: each one's cache gets its row
            for j, row in enumerate(out.tolist(), start=1):
                self._cache[problem][j].update(zip(todo, row))
        timing["features"] += t1 - t0
        timing["forward"] += time.perf_counter() - t1
        return True

    def _cascade(self, problem: Problem, configs: list[KernelConfig], timing: dict) -> tuple[dict, bool]:
        """An ensemble's score per distinct config (model.cascade_scores over the distinct
        configs in first-offered order) and whether members 1.. ran."""
        preds = self._cache[problem]
        cand = list(dict.fromkeys(configs))
        p0 = np.asarray([preds[0][c] for c in cand], dtype=np.float32)
        aten = np.asarray([is_aten_template(c.template) for c in cand], dtype=bool)
        ran = False

        def others_on(idx: np.ndarray) -> list[np.ndarray]:
            nonlocal ran
            if self._members == 1:   # a pre-filter before a single member (a model built by hand)
                return []
            sel = [cand[i] for i in idx.tolist()]
            ran = self._predict(problem, sel, 1, timing) or ran
            return [np.asarray([preds[j][c] for c in sel], dtype=np.float32) for j in range(1, self._members)]

        scores = cascade_scores(p0, aten, self.model.cascade, others_on)
        return dict(zip(cand, scores.tolist())), ran

    def _prefiltered(self, problem: Problem, configs: list[KernelConfig], timing: dict) -> tuple[dict, bool]:
        """An ensemble with a pre-filter: its score per distinct config (model.prefilter_scores
        over the distinct configs in first-offered order; the set P scored by _cascade, member 0
        predicting P's configs first) and whether anything ran."""
        cand = list(dict.fromkeys(configs))
        ran = self._predict(problem, cand, self._pf, timing)
        pf = self._cache[problem][self._pf]
        q = np.asarray([pf[c] for c in cand], dtype=np.float32)
        aten = np.asarray([is_aten_template(c.template) for c in cand], dtype=bool)

        def inner(idx: np.ndarray) -> np.ndarray:
            nonlocal ran
            sub = [cand[i] for i in idx.tolist()]
            ran = self._predict(problem, sub, 0, timing) or ran
            by_config, ran_others = self._cascade(problem, sub, timing)
            ran = ran or ran_others
            return np.asarray([by_config[c] for c in sub], dtype=np.float32)

        scores = prefilter_scores(q, aten, self.model.keep, inner)
        return dict(zip(cand, scores.tolist())), ran

    def rank(self, problem: Problem, configs: list[KernelConfig], opts: Options) -> tuple[list[float], list[int], float | None]:
        t0 = time.perf_counter()
        self.last_breakdown = {"features": 0.0, "forward": 0.0}
        scores, _, _ = self.score(problem, configs)
        t1 = time.perf_counter()
        kept = select(scores, opts)
        margin = top_margin(scores, configs)
        t2 = time.perf_counter()
        self.last_breakdown.update(select=t2 - t1, total=t2 - t0)
        return scores, kept, margin
