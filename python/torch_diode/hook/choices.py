"""The InductorChoices subclass that lets the model filter GEMM template configs.

Inductor calls the finalize hook once per GEMM op it lowers, with one generator of
KernelTemplateChoice (KTC) per template. The hook:

1. passes the call straight to Inductor when the op is not one the hook decides or no
   model of the op's decision family is loaded (counted as passthrough / fallback
   "no_model"; "no_scaled_mm_model" for `_scaled_mm`). The decision families
   (wire.FAMILIES): gemm (mm/addmm/bmm/baddbmm, HookState.ranker) and scaled_mm (the FP8
   `_scaled_mm`, HookState.family_rankers["scaled_mm"]); each op is ranked by its own
   family's model (HookState.ranker_for);
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

Override points. Like torch/_inductor/choices.py, whose InductorChoices methods are the
places where a subclass changes Inductor's decisions, this module overrides exactly these
methods of the base class (choices_class() builds the subclass per torch version):
- the finalize hook this torch calls (`_finalize_template_configs` or its predecessor,
  through inductor_compat.choices_subclass): the selection above (`_diode_finalize`);
- `get_ktc` (torch >= 2.10): under an engaged zero-configuration lowering, templates the
  hook would drop are not enumerated (hook/zero_config.py);
- `triton_kernel_kwargs` (torch 2.11+): a fixed launch config for predict mode's planned
  GEMV reductions (hook/gemv.py);
- `uuid` (Inductor's FX-graph cache key): HookState.uuid(), the model, the options and the
  GEMV table in use.
Every other InductorChoices method is the base class's. The scoring itself is pluggable
through HookState.ranker: any object with the methods of protocols.Ranker (ranking.Ranker
is the one installed). The process state these read (the installed HookState, options,
counters, hardware) is hook/state.py's.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import replace
from typing import Any

from .. import __version__
from .. import inductor_compat as ic
from .. import wire
from ..wire import OPS
from ..model import load_model_dir
from . import compat, contribute, extract, gemv, ranking, zero_config
from .protocols import Ranker
from .ranking import DEFAULT_ATEN_MARGIN, Options, config_key
from .state import PROCESS, hardware_key
from .stats import CallRecord, Stats

log = logging.getLogger("torch_diode")


class HookState:
    """What every handler instance shares: the model (through its ranker, any object with
    the protocols.Ranker methods; None without a model), the options and the counters."""

    def __init__(self, ranker: Ranker | None, options: Options, stats: Stats | None = None,
                 no_model_reason: str = "no_model", family_rankers: dict[str, Ranker] | None = None):
        self.ranker = ranker
        # the models of the decision families other than gemm, family -> ranker (scaled_mm)
        self.family_rankers: dict[str, Ranker] = dict(family_rankers or {})
        self.options = options
        self.stats = stats or Stats()
        self.no_model_reason = no_model_reason
        self._warned: set[str] = set()
        self._gemv_table: Any = gemv  # not looked up yet (the module itself marks that)

    @property
    def gemv_table(self):
        """This hardware's GEMV launch-config table (hook/gemv.py), or None."""
        if self._gemv_table is gemv:
            self._gemv_table = gemv.load_table(hardware_key())
        return self._gemv_table

    @property
    def gemv_table_in_use(self):
        """The GEMV table predict mode plans its reductions with: gemv_table in predict mode
        with gemv_reduction on, else None (one definition for the planner, the cache key,
        install and the stats)."""
        return self.gemv_table if self.options.mode == "predict" and self.options.gemv_reduction else None

    @property
    def model_id(self) -> str:
        return self.ranker.model.info.model_id if self.ranker else "none"

    def ranker_for(self, op: str) -> Ranker | None:
        """The ranker of `op`'s decision family: the GEMM model's for mm/addmm/bmm/baddbmm,
        family_rankers[family] for another family's op; None without that family's model."""
        fam = op_family(op)
        if fam == "gemm":
            return self.ranker
        return self.family_rankers.get(fam) if fam else None

    @property
    def has_model(self) -> bool:
        """Any model is loaded (the GEMM model or another family's)."""
        return self.ranker is not None or bool(self.family_rankers)

    @property
    def family_model_paths(self) -> tuple[tuple[str, str], ...]:
        """(family, model directory) of the other families' models, sorted by family."""
        return tuple(sorted((f, r.model.info.path) for f, r in self.family_rankers.items()))

    @property
    def aten_margin(self) -> float:
        """Predict mode's ATen margin in force: the aten_margin option when set, else the
        model's own (model.json selection.aten_margin, chosen at release on its validation
        split: models differ in how far a confident Triton pick can miss), else
        DEFAULT_ATEN_MARGIN."""
        return self.aten_margin_of(self.ranker)

    def aten_margin_of(self, ranker: Ranker | None) -> float:
        """aten_margin for the decisions of `ranker`'s model (each family's model carries its own)."""
        if self.options.aten_margin is not None:
            return float(self.options.aten_margin)
        own = ranker.model.info.aten_margin if ranker else None
        return DEFAULT_ATEN_MARGIN if own is None else own

    @property
    def aten_rule(self) -> str:
        """How predict mode reads the margin for an ensemble: the aten_rule option when set,
        else the model's own (model.json selection.aten_rule: the rule its margin was chosen
        under), else "mean". "every_member" hands a Triton pick over only when every member
        alone predicts it faster than ATen by more than the margin."""
        return self.aten_rule_of(self.ranker)

    def aten_rule_of(self, ranker: Ranker | None) -> str:
        """aten_rule for the decisions of `ranker`'s model."""
        if self.options.aten_rule is not None:
            return self.options.aten_rule
        own = ranker.model.info.aten_rule if ranker else None
        return own or "mean"

    @property
    def model_path(self) -> str | None:
        return self.ranker.model.info.path if self.ranker else None

    def uuid(self) -> str:
        # Inductor's FX-graph cache key: a different model or different options must
        # never reuse a graph compiled with another selection.
        # The GEMV table changes what predict mode compiles for M = 1 / N = 1 mm too.
        table = self.gemv_table_in_use
        families = "".join(f":{f}={r.model.info.model_id[:32]}" for f, r in sorted(self.family_rankers.items()))
        return (f"torch_diode:{__version__}:{self.model_id[:32]}:{self.options.key()}"
                f":{table.digest if table else 'nogemv'}{families}")

    def warn_unused(self, reason: str, detail: str) -> None:
        """One WARNING per reason that a GEMM the compile lowers gets nothing from the hook."""
        if reason not in self._warned:
            self._warned.add(reason)
            log.warning("torch_diode: a GEMM of this compile gets nothing from the hook (%s): %s; "
                        "get_prediction_stats() counts every such GEMM", reason, detail)
        else:
            log.debug("torch_diode: unused (%s): %s", reason, detail)

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

        lowering = zero_config.current()  # a GEMM lowering the hook engaged under plain compile
        ranker = state.ranker_for(op_name)   # the model of the op's decision family
        if lowering is None:
            if op_name not in OPS:
                state.stats.record(CallRecord(op=op_name, outcome="passthrough:unsupported_op"))
                return base(self, *args, **kwargs)
            if ranker is None:
                fam = op_family(op_name)
                reason = state.no_model_reason if fam == "gemm" else f"no_{fam}_model"
                state.stats.record(CallRecord(op=op_name, outcome=f"fallback:{reason}"))
                state.warn_unused(reason, f"{op_name}: no {fam} model for this GPU" if fam != "gemm"
                                  else f"{op_name}: no model for this GPU")
                return base(self, *args, **kwargs)

        # From here the generators are consumed, so every path calls `base` with lists.
        lists = {uid: list(gen) for uid, gen in template_choices.items()}

        def call_base(choice_lists: dict) -> Any:
            if lowering is not None:
                # zero configuration: one choice for the whole lowering, never a benchmark
                if lowering.chosen:
                    choice_lists = _nothing(choice_lists)
                elif not _one_decided(choice_lists):
                    choice_lists = _plain(choice_lists)
                lowering.chosen = lowering.chosen or any(choice_lists.values())
            b = dict(bound)
            b.pop("self", None)
            b["template_choices"] = {uid: iter(v) for uid, v in choice_lists.items()}
            return base(self, **b)

        if lowering is not None and (lowering.chosen or op_name not in OPS or ranker is None):
            # a later finalize call of a lowering that already has its choice, or an op the
            # model does not know: what plain compile has (ATen alone, or nothing more)
            return call_base(lists)

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
                device = getattr(kernel_inputs, "device_type", None)
                if device not in (None, "cuda"):
                    state.warn_unused(f"device_{device}", f"{op_name} on {device}: the model chooses CUDA GPU "
                                      "kernels only")
                own = _own_aten(candidates)
                if state.options.mode == "predict" and own and rec.other_choices > 1:
                    # nothing the model scores but ATen and unscored alternatives: predict mode
                    # never benchmarks, so ATen (Inductor's choice without max-autotune) alone
                    rec.outcome = "passthrough:predict_aten_only"
                    return _aten_alone(state, rec, candidates, own, call_base)
                rec.outcome = "passthrough:no_triton_configs"
                state.stats.record(rec)
                if (lowering is None and device in (None, "cuda") and state.options.mode == "predict"
                        and not state.options.zero_config):
                    state.warn_unused("zero_config_off", f"{op_name}: Inductor offered no Triton configs (GEMM "
                                      f"autotuning is off and so is zero configuration: "
                                      f"{zero_config.ENV_ZERO_CONFIG}=0 or set_options(zero_config=False))")
                return call_base(lists)
            problem = extract.problem_from_inputs(kernel_inputs, op_name)
            rec.problem = {"op": problem.op, "batch": problem.batch, "m": problem.m, "n": problem.n,
                           "k": problem.k, "dtype": problem.dtype_a}
            if problem.scale != "none":   # scaled_mm: tensor-wise or row-wise scales
                rec.problem["scale"] = problem.scale
            from .staleness import disabled_ops  # issue 54: the op's template changed since the model's data
            stale = op_name in disabled_ops(ranker.model)
            if stale or not ranker.model.info.in_domain(problem.batch, problem.m, problem.n, problem.k):
                # sizes the model never saw (model.json dataset.domain): its prediction there is
                # an unbounded extrapolation, so the model does not choose
                rec.outcome = "passthrough:stale_template" if stale else "passthrough:outside_domain"
                own = _own_aten(candidates)
                if state.options.mode == "predict" and own:   # what plain torch.compile runs
                    return _aten_alone(state, rec, candidates, own, call_base)
                state.stats.record(rec)
                return call_base(lists)      # Inductor's own choice among its configs
            if state.options.mode == "predict":
                keys = extract.config_keys_from_ktcs(rankable)
                return self._diode_predict(state, ranker, rec, t0, candidates, rankable, keys, problem,
                                           call_base, lists)
            # the KTCs straight to the ranker: their kwargs values find the table rows (issue 19)
            own = _own_aten(candidates)
            shortcut = state.options.aten_shortcut and bool(own) and "aten" in ranker.spec.templates
            extra = [config_key(extract.aten_config(own[0], problem))] if shortcut else []
            ranking = ranker.rank_ktcs(problem, rankable, state.options, extra_keys=extra)
            rec.cache_hit, predict_s = ranking.cache_hit, ranking.seconds
            if shortcut and (_aten_predicted_fastest(state.aten_margin_of(ranker), float(ranking.extra_scores[0]),
                                                     ranking.scores)
                             or _members_doubt_best(state, ranker, problem, rankable, ranking.scores, extra[0])):
                # predict mode's decision: Inductor's warm-L2 benchmark of ATen against the top-k
                # lost to it on 10 of 11 such workloads (Options.aten_shortcut, ranking.py)
                rec.configs_in, rec.configs_kept = len(rankable), 0
                rec.margin, rec.predict_ms = ranking.margin, (time.perf_counter() - t0) * 1e3
                return _aten_alone(state, rec, candidates, own, call_base, predict_s)
            kept_idx = ranking.kept
            kept = {id(rankable[i]) for i in kept_idx}
            filtered = {uid: [k for k in v if not extract.is_rankable(k) or id(k) in kept]
                        for uid, v in candidates.items()}
            rec.configs_in, rec.configs_kept = len(rankable), len(kept_idx)
            kept_configs = {i: extract.config_from_ktc(rankable[i]) for i in kept_idx}
            rec.kept = [{**kept_configs[i].__dict__, "score": float(ranking.scores[i])} for i in kept_idx]
            rec.margin = ranking.margin
        except extract.Unsupported as e:
            rec.outcome = f"passthrough:{e}"
            state.stats.record(rec)
            return call_base(lists)
        except Exception as e:
            if state.options.fallback == "raise":
                raise
            reason = _reason(e)
            detail = f"{type(e).__name__}: {e}"
            rec.outcome, rec.error = f"fallback:{reason}", detail[:300]
            state.stats.record(rec)
            state.warn_once(reason, f"{op_name}: {detail}")
            return call_base(lists)
        rec.predict_ms = (time.perf_counter() - t0) * 1e3
        state.stats.record(rec, predict_s)
        contributor = contribute.active()
        if contributor is not None:
            _offer(contributor, problem, filtered, {id(rankable[i]): kept_configs[i] for i in kept_idx})
        log.debug("torch_diode: %s %s kept %d/%d Triton configs (+%d other) in %.2f ms%s", op_name,
                  rec.problem, rec.configs_kept, rec.configs_in, rec.other_choices, rec.predict_ms,
                  " (cached)" if rec.cache_hit else "")
        return call_base(filtered)

    def _diode_predict(self, state: HookState, ranker: Ranker, rec: CallRecord, t0: float, candidates: dict,
                       rankable: list, keys: list, problem, call_base, lists: dict):
        """Predict mode: the single best-scored choice, so that Inductor benchmarks nothing.

        The op's own ATen kernel is scored with the Triton configs when the model's feature
        spec has the `aten` template (models trained on collector data do: the collector
        times ATen as template `aten`); the lowest predicted time wins, ATen's lowered by the
        ATen margin (HookState.aten_margin: a Triton config must be predicted faster by more
        than that share).
        A model without an
        `aten` feature cannot compare ATen, so ATen and the top Triton config are handed
        over and Inductor benchmarks those two. Other choices (aten::bias_addmm,
        decompose_k, CUTLASS, ...) are not scored and not handed over. If the winner does
        not build, the next best is tried (PREDICT_TRIES in all); then the default path.
        """
        own = _own_aten(candidates)
        scores_aten = bool(own) and "aten" in ranker.spec.templates
        offered = list(keys)
        aten_cfg = None
        if scores_aten:
            aten_cfg = extract.aten_config(own[0], problem)
            offered.append(config_key(aten_cfg))
        ranking = ranker.rank_keys(problem, offered, replace(state.options, top_k=1, threshold=0.0))
        rec.cache_hit, predict_s = ranking.cache_hit, ranking.seconds
        rec.configs_in = len(rankable)
        rec.margin = ranking.margin
        decide = ranking.scores
        if scores_aten:
            decide = ranking.scores.copy()
            decide[len(rankable)] = _aten_decision_score(state.aten_margin_of(ranker), float(decide[len(rankable)]))
        # stable: on a tie the Triton configs (listed first) win, as in _aten_predicted_fastest
        order = decide.argsort(kind="stable")[:PREDICT_TRIES].tolist()
        if (scores_aten and order[0] != len(rankable)
                and _members_doubt(state, ranker, problem, offered[order[0]], offered[len(rankable)])):
            rec.member_disagreed = True
            order = [len(rankable)] + [i for i in order if i != len(rankable)][:PREDICT_TRIES - 1]
        picked = None
        for i in order:
            ktc = own[0] if i == len(rankable) else rankable[i]
            if extract.builds(ktc):
                picked = i
                break
            state.stats.count_predict_retry()
        if picked is None:
            rec.outcome = "fallback:predicted_choice_failed"
            state.stats.record(rec)
            state.warn_once("predicted_choice_failed",
                            f"{rec.op}: the {len(order)} best predicted choices did not build")
            return call_base(lists)
        cfg = aten_cfg if picked == len(rankable) else extract.config_from_ktc(rankable[picked])
        rec.kept = [{**cfg.__dict__, "score": float(ranking.scores[picked])}]
        if picked == len(rankable):
            rec.predicted, rec.configs_kept, keep = "aten", 0, [_cublas_choice(candidates, own[0])]
        elif own and not scores_aten:
            rec.predicted, rec.configs_kept, keep = "aten+triton", 1, [own[0], rankable[picked]]
        else:
            rec.predicted, rec.configs_kept, keep = "triton", 1, [rankable[picked]]
        rec.other_choices = sum(1 for k in keep if not extract.is_rankable(k))
        rec.predict_ms = (time.perf_counter() - t0) * 1e3
        state.stats.record(rec, predict_s)
        log.debug("torch_diode: %s %s predicted %s (%s) in %.2f ms", rec.op, rec.problem, rec.predicted,
                  rec.kept[0], rec.predict_ms)
        return call_base(_only(candidates, *keep))

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


