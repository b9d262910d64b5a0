"""The GPU timer: warm-up, L2 flush, CUDA events per repeat, median and IQR.

Each repeat is bracketed by its own pair of CUDA events, preceded by a write of a
buffer twice the L2 size so every repeat starts cold (as in production, where the
GEMM's inputs were just written by another kernel). Before the repeats we queue
a GPU spin (torch.cuda._sleep) long enough for the CPU to enqueue every flush, event
and launch behind it, so no repeat can include CPU launch latency (ATen's Python
path takes longer to launch than a 100 MB flush takes to run; the device runs of
2026-11-22 did not yet have this spin, see tests/data/datasets/README.md). A single probe launch decides
how many repeats fit in the per-config GPU budget and catches configs that run
longer than the per-config timeout.
"""
from __future__ import annotations

from dataclasses import dataclass

from .spec import Timing
from .stats import summarize


# ~200 us of CPU enqueue time per repeat at ~1.5 GHz; capped at ~0.5 s.
SPIN_CYCLES_PER_REPEAT = 300_000
MAX_SPIN_CYCLES = 750_000_000


def queued_repeats(torch, flush, fn, n: int) -> list[float]:
    """n timings (ms) of fn: a GPU spin first, long enough for the CPU to queue every
    repeat behind it, then per repeat an L2 flush (if `flush`) and a pair of events."""
    ev = torch.cuda.Event
    starts = [ev(enable_timing=True) for _ in range(n)]
    ends = [ev(enable_timing=True) for _ in range(n)]
    torch.cuda._sleep(min(SPIN_CYCLES_PER_REPEAT * n, MAX_SPIN_CYCLES))
    for i in range(n):
        if flush is not None:
            flush.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    ends[-1].synchronize()
    return [a.elapsed_time(b) for a, b in zip(starts, ends)]


@dataclass(frozen=True)
class Measured:
    status: str          # "ok" or "timeout"
    median_ms: float = 0.0
    iqr_ms: float = 0.0
    repeats: int = 0


class GpuTimer:
    def __init__(self, timing: Timing, device: int = 0):
        import torch
        self.t = timing
        self.torch = torch
        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or (50 << 20))
        self.flush = torch.empty(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device=f"cuda:{device}") \
            if timing.l2_flush else None

    def measure(self, fn) -> Measured:
        torch = self.torch
        ev = torch.cuda.Event
        fn()  # first launch: loads the module, compiles nothing new, shakes out errors
        torch.cuda.synchronize()
        s, e = ev(enable_timing=True), ev(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        probe = s.elapsed_time(e)
        if probe > self.t.config_timeout_s * 1000.0:
            return Measured("timeout")
        n = int(self.t.budget_ms_per_config / max(probe, 1e-3))
        n = max(self.t.min_repeats, min(self.t.repeats, n))
        # The first launch and the probe already warmed the kernel up; for slow configs
        # (>= 1 ms) more warm-up only spends GPU time a sweep does not have.
        for _ in range(min(self.t.warmup, n) if probe < 1.0 else 0):
            fn()
        summ = summarize(queued_repeats(torch, self.flush, fn, n))
        return Measured("ok", summ.median, summ.iqr, summ.n)


class BatchTimer:
    """GPU time of a launch function, for the v2 engine (see module doc: cold L2, a GPU
    spin in front so CPU launch latency never lands between two events).

    probe() times one launch; repeat() times n launches back to back behind one spin and
    returns every sample (ms), so callers can merge samples from interleaved rounds."""

    def __init__(self, device: int = 0, l2_flush: bool = True):
        import torch
        self.torch = torch
        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or (50 << 20))
        self.flush = torch.empty(max(2 * l2, 64 << 20) // 4, dtype=torch.int32,
                                 device=f"cuda:{device}") if l2_flush else None

    def probe(self, fn) -> float:
        torch = self.torch
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if self.flush is not None:
            self.flush.zero_()
        s.record()
        fn()
        e.record()
        e.synchronize()
        return s.elapsed_time(e)

    def repeat(self, fn, n: int) -> list[float]:
        return queued_repeats(self.torch, self.flush, fn, n)
