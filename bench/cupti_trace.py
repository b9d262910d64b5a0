"""CUPTI kernel trace of repeated calls, used by bench/hook_end_to_end.py.

trace_events(call, marker, reps) runs `marker()` then `call()` `reps` times under the
CUDA profiler and returns the Chrome trace's events. The marker (e.g. an L2 flush,
`buf.bitwise_not_()`) launches one kernel before each call, so a parser can split the
trace into calls at it: call_launches(events, marker) gives each call's GPU activities in
launch order (hook_end_to_end.per_call builds on it).
"""
from __future__ import annotations

import json
import os
import tempfile


def trace_events(call, marker, reps: int) -> list[dict]:
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            marker()
            call()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f).get("traceEvents", [])


def call_launches(events: list[dict], marker: str = "bitwise_not", cats=("kernel",)) -> list[list[tuple]]:
    """From a Chrome trace: per call, its GPU activities of categories `cats` as (name, start
    us, duration us) in launch order. A kernel whose name contains `marker` (the L2 flush)
    opens each call and is not counted; activities before the first marker are ignored."""
    cats_asked = tuple(c.lower() for c in cats)
    cats = cats_asked + ("kernel",)   # the marker is a kernel
    evs = sorted((e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() in cats),
                 key=lambda e: e.get("ts", 0))
    calls, cur = [], None
    for e in evs:
        name = str(e.get("name", ""))[:160]
        if marker in name:
            if cur is not None:
                calls.append(cur)
            cur = []
        elif cur is not None and (str(e.get("cat", "")).lower() != "kernel" or "kernel" in cats_asked):
            cur.append((name, float(e.get("ts", 0.0)), float(e.get("dur", 0.0))))
    if cur is not None:
        calls.append(cur)
    return calls


def kernel_sums(launches: list[tuple]) -> dict:
    """One call's kernel name -> summed duration (us), from its call_launches entry (a kernel
    launched twice in a call is one name with both durations)."""
    sums: dict = {}
    for name, _, dur in launches:
        sums[name] = sums.get(name, 0.0) + dur
    return sums
