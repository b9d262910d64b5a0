"""Collector vs Inductor's own EXHAUSTIVE max-autotune, side by side, on the GPU.

  python bench/collector_vs_inductor.py --op mm --m 512 --n 512 --k 512 --dtype float16 \
      --inductor-timeout 240

Runs, one after the other in fresh subprocesses (so each pays its own worker-pool start):
  1. the collector on the problem's full EXHAUSTIVE space (python -m torch_diode.collect);
  2. Inductor's own EXHAUSTIVE pass: torch.compile(mode="max-autotune-no-cudagraphs") with
     max_autotune_gemm_search_space="EXHAUSTIVE", caches off, a feedback saver writing its
     timings; killed after --inductor-timeout seconds (reported as "> T s (not finished)").
Prints wall times, speed-up and fidelity: the collector's best Triton config time vs
Inductor's best, and the collector's time for the config Inductor picked.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

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


def run_collector(problem: dict, tmp: str) -> tuple[float, list, int]:
    from torch_diode import wire
    spec = {"shard_id": "bench", "sweep_id": "bench", "search_space": "EXHAUSTIVE", "problems": [problem]}
    sp, out = os.path.join(tmp, "spec.json"), os.path.join(tmp, "shard.msgpack")
    json.dump(spec, open(sp, "w"))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    t0 = time.perf_counter()
    rc = subprocess.run([sys.executable, "-m", "torch_diode.collect", "--spec", sp, "--out", out], env=env).returncode
    wall = time.perf_counter() - t0
    shard = wire.decode_shard(open(out, "rb").read()) if os.path.exists(out) else None
    return wall, (shard.records if shard else []), rc


def run_inductor(problem: dict, tmp: str, timeout: float) -> tuple[float, bool, dict | None]:
    out = os.path.join(tmp, "inductor.json")
    code = INDUCTOR_CHILD.format(py=os.path.join(ROOT, "python"), pj=json.dumps(problem), out=out)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        proc.wait(timeout=timeout)
        finished = proc.returncode == 0
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # the child and its compile workers
        proc.wait()
        finished = False
    wall = time.perf_counter() - t0
    data = json.load(open(out)) if os.path.exists(out) else None
    return wall, finished, data


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", default="mm", choices=["mm", "addmm", "bmm", "baddbmm"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--m", type=int, default=512)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--k", type=int, default=512)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--inductor-timeout", type=float, default=240.0)
    a = ap.parse_args()
    from torch_diode import wire
    from torch_diode.collect.spec import parse_spec
    prob = {"op": a.op, "batch": a.batch if a.op in ("bmm", "baddbmm") else 1, "m": a.m, "n": a.n,
            "k": a.k, "dtype_a": a.dtype}
    p = parse_spec({"shard_id": "x", "problems": [prob]}).problems[0]
    problem = wire.to_json(p)
    with tempfile.TemporaryDirectory() as tmp:
        c_wall, recs, rc = run_collector(problem, tmp)
        i_wall, finished, ind = run_inductor(problem, tmp, a.inductor_timeout)
    ok = [r for r in recs if r.status == "ok"]
    tri = [r for r in ok if r.config.is_triton]
    c_best = min(tri, key=lambda r: r.median_us) if tri else None
    print(f"problem: {a.op} b={prob['batch']} {a.m}x{a.n}x{a.k} {a.dtype}")
    print(f"collector: wall {c_wall:.1f} s (rc {rc}), {len(recs)} configs recorded, {len(ok)} timed ok")
    if finished:
        print(f"inductor EXHAUSTIVE: wall {i_wall:.1f} s, {ind['n'] if ind else '?'} choices timed")
        print(f"speed-up: {i_wall / c_wall:.2f}x")
    else:
        print(f"inductor EXHAUSTIVE: > {a.inductor_timeout:.0f} s (not finished)")
        print(f"speed-up: > {a.inductor_timeout / c_wall:.2f}x")
    if c_best:
        print(f"collector best triton: {c_best.median_us:.2f} us  {c_best.config}")
    if ind and c_best:
        rows = [r for r in ind["rows"] if r["ms"] and r["config"] and r["config"]["template"].startswith("triton")]
        if rows:
            ib = min(rows, key=lambda r: r["ms"])
            ib_us = ib["ms"] * 1000
            print(f"inductor best triton:  {ib_us:.2f} us  {ib['desc']}")
            print(f"fidelity: collector best / inductor best = {c_best.median_us / ib_us:.4f}")
            same = [r for r in tri if wire.to_json(r.config) == ib["config"]]
            if same:
                print(f"collector time of inductor's pick: {same[0].median_us:.2f} us "
                      f"(ratio {same[0].median_us / ib_us:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
