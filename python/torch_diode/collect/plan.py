"""Pure rules of the v2 engine, testable without a GPU: config order, repeat counts,
suspect records to re-time, contenders for the interleaved re-timing, the static targets
and the static chase, and kernel-reuse grouping."""
from __future__ import annotations

import math

from .stats import summarize

# A config whose first timing is this much slower than the best so far cannot win:
# it is timed with min_repeats only (its record keeps that count).
SLOW_FACTOR = 1.5
# Configs within this factor of the best (ATen included) are re-timed interleaved.
CONTENDER_FACTOR = 1.10
MAX_CONTENDERS = 6

# Suspect records: re-timed once with a fresh batch after the main pass (engine.py). A
# config timed far behind the best gets only min_repeats in one batch, so one disturbed
# batch (a stall, a clock dip) would otherwise stand; on the H100 dataset of 2026-11-25
# such records (e.g. a num_stages=5 bmm at 773 us whose stages 1-4 took 4.5 us) wrecked
# the model's top-1. Numbers below are from that dataset (193 problems, 156k ok records).
# A batch's IQR/median: median 1.1%, p90 3.9%, p99 51%. A clean batch behind the GPU spin
# spreads a few percent; an IQR over a quarter of the median (1.2% of records) says the
# batch itself was disturbed.
SPREAD_FACTOR = 0.25
# Stage neighbours (same template and params except num_stages) run the same tiles and
# the same work, only prefetched deeper: their medians are within 1.09x of the fastest at
# the median, 1.86x at p90. Over 3x (2.8% of records) is worth a second look; many of
# those are num_stages 1 or 2 and genuinely slow, which costs one batch, never data:
# the re-time keeps the lower batch, and the worst-first bound drops the mild ones.
NEIGHBOUR_FACTOR = 3.0
# At most this many per problem, worst first (mean 29 suspects per problem at these
# factors, 46 of 193 problems over 32): ~32 batches of RETIME_REPEATS bounds the cost.
MAX_SUSPECTS = 32
RETIME_REPEATS = 10


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


def stage_group(template: str, params: dict):
    """A config's identity up to its num_stages (None for configs without one, e.g. ATen):
    the template and every integer/bool param but num_stages (as space._key keys configs)."""
    if not params or "num_stages" not in params:
        return None
    return (template,) + tuple(sorted((k, v) for k, v in params.items() if k != "num_stages"
                                      and isinstance(v, (int, bool)) and not k.startswith("_")))


def suspects(timed: dict, spread: float = SPREAD_FACTOR, neighbour: float = NEIGHBOUR_FACTOR,
             limit: int = MAX_SUSPECTS) -> list:
    """Keys of the records to re-time, worst first, at most `limit`.

    timed: key -> (template, params, median, iqr) of every ok record of one problem. A
    record is suspect when its IQR is over `spread` x its median, or its median is over
    `neighbour` x the fastest of its stage neighbours (stage_group). Worst = furthest past
    its threshold: max(iqr / (spread * median), median / (neighbour * fastest neighbour))."""
    fastest: dict = {}
    for template, params, median, _ in timed.values():
        g = stage_group(template, params)
        if g is not None and median > 0:
            fastest[g] = min(fastest.get(g, math.inf), median)
    scored = []
    for k, (template, params, median, iqr) in timed.items():
        if not median > 0:
            continue
        score = iqr / (spread * median)
        g = stage_group(template, params)
        if g is not None:
            score = max(score, median / (neighbour * fastest[g]))
        if score > 1.0:
            scored.append((score, k))
    scored.sort(key=lambda sk: -sk[0])   # stable: ties keep the problem's config order
    return [k for _, k in scored[:limit]]


def keep_lower(old: list, new: list) -> list:
    """Of two sample batches of one config, the one with the lower median (the old one on
    a tie). A disturbance (stall, clock dip, a neighbour's traffic) only ever adds time to
    a GPU kernel, so the lower batch is the closer one to the kernel's own time."""
    if not old:
        return new
    if not new:
        return old
    return new if summarize(new).median < summarize(old).median else old