def _members_doubt(state: HookState, ranker: Ranker, problem, pick_key: tuple, aten_key: tuple) -> bool:
    """Predict mode's every_member rule (and top-k's shortcut under it): with that rule and an
    ensemble, not every member alone predicts the Triton pick faster than ATen by more than
    the margin (Ranker.member_gaps; the replay of bench/predict_aten_margin.py decides by the
    same comparison), so ATen goes first. False under "mean" or for a single model."""
    if state.aten_rule_of(ranker) != "every_member" or not ranker.model.others:
        return False
    return min(ranker.member_gaps(problem, pick_key, aten_key)) <= math.log1p(state.aten_margin_of(ranker))


def _aten_decision_score(margin: float, aten_score: float) -> float:
    """ATen's score as predict mode ranks it among the Triton configs' (log-time scores):
    lowered by the ATen margin (HookState.aten_margin), so ATen wins unless a Triton config
    is predicted faster by more than that share (cuBLAS is rarely far from the best, a wrong
    Triton pick can be). The one definition of the rule; top-k's shortcut uses it too."""
    return aten_score - math.log1p(margin)


def _members_doubt_best(state: HookState, ranker: Ranker, problem, rankable: list, triton_scores,
                        aten_key: tuple) -> bool:
    """_members_doubt for top-k's best-scored Triton config (the first of the lowest score, as
    _diode_predict's stable order)."""
    if state.aten_rule_of(ranker) != "every_member" or not len(triton_scores):   # no config key to build
        return False
    best = rankable[int(triton_scores.argmin())]
    return _members_doubt(state, ranker, problem, config_key(extract.config_from_ktc(best)), aten_key)


