"""The driver shared by the benches that re-time recorded problems on the GPU
(aten_triton_clock, pick_retime): the common options, joining parts with --merge, and the
problem loop with its time budget, one printed line per problem, and the --json file
rewritten after every problem (a device call cut short keeps what it measured)."""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

from stats import median

FAKE = "FAKE"


def add_common_args(ap) -> None:
    """Options every re-timing bench takes; each adds its own (inputs, extra clocks)."""
    ap.add_argument("--start", type=int, default=0, help="first problem of the (sampled) list")
    ap.add_argument("--count", type=int, default=0, help="this many problems from --start (0: all)")
    ap.add_argument("--budget-s", type=float, default=480.0, help="start no problem after this many seconds")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved events rounds per launch")
    ap.add_argument("--repeats", type=int, default=10, help="BatchTimer repeats per round")
    ap.add_argument("--json", default="", help="write rows and summary here (after every problem too)")
    ap.add_argument("--merge", nargs="+", metavar="PART_JSON", help="join parts' --json files, print the summary")
    ap.add_argument("--dry-run", action="store_true", help="CPU only, FAKE timings: tests the driver")


def interleaved_medians(clock, launches: dict, rounds: int, repeats: int) -> dict:
    """{key: median us} of each launch on the clock: untimed warm-up rounds first (after a
    compile the GPU idled), then `rounds` rounds of `repeats` timed calls of each launch in
    turn, interleaved so that a drift of the GPU's clocks falls on all of them alike."""
    clock.warm(list(launches.values()), repeats)
    times = {k: [] for k in launches}
    for _ in range(rounds):
        for k, fn in launches.items():
            times[k] += clock.events_us(fn, repeats)
    return {k: median(v) for k, v in times.items()}


def on_clock(clock, row: dict, setup: Callable[[], object], body: Callable[[object], None]) -> dict:
    """Runs `setup()` (compile and check the launches), then `body(its result)` (time them),
    and tears the clock down after either, however it ends. A failure does not end the run:
    it becomes the row's "error" ("setup: ..." when setup raised, e.g. a static-shape kernel
    that fails to compile or launch; the bare text for a launch error while timing)."""
    try:
        launches = setup()
    except Exception as e:
        clock.teardown()
        row["error"] = "setup: " + error_text(e)
        return row
    try:
        body(launches)
    except Exception as e:
        row["error"] = error_text(e)
    finally:
        clock.teardown()
    return row


def error_text(e: BaseException) -> str:
    """A row's error: the exception's type and the first line of its message, bounded."""
    first = str(e).splitlines()[0][:200] if str(e) else ""
    return f"{type(e).__name__}: {first}"


def dump(path: str, doc: dict) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def run_merge(ap, a, merge: Callable[[list], dict], report: Callable[[dict, str], str]) -> int:
    """--merge: the parts' --json files joined by `merge` (ValueError: a usage error), the
    report of the whole printed (report(doc, device line)), and written to --json."""
    parts = []
    for path in a.merge:
        with open(path) as f:
            parts.append(json.load(f))
    try:
        doc = merge(parts)
    except ValueError as e:
        ap.error(str(e))
    print(report(doc, f"{len(parts)} parts: " + ", ".join(doc["devices"])))
    if a.json:
        dump(a.json, doc)
    return 0


def run_problems(a, argv, clock, items: list, measure: Callable, line_keys: tuple,
                 summarize: Callable[[list, int], dict], report: Callable[[dict, list, str], str],
                 info: dict | None = None) -> int:
    """measure(p, recs) for each (p, recs) of items[--start:--start+--count] until --budget-s;
    prints line_keys of each row, then report(summary, rows, device)."""
    items = items[a.start:a.start + a.count if a.count else None]
    run_info = {"argv": sys.argv if argv is None else argv, "device": clock.device, "fake": clock.fake, **(info or {})}
    if clock.fake:
        print(f"*** {FAKE} timings: --dry-run, no GPU; the numbers below mean nothing ***", flush=True)
    t0, rows = time.perf_counter(), []
    for i, (p, recs) in enumerate(items):
        if time.perf_counter() - t0 > a.budget_s:
            print(f"budget {a.budget_s:.0f} s reached after {i} problems; {len(items) - i} skipped", flush=True)
            break
        row = measure(p, recs)
        rows.append(row)
        print(("FAKE " if clock.fake else "") + json.dumps({k: row.get(k) for k in line_keys}), flush=True)
        if a.json:
            dump(a.json, {"rows": rows, "skipped": len(items) - len(rows), "partial": True, **run_info})
    skipped = len(items) - len(rows)
    sm = summarize(rows, skipped)
    print()
    print(report(sm, rows, run_info["device"]))
    if a.json:
        dump(a.json, {"rows": rows, "skipped": skipped, "summary": sm, **run_info})
    return 0
