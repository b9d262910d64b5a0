"""CUPTI kernel trace of repeated calls, shared by the GPU benchmarks in bench/.

trace_events(call, marker, reps) runs `marker()` then `call()` `reps` times under the
CUDA profiler and returns the Chrome trace's events. The marker (e.g. an L2 flush,
`buf.bitwise_not_()`) launches one kernel before each call, so a parser can split the
trace into calls at it (hook_end_to_end.per_call, collector_fidelity.per_call_kernels).
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
