"""Predict mode's launch configs for pointwise and reduction kernels: coordinate descent's
answer read from a measured table instead of benchmarked.

Under `mode="max-autotune"` Inductor runs coordinate descent on the first launch of every
pointwise and reduction Triton kernel (`CoordescTuner.autotune`: XBLOCK/YBLOCK/R0_BLOCK
and num_warps walked from the heuristics' config while a neighbour is faster). Most of
max-autotune's remaining compile time is that walk once the GEMMs are predicted.

With a table (`TORCH_DIODE_LAUNCH_CONFIG_TABLE`, format below; none is shipped yet) and the
hook installed in predict mode, `install_tuner` wraps `CoordescTuner.autotune` once per
process. For a kernel the table knows, the walk is replaced by two timings: the table's
config (the heuristics' config with the table's fields set, each within the limits the walk
itself keeps: the tuner's tunable and unfrozen fields, `value_too_large` / `value_too_small`
for this kernel's size hints and the GPU's warps, `is_valid_config`) and the heuristics'
start; the faster is Inductor's winner (a table config equal to the start is the start,
untimed). A table config that fails to compile or run makes that kernel walk as before, so
a table can cost a compile two timings but never break it or make a kernel slower than its
start. Inductor then treats the winner as coordinate descent's: compiled, marked
`found_by_coordesc` and written to its autotune cache, so a later process on this machine
loads it from there as it would a walked winner. Any other kernel, and every kernel while
the hook is not installed in predict mode, walks as before.

A kernel is known by (collect/coordesc.py's `kernel_features`, read the same way when the
table's records were collected and here):
1. its `source_sha256` (size hints and source, its name masked): the same kernel measured;
2. else its class (heuristic type, loads, stores, reductions, reduction hint, signature)
   and the nearest measured size hints of that class, at most MAX_LOG2_DISTANCE octaves away.

Tables are built from coordinate-descent records by `python -m torch_diode.tools.launch_config_table`,
which also replays a table against held-out records.
"""
from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..collect.coordesc import CURRENT_KERNEL, kernel_features
from . import tables
from .state import PROCESS, active_state

log = logging.getLogger("torch_diode")

TABLE_FORMAT = "torch_diode.launch_config_table/1"
ENV_TABLE = "TORCH_DIODE_LAUNCH_CONFIG_TABLE"
CONFIG_KEYS = ("XBLOCK", "YBLOCK", "ZBLOCK", "R0_BLOCK", "R1_BLOCK", "num_warps", "num_stages")
CLASS_KEYS = ("heuristic_type", "num_load", "num_store", "num_reduction", "reduction_hint", "signature")
ENTRY_KEYS = frozenset({"source_sha256", "class", "size_hints", "config", "ms", "baseline_ms"})
MAX_ENTRIES = 65536
MAX_TABLE_BYTES = 32 << 20
MAX_BLOCK = 1 << 16       # blocks; the walk's own limits (TRITON_MAX_BLOCK, size hints) apply at use
MAX_WARPS = 32
MAX_STAGES = 8
MAX_SIZE_HINT = 1 << 40
MAX_LOG2_DISTANCE = 1.0


class LaunchConfigTableError(tables.TableError):
    """A table that is not a valid torch_diode.launch_config_table/1 document."""


def kernel_class(features: dict) -> str:
    """The class key of a kernel's features: what, besides its sizes, decides its code."""
    return json.dumps({k: features.get(k) for k in CLASS_KEYS}, sort_keys=True)


def log2_distance(a: dict, b: dict) -> float:
    """Euclidean distance in log2 of two size hints with the same axes; inf otherwise."""
    if set(a) != set(b):
        return math.inf
    return math.sqrt(sum((math.log2(a[k]) - math.log2(b[k])) ** 2 for k in a))


@dataclass(frozen=True)
class Entry:
    source_sha256: str
    klass: str
    size_hints: tuple          # ((axis, hint), ...) sorted
    config: tuple              # ((key, value), ...) in CONFIG_KEYS order
    ms: float
    baseline_ms: float

    def config_dict(self) -> dict[str, int]:
        return dict(self.config)


