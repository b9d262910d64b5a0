"""Command line: python -m torch_diode.collect --spec SPEC.json --out SHARD.msgpack[.gz]
           or: python -m torch_diode.collect --serve   (one JSON request per stdin line; see serve())

Exit codes (the agent maps them; see docs/collector.md):
  0  every problem measured, shard written
  2  bad usage or invalid spec (nothing measured)
  3  environment cannot collect: no GPU, torch too old, Inductor hooks missing
  4  shard written, but some problems produced no timing at all
  5  stopped at --deadline-s before all problems; shard holds the finished ones
  1  unexpected internal error
Progress goes to stderr, one line per problem, prefixed "collect:".
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import gzip
import json
import os
import sys
import time
import traceback

from .. import inductor_compat as ic
from .. import wire
from . import records
from .problems import describe
from .spec import SpecError, load_spec

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_ENV, EXIT_PARTIAL, EXIT_DEADLINE = 0, 1, 2, 3, 4, 5


def log(msg: str) -> None:
    print(f"collect: {msg}", file=sys.stderr, flush=True)


def write_atomic(path: str, data: bytes) -> None:
    if path.endswith(".gz"):
        data = gzip.compress(data, 9, mtime=0)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m torch_diode.collect",
                                 description="Time every Inductor GEMM config of each problem in a shard spec.")
    ap.add_argument("--spec", help="shard spec JSON (docs/collector.md); required unless --serve")
    ap.add_argument("--serve", action="store_true",
                    help="keep running: read one JSON request per stdin line, {\"spec\": PATH, \"out\": PATH, "
                         "\"deadline_s\": F}, collect it as --spec/--out would and answer one JSON line "
                         "{\"out\": PATH, \"code\": EXIT_CODE} on stdout (docs/collector.md)")
    ap.add_argument("--out", help="output shard (.msgpack, or .msgpack.gz for gzip)")
    ap.add_argument("--device", type=int, default=0, help="CUDA device index")
    ap.add_argument("--deadline-s", type=float, default=0.0,
                    help="start no new problem after this many seconds (0: no deadline)")
    ap.add_argument("--first", type=int, default=0,
                    help="skip the spec's problems before this index (resume a sweep)")
    ap.add_argument("--engine", choices=("v2", "autotune"), default="v2",
                    help="v2 (default): Inductor's configs compiled once per kernel class and timed as GPU "
                         "time by the collector (engine.py); autotune: through Inductor's own max-autotune "
                         "benchmarking, one compile per config per problem (driver.py, slow)")
    ap.add_argument("--compile-workers", type=int, default=0,
                    help="v2: processes compiling kernels (default: CPU cores - 1)")
    ap.add_argument("--dry-run", action="store_true",
                    help="validate the spec and print Inductor's config count per problem; no GPU needed")
    args = ap.parse_args(argv)
    if args.serve and (args.spec or args.out or args.dry_run or args.first):
        ap.error("--serve takes its specs from stdin: no --spec, --out, --dry-run or --first")
    if not args.serve and not args.spec:
        ap.error("the following arguments are required: --spec")
    return args


def dry_run(spec) -> int:
    from .enumerate import mm_configs
    total = 0
    for i, p in enumerate(spec.problems):
        size = {"float32": 4, "float8_e4m3fn": 1}.get(p.dtype_a, 2)
        n = len(mm_configs(p.m, p.n, p.k, size, spec.search_space, op=p.op))
        total += n
        print(f"{i}\t{describe(p)}\t{n}")
    print(f"total\t{total}")
    return EXIT_OK


def _tag(j: int, n: int, p, tf32: bool) -> str:
    return f"[{j + 1}/{n}] {describe(p)}" + (f" tf32={'on' if tf32 else 'off'}" if p.dtype_a == "float32" else "")


# --engine autotune: Inductor's own benchmark loop, its do_bench replaced by timing.GpuTimer.
V1_METHOD = wire.CollectionMethod("inductor-autotune+cuda-events+gpu-spin+cold-l2", "torch_diode.collect 1.0.0")


def engine_method():
    from .engine import ENGINE_VERSION, TIMING_METHOD
    return wire.CollectionMethod(TIMING_METHOD, f"torch_diode.collect {ENGINE_VERSION}")


def rendered_template(lowered_as: str) -> str:
    """The Inductor template a problem's Triton configs were rendered from: "triton_bmm" for
    a problem lowered as bmm / baddbmm, "triton_mm" for mm, addmm and scaled_mm."""
    return ic.TEMPLATE_NAMES["bmm" if lowered_as in ("bmm", "baddbmm") else "mm"]


def shard_templates(names) -> tuple[tuple[str, str], ...]:
    """A shard's `templates`: the sha256 of each Inductor template source in `names`
    (inductor_compat.template_hashes), sorted."""
    return ic.template_hashes(names) if names else ()


def static_counts(st) -> str:
    """The static stage's part of a problem's log line (engine.Stats): `static=N`, then
    `static_failed`, `static_beaten` and `static_chased` (2.4.0) only when non-zero."""
    return f"static={st.static}" + (f" static_failed={st.static_failed}" if st.static_failed else "") + \
        (" static_beaten=1" if st.static_beaten else "") + \
        (f" static_chased={st.static_chased}" if st.static_chased else "")


def run_v2(args, spec, hw, engine, jobs, t0) -> int:
    """The v2 loop: problem j+1 is lowered and its compiles queued before problem j is
    timed. The shard is rewritten after every problem (a crash loses one problem)."""
    recs, walls, done, empty = [], {}, 0, 0
    per_problem: list[dict] = []   # written beside the shard as <out>.stats.json: progress and throughput
    rendered: set = set()          # Inductor templates the measured problems' kernels were rendered from

    def save():
        write_atomic(args.out + ".stats.json", json.dumps({"engine": "v2", "problems": per_problem}).encode())
        probs, rs = records.compact(list(spec.problems), recs)
        write_atomic(args.out, records.build_shard(spec.shard_id, spec.sweep_id, hw, spec.producer_name,
                                                   spec.producer_key, probs, rs,
                                                   problem_wall_s=records.compact_walls(recs, walls),
                                                   method=engine_method(), templates=shard_templates(rendered)))

    def plan(j):
        i, p, tf32 = jobs[j]
        try:
            return engine.plan(i, p, tf32)
        except Exception as e:  # one bad problem must not lose the shard
            log(f"{_tag(j, len(jobs), p, tf32)}: FAILED to lower: {type(e).__name__}: {str(e)[:300]}")
            traceback.print_exc(file=sys.stderr)
            return None

    nxt = plan(0) if jobs else None
    for j, (i, p, tf32) in enumerate(jobs):
        cur, tag = nxt, _tag(j, len(jobs), p, tf32)
        if args.deadline_s and time.perf_counter() - t0 > args.deadline_s:
            log(f"deadline {args.deadline_s:.0f}s reached after {done}/{len(jobs)} problems")
            break
        nxt = plan(j + 1) if j + 1 < len(jobs) else None
        done += 1
        if cur is None:
            empty += 1
            continue
        try:
            got, st = engine.run(cur)
        except Exception as e:
            log(f"{tag}: FAILED {type(e).__name__}: {str(e)[:300]}")
            traceback.print_exc(file=sys.stderr)
            empty += 1
            continue
        if not any(r.status == "ok" for r in got):
            empty += 1
        recs.extend(got)
        if any(e.kc is not None for e in cur.entries):   # some config was rendered (engine.Entry.kc)
            rendered.add(rendered_template(cur.lowered_as))
        walls[i] = walls.get(i, 0.0) + st.wall_s
        per_problem.append({"index": i, "tf32": tf32, "problem": describe(p), **dataclasses.asdict(st)})
        fails = " ".join(f"{k}={v}" for k, v in sorted(st.failed.items()))
        lowered = f" lowered_as={st.lowered_as}" if st.lowered_as and st.lowered_as != p.op else ""
        static = static_counts(st)
        log(f"{tag}:{lowered} offered={st.offered} ok={st.ok} {fails} mismatched={st.mismatched} retimed={st.retimed} "
            f"{static} | "
            f"lower={st.lower_s:.1f}s compile_wait={st.compile_wait_s:.1f}s time={st.time_s:.1f}s "
            f"wall={st.wall_s:.1f}s | best_triton={st.best_triton_us:.2f}us default_best={st.default_best_us:.2f}us "
            f"aten={st.aten_us:.2f}us")
        save()
    if not recs:
        save()
    log(f"done: {done}/{len(jobs)} problems, {len(recs)} records, {time.perf_counter() - t0:.1f}s -> {args.out}")
    if done < len(jobs):
        return EXIT_DEADLINE
    return EXIT_PARTIAL if empty else EXIT_OK


class Session:
    """What a collector process keeps from one spec to the next (one spec in one-shot mode,
    every request of --serve): the imported torch and its CUDA context, the hardware
    fingerprint, and the v2 engine's compile pools (engine.Pools: the main pool depends only
    on the device and --compile-workers; the static pool is kept while its spec-dependent
    size stays the same). Everything else (the Engine, its BatchTimer and model rankers, the
    --engine autotune driver) is made per spec."""

    def __init__(self, args):
        self.device = args.device
        self.workers = args.compile_workers or None
        self.hw = None
        self.pools = None

    def prepare(self):
        """The GPU stack, checked; the hardware fingerprint (detected once). Raises
        ic.UnsupportedTorch or ImportError when this process cannot collect."""
        ic.require_supported_torch()
        import torch
        if not torch.cuda.is_available():
            raise ic.UnsupportedTorch("no CUDA/ROCm GPU visible to torch")
        if self.device >= torch.cuda.device_count():
            raise ic.UnsupportedTorch(f"device {self.device} not present ({torch.cuda.device_count()} GPUs)")
        torch.cuda.set_device(self.device)
        if self.hw is None:
            from .fingerprint import detect
            self.hw = detect(self.device)
        return self.hw

    def engine(self, spec):
        from .engine import Engine, Pools
        if self.pools is None:
            self.pools = Pools(self.device, self.workers)
        return Engine(spec, self.device, self.workers, log=log, pools=self.pools)

    def close(self) -> None:
        if self.pools is not None:
            self.pools.close()
            self.pools = None


def reset_between_specs() -> None:
    """Serve mode, before each request: nothing the previous spec compiled or cached in this
    process may change how the next one lowers or times. (The collector already compiles
    with fx_graph_cache and autotune_local_cache off: driver.inductor_settings_base.)"""
    if "torch" not in sys.modules:   # nothing imported yet: nothing to reset
        return
    import torch
    import torch._dynamo
    torch._dynamo.reset()
    try:
        from torch._inductor.utils import clear_inductor_caches
        clear_inductor_caches()   # in-process caches (cache_on_self, PyCodeCache, ...)
    except ImportError:
        pass
    # Tensors held by reference cycles of the previous spec's Engine (and its timers) are
    # freed only by the cycle collector: run it before the CUDA cache is given back.
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def collect(args, session: Session) -> int:
    """One spec, as `--spec args.spec --out args.out`: the shard and <out>.stats.json written,
    the exit code returned. One-shot mode and each --serve request call this."""
    try:
        spec = load_spec(args.spec)
    except SpecError as e:
        log(f"error: {e}")
        return EXIT_USAGE
    if args.dry_run:
        try:
            ic.require_supported_torch()
        except ic.UnsupportedTorch as e:
            log(f"error: {e}")
            return EXIT_ENV
        return dry_run(spec)
    if not args.out:
        log("error: --out is required (unless --dry-run)")
        return EXIT_USAGE
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        log(f"error: output folder {out_dir} does not exist")
        return EXIT_USAGE
    try:
        hw = session.prepare()
        if args.engine == "v2":
            driver = session.engine(spec)
        else:
            from .driver import ProblemDriver
            driver = ProblemDriver(spec, args.device)
    except ic.UnsupportedTorch as e:
        log(f"error: {e}")
        return EXIT_ENV
    except ImportError as e:
        log(f"error: cannot import the GPU stack: {e}")
        return EXIT_ENV
    log(f"hardware {hw.device_name} {hw.arch} sms={hw.sm_count} driver={hw.driver_version} "
        f"{hw.runtime_version} torch={hw.torch_version} triton={hw.triton_version}")
    t0 = time.perf_counter()
    recs, empty, done = [], 0, 0
    rendered: set = set()   # --engine autotune: the templates Inductor rendered the measured problems from
    if not 0 <= args.first < len(spec.problems):
        log(f"error: --first {args.first} outside the spec's {len(spec.problems)} problems")
        return EXIT_USAGE
    jobs = [(i, p, tf32) for i, p in enumerate(spec.problems) if i >= args.first
            for tf32 in (spec.tf32 if p.dtype_a == "float32" else (False,))]
    if args.engine == "v2":
        try:
            return run_v2(args, spec, hw, driver, jobs, t0)
        finally:
            driver.close()
    for j, (i, p, tf32) in enumerate(jobs):
        if args.deadline_s and time.perf_counter() - t0 > args.deadline_s:
            log(f"deadline {args.deadline_s:.0f}s reached after {done}/{len(jobs)} problems")
            break
        tag = f"[{j + 1}/{len(jobs)}] {describe(p)}" + (f" tf32={'on' if tf32 else 'off'}"
                                                       if p.dtype_a == "float32" else "")
        try:
            got, st = driver.run(p, i, tf32)
        except Exception as e:  # one bad problem must not lose the shard
            log(f"{tag}: FAILED {type(e).__name__}: {str(e)[:300]}")
            traceback.print_exc(file=sys.stderr)
            empty += 1
            done += 1
            continue
        done += 1
        if not any(r.status == "ok" for r in got):
            empty += 1
        recs.extend(got)
        if any(r.config.is_triton for r in got):
            rendered.add(rendered_template(st.lowered_as or p.op))
        if st.bypassed:
            log(f"{tag}: WARNING {st.bypassed} choices were timed by Inductor, not the collector's timer "
                "(benchmark_interceptor does not reach this torch's benchmark path)")
        fails = " ".join(f"{k}={v}" for k, v in sorted(st.failed.items()))
        lowered = f" lowered_as={st.lowered_as}" if st.lowered_as and st.lowered_as != p.op else ""
        log(f"{tag}:{lowered} offered={st.offered} refused={st.refused} ok={st.ok} {fails} | lower={st.hook_s:.1f}s "
            f"codegen+compile={st.compile_s:.1f}s bench={st.bench_s:.1f}s (timer {st.timer_s:.1f}s) wall={st.wall_s:.1f}s | "
            f"best_triton={st.best_triton_us:.2f}us aten={st.aten_us:.2f}us")
        write_atomic(args.out, records.build_shard(spec.shard_id, spec.sweep_id, hw, spec.producer_name,
                                                   spec.producer_key, *records.compact(list(spec.problems), recs),
                                                   method=V1_METHOD, templates=shard_templates(rendered)))
    if not recs:
        write_atomic(args.out, records.build_shard(spec.shard_id, spec.sweep_id, hw, spec.producer_name,
                                                   spec.producer_key, [], [], method=V1_METHOD))
    log(f"done: {done}/{len(jobs)} problems, {len(recs)} records, {time.perf_counter() - t0:.1f}s -> {args.out}")
    if done < len(jobs):
        return EXIT_DEADLINE
    return EXIT_PARTIAL if empty else EXIT_OK


def _request(line: str, base) -> argparse.Namespace:
    """One --serve request line as the args of collect(); ValueError when malformed."""
    try:
        req = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(req, dict):
        raise ValueError("a request is a JSON object")
    unknown = sorted(set(req) - {"spec", "out", "deadline_s"})
    if unknown:
        raise ValueError(f"unknown request keys: {', '.join(unknown)}")
    for key in ("spec", "out"):
        if not isinstance(req.get(key), str) or not req[key]:
            raise ValueError(f"'{key}' must be a non-empty string path")
    deadline = req.get("deadline_s", 0.0)
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or deadline < 0:
        raise ValueError("'deadline_s' must be a number >= 0")
    return argparse.Namespace(**{**vars(base), "spec": req["spec"], "out": req["out"],
                                 "deadline_s": float(deadline), "serve": False})


def serve(base, session: Session, requests, replies) -> int:
    """The --serve loop: one JSON request per line of `requests`, each collected by collect()
    exactly as one-shot mode would, each answered by one JSON line on `replies`:
    {"out": PATH, "code": EXIT_CODE}, or {"error": "..."} for a malformed line (the loop goes
    on). EOF ends it with 0. After an internal error (code 1) the process state cannot be
    trusted (a CUDA fault is sticky), so the loop answers and then ends with 1: the agent
    starts a fresh collector for its next shard."""
    def reply(obj) -> None:
        replies.write(json.dumps(obj) + "\n")
        replies.flush()

    for line in requests:
        if not line.strip():
            continue
        try:
            args = _request(line, base)
        except ValueError as e:
            log(f"serve: bad request: {e}")
            reply({"error": str(e)})
            continue
        log(f"serve: spec {args.spec} -> {args.out}")
        try:
            reset_between_specs()
            code = collect(args, session)
        except Exception as e:  # what one-shot mode would exit 1 on
            log(f"serve: internal error: {type(e).__name__}: {e}")
            traceback.print_exc(file=sys.stderr)
            code = EXIT_INTERNAL
        reply({"out": args.out, "code": code})
        if code == EXIT_INTERNAL:
            return EXIT_INTERNAL
    return EXIT_OK


def main(argv=None) -> int:
    args = parse_args(argv)
    session = Session(args)
    try:
        if not args.serve:
            return collect(args, session)
        # Replies get the process's stdout to themselves: fd 1 then points at stderr, so a
        # stray print (ours, Inductor's, Triton's) lands in the log, not in the protocol.
        sys.stdout.flush()
        replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
        os.dup2(2, 1)
        try:
            return serve(args, session, sys.stdin, replies)
        finally:
            replies.close()
    finally:
        session.close()
