"""Opt-in feedback (issue 20): the timings Inductor measured for the choices the hook
offered, written as a community dataset ready for `diode contribute`.

Off by default. With `TORCH_DIODE_CONTRIBUTE=DIR` set when the hook is installed, and a
GPU detected (the shard needs its HardwareId), the hook

1. registers, for every GEMM it filters in topk mode, each choice it hands to Inductor
   with the problem and its wire KernelConfig (Triton configs as extract.config_from_ktc,
   the op's ATen kernel as the collector records it, other choices by uid and kwargs);
2. adds an Inductor feedback saver (inductor_compat.feedback_saver): after every
   autotune Inductor passes the timings it measured (ms per ChoiceCaller; a failed
   choice is inf); each registered choice becomes a record, status `ok` with the time,
   or `compile_error`;
3. at process exit writes everything once, as one `dataset` message holding one shard
   (wire version 2, `method.timing` = "inductor-autotune", `method.collector` =
   "torch_diode.hook <version>"): DIR/inductor-autotune-<host>-<pid>-<ms>.msgpack.

Inductor's autotune timing (do_bench: warm L2, its own repeat count) is not the
collector's (cuda events + GPU spin + cold L2): the method field keeps such records
apart, so training never mixes them silently. Predict mode benchmarks nothing, so it
contributes nothing.
"""
from __future__ import annotations

import atexit
import logging
import math
import os
import socket
import threading
import time
from typing import Any

from .. import __version__
from .. import inductor_compat as ic
from .. import wire

log = logging.getLogger("torch_diode")

ENV_CONTRIBUTE = "TORCH_DIODE_CONTRIBUTE"
TIMING_METHOD = "inductor-autotune"
COLLECTOR = f"torch_diode.hook {__version__}"
MAX_PENDING = 200_000     # offered choices waiting for a timing (dropped oldest-first past this)
MAX_RECORDS = 1_000_000   # records kept for the exit flush


class Contributor:
    def __init__(self, directory: str, hardware: wire.HardwareId):
        self.directory = directory
        self.hardware = hardware
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[Any, int, wire.KernelConfig]] = {}  # id(ktc) -> (ktc, problem, config)
        self._problems: list[wire.Problem] = []
        self._index: dict[wire.Problem, int] = {}
        self._records: list[wire.ShardRecord] = []
        self._saver: Any = None
        self.written: str | None = None

    # ------------------------------------------------------------ collecting

    def offer(self, problem: wire.Problem, choices: list[tuple[Any, wire.KernelConfig]]) -> None:
        """The KTCs handed to Inductor for `problem`, each with its KernelConfig."""
        with self._lock:
            p = self._index.get(problem)
            if p is None:
                p = self._index[problem] = len(self._problems)
                self._problems.append(problem)
            for ktc, cfg in choices:
                self._pending[id(ktc)] = (ktc, p, cfg)  # the ktc is kept: its id stays unique
            while len(self._pending) > MAX_PENDING:
                self._pending.pop(next(iter(self._pending)))

    def on_feedback(self, timings: dict, name: str, input_nodes: Any, choices: list) -> None:
        """Inductor's feedback saver: timings[choice] = measured ms (inf when it failed)."""
        with self._lock:
            for choice, ms in timings.items():
                ktc = ic.choice_ktc(choice)
                entry = self._pending.pop(id(ktc), None) if ktc is not None else None
                if entry is None or entry[0] is not ktc or len(self._records) >= MAX_RECORDS:
                    continue
                _, p, cfg = entry
                ms = float(ms)
                if math.isfinite(ms) and ms > 0:
                    self._records.append(wire.ShardRecord(p, cfg, ms * 1000.0, 0.0, 1, "ok", 0))
                else:
                    self._records.append(wire.ShardRecord(p, cfg, 0.0, 0.0, 0, "compile_error", 0))

    @property
    def record_count(self) -> int:
        with self._lock:
            return len(self._records)

    # ------------------------------------------------------------ writing

    def shard_bytes(self, created_ms: int | None = None) -> bytes | None:
        """The dataset message (one sealed shard) of what was measured; None if nothing."""
        from ..collect import records
        from ..dataset import Dataset, encode_dataset
        from ..hardware import hardware_key
        with self._lock:
            recs = list(self._records)
            problems = list(self._problems)
        if not recs:
            return None
        problems, recs = records.compact(problems, recs)
        created_ms = int(time.time() * 1000) if created_ms is None else created_ms
        sid = f"hook-{socket.gethostname()}-{os.getpid()}-{created_ms}"
        data = records.build_shard(sid, "torch_diode-hook-feedback", self.hardware, "torch_diode.hook", "",
                                   problems, recs, created_ms=created_ms,
                                   method=wire.CollectionMethod(TIMING_METHOD, COLLECTOR))
        return encode_dataset(Dataset(hardware_key(self.hardware), [wire.decode_shard(data)]))

    def flush(self) -> str | None:
        """Writes the dataset file (once per process; later calls write nothing)."""
        if self.written:
            return self.written
        try:
            data = self.shard_bytes()
            if data is None:
                return None
            os.makedirs(self.directory, exist_ok=True)
            path = os.path.join(self.directory, f"{TIMING_METHOD}-{socket.gethostname()}-{os.getpid()}-"
                                                f"{int(time.time() * 1000)}.msgpack")
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            self.written = path
            log.info("torch_diode: wrote %d Inductor autotune timings to %s (diode contribute %s ...)",
                     self.record_count, path, path)
            return path
        except Exception as e:  # never fail the user's process at exit
            log.warning("torch_diode: could not write the autotune timings to %s: %s", self.directory, e)
            return None

    # ------------------------------------------------------------ Inductor

    def start(self) -> None:
        if self._saver is None:
            self._saver = ic.feedback_saver(self.on_feedback)
            self._saver.__enter__()

    def stop(self) -> None:
        if self._saver is not None:
            saver, self._saver = self._saver, None
            saver.__exit__(None, None, None)


_active: Contributor | None = None
_lock = threading.Lock()


def active() -> Contributor | None:
    return _active


def enable(directory: str, hardware: wire.HardwareId) -> Contributor:
    """Starts collecting (idempotent per directory); the file is written at exit."""
    global _active
    with _lock:
        if _active is not None and _active.directory == directory:
            _active.start()
            return _active
        if _active is not None:
            disable()
        c = Contributor(directory, hardware)
        c.start()
        atexit.register(c.flush)
        _active = c
        return c


def disable(flush: bool = True) -> str | None:
    """Stops collecting; writes what was measured (unless flush=False)."""
    global _active
    c, _active = _active, None
    if c is None:
        return None
    c.stop()
    return c.flush() if flush else None


def enable_from_env(hardware: wire.HardwareId | None) -> Contributor | None:
    """TORCH_DIODE_CONTRIBUTE=DIR: enable (needs the detected HardwareId); unset: nothing."""
    directory = os.environ.get(ENV_CONTRIBUTE, "").strip()
    if not directory:
        return None
    if hardware is None:
        log.warning("torch_diode: %s is set but no GPU was detected: no timings are recorded", ENV_CONTRIBUTE)
        return None
    return enable(os.path.expanduser(directory), hardware)
