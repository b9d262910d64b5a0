"""The small statistics every bench script and the package's tools report: geomean,
nearest-rank quantile / p90, median.

It lives in the package (not bench/) so that the package's own tools
(torch_diode/tools/gemv_table.py's robust rule) use the same geomean as the bench scripts,
which reach it through bench/stats.py. It imports nothing of torch_diode's and no torch.

Why this module: the bench scripts each had their own copy, and their p90s disagreed
(round(0.9*(n-1)), int(q*(n-1)) and nearest rank picked different elements for most n),
so a p90 printed by one script could not be set beside another's or beside `diode validate`.
Here is the one definition, the same as the C++ reference `regret_stats`
(models/src/metrics.cpp), which `diode validate` reports:

    geomean = exp(mean(log x))
    p90     = nearest rank: the 1-based rank ceil(0.9 * n) of the sorted values

tests/python/test_bench_stats.py checks both against `diode validate --report`'s summary.json.

Every helper leaves out None entries (a bench row whose figure is missing: a failed
workload, a ratio with no denominator) and returns None when no value is left, so callers
need not filter first and an empty table cell stays empty instead of raising.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable


def _values(xs: Iterable[float | None]) -> list[float]:
    return [x for x in xs if x is not None]


def geomean(xs: Iterable[float | None]) -> float | None:
    """exp(mean(log x)) over the values that are not None; None when there are none."""
    v = _values(xs)
    # Summed in the given order, like regret_stats, so a figure matches `diode validate` to the last bits.
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None


def quantile(xs: Iterable[float | None], q: float) -> float | None:
    """Nearest-rank quantile: the sorted values' element of 1-based rank ceil(q * n) (at
    least 1); None when there are no values. Always one of the values, never interpolated,
    like regret_stats' p90."""
    s = sorted(_values(xs))
    if not s:
        return None
    # q * n in double precision, as the C++ computes it, so the two pick the same element.
    return s[max(math.ceil(q * len(s)), 1) - 1]


def p90(xs: Iterable[float | None]) -> float | None:
    """quantile(xs, 0.9): the p90 `diode validate` reports."""
    return quantile(xs, 0.9)


def median(xs: Iterable[float | None]) -> float | None:
    """statistics.median: the middle value, the mean of the two middle values for even n
    (what the bench scripts' medians have always been); None when there are no values."""
    v = _values(xs)
    return statistics.median(v) if v else None


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, None when a is missing or b is missing or zero (a table cell with no figure)."""
    return a / b if a is not None and b else None