# A round of the static re-time whose median is above this x the lowest round median of
# the same kernel ran after the GPU spin drained: the timing process was descheduled
# (two compile pools held every core), and every later launch of that batch carried CPU
# launch latency. Seen on the H100 (collector 2.2.0, 50 log-normal problems): 17 of 520
# static records had an IQR above half the median, e.g. 5.81 us with an IQR of 527 us.
DISTURBED_ROUND_FACTOR = 1.5


def drop_disturbed_rounds(batches: list, factor: float = DISTURBED_ROUND_FACTOR) -> list:
    """Of one kernel's interleaved rounds (lists of samples), those whose median is within
    `factor` of the lowest round median, in their order: as in keep_lower, a disturbance
    only adds time, so the lowest round always stays. Empty rounds are dropped."""
    meds = [(b, summarize(b).median) for b in batches if b]
    if not meds:
        return []
    floor = min(m for _, m in meds)
    return [b for b, m in meds if m <= factor * floor]


def contenders(times: dict, factor: float = CONTENDER_FACTOR, limit: int = MAX_CONTENDERS) -> list:
    """Keys of the fastest entries within `factor` of the best, at most `limit` of them."""
    if not times:
        return []
    best = min(times.values())
    close = sorted((t, k) for k, t in times.items() if t <= factor * best)
    return [k for _, k in close[:limit]]


# Static targets beyond the `top` fastest: every config within this factor of the runtime
# pass's best, up to 2 x top. The runtime pass reads lower than the static rounds (2.2.0,
# H100: the same runtime kernel 7% lower than in the fidelity bench, static records 1.002x
# it), so a config just outside the top could end as the problem's best without being
# timed side by side with the static ones: 9 of 50 problems, by up to 3.6%.
STATIC_NEAR_FACTOR = 1.04


def static_targets(times: dict, defaults: set, top: int, near: float = STATIC_NEAR_FACTOR) -> list:
    """Keys of the entries to re-time as static-shape kernels: the `top` fastest of
    `times` (key -> median, ok Triton entries only) and any other within `near` x the
    fastest, at most 2 x top in all; then the fastest DEFAULT-list entry (`defaults`:
    keys) when it is not among them, so the record that stands for max-autotune DEFAULT
    is timed the way Inductor runs it too. Fastest first."""
    if top <= 0 or not times:
        return []
    order = sorted(times, key=lambda k: (times[k], str(k)))
    best = times[order[0]]
    out = order[:top] + [k for k in order[top:2 * top] if times[k] <= near * best]
    dflt = [k for k in order if k in defaults]
    if dflt and dflt[0] not in out:
        out.append(dflt[0])
    return out


def pick_targets(targets: list, picks: list, times: dict) -> list:
    """The keys of `picks` (a model's top predicted entries, collector 2.6.0) that join the
    static targets: those not already `targets` and with a time (ok entries), once each, in
    the model's order; none when there are no targets (no static stage)."""
    if not targets:
        return []
    have = set(targets)
    return [k for k in dict.fromkeys(picks) if k in times and k not in have]


def chase_targets(times: dict, static: set, limit: int) -> list:
    """Keys of the entries for a static chase wave (collector 2.4.0): those not in `static`
    whose median (`times`: key -> median, ok Triton entries) is below the fastest static
    one's, fastest first, at most max(limit, 1). A first-pass median of few samples is the
    lowest of many noisy ones, so such an entry may only look faster than the static
    records; the chase times it as a static kernel beside them. Empty when no entry is
    static (no static stage ran) or the fastest entry is a static one."""
    best = min((times[k] for k in static if k in times), default=None)
    if best is None:
        return []
    below = sorted((k for k in times if k not in static and times[k] < best), key=lambda k: (times[k], str(k)))
    return below[:max(limit, 1)]


def reuse_groups(keys: list) -> dict:
    """kernel-class key -> indices of the problems that share it (in order)."""
    out: dict = {}
    for i, k in enumerate(keys):
        out.setdefault(k, []).append(i)
    return out
