"""Collector v2 throughput on the log-normal mix of real model shapes, on the GPU.

  python bench/collector_throughput.py --n 50 --seed 2026112501 --out shard.msgpack \
      [--deadline-s 520] [--inductor-timeout 120]

1. Samples `--n` problems (torch_diode.collect.sample: ln M, ln N, ln K mean/std
   6.5725/2.5562, 5.9139/1.6697, 6.2049/2.1647, multiples of 8, all four ops, fp16 and
   bf16, fixed seed) and collects them end to end with `python -m torch_diode.collect`
   (engine v2, EXHAUSTIVE). The kernel cache starts as the machine has it: say which.
2. From the shard alone: problems per GPU-hour, seconds per problem (median, p90, from
   the per-problem wall seconds the shard records), configs timed per second, share of
   records with a final status other than `timeout`.
3. Unless --inductor-timeout 0: Inductor's own EXHAUSTIVE max-autotune on two small
   problems of the mix vs the collector's recorded seconds for the same problems.
4. Where the seconds went, per stage (lowering, compile wait, timing, the static-shape
   re-time of collector 2.2.0 with its chase of 2.4.0), from the `<out>.stats.json`
   sidecar. Without a GPU, for finished collections:
   python bench/collector_throughput.py --breakdown A.stats.json ...

With --serve-vs-oneshot K, instead: the sample is cut into K specs (small shards, as
the fleet leases them) and collected twice, side by side in one run: one collector
process per spec (what the agent does by default), then one `--serve` process answering
the K specs in turn (the agent's --persistent-collector). Each arm starts with empty
Inductor and Triton caches of its own. Printed: each arm's wall per spec and in total,
the medians of each spec's first problem and of its other problems (the start-up a spec
pays), and the ratio one-shot / served (only when every spec of both arms succeeded and
both hold the same problems; else the reason). A throwaway `--help` run first warms the
page cache for both arms (serve_vs_oneshot).
"""
from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

# One definition for every bench script, the same as `diode validate` (bench/stats.py);
# quantile stays importable from here under its old name.
from stats import median, p90, quantile  # noqa: E402,F401


STAGES = ("lower_s", "compile_wait_s", "time_s", "static_s", "wall_s")
COUNTS = ("static", "static_failed", "static_beaten", "static_chased", "retimed", "mismatched")


def stage_breakdown(problems: list[dict]) -> dict:
    """Where a collection's seconds went, from its `<out>.stats.json` problems: per stage
    (lowering, waiting for compiles, timing, the static-shape re-time of 2.2.0, the whole
    problem) the median and total seconds, and the static stage's records (re-timed,
    failed, chased) and problems whose best Triton record is not static. Stages a
    collector version did not have are left out."""
    out: dict = {"problems": len(problems)}
    for k in STAGES:
        xs = [float(x[k]) for x in problems if k in x]
        if xs:
            out[k] = {"median": median(xs), "total": sum(xs)}
    for k in COUNTS:
        if any(k in x for x in problems):
            out[k] = sum(int(x.get(k, 0)) for x in problems)
    return out