class LaunchConfigTable:
    def __init__(self, hardware: str, entries: list[Entry], digest: str, source: str):
        self.hardware, self.entries, self.digest, self.source = hardware, entries, digest, source
        self._by_source = {e.source_sha256: e for e in entries}
        self._by_class: dict[str, list[Entry]] = {}
        for e in entries:
            self._by_class.setdefault(e.klass, []).append(e)

    def lookup(self, features: dict) -> tuple[Entry, str] | None:
        """The entry for a kernel and how it was found ("source" or "nearest"), or None."""
        e = self._by_source.get(features.get("source_sha256", ""))
        if e is not None:
            return e, "source"
        hints = features.get("size_hints")
        if not isinstance(hints, dict) or not hints or \
                not all(isinstance(v, int) and v > 0 for v in hints.values()):
            return None
        best = None
        for e in self._by_class.get(kernel_class(features), ()):
            d = log2_distance(hints, dict(e.size_hints))
            if d <= MAX_LOG2_DISTANCE and (best is None or (d, e.size_hints) < (best[1], best[0].size_hints)):
                best = (e, d)
        return (best[0], "nearest") if best else None


def parse_config(cfg: Any, where: str) -> tuple:
    """A launch config: blocks powers of two up to MAX_BLOCK, num_warps a power of two up to
    MAX_WARPS, num_stages 1-MAX_STAGES; other keys are refused."""
    if not isinstance(cfg, dict) or not cfg or set(cfg) - set(CONFIG_KEYS):
        raise LaunchConfigTableError(f"{where}: config must be an object of some of {CONFIG_KEYS}, got {cfg!r}")
    out = []
    for k in CONFIG_KEYS:
        if k in cfg:
            hi = MAX_WARPS if k == "num_warps" else MAX_STAGES if k == "num_stages" else MAX_BLOCK
            v = tables.bounded_int(cfg, k, 1, hi, where, LaunchConfigTableError)
            if k != "num_stages" and not tables.pow2(v):
                raise LaunchConfigTableError(f"{where}: {k} must be a power of two, got {v!r}")
            out.append((k, v))
    return tuple(out)


def parse_table(data: bytes, source: str = "<bytes>") -> LaunchConfigTable:
    """Strictly parses a table document (bounded size, exact keys, sane values)."""
    hw, _, raw = tables.parse_document(data, source, TABLE_FORMAT, MAX_TABLE_BYTES, MAX_ENTRIES,
                                       LaunchConfigTableError)
    entries, seen = [], set()
    for i, r in enumerate(raw):
        where = f"{source}: entries[{i}]"
        if not isinstance(r, dict) or set(r) != ENTRY_KEYS:
            raise LaunchConfigTableError(f"{where}: must be an object with exactly {sorted(ENTRY_KEYS)}")
        sha = r["source_sha256"]
        if not isinstance(sha, str) or len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise LaunchConfigTableError(f"{where}: source_sha256 must be 64 lowercase hex digits")
        if sha in seen:
            raise LaunchConfigTableError(f"{where}: a second entry for source {sha[:16]}")
        seen.add(sha)
        klass = r["class"]
        if not isinstance(klass, dict) or set(klass) != set(CLASS_KEYS):
            raise LaunchConfigTableError(f"{where}: class must be an object with exactly {list(CLASS_KEYS)}")
        hints = r["size_hints"]
        if not isinstance(hints, dict) or not 0 < len(hints) <= 4 or \
                not all(isinstance(k, str) and len(k) <= 8 for k in hints):
            raise LaunchConfigTableError(f"{where}: size_hints must map 1-4 axis names to sizes")
        size_hints = tuple(sorted((k, tables.bounded_int(hints, k, 1, MAX_SIZE_HINT, f"{where}: size_hints",
                                                         LaunchConfigTableError)) for k in hints))
        entries.append(Entry(sha, kernel_class(klass), size_hints, parse_config(r["config"], where),
                             tables.positive_number(r, "ms", "ms", where, LaunchConfigTableError, 1e7),
                             tables.positive_number(r, "baseline_ms", "ms", where, LaunchConfigTableError, 1e7)))
    return LaunchConfigTable(hw, entries, hashlib.sha256(data).hexdigest()[:16], source)


