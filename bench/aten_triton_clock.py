"""Is the collector's clock fair to cuBLAS? Per problem, best-Triton / ATen under the
collector's clock (CUDA events around each launch) vs under CUPTI kernel durations.

Why: the dataset records every config's GPU time with CUDA events around each launch,
queued behind a GPU spin, cold L2 (torch_diode.collect.timing: BatchTimer,
queued_repeats). On the H100 of 2026-11-26 (bench/RESULTS.md, hook end to end) the
collector's ATen record was 2.6-4.0 us above the CUPTI kernel sum of the same cuBLAS call
on 10 small GEMMs (e.g. 17.25 vs 14.45 us) and 12% above on a large one. If the events
around an ATen call carry more than those around a Triton kernel (cuBLAS split-K: two
kernels and the gap between them; addmm with out= copying the bias first), the dataset is
biased against cuBLAS, and a model trained on it picks Triton where cuBLAS is faster.

  python bench/aten_triton_clock.py --data datasets/nvidia-h100-80gb [--sample 40 --seed 1]
      [--start 0 --count 20] [--budget-s 480] [--json part.json]
  python bench/aten_triton_clock.py --merge part1.json part2.json [--json all.json]
  python bench/aten_triton_clock.py --data FILE --sample 6 --dry-run     # CPU, FAKE timings

Problems: as bench/collector_fidelity.py (load_problems, select_problems: a stratified
sample over op x dtype x decode (M <= 16) in an order fixed by --seed; --start/--count take
a slice, parts are joined with --merge, which gives the summary a single run would).

Per problem:
- recorded: the dataset's medians of ATen (template `aten`; for addmm also
  `aten::bias_addmm` where recorded, reported beside it) and of its best Triton config;
  (The collector times an `aten::bias_addmm` choice with the same launch as `aten`,
  engine.Engine.run: both records are the same call, timed at different moments.)
- now, in one process: ATen (torch_diode.collect.engine._aten_fn, as the collector calls
  it: out= the output buffer) and that Triton config as the problem's static-shape kernel
  (collector_fidelity.our_kernel(static=True), as the collector's static stage times it),
  both checked against ATen's output, then (a) timed with BatchTimer.repeat, the
  collector's clock, interleaved, --rounds x --repeats each after 50 ms of untimed rounds,
  median; (b) profiled with CUPTI, interleaved, --profile-rounds x --profile-reps/rounds
  calls each, an L2 flush (bitwise_not, the marker) before each call: per call the sum of
  all its kernels' durations (median over calls), how many kernels it launched, their names
  (first 4) and its span (first kernel's start to last kernel's end: the sum plus gaps).
- derived: ratio triton/aten recorded, by events now, by CUPTI now; offset_us = events -
  CUPTI sum for ATen and for Triton; winner_flip: the faster of the two by events now is
  not the faster by CUPTI now (winner_flip_recorded: the dataset's winner is not CUPTI's).

How to read it: if ATen's offset is clearly larger than Triton's (say 3 us vs 1 us on
problems under 20 us, where "under 20 us" is ATen's CUPTI time), the events clock
overstates cuBLAS; then the geomean ratio by events is below that by CUPTI (Triton looks
better than it is) and winner flips count the problems whose label the dataset has
wrong. Equal offsets (and ratios) say the clock is fair and the gap to eager cuBLAS in
RESULTS.md is common to both (events vs kernel sum), not a bias. `aten_multi_kernel`
counts problems where the ATen call ran more than one kernel (see their names).

--dry-run runs the whole driver (selection, recorded figures, derivation, summary, JSON)
on CPU with FAKE launch functions and made-up timings; every output says FAKE.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))  # collector_fidelity, cupti_trace, stats

from collector_fidelity import DECODE_M, load_problems, select_problems  # noqa: E402
from cupti_trace import call_launches, kernel_sums  # noqa: E402  (per call, its GPU activities in launch order)
from gpu_clock import CollectorClock  # noqa: E402  (the GPU side shared with pick_retime)
from retime_run import FAKE, add_common_args, error_text, interleaved_medians, on_clock, run_merge, run_problems  # noqa: E402  (the driver, likewise)
from stats import geomean, median, p90  # noqa: E402  (one definition for every bench script, as `diode validate`)

ATEN, BIAS_ADDMM = "aten", "aten::bias_addmm"   # templates as the collector records them
SMALL_US = 20.0        # "small" problems: ATen's CUPTI kernel sum under this (us)
MARKER = "bitwise_not"  # the L2 flush launched before each profiled call


# -- pure functions -------------------------------------------------------------------------

def best_triton(recs):
    """The problem's fastest Triton record (by recorded median), None if it has none."""
    tri = [r for r in recs if r.config.is_triton]
    return min(tri, key=lambda r: r.median_us) if tri else None