def _aten_predicted_fastest(margin: float, aten_score: float, triton_scores) -> bool:
    """Predict mode's choice would be the op's ATen kernel (for top-k mode's shortcut): its
    decision score is below every Triton config's (a tie goes to Triton, as in
    _diode_predict's stable argsort where the Triton configs come first)."""
    best_triton = float(triton_scores.min()) if len(triton_scores) else math.inf
    return _aten_decision_score(margin, aten_score) < best_triton


def _aten_alone(state, rec, candidates: dict, own: list, call_base, predict_s: float = 0.0):
    """The hand-over of the op's ATen kernel alone (nothing benchmarked), recorded: predict
    mode's, and top-k mode's ATen shortcut (with the ranking's `predict_s`)."""
    rec.predicted = "aten"
    state.stats.record(rec, predict_s)
    return call_base(_only(candidates, _cublas_choice(candidates, own[0])))


def _own_aten(candidates: dict) -> list:
    """The op's own ATen choices (aten::mm, ...) among the candidate lists, in order."""
    return [k for v in candidates.values() for k in v if extract.is_own_aten(k)]


def _offer(contributor, problem, lists: dict, triton_configs: dict) -> None:
    """Registers what goes to Inductor with the feedback contributor (TORCH_DIODE_CONTRIBUTE)."""
    try:
        pairs = []
        for v in lists.values():
            for k in v:
                cfg = triton_configs.get(id(k))
                if cfg is None:
                    cfg = extract.other_config(k, problem)
                pairs.append((k, cfg))
        contributor.offer(problem, pairs)
    except Exception as e:  # feedback must never break compilation
        log.debug("torch_diode: contribute: cannot register choices: %s", e)


