"""The InductorChoices subclass that lets the model filter GEMM template configs.

Inductor calls the finalize hook once per GEMM op it lowers, with one generator of
KernelTemplateChoice (KTC) per template. The hook:

1. passes the call straight to Inductor when the op is not mm/addmm/bmm/baddbmm or no
   model is loaded (counted as passthrough / fallback "no_model");
2. materialises the generators (KTCs are cheap: the expensive ChoiceCaller is built
   lazily, and only for what the hook returns);
3. with search_space="exhaustive", re-enumerates the Triton templates through
   `get_ktc` with Inductor's EXHAUSTIVE GEMM space patched in for that loop only;
4. scores every Triton config with one batched forward (ranking.Ranker), keeps the
   top-k plus any within the threshold, keeps every non-Triton choice (ATen, ...);
5. hands the filtered lists to Inductor's own finalize method, so anything the base
   class does there (logging, future post-processing) still happens.

Any exception in 2-4 gives Inductor exactly the lists it would have used (the DEFAULT
space, unfiltered), logs the reason once, and counts it in get_prediction_stats().
"""
from __future__ import annotations

import logging
import time
from typing import Any

from .. import __version__
from ..wire import OPS
from . import compat, extract
from .ranking import Options, Ranker, select, top_margin
from .stats import CallRecord, Stats

log = logging.getLogger("torch_diode")


class HookState:
    """What every handler instance shares: the model, the options and the counters."""

    def __init__(self, ranker: Ranker | None, options: Options, stats: Stats | None = None,
                 no_model_reason: str = "no_model"):
        self.ranker = ranker
        self.options = options
        self.stats = stats or Stats()
        self.no_model_reason = no_model_reason
        self._warned: set[str] = set()

    @property
    def model_id(self) -> str:
        return self.ranker.model.info.model_id if self.ranker else "none"

    @property
    def model_path(self) -> str | None:
        return self.ranker.model.info.path if self.ranker else None

    def uuid(self) -> str:
        # Inductor's FX-graph cache key: a different model or different options must
        # never reuse a graph compiled with another selection.
        return f"torch_diode:{__version__}:{self.model_id[:32]}:{self.options.key()}"

    def warn_once(self, reason: str, detail: str) -> None:
        if reason not in self._warned:
            self._warned.add(reason)
            log.warning("torch_diode: falling back to Inductor's default configs (%s): %s", reason, detail)
        else:
            log.debug("torch_diode: fallback (%s): %s", reason, detail)


class DiodeChoicesMixin:
    """Mixed into InductorChoices by `choices_class()`; needs `_diode_state` set."""

    _diode_state: HookState
    _diode_base_finalize: Any  # the base class's finalize function (unbound)

    def uuid(self) -> str:
        return self._diode_state.uuid()

    def _diode_finalize(self, args: tuple, kwargs: dict):
        base = self._diode_base_finalize
        state = self._diode_state
        try:
            bound = compat.bind_finalize_args(base, args, kwargs)
            op_name = bound["op_name"]
            template_choices = bound["template_choices"]
            kernel_inputs = bound["kernel_inputs"]
        except Exception as e:  # a signature this build does not know: never break compilation
            state.stats.record(CallRecord(op="?", outcome="fallback:signature"))
            state.warn_once("signature", repr(e))
            return base(self, *args, **kwargs)

        if op_name not in OPS:
            state.stats.record(CallRecord(op=op_name, outcome="passthrough:unsupported_op"))
            return base(self, *args, **kwargs)
        if state.ranker is None:
            state.stats.record(CallRecord(op=op_name, outcome=f"fallback:{state.no_model_reason}"))
            return base(self, *args, **kwargs)

        # From here the generators are consumed, so every path calls `base` with lists.
        lists = {uid: list(gen) for uid, gen in template_choices.items()}

        def call_base(choice_lists: dict) -> Any:
            b = dict(bound)
            b.pop("self", None)
            b["template_choices"] = {uid: iter(v) for uid, v in choice_lists.items()}
            return base(self, **b)

        rec = CallRecord(op=op_name, outcome="model", templates=list(lists))
        t0 = time.perf_counter()
        predict_s = 0.0
        try:
            candidates = dict(lists)
            if state.options.search_space == "exhaustive":
                candidates.update(self._diode_exhaustive(bound, lists))
            rankable = [k for v in candidates.values() for k in v if extract.is_rankable(k)]
            rec.other_choices = sum(1 for v in candidates.values() for k in v if not extract.is_rankable(k))
            if not rankable:
                rec.outcome = "passthrough:no_triton_configs"
                state.stats.record(rec)
                return call_base(lists)
            problem = extract.problem_from_inputs(kernel_inputs, op_name)
            rec.problem = {"op": problem.op, "batch": problem.batch, "m": problem.m, "n": problem.n,
                           "k": problem.k, "dtype": problem.dtype_a}
            configs = [extract.config_from_ktc(k) for k in rankable]
            scores, rec.cache_hit, predict_s = state.ranker.score(problem, configs)
            kept_idx = select(scores, state.options)
            kept = {id(rankable[i]) for i in kept_idx}
            filtered = {uid: [k for k in v if not extract.is_rankable(k) or id(k) in kept]
                        for uid, v in candidates.items()}
            rec.configs_in, rec.configs_kept = len(rankable), len(kept_idx)
            rec.kept = [{**configs[i].__dict__, "score": scores[i]} for i in kept_idx]
            rec.margin = top_margin(scores, configs)
        except extract.Unsupported as e:
            rec.outcome = f"passthrough:{e}"
            state.stats.record(rec)
            return call_base(lists)
        except Exception as e:
            if state.options.fallback == "raise":
                raise
            reason = _reason(e)
            rec.outcome = f"fallback:{reason}"
            state.stats.record(rec)
            state.warn_once(reason, f"{op_name}: {type(e).__name__}: {e}")
            return call_base(lists)
        rec.predict_ms = (time.perf_counter() - t0) * 1e3
        state.stats.record(rec, predict_s)
        log.debug("torch_diode: %s %s kept %d/%d Triton configs (+%d other) in %.2f ms%s", op_name,
                  rec.problem, rec.configs_kept, rec.configs_in, rec.other_choices, rec.predict_ms,
                  " (cached)" if rec.cache_hit else "")
        return call_base(filtered)

    def _diode_exhaustive(self, bound: dict, lists: dict) -> dict:
        """Triton templates re-enumerated in Inductor's EXHAUSTIVE space (this call only)."""
        get_ktc = getattr(self, "get_ktc", None)
        if get_ktc is None:
            raise RuntimeError("search_space='exhaustive' needs InductorChoices.get_ktc (torch >= 2.10)")
        overrides = bound.get("kwarg_overrides") or {}
        out = {}
        for template in bound["templates"]:
            uid = getattr(template, "uid", None)
            if uid not in lists or not str(uid).startswith("triton::"):
                continue
            with compat.gemm_search_space("EXHAUSTIVE", self._diode_state.options.prune_shared_mem):
                # generators are lazy: consume inside the patch
                out[uid] = list(get_ktc(bound["kernel_inputs"], template, bound["op_name"],
                                        overrides.get(uid, {})))
        return out