def recorded(recs) -> dict:
    """The dataset's figures of one problem from its ok records: ATen's median, bias_addmm's
    (None where not recorded) and the best Triton record (its config as wire JSON)."""
    from torch_diode import wire
    out = {"aten_recorded_us": None, "bias_addmm_recorded_us": None}
    for r in recs:
        key = {ATEN: "aten_recorded_us", BIAS_ADDMM: "bias_addmm_recorded_us"}.get(r.config.template)
        if key and (out[key] is None or r.median_us < out[key]):
            out[key] = r.median_us
    best = best_triton(recs)
    out["triton_recorded_us"] = best.median_us if best else None
    out["triton_config"] = wire.to_json(best.config) if best else None
    return out


MEMOPS = ("gpu_memcpy", "gpu_memset")  # GPU work that is not a kernel: inside the events, not in the kernel sum


def profile_calls(events: list[dict], marker: str = MARKER) -> list[dict]:
    """Per profiled call: total_us (sum of its kernels), kernels {name: us}, launches,
    names (in launch order), memops and memops_us (memcpy/memset: GPU work the events
    around the call include, the kernel sum does not) and span_us (first start to last
    end of all of them: the sums plus the gaps)."""
    out = []
    for launches, mem in zip(call_launches(events, marker), call_launches(events, marker, MEMOPS)):
        sums = kernel_sums(launches)
        allops = launches + mem
        span = (max(t + d for _, t, d in allops) - min(t for _, t, _ in allops)) if allops else 0.0
        out.append({"total_us": sum(sums.values()), "kernels": sums, "launches": len(launches),
                    "names": [n for n, _, _ in launches], "memops": len(mem),
                    "memops_us": sum(d for _, _, d in mem), "span_us": span})
    return out


def profile_summary(calls: list[dict]) -> dict:
    """One launch function's CUPTI figures over its profiled calls (medians; kernel names:
    the first 4 launches of the first call)."""
    if not calls:
        return {"cupti_us": None}
    names = sorted({n for c in calls for n in c["kernels"]})
    return {"cupti_us": median([c["total_us"] for c in calls]),
            "span_us": median([c["span_us"] for c in calls]),
            "kernels": statistics.median_low([c["launches"] for c in calls]),
            "kernel_names": calls[0]["names"][:4],
            "memops": statistics.median_low([c.get("memops", 0) for c in calls]),
            "memops_us": median([c.get("memops_us", 0.0) for c in calls]),
            "kernels_us": {n: median([c["kernels"].get(n, 0.0) for c in calls]) for n in names},
            "calls": len(calls)}


def _ratio(a, b):
    return a / b if a and b else None


def _winner(ratio):
    """The faster of the two from triton/aten (a tie goes to ATen)."""
    return None if ratio is None else ("triton" if ratio < 1.0 else "aten")


def derive(row: dict) -> dict:
    """Adds the derived figures to one problem's row (in place; also returns it): ratios
    triton/aten recorded, by events, by CUPTI (and recorded against bias_addmm), each
    side's offset events - CUPTI, the winners and whether they flip."""
    row["ratio_recorded"] = _ratio(row.get("triton_recorded_us"), row.get("aten_recorded_us"))
    row["ratio_recorded_bias_addmm"] = _ratio(row.get("triton_recorded_us"), row.get("bias_addmm_recorded_us"))
    row["ratio_events"] = _ratio(row.get("triton_events_us"), row.get("aten_events_us"))
    row["ratio_cupti"] = _ratio(row.get("triton_cupti_us"), row.get("aten_cupti_us"))
    for side in ("aten", "triton"):
        ev, cu = row.get(side + "_events_us"), row.get(side + "_cupti_us")
        row[side + "_offset_us"] = ev - cu if ev is not None and cu is not None else None
    for clock in ("recorded", "events", "cupti"):
        row["winner_" + clock] = _winner(row["ratio_" + clock])
    have = row["winner_events"] is not None and row["winner_cupti"] is not None
    row["winner_flip"] = row["winner_events"] != row["winner_cupti"] if have else None
    have = row["winner_recorded"] is not None and row["winner_cupti"] is not None
    row["winner_flip_recorded"] = row["winner_recorded"] != row["winner_cupti"] if have else None
    return row