def load_table() -> LaunchConfigTable | None:
    """The table named by $TORCH_DIODE_LAUNCH_CONFIG_TABLE, parsed once per path, used for
    whatever GPU it was made on (it is the user's choice; a wrong one costs timings, not
    correctness); None when it is unset. A broken or missing table is logged once and
    treated as none (every kernel walks)."""
    path_s = os.environ.get(ENV_TABLE, "").strip()
    if not path_s:
        return None
    return tables.load_once(Path(path_s), PROCESS.launch_config_tables, parse_table, "launch-config table")


def predicted_config(tuner: Any, baseline: Any, config: dict) -> Any | None:
    """The heuristics' config with the table's fields set, where the walk itself could have
    reached it: every field the table changes is one this kernel has, the tuner tunes and has
    not frozen, and within the tuner's limits for this kernel (`value_too_large` /
    `value_too_small`: TRITON_MAX_BLOCK, the size hints, the GPU's warps, the minimum
    blocks), and the result passes `is_valid_config`. None otherwise."""
    from torch._inductor.runtime.coordinate_descent_tuner import get_field, set_field
    tunable = set(tuner.tunable_fields)
    frozen = set(getattr(tuner, "frozen_fields", None) or ())
    cand = copy.deepcopy(baseline)
    for k, v in config.items():
        cur = get_field(cand, k)
        if cur is None:
            return None
        if v == cur:
            continue
        if k not in tunable or k in frozen or tuner.value_too_large(k, v) or tuner.value_too_small(k, v):
            return None
        set_field(cand, k, v)
    return cand if tuner.is_valid_config(cand) else None


def _count(outcome: str) -> None:
    state = active_state()
    if state is not None:
        state.stats.count_launch_config(outcome)


_wrap_lock = threading.Lock()
_wrapped: dict[str, Any] = {}


def install_tuner() -> bool:
    """Wraps CoordescTuner.autotune (and CachingAutotuner._coordinate_descent_tuning, which
    says which kernel is tuned) once per process (idempotent). The wrapper predicts only
    while the hook is installed in predict mode with a table; False when this torch has no
    coordinate-descent tuner."""
    with _wrap_lock:
        if "autotune" in _wrapped:
            return True
        try:
            from torch._inductor.runtime.coordinate_descent_tuner import CoordescTuner
        except ImportError:
            return False
        orig = CoordescTuner.__dict__["autotune"]

        def autotune(tuner, func, baseline_config, baseline_timing=None):
            state = active_state()
            table = load_table() if state is not None and state.options.mode == "predict" else None
            if table is None:
                return orig(tuner, func, baseline_config, baseline_timing)
            autotuner = CURRENT_KERNEL.get()
            try:
                hit = table.lookup(kernel_features(autotuner)) if autotuner is not None else None
                cfg = predicted_config(tuner, baseline_config, hit[0].config_dict()) if hit else None
            except Exception as e:  # the hook must never break a compile: the walk, counted
                log.debug("torch_diode: launch-config lookup failed: %s", e)
                hit, cfg = None, None
            if cfg is None:
                _count("tuned:no_entry" if hit is None else "tuned:entry_not_valid_here")
                return orig(tuner, func, baseline_config, baseline_timing)
            if cfg == baseline_config:     # the table says the start: nothing to time
                _count(f"same_as_start:{hit[1]}")
                return baseline_config
            # The start, then the table's config (which must compile and run here), each timed
            # once by Inductor's own benchmark; the faster is the winner. The start goes first
            # so that a failing table config leaves its time to the walk.
            t_base = baseline_timing
            try:
                if t_base is None:
                    t_base = func(baseline_config)
                t_cfg = func(cfg)
                if not (math.isfinite(t_cfg) and math.isfinite(t_base)):
                    raise ValueError(f"timings {t_cfg}, {t_base}")
            except Exception as e:
                log.debug("torch_diode: launch config of the table did not run: %s", e)
                _count("tuned:entry_failed_here")
                ok = t_base is not None and math.isfinite(t_base)
                return orig(tuner, func, baseline_config, t_base if ok else baseline_timing)
            if t_cfg <= t_base:
                _count(f"predicted:{hit[1]}")
                return cfg
            _count(f"start_faster:{hit[1]}")
            return baseline_config

        autotune.__wrapped__ = orig
        CoordescTuner.autotune = autotune
        _wrapped["autotune"] = orig
        CURRENT_KERNEL.install()
        return True
