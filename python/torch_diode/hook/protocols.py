"""The interface the handler (hook/choices.py) needs from a ranker.

`ranking.Ranker` is the implementation the hook installs for the GEMM model (a model, its
per-config feature table and a per-problem prediction cache); `ranking.FamilyRanker` the one
for another decision family's model (scaled_mm: features by torch_diode.features per config). The handler and HookState are typed against
`Ranker` below, so that another scorer (a test double, a different model runtime) can be
put into a HookState without subclassing ranking.Ranker: it needs these attributes and
methods and nothing else. Every method may be called from several threads at once (Inductor
lowers graphs in parallel) and may raise: the handler then gives Inductor its own lists and
counts the reason (a FloatingPointError is counted as "non_finite_prediction",
extract.Unsupported as a passthrough).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

if TYPE_CHECKING:  # annotations only
    from ..features import FeatureSpec
    from ..model import LoadedModel
    from ..wire import Problem
    from .ranking import Options, Ranking


class Ranker(Protocol):
    """What the handler calls on HookState.ranker (implemented by ranking.Ranker)."""

    model: LoadedModel
    """The loaded model: the handler reads `model.info` (model_id, path, hardware_key,
    aten_margin, aten_rule, in_domain(), the model's own selection rules) and `model.others`
    (an ensemble's members after the first; empty for a single model)."""

    spec: FeatureSpec
    """The model's feature spec (model.info.feature_spec): `spec.templates` says whether the
    model scores the op's ATen kernel (template "aten") against the Triton configs."""

    def rank_keys(self, problem: Problem, keys: list[tuple], opts: Options) -> Ranking:
        """Scores the configs given as config_key tuples for `problem` (predictions cached per
        problem). Returns a ranking.Ranking: `scores` (one float64 per key, in order; lower is
        predicted faster, a log time), `kept` (indices selected by opts: top_k, threshold,
        max_kept; best first), `margin`, `cache_hit`, `seconds` (features + forward) and
        `breakdown` (seconds per stage). Predict mode calls it with top_k=1."""
        ...

    def rank_ktcs(self, problem: Problem, ktcs: list, opts: Options,
                  extra_keys: Sequence[tuple] = ()) -> Ranking:
        """rank_keys() of Inductor's Triton KernelTemplateChoices (their config keys read from
        the KTCs). `extra_keys` (top-k mode: the op's ATen config) are scored in the same
        forward and returned apart in `Ranking.extra_scores`, outside scores, kept and margin.
        Raises extract.Unsupported for a KTC it cannot read."""
        ...

    def member_gaps(self, problem: Problem, pick_key: tuple, aten_key: tuple) -> list[float]:
        """For each member of the model (member 0 first; one value for a single model): its
        own predicted log time of `aten_key` minus that of `pick_key`. Predict mode's
        every_member rule hands the Triton pick over only when every gap exceeds
        log1p(aten_margin)."""
        ...
