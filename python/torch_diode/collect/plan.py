"""Pure rules of the v2 engine, testable without a GPU: config order, repeat counts,
contenders for the interleaved re-timing, and kernel-reuse grouping."""
from __future__ import annotations

import math

# A config whose first timing is this much slower than the best so far cannot win:
# it is timed with min_repeats only (its record keeps that count).
SLOW_FACTOR = 1.5
# Configs within this factor of the best (ATen included) are re-timed interleaved.
CONTENDER_FACTOR = 1.10
MAX_CONTENDERS = 6


def promise(params: dict, m: int, n: int, batch: int, sm_count: int) -> float:
    """Higher = more likely fast. Wave efficiency of the tile grid times the tile's
    arithmetic intensity (how much each loaded byte is reused), both in (0, 1]."""
    bm, bn = params["BLOCK_M"], params["BLOCK_N"]
    tiles = math.ceil(m / bm) * math.ceil(n / bn) * max(batch, 1)
    waves = tiles / max(sm_count, 1)
    wave_eff = waves / math.ceil(waves) if waves > 0 else 0.0
    useful = (min(m, bm) * min(n, bn)) / (bm * bn)           # padding waste on small M or N
    intensity = (bm * bn) / (bm + bn) / 128.0                  # 256x256 tile -> 1.0
    return wave_eff * useful * min(intensity, 1.0)


def order(entries: list, m: int, n: int, batch: int, sm_count: int) -> list:
    """ATen first (the baseline every config is compared with), then Inductor's DEFAULT
    configs, then the rest by promise(); a problem cut short has timed what matters."""
    def key(e):
        if not e.is_triton:
            return (0, 0.0)
        return (1 if e.default else 2, -promise(e.params, m, n, batch, sm_count))
    return sorted(entries, key=key)


def repeats_for(probe_ms: float, best_ms: float, min_repeats: int, max_repeats: int,
                budget_ms: float) -> int:
    """Repeats for a config after its probe launch: few when it is far behind the best
    so far, else as many as fit the per-config GPU budget."""
    if best_ms > 0 and probe_ms > SLOW_FACTOR * best_ms:
        return min_repeats
    fit = int(budget_ms / max(probe_ms, 1e-3))
    return max(min_repeats, min(max_repeats, fit))


def contenders(times: dict, factor: float = CONTENDER_FACTOR, limit: int = MAX_CONTENDERS) -> list:
    """Keys of the fastest entries within `factor` of the best, at most `limit` of them."""
    if not times:
        return []
    best = min(times.values())
    close = sorted((t, k) for k, t in times.items() if t <= factor * best)
    return [k for _, k in close[:limit]]


def reuse_groups(keys: list) -> dict:
    """kernel-class key -> indices of the problems that share it (in order)."""
    out: dict = {}
    for i, k in enumerate(keys):
        out.setdefault(k, []).append(i)
    return out
