"""What Inductor's coordinate descent tunes, recorded as it runs.

Coordinate descent (``torch._inductor.config.coordinate_descent_tuning``, on under
``mode="max-autotune"``) benchmarks the launch config of every pointwise and reduction
Triton kernel on its first launch: starting from the heuristics' config it walks
XBLOCK/YBLOCK/R0_BLOCK/num_warps (x2, /2) while a neighbour is faster
(``CoordescTuner.autotune``). This module records, per tuned kernel, the kernel's
features, every config timed with its time, the start and the winner, and the seconds
the walk took. That is the data a launch-config decision family is trained on, and it
says what coordinate descent is worth: the GPU time it gains over the heuristics' config
against the compile time it costs.

Two override points of the running Inductor are wrapped, both in the process that
launches the kernels (coordinate descent runs there, not in compile workers):

- ``CachingAutotuner._coordinate_descent_tuning`` (``CURRENT_KERNEL``): remembers which
  kernel is being tuned (its heuristic type, size hints, source hash, signature,
  inductor_meta), so the record can carry the kernel's features; absent from a torch that
  lacks it (the record then has the tuner's own fields only);
- ``CoordescTuner.autotune(func, baseline_config, baseline_timing)``: wraps ``func`` so
  every benchmarked config is recorded, and records the result.

Records are appended to a JSON-lines file as each kernel finishes (flushed), so a crash
loses at most the kernel being tuned. ``summarize`` reduces a file to the totals.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from typing import Any, Callable, Iterable

from ..summary_stats import geomean

FORMAT = "torch_diode.coordesc/1"

# inductor_meta fields that describe the kernel (the rest name files, hashes and flags).
_META_FEATURES = ("kernel_name", "num_load", "num_store", "num_reduction", "reduction_hint",
                  "no_x_dim", "tiling_scores", "mix_order_reduction", "persistent_reduction",
                  "max_threads_per_block", "warp_size")


def config_dict(cfg: Any) -> dict:
    """A launch config (``triton.Config``) as plain data: its block sizes and num_warps,
    num_stages."""
    out = {k: v for k, v in sorted(getattr(cfg, "kwargs", {}).items())
           if isinstance(v, (int, float, str, bool))}
    for k in ("num_warps", "num_stages"):
        v = getattr(cfg, k, None)
        if v is not None:
            out[k] = v
    return out


def _plain(v: Any) -> Any:
    """JSON-able copy of a metadata value (an enum by its name, anything else by str)."""
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    name = getattr(v, "name", None)   # enums (ReductionHint, HeuristicType)
    return name if isinstance(name, str) else str(v)


def kernel_features(autotuner: Any) -> dict:
    """The features of the kernel a ``CachingAutotuner`` tunes (what does not depend on
    the launch config)."""
    f: dict = {}
    ht = getattr(autotuner, "heuristic_type", None)
    if ht is not None:
        f["heuristic_type"] = _plain(ht)
    size_hints = getattr(autotuner, "size_hints", None)
    if size_hints is not None:
        f["size_hints"] = _plain(size_hints)
    meta = getattr(autotuner, "inductor_meta", None) or {}
    for k in _META_FEATURES:
        if k in meta:
            f[k] = _plain(meta[k])
    sig = (getattr(autotuner, "triton_meta", None) or {}).get("signature")
    if isinstance(sig, dict):
        f["signature"] = {str(k): str(v) for k, v in sig.items()}
    src = getattr(getattr(autotuner, "fn", None), "src", None)
    if isinstance(src, str):
        # Name-free: Inductor's kernel names differ between compiles of the same code.
        name = str(meta.get("kernel_name", ""))
        body = src.replace(name, "KERNEL") if name else src
        f["source_sha256"] = hashlib.sha256(f"{size_hints}\n{body}".encode()).hexdigest()
    return f


class CurrentKernel:
    """Which kernel this thread's coordinate descent is tuning: `CoordescTuner.autotune` is
    given only a benchmark function and a config, so the kernel (its CachingAutotuner) is
    remembered around `CachingAutotuner._coordinate_descent_tuning`, which calls it. One
    instance per process (CURRENT_KERNEL): the recorder and the hook's launch-config
    predictor both read it. `install` wraps once and stays: the wrapper only sets and
    restores a thread-local around the original."""

    def __init__(self):
        self._tls = threading.local()
        self._lock = threading.Lock()
        self._orig: Callable | None = None

    def get(self) -> Any:
        return getattr(self._tls, "autotuner", None)

    @contextlib.contextmanager
    def tuning(self, autotuner: Any):
        prev = self.get()
        self._tls.autotuner = autotuner
        try:
            yield
        finally:
            self._tls.autotuner = prev

    def install(self) -> bool:
        """False when this torch has no CachingAutotuner._coordinate_descent_tuning (no
        Triton, or another torch): records and lookups then lack the kernel's features."""
        from .. import inductor_compat as ic
        with self._lock:
            if self._orig is not None:
                return True
            found = ic.coordesc_kernel_method()
            if found is None:
                return False
            cls, name = found
            orig = cls.__dict__[name]
            current = self

            def _coordinate_descent_tuning(autotuner, *args, **kwargs):
                with current.tuning(autotuner):
                    return orig(autotuner, *args, **kwargs)

            _coordinate_descent_tuning.__wrapped__ = orig
            setattr(cls, name, _coordinate_descent_tuning)
            self._orig = orig
            return True


CURRENT_KERNEL = CurrentKernel()