def print_breakdown(b: dict) -> None:
    parts = [f"{k[:-2]} {v['median']:.1f} s median / {v['total']:.0f} s total" for k, v in b.items()
             if isinstance(v, dict)]
    print(f"stages over {b['problems']} problems: " + "; ".join(parts))
    counts = {k: b[k] for k in COUNTS if k in b}
    if counts:
        print("records: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


# Inductor's own EXHAUSTIVE max-autotune of one problem in a child process (step 3; from the
# removed bench/collector_vs_inductor.py, git history).
INDUCTOR_CHILD = r"""
import json, sys, time, torch
sys.path.insert(0, {py!r})
from torch._inductor import config, select_algorithm
from torch_diode import wire, inductor_compat as ic
from torch_diode.collect.problems import make_fn, make_inputs
from torch_diode.collect.records import to_config
p = wire.problem_from_json(json.loads({pj!r}))
out = {out!r}
def saver(timings, name, input_nodes, choices, *rest):
    rows = []
    for ch, ms in timings.items():
        ktc = ic.choice_ktc(ch)
        cfg = to_config(ic.ktc_template_uid(ktc), {{**ic.ktc_params(ktc), **ic.ktc_extra(ktc)}}) if ktc else None
        rows.append({{"config": wire.to_json(cfg) if cfg else None, "ms": ms if ms == ms and ms != float("inf") else None,
                      "desc": str(getattr(ch, "description", ""))}})
    json.dump({{"name": name, "n": len(timings), "t": time.perf_counter() - t0, "rows": rows}}, open(out, "w"))
select_algorithm.add_feedback_saver(saver)
inputs = make_inputs(p)
t0 = time.perf_counter()
with config.patch(max_autotune_gemm_search_space="EXHAUSTIVE", force_disable_caches=True,
                  max_autotune_gemm_backends="TRITON,ATEN"):
    fn = torch.compile(make_fn(p), mode="max-autotune-no-cudagraphs", dynamic=False, fullgraph=True)
    fn(*inputs); torch.cuda.synchronize()
print("inductor_wall_s", time.perf_counter() - t0, flush=True)
"""


def _kill_group(proc: subprocess.Popen) -> None:
    """The process and its compile workers (it leads its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_inductor(problem: dict, tmp: str, timeout: float) -> tuple[float, bool, dict | None]:
    out = os.path.join(tmp, "inductor.json")
    code = INDUCTOR_CHILD.format(py=os.path.join(ROOT, "python"), pj=json.dumps(problem), out=out)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        proc.wait(timeout=timeout)
        finished = proc.returncode == 0
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        finished = False
    wall = time.perf_counter() - t0
    data = json.load(open(out)) if os.path.exists(out) else None
    return wall, finished, data

def shard_walls(path: str) -> tuple[int, list[float]]:
    """The problems a shard holds and its per-problem wall seconds."""
    from torch_diode import wire
    shard = wire.decode_shard(open(path, "rb").read())
    return len(shard.problems), list(getattr(shard, "problem_wall_s", ()) or ())


def arm_summary(specs: list[dict]) -> dict:
    """One arm's figures from its per-spec results ({"wall_s", "problems", "walls"})."""
    firsts = [r["walls"][0] for r in specs if len(r["walls"]) >= 2]
    others = [w for r in specs if len(r["walls"]) >= 2 for w in r["walls"][1:]]
    return {"wall_s": sum(r["wall_s"] for r in specs), "problems": sum(r["problems"] for r in specs),
            "first_problem_median_s": median(firsts) if firsts else None,
            "other_problems_median_s": median(others) if others else None, "specs": specs}


def _read_reply(proc: subprocess.Popen, buf: bytearray, deadline: float) -> str | None:
    """The next line of `proc`'s stdout, by `deadline` (time.monotonic()): None when none came
    in time, "" at EOF. `buf` keeps bytes read past the line for the next call."""
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return ""
            buf += chunk
    i = buf.index(b"\n")
    line = bytes(buf[:i]).decode("utf-8", "replace")
    del buf[:i + 1]
    return line + "\n"


def _oneshot_spec(cmd: list[str], env: dict, timeout_s: float) -> dict:
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    try:
        return {"code": proc.wait(timeout=timeout_s)}
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return {"code": None, "error": f"no exit within {timeout_s:g} s (killed)"}


def _served_arm(spec_paths: list[str], outs: list[str], cmd: list[str], env: dict, timeout_s: float) -> list[dict]:
    """The K specs through one --serve process, each reply bounded by timeout_s. After a
    timeout (the process is killed), EOF or a broken pipe, the specs not answered fail."""
    specs: list[dict] = []
    proc = subprocess.Popen(cmd + ["--serve"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            start_new_session=True)
    buf = bytearray()
    dead = ""   # why the process serves no more specs
    try:
        for sp, out in zip(spec_paths, outs):
            if dead:
                specs.append({"wall_s": 0.0, "code": None, "error": f"not sent: {dead}"})
                continue
            t0 = time.perf_counter()
            try:
                proc.stdin.write((json.dumps({"spec": sp, "out": out}) + "\n").encode())
                proc.stdin.flush()
                line = _read_reply(proc, buf, time.monotonic() + timeout_s)
            except (BrokenPipeError, ConnectionResetError):
                line = ""
            wall = time.perf_counter() - t0
            if line is None:
                _kill_group(proc)
                dead = f"no reply within {timeout_s:g} s (killed)"
                reply = {"error": dead}
            elif not line.strip():
                dead = "no reply (the collector ended)"
                reply = {"error": dead}
            else:
                try:
                    reply = json.loads(line)
                    if not isinstance(reply, dict):
                        raise ValueError("not an object")
                except ValueError:
                    reply = {"error": f"reply is not a JSON object: {line[:200]!r}"}
            specs.append({"wall_s": wall, "code": reply.get("code"),
                          **({"error": reply["error"]} if "error" in reply else {})})
        if proc.poll() is None:
            try:
                proc.stdin.close()
                proc.wait(timeout=60)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                pass
    finally:
        if proc.poll() is None:
            _kill_group(proc)
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except OSError:
                pass
    return specs


def ratio_or_reason(res: dict) -> tuple[float | None, str | None]:
    """One-shot wall / served wall, only when both arms collected every spec (code 0 each)
    and hold the same number of problems; else None and why."""
    bad = {arm: [i for i, r in enumerate(res[arm]["specs"]) if r.get("code") != 0] for arm in ("oneshot", "served")}
    if bad["oneshot"] or bad["served"]:
        def names(arm):
            return ", ".join(f"#{i} (code {res[arm]['specs'][i].get('code')})" for i in bad[arm])
        return None, "failed specs: " + "; ".join(f"{arm} {names(arm)}" for arm in bad if bad[arm])
    o, s = res["oneshot"], res["served"]
    if o["problems"] != s["problems"]:
        return None, f"the arms hold different problem counts: oneshot {o['problems']}, served {s['problems']}"
    if not s["wall_s"]:
        return None, "served wall is 0"
    return o["wall_s"] / s["wall_s"], None


def serve_vs_oneshot(spec_paths: list[str], tmp: str, collect_cmd: list[str], env: dict,
                     timeout_s: float = 3600) -> dict:
    """Collects the specs one process each, then all through one --serve process; each arm
    with its own empty Inductor and Triton caches. Every spec is bounded by timeout_s (a
    one-shot process, or one reply of the served process: on a timeout it is killed with its
    group and the spec, and any the served process did not get to, fail).

    Before the first arm, one throwaway `collect_cmd --help` run reads the interpreter,
    torch_diode and torch into the OS page cache, so the one-shot arm (first) does not pay
    the cold disk alone. (Modules only a collection imports, Inductor's and Triton's
    codegen, are still read first by the one-shot arm's first spec.)

    Returns both arms' figures and `oneshot_over_served_wall`: the ratio of their walls, only
    when every spec of both arms exited 0 and both arms hold the same number of problems;
    else None, and `ratio_unavailable` says why."""
    try:
        subprocess.run(collect_cmd + ["--help"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=600)
    except subprocess.TimeoutExpired:
        pass
    res = {}
    for arm in ("oneshot", "served"):
        aenv = dict(env, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, arm, "inductor"),
                    TRITON_CACHE_DIR=os.path.join(tmp, arm, "triton"))
        outs = [os.path.join(tmp, arm, f"shard{i}.msgpack") for i in range(len(spec_paths))]
        os.makedirs(os.path.join(tmp, arm), exist_ok=True)
        if arm == "oneshot":
            specs = []
            for sp, out in zip(spec_paths, outs):
                t0 = time.perf_counter()
                r = _oneshot_spec(collect_cmd + ["--spec", sp, "--out", out], aenv, timeout_s)
                specs.append({"wall_s": time.perf_counter() - t0, **r})
        else:
            specs = _served_arm(spec_paths, outs, collect_cmd, aenv, timeout_s)
        for r, out in zip(specs, outs):
            r["problems"], r["walls"] = shard_walls(out) if os.path.exists(out) else (0, [])
        res[arm] = arm_summary(specs)
    ratio, why = ratio_or_reason(res)
    res["oneshot_over_served_wall"] = ratio
    if why:
        res["ratio_unavailable"] = why
    return res


def print_serve_vs_oneshot(res: dict) -> None:
    f = lambda x: "-" if x is None else f"{x:.2f}"
    for arm in ("oneshot", "served"):
        a = res[arm]
        per = ", ".join(f"{r['wall_s']:.1f}" for r in a["specs"])
        print(f"{arm}: {len(a['specs'])} specs, {a['problems']} problems, wall {a['wall_s']:.1f} s ({per}); "
              f"first problem of a spec median {f(a['first_problem_median_s'])} s, "
              f"the others {f(a['other_problems_median_s'])} s")
    why = res.get("ratio_unavailable")
    print(f"one-shot / served wall: {f(res['oneshot_over_served_wall'])}" + (f" ({why})" if why else ""))


def main() -> int:
    if sys.argv[1:2] == ["--breakdown"]:  # no GPU: where the seconds of finished collections went
        probs = [x for f in sys.argv[2:] for x in json.load(open(f))["problems"]]
        print_breakdown(stage_breakdown(probs))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline-s", type=float, default=0.0)
    ap.add_argument("--problem-timeout-s", type=float, default=150.0)
    ap.add_argument("--inductor-timeout", type=float, default=120.0)
    ap.add_argument("--shard-id", default="")
    ap.add_argument("--first", type=int, default=0, help="resume: skip the sample's problems before this index")
    ap.add_argument("--serve-vs-oneshot", type=int, default=0, metavar="K",
                    help="cut the sample into K specs and collect them one process each, then through one "
                         "--serve process (side by side; --out is then a folder for both arms' shards)")
    a = ap.parse_args()
    from torch_diode import wire
    from torch_diode.collect.sample import sample_problems
    probs = sample_problems(a.n, a.seed)
    spec = {"shard_id": a.shard_id or f"throughput/{a.seed}", "sweep_id": f"lognormal-{a.seed}",
            "search_space": "EXHAUSTIVE", "problems": [wire.to_json(p) for p in probs],
            "timing": {"repeats": 15, "min_repeats": 3, "budget_ms_per_config": 10.0,
                       "problem_timeout_s": a.problem_timeout_s}}
    tmp = tempfile.mkdtemp()
    sp = os.path.join(tmp, "spec.json")
    json.dump(spec, open(sp, "w"))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), TORCH_DIODE_AUTO_INSTALL="0")
    if a.serve_vs_oneshot:
        k = a.serve_vs_oneshot
        paths = []
        for i in range(k):
            part = dict(spec, shard_id=f"{spec['shard_id']}/{i}", problems=spec["problems"][i::k])
            paths.append(os.path.join(tmp, f"spec{i}.json"))
            json.dump(part, open(paths[-1], "w"))
        os.makedirs(a.out, exist_ok=True)
        res = serve_vs_oneshot(paths, a.out, [sys.executable, "-m", "torch_diode.collect"], env)
        print_serve_vs_oneshot(res)
        json.dump(res, open(os.path.join(a.out, "serve_vs_oneshot.json"), "w"), indent=1)
        return 0
    cmd = [sys.executable, "-m", "torch_diode.collect", "--spec", sp, "--out", a.out]
    if a.deadline_s:
        cmd += ["--deadline-s", str(a.deadline_s)]
    if a.first:
        cmd += ["--first", str(a.first)]
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, env=env).returncode
    wall = time.perf_counter() - t0
    shard = wire.decode_shard(open(a.out, "rb").read())
    walls = list(getattr(shard, "problem_wall_s", ()) or ())
    if not walls and os.path.exists(a.out + ".stats.json"):  # shards written before wire v2
        walls = [x["wall_s"] for x in json.load(open(a.out + ".stats.json"))["problems"]]
    recs = shard.records
    ok = sum(r.status == "ok" for r in recs)
    final = sum(r.status != "timeout" for r in recs)
    print(f"\n=== collector v2, {len(shard.problems)}/{a.n} problems collected (rc {rc}), process wall {wall:.1f} s")
    print(f"records {len(recs)}: ok {ok}, final status other than timeout {final / max(len(recs), 1):.1%}")
    if walls:
        tot = sum(walls)
        print(f"seconds per problem (recorded): median {median(walls):.1f}, p90 {p90(walls):.1f}, "
              f"sum {tot:.1f}")
        print(f"problems per GPU-hour: {3600 * len(walls) / tot:.0f} (recorded seconds), "
              f"{3600 * len(shard.problems) / wall:.0f} (process wall incl. start-up)")
        print(f"configs timed per second: {ok / tot:.1f}")
    if os.path.exists(a.out + ".stats.json"):
        print_breakdown(stage_breakdown(json.load(open(a.out + ".stats.json"))["problems"]))
    if a.inductor_timeout > 0 and walls:
        small = sorted(range(len(shard.problems)), key=lambda i: len([r for r in recs if r.problem_index == i]))
        for i in small[:2]:
            p = shard.problems[i]
            iw, fin, ind = run_inductor(wire.to_json(p), tmp, a.inductor_timeout)
            mine = walls[i] if i < len(walls) else float("nan")
            verdict = f"{iw / mine:.1f}x" if fin else f"> {a.inductor_timeout / mine:.1f}x (Inductor not finished)"
            print(f"inductor EXHAUSTIVE {p.op} {p.batch}x{p.m}x{p.n}x{p.k} {p.dtype_a}: "
                  f"{iw:.1f} s{'' if fin else ' (killed)'} vs collector {mine:.1f} s -> speed-up {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