def _stats(xs) -> dict | None:
    return {"geomean": geomean(xs), "p90": p90(xs), "median": median(xs), "n": len(xs)} if xs else None


def summarize(rows: list[dict], skipped: int = 0) -> dict:
    """The report's figures from problem rows (one run or merged parts)."""
    ok = [x for x in rows if not x.get("error")]
    out = {"problems": len(rows), "measured": len(ok), "failed": len(rows) - len(ok), "skipped": skipped,
           "profile_failed": sum(bool(x.get("profile_error")) for x in ok)}
    out["ratio"] = {k: _stats([x["ratio_" + k] for x in ok if x.get("ratio_" + k)])
                    for k in ("recorded", "events", "cupti", "recorded_bias_addmm")}
    small = [x for x in ok if x.get("aten_cupti_us") is not None and x["aten_cupti_us"] < SMALL_US]
    out["small_us"] = SMALL_US
    out["offset_us"] = {}
    for side in ("aten", "triton"):
        key = side + "_offset_us"
        allv = [x[key] for x in ok if x.get(key) is not None]
        sm = [x[key] for x in small if x.get(key) is not None]
        out["offset_us"][side] = {"median": median(allv) if allv else None, "n": len(allv),
                                  "median_small": median(sm) if sm else None, "n_small": len(sm)}
    for key in ("winner_flip", "winner_flip_recorded"):
        v = [x[key] for x in ok if x.get(key) is not None]
        out[key] = {"yes": sum(v), "of": len(v)}
    for side in ("aten", "triton"):
        v = [x[side + "_kernels"] for x in ok if x.get(side + "_kernels") is not None]
        out[side + "_multi_kernel"] = {"yes": sum(k > 1 for k in v), "of": len(v)}
        v = [x[side + "_memops"] for x in ok if x.get(side + "_memops") is not None]
        out[side + "_memops"] = {"yes": sum(k > 0 for k in v), "of": len(v)}
    errs = {side: max(v) for side in ("aten", "triton")
            if (v := [x[side + "_rel_err"] for x in ok if x.get(side + "_rel_err") is not None])}
    if errs:   # output vs ATen's (relative L2); the collector rejects > CHECK_TOLERANCE (5e-2)
        out["max_rel_err"] = errs
    return out


def merge(parts: list[dict]) -> dict:
    """Joins parts' JSON (rows in order, skipped summed) into one report; refuses to mix
    FAKE (dry-run) parts with measured ones."""
    fakes = {bool(d.get("fake")) for d in parts}
    if len(fakes) > 1:
        raise ValueError("cannot merge FAKE (--dry-run) parts with measured ones")
    rows = [x for d in parts for x in d["rows"]]
    for x in rows:   # parts written before a derived figure existed
        derive(x)
    skipped = sum(d.get("skipped", 0) for d in parts)
    return {"fake": fakes.pop() if fakes else False, "devices": sorted({d.get("device", "") for d in parts}),
            "rows": rows, "skipped": skipped, "summary": summarize(rows, skipped)}


def _f(x, fmt=".2f"):
    return "-" if x is None else format(x, fmt)