class CoordescRecorder:
    """Records coordinate descent while installed (``with CoordescRecorder(path):``).

    ``records`` holds one dict per tuned kernel: ``features``, ``baseline`` /
    ``best`` (config and ms), ``trials`` (every config the walk timed, with its ms, in
    order; a config that failed to run has ``ms`` null), ``tune_s`` (seconds in the
    walk, compiles included), ``tags`` (a copy of ``self.tags`` when it finished)."""

    def __init__(self, path: str | None = None, clock: Callable[[], float] = time.perf_counter):
        self.path = path
        self.records: list[dict] = []
        # Copied into each record as "tags" (e.g. the model and entry being compiled).
        self.tags: dict = {}
        self._clock = clock
        self._undo: list[Callable[[], None]] = []
        self._token: object | None = None
        self._lock = threading.Lock()

    # -- installing ---------------------------------------------------------------
    def install(self) -> "CoordescRecorder":
        if self._undo:
            raise RuntimeError("CoordescRecorder is already installed")
        # This install's token: its wrappers record while it is the recorder's current one
        # (a wrapper of an earlier install left below a later one passes through).
        self._token = object()
        from torch._inductor.runtime.coordinate_descent_tuner import CoordescTuner
        self._patch(CoordescTuner, "autotune", self._wrap_autotune)
        CURRENT_KERNEL.install()
        return self

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def __enter__(self) -> "CoordescRecorder":
        return self.install()

    def __exit__(self, *exc) -> None:
        self.uninstall()

    def _patch(self, cls: type, name: str, make: Callable[[Callable], Callable]) -> None:
        orig = cls.__dict__[name]
        wrapper = make(orig)
        setattr(cls, name, wrapper)

        def undo():
            # Restore only what this recorder replaced: a wrapper installed after it (the
            # hook's launch-config predictor, hook/launch_configs.py) stays, and this one,
            # still below it, passes through from now on.
            self._token = None
            if cls.__dict__.get(name) is wrapper:
                setattr(cls, name, orig)
        self._undo.append(undo)

    def _wrap_autotune(self, orig: Callable) -> Callable:
        recorder, token = self, self._token

        def autotune(tuner, func, baseline_config, baseline_timing=None):
            if recorder._token is not token:
                return orig(tuner, func, baseline_config, baseline_timing)
            trials: list[dict] = []

            def timed(cfg):
                try:
                    ms = func(cfg)
                except Exception:
                    trials.append({"config": config_dict(cfg), "ms": None})
                    raise
                trials.append({"config": config_dict(cfg), "ms": float(ms)})
                return ms

            t0 = recorder._clock()
            best = orig(tuner, timed, baseline_config, baseline_timing)
            tune_s = recorder._clock() - t0
            recorder._add(tuner, baseline_config, baseline_timing, best, trials, tune_s)
            return best
        return autotune

    # -- recording ----------------------------------------------------------------
    def _add(self, tuner, baseline_config, baseline_timing, best, trials, tune_s) -> None:
        times = {json.dumps(t["config"], sort_keys=True): t["ms"] for t in trials if t["ms"] is not None}

        def ms_of(cfg, given=None):
            if given is not None:
                return float(given)
            return times.get(json.dumps(config_dict(cfg), sort_keys=True))

        autotuner = CURRENT_KERNEL.get()
        features = kernel_features(autotuner) if autotuner is not None else {}
        features.setdefault("size_hints", _plain(getattr(tuner, "size_hints", None)))
        rec = {"format": FORMAT, "name": getattr(tuner, "name", None), "features": features,
               "is_mm": bool(getattr(tuner, "is_mm", False)),
               "baseline": {"config": config_dict(baseline_config), "ms": ms_of(baseline_config, baseline_timing)},
               "best": {"config": config_dict(best), "ms": ms_of(best)},
               "trials": trials, "tune_s": tune_s, "tags": dict(self.tags)}
        with self._lock:
            self.records.append(rec)
            if self.path:
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(rec, sort_keys=True) + "\n")
                    f.flush()
                    os.fsync(f.fileno())


def load(path: str) -> list[dict]:
    """The records of a recorder's file; a torn last line (a crash mid-write) is skipped,
    any other bad line is an error naming the file and line."""
    out = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines):       # the last line, not newline-terminated: torn
                continue
            raise ValueError(f"{path}:{i}: not a JSON record: {e}") from None
        if rec.get("format") != FORMAT:
            raise ValueError(f"{path}:{i}: format {rec.get('format')!r}, expected {FORMAT!r}")
        out.append(rec)
    return out


def summarize(records: Iterable[dict]) -> dict:
    """Totals over tuned kernels: how many, configs timed, seconds spent walking, and
    what the walk gained: the geomean over kernels of baseline/best time, and the sum of
    best times over the sum of baseline times (each kernel launched once)."""
    recs = [r for r in records if r["baseline"]["ms"] and r["best"]["ms"]]
    n = len(recs)
    ratios = [r["baseline"]["ms"] / r["best"]["ms"] for r in recs]
    base = sum(r["baseline"]["ms"] for r in recs)
    best = sum(r["best"]["ms"] for r in recs)
    by_type: dict[str, int] = {}
    for r in recs:
        t = str(r["features"].get("heuristic_type", "unknown"))
        by_type[t] = by_type.get(t, 0) + 1
    return {"kernels": n,
            "kernels_by_heuristic_type": by_type,
            "configs_timed": sum(len(r["trials"]) for r in recs),
            "tune_s": sum(r["tune_s"] for r in recs),
            "kernels_improved": sum(1 for r in recs if r["best"]["config"] != r["baseline"]["config"]),
            "speedup_geomean": geomean(ratios) if n else None,
            "baseline_ms": base, "best_ms": best,
            "best_over_baseline_time": best / base if base else None}