PREDICT_TRIES = 3  # predict mode: best choices tried in turn when one does not build
BIAS_ADDMM = "aten::bias_addmm"


def _cublas_choice(candidates: dict, own: Any) -> Any:
    """The cuBLAS choice predict mode hands over when ATen is predicted: for addmm with a
    row bias, Inductor's `aten::bias_addmm` where offered (a 1-D bias: the cuBLASLt bias
    epilogue, as eager addmm runs it), else the op's own ATen kernel. Inductor's
    `aten::addmm` gets the bias expanded to M x N and copies it into the output first:
    on an H100 (bench/hook_end_to_end.py, 2026-11-25) that was 23.9 us against eager's
    14.3 us for ViT fc1 (1576x3072x768 fp16) and 18.3 against 11.7 for its qkv. The model's
    `aten` is the collector's record, which calls torch.addmm with the 1-D bias
    (collect/problems.py, bias_shape), i.e. this same epilogue: bias_addmm / aten 0.991
    geomean, median 1.008 over 156 H100 problems, the same call timed twice
    (bench/dataset_bias_addmm.py (script removed; git history))."""
    return next((k for v in candidates.values() for k in v if compat.ktc_uid(k) == BIAS_ADDMM), own)


def _plain(candidates: dict) -> dict:
    """What plain torch.compile hands Inductor for this call: the op's ATen kernel alone (the
    cuBLAS choice predict mode uses, `_cublas_choice`), or nothing where the call has none
    (Triton, decompose_k, subgraph templates: plain compile never offers them)."""
    own = _own_aten(candidates)
    return _only(candidates, _cublas_choice(candidates, own[0])) if own else _nothing(candidates)


