"""bench/cupti_trace.py's trace parsing (what bench/hook_end_to_end.py reads GPU time from),
on a synthetic Chrome trace: no GPU needed."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))

import cupti_trace as ct  # noqa: E402


def _k(name, ts, dur, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}


def test_calls_split_at_the_marker_in_launch_order():
    events = [_k("early", 0, 1), _k("bitwise_not_flush", 10, 5), _k("gemm", 20, 3), _k("memcpy", 21, 1, "gpu_memcpy"),
              _k("epilogue", 24, 1), _k("bitwise_not_flush", 30, 5), _k("gemm", 40, 4), _k("gemm", 45, 2),
              {"ph": "i", "cat": "kernel", "name": "instant", "ts": 46}]
    calls = ct.call_launches(list(reversed(events)))
    assert calls == [[("gemm", 20.0, 3.0), ("epilogue", 24.0, 1.0)], [("gemm", 40.0, 4.0), ("gemm", 45.0, 2.0)]]
    with_copies = ct.call_launches(events, cats=("kernel", "gpu_memcpy"))
    assert with_copies[0][1] == ("memcpy", 21.0, 1.0)
    assert ct.kernel_sums(calls[1]) == {"gemm": 6.0}
    assert ct.call_launches([_k("gemm", 0, 1)]) == []
