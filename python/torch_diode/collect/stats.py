"""Summary statistics of repeated timings: median and interquartile range."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    median: float
    iqr: float  # p75 - p25
    n: int


def _quantile(sorted_xs: list[float], q: float) -> float:
    # Linear interpolation between closest ranks (numpy's default, "type 7").
    pos = q * (len(sorted_xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def summarize(xs: list[float]) -> Summary:
    if not xs:
        raise ValueError("summarize: no samples")
    s = sorted(xs)
    return Summary(_quantile(s, 0.5), _quantile(s, 0.75) - _quantile(s, 0.25), len(s))