def _one_decided(candidates: dict) -> bool:
    """Exactly one choice, and one the hook decides between: a Triton config or cuBLAS (the
    op's ATen kernel, or aten::bias_addmm)."""
    items = [k for v in candidates.values() for k in v]
    return len(items) == 1 and (extract.is_rankable(items[0]) or extract.is_own_aten(items[0])
                                or compat.ktc_uid(items[0]) == BIAS_ADDMM)


def op_family(op: str) -> str:
    """The decision family of an Inductor op_name (wire.family_of); "" for an op of none."""
    try:
        return wire.family_of(op) or ""
    except (KeyError, ValueError):
        return ""


def _zero_config_template(uid: str) -> bool:
    """A template an engaged zero-configuration lowering may hand over: a Triton GEMM
    template the model ranks, or cuBLAS (the op's ATen kernel, aten::bias_addmm)."""
    return uid.startswith("triton::") or uid in extract.OWN_ATEN or uid == BIAS_ADDMM


def _nothing(candidates: dict) -> dict:
    return {uid: [] for uid in candidates}


def _only(candidates: dict, *keep) -> dict:
    """The candidate lists with only `keep` (by identity, each once), in Inductor's order."""
    ids = {id(k) for k in keep}
    out = {}
    for uid, v in candidates.items():
        out[uid] = []
        for k in v:
            if id(k) in ids:
                ids.discard(id(k))
                out[uid].append(k)
    return out