def markdown(sm: dict, rows: list[dict], device: str = "", fake: bool = False) -> str:
    """The summary and the per-problem table as markdown."""
    tag = f"**{FAKE} timings (--dry-run, no GPU): numbers mean nothing.** " if fake else ""
    L = [f"### ATen vs best Triton: events clock vs CUPTI kernel sum ({device or 'unknown device'})", "",
         f"{tag}{sm['problems']} problems ({sm['measured']} measured, {sm['failed']} failed, "
         f"{sm['skipped']} skipped for the budget" + (f"; CUPTI failed on {sm['profile_failed']}, timed by "
                                                       f"events only" if sm.get("profile_failed") else "") + ").", "",
         "| triton/aten by | geomean | p90 | median | n |", "|---|---|---|---|---|"]
    for k, what in (("recorded", "recorded (dataset) medians"), ("events", "events now (collector's clock)"),
                    ("cupti", "CUPTI kernel sum now"), ("recorded_bias_addmm", "recorded, vs aten::bias_addmm")):
        r = sm["ratio"].get(k)
        if r:
            L.append(f"| {what} | {r['geomean']:.4f} | {r['p90']:.4f} | {r['median']:.4f} | {r['n']} |")
    L += ["", f"| offset events - CUPTI (us) | median | n | median, ATen CUPTI < {sm['small_us']:g} us | n |",
          "|---|---|---|---|---|"]
    for side in ("aten", "triton"):
        o = sm["offset_us"][side]
        L.append(f"| {side} | {_f(o['median'])} | {o['n']} | {_f(o['median_small'])} | {o['n_small']} |")
    wf, wr = sm["winner_flip"], sm["winner_flip_recorded"]
    L += ["", f"winner flips (faster of ATen / Triton differs, events now vs CUPTI now): {wf['yes']}/{wf['of']}; "
              f"recorded vs CUPTI now: {wr['yes']}/{wr['of']}",
          f"ATen calls running > 1 kernel: {sm['aten_multi_kernel']['yes']}/{sm['aten_multi_kernel']['of']}; "
          f"Triton: {sm['triton_multi_kernel']['yes']}/{sm['triton_multi_kernel']['of']}; calls with a "
          f"memcpy/memset (in the events, not in the kernel sum): ATen {sm['aten_memops']['yes']}/"
          f"{sm['aten_memops']['of']}, Triton {sm['triton_memops']['yes']}/{sm['triton_memops']['of']}", "",
          *([f"largest relative error against ATen's output: " + ", ".join(
              f"{k} {v:.2e}" for k, v in sorted(sm["max_rel_err"].items())), ""] if sm.get("max_rel_err") else []),
          "| problem | rec aten | rec bias_addmm | rec triton | ev aten | cupti aten | ev triton | cupti triton "
          "| ratio rec / ev / cupti | offset aten / triton | aten kernels | flip |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for x in rows:
        if x.get("error"):
            L.append(f"| {x['problem']} | {_f(x.get('aten_recorded_us'))} | {_f(x.get('bias_addmm_recorded_us'))} | "
                     f"{_f(x.get('triton_recorded_us'))} | failed: {x['error'][:80]} |||||||| ")
            continue
        names = ", ".join(n[:48] for n in x.get("aten_kernel_names") or [])
        flip = "FLIP" if x.get("winner_flip") else ("rec" if x.get("winner_flip_recorded") else "")
        L.append(f"| {x['problem']} | {_f(x.get('aten_recorded_us'))} | {_f(x.get('bias_addmm_recorded_us'))} | "
                 f"{_f(x.get('triton_recorded_us'))} | {_f(x.get('aten_events_us'))} | {_f(x.get('aten_cupti_us'))} | "
                 f"{_f(x.get('triton_events_us'))} | {_f(x.get('triton_cupti_us'))} | "
                 f"{_f(x.get('ratio_recorded'), '.3f')} / {_f(x.get('ratio_events'), '.3f')} / "
                 f"{_f(x.get('ratio_cupti'), '.3f')} | {_f(x.get('aten_offset_us'))} / "
                 f"{_f(x.get('triton_offset_us'))} | {x.get('aten_kernels', '-')}: {names} | {flip} |")
    return "\n".join(L)


# -- clocks: the GPU one and the FAKE one of --dry-run ------------------------------------

class GpuClock(CollectorClock):
    """ATen and a static-shape Triton kernel of one problem on the GPU, timed both ways."""

    def __init__(self):
        super().__init__("aten_triton_clock")

    def setup(self, p, recs, cfg) -> dict:
        """{"aten": launch, "triton": launch, "aten_rel_err", "triton_rel_err"} for problem p,
        TF32 as it was collected (restored by teardown)."""
        io = self.problem(p, recs)
        aten, tri = self.aten(io), self.triton(io, cfg)
        return {"aten": aten, "triton": tri, "aten_rel_err": self.check(aten, io),
                "triton_rel_err": self.check(tri, io)}

    def profile(self, fn, reps) -> list[dict]:
        from cupti_trace import trace_events
        fn()
        self.torch.cuda.synchronize()
        flush = self.timer.flush
        return profile_calls(trace_events(fn, flush.bitwise_not_, reps))


class FakeClock:
    """--dry-run: no GPU; launch functions are labels and every time is made up from the
    recorded medians (ATen: a 3 us events offset and, on addmm, a bias-copy kernel; Triton:
    1 us), with seeded noise. Only the driver's plumbing is real."""
    fake = True
    device = f"{FAKE} (--dry-run, no GPU)"

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.base = {}

    def setup(self, p, recs, cfg) -> dict:
        rec = recorded(recs)
        aten = ("aten", p.op)
        tri = ("triton", repr(cfg))
        self.base = {aten: (rec["aten_recorded_us"] or 10.0) - 3.0, tri: (rec["triton_recorded_us"] or 10.0) - 1.0}
        self.offset = {aten: 3.0, tri: 1.0}
        return {"aten": aten, "triton": tri, "aten_rel_err": 0.0, "triton_rel_err": 0.0}

    def teardown(self):
        pass

    def warm(self, fns, n):
        pass

    def events_us(self, fn, n) -> list[float]:
        return [max(0.5, self.base[fn] + self.offset[fn] + self.rng.gauss(0, 0.1)) for _ in range(n)]

    def profile(self, fn, reps) -> list[dict]:
        out = []
        for _ in range(reps):
            t = max(0.5, self.base[fn] + self.rng.gauss(0, 0.1))
            ks = [("fake_" + fn[0] + "_gemm", t)]
            if fn[0] == "aten" and fn[1] == "addmm":
                ks = [("fake_bias_copy", 1.0), ("fake_aten_gemm", t - 1.0)]
            out.append({"total_us": sum(d for _, d in ks), "kernels": dict(ks), "launches": len(ks),
                        "names": [n for n, _ in ks], "memops": 0, "memops_us": 0.0, "span_us": sum(d for _, d in ks) + 0.5 * (len(ks) - 1)})
        return out


def measure(clock, p, recs, a) -> dict:
    """One problem's row: recorded figures, both launches timed by events and by CUPTI,
    interleaved, then derived."""
    from torch_diode.collect.problems import describe
    row = {"problem": describe(p), "op": p.op, "dtype": p.dtype_a, "decode": p.m <= DECODE_M, **recorded(recs)}
    if row["triton_config"] is None:
        row["error"] = "no ok Triton record"
        return derive(row)

    def time_both(fns):
        aten, tri = fns["aten"], fns["triton"]
        row["aten_rel_err"], row["triton_rel_err"] = fns["aten_rel_err"], fns["triton_rel_err"]
        for side, us in interleaved_medians(clock, {"aten": aten, "triton": tri}, a.rounds, a.repeats).items():
            row[side + "_events_us"] = us
        calls = {"aten": [], "triton": []}
        per = max(1, a.profile_reps // a.profile_rounds)
        try:
            for _ in range(a.profile_rounds):
                calls["aten"] += clock.profile(aten, per)
                calls["triton"] += clock.profile(tri, per)
            for side in ("aten", "triton"):
                prof = profile_summary(calls[side])
                row.update({f"{side}_{k}": v for k, v in prof.items()})  # aten_cupti_us, aten_kernels, ...
        except Exception as e:   # no CUPTI: the events figures stand alone (no CUPTI ratio, offset, flip)
            row["profile_error"] = error_text(e)

    return derive(on_clock(clock, row, lambda: clock.setup(p, recs, best_triton(recs).config), time_both))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", nargs="+", default=[], help="dataset files or directories")
    ap.add_argument("--sample", type=int, default=0, help="a stratified sample of this many problems (0: all)")
    ap.add_argument("--seed", type=int, default=1, help="order of the stratified sample")
    add_common_args(ap)
    ap.add_argument("--profile-reps", type=int, default=30, help="CUPTI-profiled calls per launch")
    ap.add_argument("--profile-rounds", type=int, default=3, help="interleaved CUPTI rounds (reps split over them)")
    a = ap.parse_args(argv)
    if a.merge:
        return run_merge(ap, a, merge, lambda doc, dev: markdown(doc["summary"], doc["rows"], dev, doc["fake"]))
    if not a.data:
        ap.error("--data (or --merge) is required")
    if min(a.rounds, a.repeats, a.profile_reps, a.profile_rounds) < 1:
        ap.error("--rounds, --repeats, --profile-reps and --profile-rounds must be >= 1")
    items = load_problems(a.data)
    if not items:
        ap.error(f"no problem with an ok Triton record in {a.data}")
    if a.sample:
        items = select_problems(items, a.sample, a.seed)
    clock = FakeClock(a.seed) if a.dry_run else GpuClock()
    return run_problems(a, argv, clock, items, lambda p, recs: measure(clock, p, recs, a),
                        ("problem", "ratio_recorded", "ratio_events", "ratio_cupti", "aten_offset_us",
                         "triton_offset_us", "aten_kernels", "winner_flip", "error"),
                        summarize, lambda sm, rows, dev: markdown(sm, rows, dev, clock.fake))


if __name__ == "__main__":
    # run as a script only: importing this module (tests) must not change the environment
    os.environ.setdefault("TORCH_DIODE_AUTO_INSTALL", "0")
    raise SystemExit(main())
