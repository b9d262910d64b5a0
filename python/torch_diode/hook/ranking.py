"""Scoring a problem's template configs with the model, and choosing which to keep.

One batched forward per problem: the features of every config (torch_diode.features,
the reference the model was trained on) are stacked, normalised by the model's
feature_spec, and run through the MLP at once. Predictions are cached per problem, so
a GEMM that appears many times in a graph (or again after a recompile) costs one
forward.
"""
from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import torch

from ..features import raw_features
from ..model import LoadedModel
from ..wire import KernelConfig, Problem

DEFAULT_TOP_K = 5
DEFAULT_THRESHOLD = 0.05   # keep configs predicted within 5% of the best time
DEFAULT_MAX_KEPT = 16      # never keep more than this many Triton configs, whatever the threshold
CACHE_PROBLEMS = 4096
SEARCH_SPACES = ("default", "exhaustive")
MAX_LOG_MARGIN = math.log(1e3)  # top_margin() reports at most a predicted 1000x


@dataclass(frozen=True)
class Options:
    top_k: int = DEFAULT_TOP_K
    threshold: float = DEFAULT_THRESHOLD
    max_kept: int = DEFAULT_MAX_KEPT
    search_space: str = "default"   # "default" | "exhaustive" (any case): Triton configs the model scores
    prune_shared_mem: bool = True   # exhaustive only: let Inductor drop configs over the smem limit
    fallback: str = "default"       # "default" (Inductor's full list) | "raise" (debugging)

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

    def key(self) -> str:
        return (f"k{self.top_k}-t{self.threshold!r}-m{self.max_kept}-s{self.search_space}"
                f"-p{int(self.prune_shared_mem)}-f{self.fallback}")


def select(scores: list[float], opts: Options) -> list[int]:
    """Indices to keep, best first: the top_k, plus any within `threshold` of the best.

    Scores are predicted log(time): "within 5%" means score <= best + log(1.05).
    """
    if not scores:
        return []
    order = sorted(range(len(scores)), key=lambda i: (scores[i], i))
    best = scores[order[0]]
    limit = best + math.log1p(opts.threshold)
    kept = [i for r, i in enumerate(order) if r < opts.top_k or scores[i] <= limit]
    return kept[:opts.max_kept]


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


class Ranker:
    """Model + prediction cache. Thread-safe: Inductor may lower graphs in several threads."""

    def __init__(self, model: LoadedModel):
        self.model = model
        self.spec = model.info.feature_spec
        n = len(self.spec.names)
        mean = self.spec.mean or [0.0] * n
        sd = [s if s > 0 else 1.0 for s in (self.spec.stddev or [1.0] * n)]
        self._mean = torch.tensor(mean, dtype=torch.float64)
        self._sd = torch.tensor(sd, dtype=torch.float64)
        self._cache: OrderedDict[Problem, dict[KernelConfig, float]] = OrderedDict()
        self._lock = threading.Lock()

    def features(self, problem: Problem, configs: list[KernelConfig]) -> torch.Tensor:
        """Normalised float32 features, [len(configs), n]: (raw - mean) / stddev as in features.py."""
        raw = torch.tensor([raw_features(self.spec, problem, c) for c in configs], dtype=torch.float32)
        if not self.spec.mean:
            return raw
        return ((raw.to(torch.float64) - self._mean) / self._sd).to(torch.float32)

    def _forward(self, x: torch.Tensor) -> list[float]:
        # Inductor lowers under FakeTensorMode and other dispatch modes; the model must
        # run on real tensors, outside autograd.
        from torch.utils._python_dispatch import _disable_current_modes
        with _disable_current_modes(), torch.no_grad():
            y = self.model.module(x)
        out = y.tolist()
        if not all(math.isfinite(v) for v in out):
            raise FloatingPointError("model produced a non-finite prediction")
        return out

    def score(self, problem: Problem, configs: list[KernelConfig]) -> tuple[list[float], bool, float]:
        """(scores, cache_hit, seconds spent in features + forward)."""
        with self._lock:
            cached = self._cache.get(problem)
            if cached is not None:
                self._cache.move_to_end(problem)
                if all(c in cached for c in configs):
                    return [cached[c] for c in configs], True, 0.0
        t0 = time.perf_counter()
        todo = list(dict.fromkeys(c for c in configs if cached is None or c not in cached))
        preds = self._forward(self.features(problem, todo))
        elapsed = time.perf_counter() - t0
        with self._lock:
            entry = self._cache.setdefault(problem, {})
            entry.update(zip(todo, preds))
            self._cache.move_to_end(problem)
            while len(self._cache) > CACHE_PROBLEMS:
                self._cache.popitem(last=False)
            return [entry[c] for c in configs], False, elapsed

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