def _reason(e: Exception) -> str:
    if isinstance(e, FloatingPointError):
        return "non_finite_prediction"
    if isinstance(e, (KeyError, TypeError, ValueError, AttributeError)):
        return "feature_error"
    return "prediction_error"


def choices_class(base: type | None = None) -> type:
    """The handler class for this torch: built by inductor_compat.choices_subclass (the
    factory the collector uses too) from DiodeChoicesMixin and `base` (default
    InductorChoices), overriding whichever finalize hook this version calls."""
    base = base or compat.choices_base()
    built = PROCESS.handler_classes.get(base)   # one class per base for the process (state.py)
    if built is not None:
        return built

    def finalize(self, parent, args, kwargs):
        return self._diode_finalize(args, kwargs)

    def triton_kernel_kwargs(self, kernel_cls, features, groups, kernel_kwargs):
        # Inductor's hook for fixed launch configs: predict mode's planned GEMV reductions
        kw = base.triton_kernel_kwargs(self, kernel_cls, features, groups, kernel_kwargs)
        return gemv.fixed_config_kwargs(features, groups, kernel_cls, kw)

    def __init__(self, state: HookState | None = None):
        base.__init__(self)
        if state is None:  # built by Inductor from the class itself: use the active state
            state = current_state()
        self._diode_state = state

    def get_ktc(self, *args, **kwargs):
        # An engaged zero-configuration lowering hands over cuBLAS or one Triton config:
        # templates it would drop (decompose_k, contiguous subgraphs, CUTLASS, ...) are not
        # even enumerated, as plain compile never offers them.
        if zero_config.active():
            template = kwargs.get("template", args[1] if len(args) > 1 else None)
            if not _zero_config_template(compat.template_uid(template)):
                return iter(())
        return base.get_ktc(self, *args, **kwargs)

    namespace = {"__init__": __init__, "__module__": __name__}
    if hasattr(base, "get_ktc"):            # torch >= 2.10
        namespace["get_ktc"] = get_ktc
    if hasattr(base, "triton_kernel_kwargs"):   # in torch 2.11 and 2.13; without it: no GEMV reductions
        namespace["triton_kernel_kwargs"] = triton_kernel_kwargs
    cls = ic.choices_subclass(finalize, base, name="DiodeInductorChoices", mixins=(DiodeChoicesMixin,),
                              namespace=namespace)
    with PROCESS.lock:
        return PROCESS.handler_classes.setdefault(base, cls)


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
        return (_rebuild_factory, (self.state.model_path, options_dict(self.state.options), self.uuid(),
                                   self.state.family_model_paths))

    def __repr__(self) -> str:
        return f"torch_diode.ChoicesFactory({self.uuid()})"