def _reason(e: Exception) -> str:
    if isinstance(e, FloatingPointError):
        return "non_finite_prediction"
    if isinstance(e, (KeyError, TypeError, ValueError, AttributeError)):
        return "feature_error"
    return "prediction_error"


_CLASS_CACHE: dict[type, type] = {}


def choices_class(base: type | None = None) -> type:
    """The handler class for this torch: a subclass of `base` (default InductorChoices)
    that overrides whichever finalize hook this version calls."""
    base = base or compat.choices_base()
    if base in _CLASS_CACHE:
        return _CLASS_CACHE[base]
    name = compat.finalize_hook_name()
    base_fn = getattr(base, name, None)
    if base_fn is None:
        raise compat.UnsupportedTorch(f"{base.__name__} has no {name}")

    def finalize(self, *args, **kwargs):
        return self._diode_finalize(args, kwargs)

    finalize.__name__ = name
    finalize.__doc__ = f"torch_diode override of {base.__name__}.{name}"

    def __init__(self, state: HookState | None = None):
        base.__init__(self)
        if state is None:  # built by Inductor from the class itself: use the active state
            from . import api
            state = api.current_state()
        self._diode_state = state

    cls = type("DiodeInductorChoices", (DiodeChoicesMixin, base), {
        name: finalize, "__init__": __init__, "_diode_base_finalize": staticmethod(base_fn),
        "__module__": __name__,
    })
    _CLASS_CACHE[base] = cls
    return cls


class ChoicesFactory:
    """What goes into `config.inductor_choices_class`: builds a handler per thread.

    It has `uuid()` itself and pickles to (model path, options, uuid), so whichever way a
    torch version folds this config into its cache key (calling `factory().uuid()` or
    pickling the config), the key changes with the model and the options.
    """

    def __init__(self, state: HookState):
        self.state = state

    def __call__(self):
        return choices_class()(self.state)

    def uuid(self) -> str:
        return self.state.uuid()

    def __reduce__(self):
        return (_rebuild_factory, (self.state.model_path, _options_dict(self.state.options), self.uuid()))

    def __repr__(self) -> str:
        return f"torch_diode.ChoicesFactory({self.uuid()})"


def _options_dict(o: Options) -> dict:
    return {"top_k": o.top_k, "threshold": o.threshold, "max_kept": o.max_kept,
            "search_space": o.search_space, "prune_shared_mem": o.prune_shared_mem, "fallback": o.fallback}


def _rebuild_factory(model_path: str | None, options: dict, uuid: str) -> ChoicesFactory:
    """Unpickling in a compile subprocess: reload the same model from its path."""
    from . import api
    return ChoicesFactory(api.state_for(model_path, Options(**options)))
