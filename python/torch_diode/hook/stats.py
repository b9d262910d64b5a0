"""Counters for what the hook did, and the per-call records of profile_predictions()."""
from __future__ import annotations

import threading
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class CallRecord:
    """One call of the finalize hook, as seen by profile_predictions()."""
    op: str
    outcome: str                 # "model" | "passthrough:<reason>" | "fallback:<reason>"
    problem: dict | None = None
    templates: list[str] = field(default_factory=list)
    configs_in: int = 0          # Triton configs offered
    configs_kept: int = 0        # Triton configs returned
    other_choices: int = 0       # ATen & other non-Triton choices (always returned)
    cache_hit: bool = False
    predict_ms: float = 0.0
    kept: list[dict] = field(default_factory=list)  # kept configs with their predicted score
    # Predicted relative margin of the best config over the next-best distinct config,
    # exp(score_2nd - score_best) - 1 (scores are predicted log time); None with < 2 configs.
    margin: float | None = None
    predicted: str = ""          # predict mode: "triton" | "aten" | "aten+triton" (what was handed over)
    # predict mode, aten_rule "every_member": the ensemble's best was a Triton config that not
    # every member predicted faster than ATen by the margin, so ATen went first
    member_disagreed: bool = False
    error: str = ""              # fallback: the exception, "Type: message" (first 300 characters)

    def as_dict(self) -> dict:
        return asdict(self)


class Stats:
    def __init__(self):
        self._lock = threading.Lock()
        self._profiles: list[list[CallRecord]] = []
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.calls = 0
            self.model_selections = 0
            self.cache_hits = 0
            self.fallbacks: Counter[str] = Counter()     # errors: Inductor's default path was taken
            self.fallback_errors: dict[str, str] = {}    # reason -> the latest error text (diagnosis)
            self.passthrough: Counter[str] = Counter()   # nothing to rank (ATen only, other op, ...)
            self.load_failures: Counter[str] = Counter()  # model resolution / verification problems
            self.configs_seen = 0
            self.configs_kept = 0
            self.predict_seconds = 0.0
            self.margin_sum = 0.0    # over model selections that had a runner-up (see `confidence`)
            self.margin_count = 0
            self.predicted: Counter[str] = Counter()  # predict mode: what was handed to Inductor
            self.predict_retries = 0  # predict mode: best choices that did not build
            # predict mode, M = 1 / N = 1 mm and M = 1 addmm (hook/gemv.py): "reduction" (planned with the
            # table's launch config), "cublas_or_model" (the table said the reduction does not
            # win; the GEMM path stays), "fixed_config" (reduction kernels that got the config;
            # fewer than "reduction" means Inductor's own untuned heuristics ran for the rest),
            # "planning_error" / "fixed_config_error" (Inductor's path was taken)
            self.gemv: Counter[str] = Counter()
            # predict mode with a launch-config table (hook/launch_configs.py), per kernel that
            # coordinate descent would tune: "predicted:source" / "predicted:nearest" (the table's
            # config won its timing against the start), "start_faster:..." (the start kept),
            # "same_as_start:..." (the table's config is the start: kept, untimed),
            # "tuned:no_entry" / "tuned:entry_not_valid_here" / "tuned:entry_failed_here" (walked)
            self.launch_configs: Counter[str] = Counter()

    def count_predict_retry(self) -> None:
        with self._lock:
            self.predict_retries += 1

    def count_gemv(self, outcome: str) -> None:
        with self._lock:
            self.gemv[outcome] += 1

    def count_launch_config(self, outcome: str) -> None:
        with self._lock:
            self.launch_configs[outcome] += 1

    def count_load_failure(self, reason: str) -> None:
        with self._lock:
            self.load_failures[reason] += 1

    def record(self, rec: CallRecord, predict_seconds: float = 0.0) -> None:
        with self._lock:
            self.calls += 1
            kind, _, reason = rec.outcome.partition(":")
            if kind == "model":
                self.model_selections += 1
                self.configs_seen += rec.configs_in
                self.configs_kept += rec.configs_kept
                self.cache_hits += int(rec.cache_hit)
                self.predict_seconds += predict_seconds
                if rec.margin is not None:
                    self.margin_sum += rec.margin
                    self.margin_count += 1
            elif kind == "fallback":
                self.fallbacks[reason] += 1
                if rec.error:
                    self.fallback_errors[reason] = rec.error
            else:
                self.passthrough[reason] += 1
            if rec.predicted:
                self.predicted[rec.predicted] += 1
            for sink in self._profiles:
                sink.append(rec)

    def add_profile(self, sink: list) -> None:
        with self._lock:
            self._profiles.append(sink)

    def remove_profile(self, sink: list) -> None:
        with self._lock:
            self._profiles = [s for s in self._profiles if s is not sink]

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "calls": self.calls,
                "model_selections": self.model_selections,
                "cache_hits": self.cache_hits,
                "fallbacks": dict(self.fallbacks),
                "fallback_errors": dict(self.fallback_errors),  # reason -> latest "Type: message"
                "passthrough": dict(self.passthrough),
                "load_failures": dict(self.load_failures),
                "configs_seen": self.configs_seen,
                "configs_kept": self.configs_kept,
                "predict_seconds": self.predict_seconds,
                # predict mode: GEMMs given the model's single choice, by kind, and choices
                # that did not build so that the next best was used
                "predicted": dict(self.predicted),
                "predict_retries": self.predict_retries,
                # predict mode, M = 1 / N = 1 mm and M = 1 addmm (hook/gemv.py): outcome -> count
                "gemv": dict(self.gemv),
                # predict mode, kernels coordinate descent would tune (hook/launch_configs.py): outcome -> count
                "launch_configs": dict(self.launch_configs),
                # Totals under the names torch-diode 0.1.1 users look for (docs/hook.md):
                # `total_predictions` is GEMMs whose configs the model chose (= model_selections),
                # `total_fallbacks` the sum of `fallbacks` over reasons, `total_calls` = calls,
                # `configs_filtered` the Triton configs the model removed.
                "total_calls": self.calls,
                "total_predictions": self.model_selections,
                "total_fallbacks": sum(self.fallbacks.values()),
                "configs_filtered": self.configs_seen - self.configs_kept,
                # Mean predicted margin of the top config over the runner-up: how decisively
                # the model separated its choice, not a measured accuracy. None until a
                # model selection with at least two distinct configs.
                "confidence": self.margin_sum / self.margin_count if self.margin_count else None,
            }