def options_dict(o: Options) -> dict:
    """Every option by name: what get_options() reports and what a pickled factory carries."""
    return {"top_k": o.top_k, "threshold": o.threshold, "max_kept": o.max_kept,
            "search_space": o.search_space, "prune_shared_mem": o.prune_shared_mem, "fallback": o.fallback,
            "mode": o.mode, "aten_margin": o.aten_margin, "aten_rule": o.aten_rule, "aten_shortcut": o.aten_shortcut,
            "gemv_reduction": o.gemv_reduction, "zero_config": o.zero_config}


def _rebuild_factory(model_path: str | None, options: dict, uuid: str,
                     family_paths: tuple = ()) -> ChoicesFactory:
    """Unpickling in a compile subprocess: reload the same models from their paths."""
    return ChoicesFactory(state_for(model_path, Options(**options), tuple(family_paths)))


def current_state() -> HookState:
    """The installed hook's state, or (not installed) a state without a model with the
    process's options and counters."""
    with PROCESS.lock:
        active = PROCESS.active
        return active if active is not None else HookState(None, PROCESS.options, PROCESS.stats)


def state_for(model_path: str | None, options: Options, family_paths: tuple = ()) -> HookState:
    """A state for unpickled factories (compile subprocesses): same model paths (the GEMM
    model's, and (family, path) of the other families'), same options."""
    family_paths = tuple(family_paths)
    key = (model_path, options) if not family_paths else (model_path, options, family_paths)
    with PROCESS.lock:
        active = PROCESS.active
        if (active is not None and active.model_path == model_path and active.options == options
                and active.family_model_paths == family_paths):
            return active
        if key not in PROCESS.rebuilt:
            ranker, reason = None, "no_model"
            if model_path:
                try:
                    ranker = ranking.Ranker(load_model_dir(model_path))
                except Exception as e:
                    reason = "model_load_failed"
                    PROCESS.stats.count_load_failure(reason)
                    log.warning("torch_diode: cannot reload %s in this process: %s", model_path, e)
            family_rankers = {}
            for fam, path in family_paths:
                try:
                    family_rankers[fam] = ranking.ranker_for_model(load_model_dir(path))
                except Exception as e:
                    PROCESS.stats.count_load_failure("model_load_failed")
                    log.warning("torch_diode: cannot reload the %s model %s in this process: %s", fam, path, e)
            PROCESS.rebuilt[key] = HookState(ranker, options, PROCESS.stats, reason, family_rankers)
        return PROCESS.rebuilt[key]
