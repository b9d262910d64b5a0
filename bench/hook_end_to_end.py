#!/usr/bin/env python3
"""End-to-end benchmark of the torch_diode Inductor hook (GPU).

For each workload (single GEMMs and two small models) and each mode

  plain              torch.compile(fn)                                   (no autotuning)
  default            torch.compile(fn, mode="max-autotune"), DEFAULT GEMM search space
  exhaustive         same, EXHAUSTIVE search space (bounded: "not finished" past --exhaustive-timeout)
  diode              max-autotune + torch_diode (model scores Inductor's DEFAULT list, keeps top-k)
  diode_exhaustive   max-autotune + torch_diode scoring the EXHAUSTIVE list (search_space="exhaustive")

it measures the compile time (first call: Dynamo + Inductor + autotuning, cold caches)
and the run time of the compiled callable (median of CUDA-event timed calls; for a
single-GEMM workload this is the GEMM time), then prints both side by side with ratios
to `default`, and writes everything to --out as JSON.

Every (mode, workload) runs in its own Python subprocess with its own empty Inductor
cache dir and caches force-disabled, so no mode sees another's compiled kernels,
autotune results or choices handler. The driver enforces per-run timeouts and an
overall --budget-s (runs that do not fit are reported as skipped, not silently dropped).

  python bench/hook_end_to_end.py --model DIR --out results.json
  python bench/hook_end_to_end.py --dry-run [--model DIR]      # imports + one worker, no GPU needed
  python bench/hook_end_to_end.py --rank-timing [--model DIR]  # CPU: time to rank ~1,400 configs
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(os.path.dirname(HERE), "python")

MODES = ("plain", "default", "exhaustive", "diode", "diode_exhaustive")
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}

# name -> spec. GEMMs: op, m, n, k[, batch]. Models: kind + sizes (tokens = batch * seq).
WORKLOADS = {
    "mm_1024x4096x2048": {"kind": "gemm", "op": "mm", "m": 1024, "n": 4096, "k": 2048},
    "mm_512x512x512": {"kind": "gemm", "op": "mm", "m": 512, "n": 512, "k": 512},
    "linear_8192x4096x4096": {"kind": "gemm", "op": "addmm", "m": 8192, "n": 4096, "k": 4096},
    "bmm_32x512x512x128": {"kind": "gemm", "op": "bmm", "batch": 32, "m": 512, "n": 512, "k": 128},
    "mlp_block": {"kind": "mlp", "tokens": 4096, "d": 2048, "ffn": 8192},
    "attn_proj": {"kind": "attn", "batch": 8, "seq": 512, "d": 2048, "heads": 16},
}
DEFAULT_WORKLOADS = ("mm_1024x4096x2048", "mm_512x512x512", "linear_8192x4096x4096",
                     "bmm_32x512x512x128", "mlp_block", "attn_proj")


# ====================================================================== worker (one run)

def _build(spec: dict, dtype, device):
    """(callable, args) for a workload."""
    import torch
    from torch import nn

    g = torch.Generator(device="cpu").manual_seed(0)

    def rnd(*shape):
        return (torch.randn(*shape, generator=g) * 0.1).to(device=device, dtype=dtype)

    kind = spec["kind"]
    if kind == "gemm":
        op, m, n, k = spec["op"], spec["m"], spec["n"], spec["k"]
        if op == "mm":
            return (lambda a, b: a @ b), (rnd(m, k), rnd(k, n))
        if op == "addmm":  # nn.Linear / F.linear
            return (lambda x, w, b: nn.functional.linear(x, w, b)), (rnd(m, k), rnd(n, k), rnd(n))
        if op == "bmm":
            bsz = spec["batch"]
            return (lambda a, b: torch.bmm(a, b)), (rnd(bsz, m, k), rnd(bsz, k, n))
        raise ValueError(f"unknown op {op}")
    if kind == "mlp":  # transformer MLP block: Linear(d, ffn) -> GELU -> Linear(ffn, d), residual
        d, ffn = spec["d"], spec["ffn"]
        mod = nn.Sequential(nn.Linear(d, ffn), nn.GELU(), nn.Linear(ffn, d)).to(device=device, dtype=dtype)
        return (lambda x: x + mod(x)), (rnd(spec["tokens"], d),)
    if kind == "attn":  # q/k/v/o projections plus the two attention bmms
        b, s, d, h = spec["batch"], spec["seq"], spec["d"], spec["heads"]

        class Attn(nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = nn.Linear(d, 3 * d)
                self.o = nn.Linear(d, d)

            def forward(self, x):
                q, k_, v = self.qkv(x).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4)
                att = torch.softmax((q @ k_.transpose(-1, -2)) * (d // h) ** -0.5, dim=-1)
                y = (att @ v).transpose(1, 2).reshape(b, s, d)
                return self.o(y)

        mod = Attn().to(device=device, dtype=dtype)
        return mod, (rnd(b, s, d),)
    raise ValueError(f"unknown workload kind {kind}")


def _time_ms(fn, args, reps: int) -> tuple[float, list[float]]:
    import torch
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(*args)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times), times


def worker(a) -> dict:
    import torch
    from torch._inductor import config

    res: dict = {"mode": a.mode, "workload": a.workload, "torch": torch.__version__}
    try:
        import triton
        res["triton"] = triton.__version__
    except ImportError:
        res["triton"] = None
    if a.dry_run:
        import torch_diode.hook.api  # noqa: F401
        from torch_diode.hook import compat
        res.update(status="dry_run_ok", cuda=torch.cuda.is_available(),
                   finalize_hook=compat.finalize_hook_name(),
                   has_choices_config=compat.has_choices_config(),
                   search_space_flag=compat.exhaustive_flag_supported())
        if a.model:
            from torch_diode.model import load_model_dir
            res["model_id"] = load_model_dir(a.model).info.model_id[:16]
        return res
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: this benchmark needs a GPU (use --dry-run to check imports)")
    config.force_disable_caches = True  # cold compile for every mode; the env var covers subprocesses
    res["device"] = torch.cuda.get_device_name()
    spec = WORKLOADS[a.workload]
    dtype = getattr(torch, DTYPES[a.dtype])
    fn, args = _build(spec, dtype, "cuda")
    compile_kwargs = {}
    if a.mode != "plain":
        compile_kwargs["mode"] = "max-autotune"
        config.max_autotune_gemm_search_space = "EXHAUSTIVE" if a.mode == "exhaustive" else "DEFAULT"
    if a.mode.startswith("diode"):
        import torch_diode
        if not torch_diode.install(a.model, top_k=a.top_k, threshold=a.threshold,
                                   search_space="exhaustive" if a.mode == "diode_exhaustive" else "default"):
            raise RuntimeError(f"torch_diode did not load {a.model}: {torch_diode.get_prediction_stats()}")
    benchmarked = []
    saver_ctx = None
    try:  # count the choices Inductor really benchmarks (optional: API differs across versions)
        from torch_diode import inductor_compat
        saver_ctx = inductor_compat.feedback_saver(
            lambda timings, name, inputs, choices: benchmarked.append({"op": name, "choices": len(timings)}))
        saver_ctx.__enter__()
    except Exception as e:
        res["feedback_saver_error"] = repr(e)
        saver_ctx = None
    torch._dynamo.reset()
    compiled = torch.compile(fn, **compile_kwargs)
    with torch.no_grad():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = compiled(*args)
        torch.cuda.synchronize()
        res["compile_s"] = time.perf_counter() - t0
        if saver_ctx is not None:
            saver_ctx.__exit__(None, None, None)
        ref = fn(*args)
        res["max_abs_err"] = float((out.float() - ref.float()).abs().max())
        res["ref_max_abs"] = float(ref.float().abs().max())
        res["run_ms"], res["run_ms_all"] = _time_ms(compiled, args, a.reps)
        res["eager_ms"], _ = _time_ms(fn, args, a.reps)
    res["autotunes"] = benchmarked
    if a.mode.startswith("diode"):
        import torch_diode
        res["diode_stats"] = torch_diode.get_prediction_stats()
    res["status"] = "ok"
    return res


# ====================================================================== driver

def _run_one(a, mode: str, workload: str, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="diode_bench_") as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--mode", mode, "--workload", workload,
               "--dtype", a.dtype, "--reps", str(a.reps), "--top-k", str(a.top_k),
               "--threshold", str(a.threshold), "--result", out]
        if a.model:
            cmd += ["--model", a.model]
        if a.dry_run:
            cmd.append("--dry-run")
        env = dict(os.environ)
        env.update(TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"), TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
                   TRITON_CACHE_DIR=os.path.join(tmp, "triton"), TORCH_DIODE_AUTO_INSTALL="0",
                   PYTHONPATH=PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", ""))
        t0 = time.perf_counter()
        # own session: on timeout the whole group goes, Inductor's compile workers included
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            _, stderr = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(p)
            return {"mode": mode, "workload": workload, "status": "not_finished", "limit_s": timeout,
                    "wall_s": time.perf_counter() - t0}
        wall = time.perf_counter() - t0
        if p.returncode == 0 and os.path.exists(out):
            with open(out) as f:
                r = json.load(f)
            r["wall_s"] = wall
            return r
        return {"mode": mode, "workload": workload, "status": "error", "rc": p.returncode, "wall_s": wall,
                "stderr_tail": (stderr or "")[-3000:]}


def _kill_group(p: subprocess.Popen) -> None:
    import signal
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.communicate()


def _fmt(x, spec):
    if isinstance(x, (int, float)):
        return format(x, spec)
    width = spec.split(".")[0]
    return "-".rjust(int(width)) if width.isdigit() else "-"


def _report(results: list[dict], workloads, modes) -> str:
    by = {(r["workload"], r["mode"]): r for r in results}
    lines = []
    head = f"{'workload':24s} {'mode':17s} {'status':13s} {'compile s':>10s} {'x default':>9s} " \
           f"{'run ms':>9s} {'x default':>9s} {'x plain':>8s} {'kept/seen':>10s}"
    lines += [head, "-" * len(head)]
    for w in workloads:
        base, plain = by.get((w, "default"), {}), by.get((w, "plain"), {})
        for m in modes:
            r = by.get((w, m))
            if r is None:
                continue
            ok = r.get("status") == "ok"
            c, t = r.get("compile_s") if ok else None, r.get("run_ms") if ok else None
            cx = c / base["compile_s"] if ok and base.get("status") == "ok" else None
            tx = t / base["run_ms"] if ok and base.get("status") == "ok" else None
            px = t / plain["run_ms"] if ok and plain.get("status") == "ok" else None
            kept = ""
            st = r.get("diode_stats")
            if st:
                kept = f"{st.get('configs_kept')}/{st.get('configs_seen')}"
            status = r.get("status", "?")
            if status == "not_finished":
                status = f">{r.get('limit_s', 0):.0f}s"
            lines.append(f"{w:24s} {m:17s} {status:13s} {_fmt(c, '10.2f')} {_fmt(cx, '9.3f')} "
                         f"{_fmt(t, '9.4f')} {_fmt(tx, '9.3f')} {_fmt(px, '8.3f')} {kept:>10s}")
    return "\n".join(lines)


def rank_timing(a) -> dict:
    """CPU: time for the hook to rank Inductor's EXHAUSTIVE triton::mm list for one problem."""
    sys.path.insert(0, PYTHON_DIR)
    import torch

    from torch_diode.collect.enumerate import mm_configs
    from torch_diode.hook import extract
    from torch_diode.hook.ranking import Options, Ranker, select
    from torch_diode.model import load_model_dir
    from torch_diode.wire import Problem

    model_dir = a.model
    if not model_dir:  # a random model of the documented example size (256 hidden, 3 blocks)
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python"))
        from test_hook_model import write_model_dir
        model_dir = write_model_dir(tempfile.mkdtemp(prefix="diode_rank_"), hidden=256, blocks=3)
    model = load_model_dir(model_dir)
    p = Problem(op="mm", m=1024, n=4096, k=2048, dtype_a="bfloat16", dtype_b="bfloat16", dtype_out="bfloat16")
    raw = mm_configs(p.m, p.n, p.k, 2, "EXHAUSTIVE")

    class _KTC:  # what the handler reads from an Inductor KernelTemplateChoice
        def __init__(self, kw):
            self.template = types.SimpleNamespace(uid="triton::mm")
            self.params = types.SimpleNamespace(to_kwargs=lambda: dict(kw))
            self.extra_kwargs = {"ALLOW_TF32": False}

    ktcs = [_KTC(c) for c in raw]
    rows = []
    for _ in range(a.reps):
        r = Ranker(model)
        t0 = time.perf_counter()
        configs = [extract.config_from_ktc(k) for k in ktcs]
        t1 = time.perf_counter()
        x = r.features(p, configs)
        t2 = time.perf_counter()
        s = r._forward(x)
        t3 = time.perf_counter()
        select(s, Options())
        t4 = time.perf_counter()
        r2 = Ranker(model)
        t5 = time.perf_counter()
        s2, hit, _ = r2.score(p, configs)   # what the handler calls: a miss ...
        select(s2, Options())
        t6 = time.perf_counter()
        _, hit2, _ = r2.score(p, configs)   # ... then a hit
        t7 = time.perf_counter()
        assert not hit and hit2
        rows.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t1 - t0 + t6 - t5, t7 - t6))
    med = [statistics.median(c) * 1e3 for c in zip(*rows)]
    res = {"configs": len(configs), "torch_threads": torch.get_num_threads(),
           "arch": vars(model.info.architecture), "extract_ms": med[0], "features_ms": med[1],
           "forward_ms": med[2], "select_ms": med[3], "total_ms": med[4], "cache_hit_ms": med[5],
           "reps": a.reps}
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="torch_diode model directory (needed for the diode modes)")
    ap.add_argument("--out", help="write all results as JSON here")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma list of {MODES}")
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS), help=f"comma list of {list(WORKLOADS)}")
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--reps", type=int, default=50, help="timed calls per measurement")
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--threshold", type=float, default=0.05)
    ap.add_argument("--timeout", type=float, default=300, help="limit per run (s), non-exhaustive modes")
    ap.add_argument("--exhaustive-timeout", type=float, default=240, help="limit per EXHAUSTIVE run (s)")
    ap.add_argument("--budget-s", type=float, default=540,
                    help="stop starting runs after this much wall time (default fits a 10-minute session)")
    ap.add_argument("--dry-run", action="store_true", help="check imports and the worker path; no GPU work")
    ap.add_argument("--rank-timing", action="store_true", help="CPU: time ranking ~1,400 configs, then exit")
    # worker-only arguments
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--workload", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.worker:
        try:
            res = worker(a)
        except Exception as e:
            res = {"mode": a.mode, "workload": a.workload, "status": "error",
                   "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
        with open(a.result, "w") as f:
            json.dump(res, f)
        return 0

    if a.rank_timing:
        a.reps = min(a.reps, 10)
        res = rank_timing(a)
        print(json.dumps(res, indent=1))
        if a.out:
            with open(a.out, "w") as f:
                json.dump(res, f, indent=1)
        return 0

    modes = [m for m in a.modes.split(",") if m]
    workloads = [w for w in a.workloads.split(",") if w]
    bad = [m for m in modes if m not in MODES] + [w for w in workloads if w not in WORKLOADS]
    if bad:
        ap.error(f"unknown modes/workloads: {bad}")
    if any(m.startswith("diode") for m in modes) and not a.model:
        ap.error("the diode modes need --model DIR (or leave them out of --modes)")
    if a.model and not os.path.isfile(os.path.join(a.model, "model.json")):
        ap.error(f"--model {a.model}: no model.json there")

    if a.dry_run:  # one worker per mode on the first workload: imports, args, JSON round trip
        results = [_run_one(a, m, workloads[0], 180) for m in modes]
        print(json.dumps(results, indent=1))
        ok = all(r.get("status") == "dry_run_ok" for r in results)
        print("dry run:", "OK" if ok else "FAILED")
        return 0 if ok else 1

    # cheap modes first for every workload, EXHAUSTIVE ones last with what remains of the budget
    order = [(w, m) for w in workloads for m in modes if "exhaustive" not in m] + \
            [(w, m) for w in workloads for m in modes if "exhaustive" in m]
    meta = {"argv": sys.argv, "modes": modes, "workloads": {w: WORKLOADS[w] for w in workloads},
            "dtype": a.dtype, "model": a.model, "reps": a.reps, "top_k": a.top_k, "threshold": a.threshold}

    def save(results, done):
        if a.out:  # after every run, so a killed session still leaves what finished
            tmp = a.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"meta": meta, "complete": done, "results": results}, f, indent=1)
            os.replace(tmp, a.out)

    start, results = time.perf_counter(), []
    for w, m in order:
        left = a.budget_s - (time.perf_counter() - start)
        limit = a.exhaustive_timeout if m == "exhaustive" else a.timeout
        if left < 30:
            results.append({"mode": m, "workload": w, "status": "skipped_budget"})
            continue
        r = _run_one(a, m, w, min(limit, left))
        results.append(r)
        save(results, False)
        print(f"[{time.perf_counter() - start:7.1f}s] {w} {m}: {r.get('status')} "
              f"compile={_fmt(r.get('compile_s'), '.2f')}s run={_fmt(r.get('run_ms'), '.4f')}ms"
              + (f" ({r.get('error') or r.get('stderr_tail', '')[-300:]})" if r.get("status") == "error" else ""),
              flush=True)
    save(results, True)
    print()
    print(_report(results, workloads, modes))
    if a.out:
        print(f"\nwrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
