"""Collector engine v2: Inductor's whole search space of a GEMM, timed as GPU time, fast.

The GEMM ops (mm, addmm, bmm, baddbmm) and scaled_mm (FP8 torch._scaled_mm: Inductor's
triton::mm with its scale epilogue against ATen's _scaled_mm) go through the same steps.

Per problem:
  1. space.offered_space: Inductor lowers the problem (EXHAUSTIVE, then DEFAULT for the
     flags); every config it offers becomes a record, whatever happens next.
  2. Triton configs are compiled in a pool of spawned processes from Inductor's own
     template rendered with runtime sizes (template.py): one compiled kernel serves every
     problem of its kernel class, and Triton's on-disk cache keeps it across runs. The
     next problem is lowered and its compiles queued before the current one is timed,
     so compiling overlaps timing.
  3. In this process each kernel is loaded once, checked against ATen's result once,
     and timed with BatchTimer (cold L2, launches queued behind a GPU spin: GPU time
     only). Order: ATen, DEFAULT configs, then the rest by plan.promise(). Repeats are
     adaptive (plan.repeats_for); suspect records (plan.suspects: a wide spread, or far
     slower than the same config at another num_stages) are re-timed once, keeping the
     lower batch.
  4. The fastest `timing.static_top` Triton configs, any near tie (plan.static_targets)
     and DEFAULT's fastest are compiled again as the problem's *static* kernel class
     (sizes and strides as literals, as Inductor compiles them:
     template.kernel_class(static=True)) in a second pool, and re-timed interleaved with
     ATen after untimed warm-up rounds, disturbed rounds dropped (retime_static); their
     records carry FLAG_STATIC. The runtime-size kernels
     rank the space fast; the static ones time the contenders as Inductor would run them
     (bench/RESULTS.md: runtime sizes were 1.057x Inductor's kernels and picked its best
     on 13 of 21 problems, static ones 1.003x and 21 of 21). With static_top 0 the
     contenders are re-timed interleaved with their runtime-size kernels instead.
  5. Static chase (2.4.0; waves since 2.5.0): runtime-size records still faster than the
     fastest static one (plan.chase_targets; their few-sample medians may only look
     faster) are compiled as static kernels too and re-timed with that static record and
     ATen, wave after wave (at most CHASE_WAVES) until none is left.
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import multiprocessing as mp
import os
import time
from dataclasses import dataclass, field

from .. import wire
from . import plan, records, smem, template
from .space import TRITON_GEMM, Offered, offered_space
from .spec import Spec
from .stats import summarize

TIMING_METHOD = "cuda-events+gpu-spin+cold-l2"
# 2.1.0: space discovery compiles with coordinate_descent_tuning off (M = 1 / N = 1 problems
# stay GEMMs) and suspect batches are re-timed once, the lower kept (plan.suspects);
# 2.0.0: engine v2 as first run on the H100 (datasets/README.md says which shards are which)
# 2.2.0: the top contenders re-timed as static-shape kernels (FLAG_STATIC, timing.static_top);
# 2.3.0: a disturbed round of that re-time is dropped (plan.drop_disturbed_rounds), near
# ties join the static targets (plan.STATIC_NEAR_FACTOR), untimed warm-up rounds precede the
# static rounds (STATIC_WARMUP_S), and the compile workers run at a lower CPU priority than
# the timing process (COMPILE_NICE)
# 2.4.0: static chase: first-pass records still faster than the best static one after the
# static rounds are compiled as static kernels too and re-timed with it and ATen, once
# (Engine._static_chase, plan.chase_targets; `static_chased` in the stats), and a cheap
# static target gets up to 50 repeats per round instead of 10 (plan.static_repeats, gone in 2.5.0)
# 2.5.0: the static chase runs in waves until no first-pass record is below the best
# static one (at most CHASE_WAVES), and static rounds are batches of 10 repeats again:
# 2.4.0's batches of up to 50 read the static records of kernels under 10 us 1.031x the
# fidelity bench's static time (median of 41 configs; 2.3.0's batches of 10: 0.992x of 47),
# so first-pass records ended the best Triton record on 11 of 49 problems (2.3.0: 3 of
# 75) and its pick agreed with Inductor's best on 28 of 40 (bench/RESULTS.md)
# 2.6.0: timing.model_top: a model's top predicted configs join the static targets
# (Engine._model_picks; `static_model` in the stats), so its likely picks are timed as the
# kernel Inductor compiles; without model_top the same as 2.5.0
# 2.7.0: the scaled_mm family (FP8 torch._scaled_mm: Inductor's triton::mm with its scale
# epilogue, ATen's _scaled_mm) and every shard carries `templates` (sha256 of each Inductor
# template source rendered)
ENGINE_VERSION = "2.7.0"
# ShardRecord.flags bits: defined once in wire.py (shared/schema/contracts.json), re-exported here.
from ..wire import FLAG_DEFAULT, FLAG_NOT_RUNNABLE, FLAG_STATIC  # noqa: E402,F401
STATIC_ROUNDS = 3        # interleaved rounds of the static re-time, each of max(min_repeats, 10) repeats
CHASE_WAVES = 3          # static chase waves at most (each of at most timing.static_top entries)
# Before those rounds the GPU idled while the static kernels compiled (~1-2 s), and an idle
# GPU lowers its clocks (KINDS.md: 345 MHz idle, 1,980 MHz under load); the runtime pass,
# timed back to back, read 7% lower than the same kernel timed after such a gap. So the
# targets first run, untimed, for this long (at most STATIC_WARMUP_ROUNDS rounds).
STATIC_WARMUP_S, STATIC_WARMUP_ROUNDS = 0.05, 20
# CPU priority (nice increment) of the compile workers: below the timing process, so a
# launch batch is not descheduled past its GPU spin while the pools compile the next
# problem (2.2.0 ran both pools, up to 26 processes, at the timer's priority on 16 cores).
# The static pool sits between: the current problem waits for it.
COMPILE_NICE, STATIC_COMPILE_NICE = 10, 5
_DTYPE_SIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float8_e4m3fn": 1}
_TORCH_DTYPE = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32",
                "float8_e4m3fn": "float8_e4m3fn"}
CHECK_TOLERANCE = 5e-2   # relative L2 error vs ATen; a wrong kernel is off by ~1
# scaled_mm: both sides multiply the same FP8 values exactly and accumulate in float32; they
# differ by accumulation order and the bfloat16 rounding of the output (~2^-9 relative), so
# a right kernel is off by a few 1e-3 (4e-3 for the rendered kernels in Triton's interpreter
# against CPU ATen), one scale missing by ~0.3 and a wrong tile by ~1.
SCALED_CHECK_TOLERANCE = 2e-2


def check_tolerance(p: wire.Problem) -> float:
    """Largest relative L2 error (vs ATen's result) a Triton kernel of `p` may show."""
    return SCALED_CHECK_TOLERANCE if p.op == "scaled_mm" else CHECK_TOLERANCE


@dataclass
class Entry:
    offered: Offered
    is_triton: bool
    kc: object = None                 # template.KernelClass for Triton entries
    future: object = None
    status: str = ""
    samples: list = field(default_factory=list)
    static: bool = False              # samples are of the static-shape kernel (FLAG_STATIC)

    @property
    def params(self):
        return self.offered.params

    @property
    def default(self):
        return self.offered.default


@dataclass
class Planned:
    idx: int
    problem: wire.Problem
    tf32: bool
    lowered_as: str
    entries: list
    lower_s: float


@dataclass
class Stats:
    offered: int = 0
    ok: int = 0
    failed: dict = field(default_factory=dict)
    lower_s: float = 0.0
    compile_wait_s: float = 0.0
    time_s: float = 0.0
    wall_s: float = 0.0
    mismatched: int = 0
    retimed: int = 0          # suspect records re-timed with a fresh batch (plan.suspects)
    static: int = 0           # records re-timed as static-shape kernels (FLAG_STATIC)
    static_failed: int = 0    # static targets whose kernel did not compile, run or match ATen
    static_s: float = 0.0     # wall seconds of the static stage (its compile wait included)
    static_beaten: int = 0    # 1: a record not re-timed as static is still the problem's best Triton record
    static_chased: int = 0    # entries compiled in the static chase waves (2.4.0; plan.chase_targets)
    static_model: int = 0     # static targets only a model's top picks added (2.6.0; timing.model_top)
    lowered_as: str = ""
    best_triton_us: float = 0.0
    aten_us: float = 0.0
    default_best_us: float = 0.0


def _compile_job(kc, dtype: str, out_dtype: str, params: dict, allow_tf32: bool) -> str:
    """In a pool process: compile one kernel into Triton's on-disk cache. '' or the error.
    (`dtype`, `out_dtype`: the problem's, as in the kernel class, which decides the pointer
    types: template.pointer_args.)"""
    import torch
    try:
        kernel = template.load(kc)
        consts = _consts(kc, params, allow_tf32)
        pointers = template.pointer_args(kc)
        ptrs = [getattr(torch, _TORCH_DTYPE[d]) for _, d in pointers]
        names = {n for n, _ in pointers}
        runtime = [a for a in kernel.arg_names if a not in names and a not in consts
                   and a not in ("num_warps", "num_stages")]
        vals = [0.5 if a in ("alpha", "beta") else 1 for a in runtime]
        kernel.warmup(*ptrs, *vals, grid=(1,), **consts)
        return ""
    except Exception as e:  # the main process records it; the pool keeps going
        return f"{type(e).__name__}: {e}"[:2000]


def _consts(kc, params: dict, allow_tf32: bool) -> dict:
    # Alignment constexprs are a function of the kernel class (all non-unit strides of a
    # class share one alignment per position); read them back from the pattern.
    out = {}
    for nm, pat in (("A", kc.a), ("B", kc.b), ("C", kc.c), ("BIAS", kc.bias)):
        for i, v in enumerate(pat):
            if v < 0:
                out[f"S{nm}{i}"] = -v
    sm, sn, sk = kc.sizes
    out.update(SM=sm, SN=sn, SK=sk, A_HINT=bool(params["A_HINT"]), B_HINT=bool(params["B_HINT"]),
               BLOCK_M=params["BLOCK_M"], BLOCK_N=params["BLOCK_N"], BLOCK_K=params["BLOCK_K"],
               GROUP_M=params.get("GROUP_M", 8), EVEN_K=kc.even_k, ALLOW_TF32=bool(allow_tf32),
               num_warps=params["num_warps"], num_stages=params["num_stages"])
    return out


def lower_priority(increment: int) -> int:
    """Raises this process's nice value by `increment` (never refused: only lowering a
    priority needs no privilege); returns the new value, or the old one where the OS has
    no nice (the pools then share the CPU as before)."""
    try:
        return os.nice(increment)
    except (AttributeError, OSError):
        return os.nice(0) if hasattr(os, "nice") else 0


def _pool_init(device: int, nice: int = 0) -> None:
    import torch
    if nice:
        lower_priority(nice)
    torch.cuda.set_device(device)


class Pools:
    """The compile pools of an Engine. One engine per spec makes its own; a collector that
    serves many specs (cli.Session, `--serve`) keeps one Pools across them: the main pool
    depends only on the device and the worker count; the static pool's size depends on the
    spec (timing.static_top, timing.model_top), so static(size) keeps it while the size is
    the same and replaces it when not. A broken pool (a worker died) is replaced too."""

    def __init__(self, device: int = 0, workers: int | None = None):
        self.device = device
        self.workers = workers or max(1, (os.cpu_count() or 2) - 1)
        self._main = None
        self._static = None
        self._static_size = 0

    @staticmethod
    def _broken(pool) -> bool:
        """True when the pool takes no more work: a worker died (BrokenExecutor) or it was
        shut down (RuntimeError), which submit() reports at once; a no-op task otherwise."""
        try:
            pool.submit(int)
            return False
        except (cf.BrokenExecutor, RuntimeError):
            return True

    def _new(self, size: int, nice: int):
        return cf.ProcessPoolExecutor(max_workers=size, mp_context=mp.get_context("spawn"),
                                      initializer=_pool_init, initargs=(self.device, nice))

    def main(self):
        if self._main is None or self._broken(self._main):
            if self._main is not None:
                self._main.shutdown(wait=False, cancel_futures=True)
            self._main = self._new(self.workers, COMPILE_NICE)
        return self._main

    def static(self, size: int):
        if self._static is None or self._static_size != size or self._broken(self._static):
            if self._static is not None:
                self._static.shutdown(wait=False, cancel_futures=True)
            self._static, self._static_size = self._new(size, STATIC_COMPILE_NICE), size
        return self._static

    def close(self) -> None:
        for pool in (self._main, self._static):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._main = self._static = None
        self._static_size = 0


class Engine:
    picker = None   # hook.ranking.Ranker of timing.model (collector 2.6.0); None: no model picks
    extra_pickers: tuple = ()   # Rankers of timing.extra_models, whose picks join picker's

    def __init__(self, spec: Spec, device: int = 0, workers: int | None = None, log=print,
                 pools: "Pools | None" = None):
        """`pools`: compile pools kept by the caller across specs (serve mode: cli.Session);
        None: this engine makes its own and close() shuts them down."""
        import torch
        self.spec = spec
        self.device = device
        self.log = log
        self.timer = __import__("torch_diode.collect.timing", fromlist=["BatchTimer"]).BatchTimer(
            device, spec.timing.l2_flush)
        props = torch.cuda.get_device_properties(device)
        self.sm_count = props.multi_processor_count
        self.smem_limit = int(getattr(props, "shared_memory_per_block_optin", 0)) if spec.smem_prefilter else 0
        self._own_pools = pools is None
        self.pools = Pools(device, workers) if pools is None else pools
        n = self.pools.workers
        self.pool = self.pools.main()
        # Static-shape kernels compile in their own pool: the main one is FIFO and already
        # holds the next problem's compiles, which the current problem must not wait behind.
        # One worker per target (up to 2 x static_top + DEFAULT's with near ties, at most
        # the main pool's size), so a problem's static kernels compile in one wave (~1-2 s);
        # the two pools oversubscribe the cores only while the next problem still compiles.
        # timing.model_top: the model that ranks each problem's entries (loaded once; a bad
        # path fails here, before any problem is measured)
        if spec.timing.model_top:
            from ..hook.ranking import Ranker
            from ..model import load_model_dir
            self.picker = Ranker(load_model_dir(spec.timing.model))
            self.extra_pickers = tuple(Ranker(load_model_dir(m)) for m in spec.timing.extra_models)
        picks = spec.timing.model_top * (1 + len(spec.timing.extra_models))
        self.static_pool = self.pools.static(max(1, min(2 * spec.timing.static_top + 1 + picks, n))) \
            if spec.timing.static_top else None
        self.submitted: dict = {}   # (kernel class, constexprs) -> future, across problems

    def close(self) -> None:
        if self._own_pools:
            self.pools.close()
            return
        # Borrowed pools outlive this spec: drop the compiles it queued and did not wait for
        # (those already running finish in the background; their kernels land in Triton's cache).
        for fut in self.submitted.values():
            fut.cancel()

    # -- planning ------------------------------------------------------------------------
    def plan(self, idx: int, p: wire.Problem, tf32: bool) -> Planned:
        sp = offered_space(p, tf32, self.spec.search_space)
        size = _DTYPE_SIZE[p.dtype_a]
        allow = tf32 and p.dtype_a == "float32"
        entries = []
        for o in sp.offered:
            triton = o.uid in TRITON_GEMM and "BLOCK_M" in o.params
            e = Entry(o, is_triton=triton)
            if triton:
                reason = smem.refuse_reason(o.params, size, self.smem_limit)
                if reason:
                    e.status = "out_of_resources"
                else:
                    e.kc = template.kernel_class(p, bool(o.params.get("EVEN_K", p.k % o.params["BLOCK_K"] == 0)),
                                                 sp.lowered_as,
                                                 fast_accum=bool(o.params.get("USE_FAST_ACCUM", False)))
                    o.params.update(template.hints(p, o.params))
                    key = (e.kc, tuple(sorted(_consts(e.kc, o.params, allow).items())))
                    fut = self.submitted.get(key)
                    if fut is None:
                        ints = {k: v for k, v in o.params.items() if isinstance(v, (int, bool))}  # picklable
                        fut = self.pool.submit(_compile_job, e.kc, p.dtype_a, p.dtype_out, ints, allow)
                        self.submitted[key] = fut
                    e.future = fut
            entries.append(e)
        entries = plan.order(entries, p.m, p.n, p.batch, self.sm_count)
        return Planned(idx, p, tf32, sp.lowered_as, entries, sp.lower_s)

    # -- static-shape re-time ------------------------------------------------------------
    def _static_stage(self, pl: Planned, tensors: dict, ref, ref_norm: float, deadline: float, st: Stats,
                      runtime_fns: dict) -> None:
        """Compile plan.static_targets as static kernel classes, check each against ATen's
        result, then retime_static with ATen in the same rounds (`runtime_fns` has its
        launch), so the records that decide "cuBLAS or Triton" are timed side by side.
        A target that fails keeps its runtime-size record. Then the chase (_static_chase)
        for first-pass records still faster than every static one."""
        tm = self.spec.timing
        ok = {id(e): e for e in pl.entries if e.status == "ok" and e.is_triton and e.samples and e.kc}
        times = {k: summarize(e.samples).median for k, e in ok.items()}
        keys = plan.static_targets(times, {k for k, e in ok.items() if e.default}, tm.static_top)
        added = plan.pick_targets(keys, self._model_picks(pl.problem, ok), times)
        st.static_model = len(added)
        targets = [ok[k] for k in keys + added]
        fns = self._compile_static(pl, targets, tensors, ref, ref_norm, deadline, st)
        aten = [e for e in pl.entries if e.status == "ok" and not e.is_triton and id(e) in runtime_fns]
        aten_fns = {id(e): runtime_fns[id(e)] for e in aten}
        retime_static(targets + aten, {**fns, **aten_fns}, self.timer.repeat, max(tm.min_repeats, 10),
                      STATIC_ROUNDS, deadline)
        st.static_chased = self._static_chase(pl, targets, fns, aten_fns, tensors, ref, ref_norm, deadline, st)
        # Counted over all waves; the chase re-times the best static record again, so the
        # waves' return values would count it twice.
        st.static = sum(1 for e in pl.entries if e.static)
        st.static_beaten = static_beaten(pl.entries)
        if st.static_beaten:
            from .problems import describe
            self.log(f"  note: a record not timed as static is the best Triton record of {describe(pl.problem)}")

    def _model_picks(self, problem: wire.Problem, ok: dict) -> list:
        """Keys (ids) of the timing.model_top entries of `ok` (id -> ok Triton entry) the
        model predicts fastest, best first, then those of each timing.extra_models model not
        already in (the union, so a candidate's picks are timed as compiled beside the
        shipped model's); [] without a model. A model that cannot rank
        this problem (e.g. a config its feature table refuses) adds nothing: the static stage
        goes on as in 2.5.0."""
        if self.picker is None or not ok:
            return []
        from ..hook.ranking import Options, config_key
        keys = list(ok)
        cfg_keys = [config_key(ok[k].offered.config) for k in keys]
        picks: dict = {}   # insertion-ordered set: timing.model's picks first, then each extra model's
        for picker in [self.picker, *self.extra_pickers]:
            try:
                r = picker.rank_keys(problem, cfg_keys, Options(top_k=self.spec.timing.model_top, threshold=0.0))
            except Exception as e:  # never lose a problem's measurement to a model
                self.log(f"  note: model_top skipped: {type(e).__name__}: {e}")
                continue
            picks.update((keys[i], None) for i in r.kept)
        return list(picks)

    def _static_chase(self, pl: Planned, tried: list, static_fns: dict, aten_fns: dict,
                      tensors: dict, ref, ref_norm: float, deadline: float, st: Stats,
                      waves: int | None = None) -> int:
        """Static waves (2.4.0; a loop since 2.5.0) for the first-pass records still faster
        than the fastest static one: a first-pass median of 3 samples is the lowest of
        ~1,000 noisy ones (winner's curse) and the first pass reads ~2-3% below the static
        rounds (bench/static_record_check.py (script removed; git history)), so such a record may only look faster. Each
        wave: plan.chase_targets picks them (fastest first, at most static_top), they are
        compiled and checked as in the first wave, then re-timed in the same rounds as the
        best static record and ATen, so they are compared side by side. Waves repeat while
        such records remain, at most `waves` (default CHASE_WAVES), never past the deadline:
        a tiny problem can have dozens of first-pass records tied below the best static one
        (addmm 16x840x112 fp16 under 2.4.0: 16). An entry tried once (compiled, or failed:
        it would fail the same way) is not tried again. `static_fns`: id -> static launch of
        the first wave; `aten_fns`: id -> launch of each ATen entry re-timed beside them.
        Returns how many entries the chase compiled."""
        tm = self.spec.timing
        aten = [e for e in pl.entries if id(e) in aten_fns]
        tried_ids = {id(e) for e in tried}
        live = dict(static_fns)   # id -> static launch, of every wave so far
        chased = 0
        for _ in range(CHASE_WAVES if waves is None else waves):
            if time.perf_counter() > deadline:
                break
            cand = {id(e): e for e in pl.entries if e.status == "ok" and e.is_triton and e.samples and e.kc
                    and (e.static or id(e) not in tried_ids)}
            times = {k: summarize(e.samples).median for k, e in cand.items()}
            chase = [cand[k] for k in plan.chase_targets(times, {k for k, e in cand.items() if e.static},
                                                         tm.static_top)]
            if not chase:
                break
            best = min((e for e in cand.values() if e.static and id(e) in live), key=lambda e: times[id(e)],
                       default=None)
            tried_ids.update(id(e) for e in chase)
            chased += len(chase)
            fns = self._compile_static(pl, chase, tensors, ref, ref_norm, deadline, st)
            if not fns:   # nothing compiled: this wave's records stand as they are
                continue
            live.update(fns)
            rivals = [best] if best is not None else []
            fns.update({id(e): live[id(e)] for e in rivals})
            fns.update(aten_fns)
            retime_static(chase + rivals + aten, fns, self.timer.repeat, max(tm.min_repeats, 10),
                          STATIC_ROUNDS, deadline)
        return chased

    def _compile_static(self, pl: Planned, targets: list, tensors: dict, ref, ref_norm: float,
                        deadline: float, st: Stats) -> dict:
        """Compile `targets` as the problem's static kernel class in the static pool, all
        queued at once (one wave, one worker each), and check each against ATen's result.
        Returns id(entry) -> launch for those that compiled, loaded and matched; each
        failure is logged and counted in st.static_failed, and its entry keeps its record."""
        p = pl.problem
        allow = pl.tf32 and p.dtype_a == "float32"
        jobs = []
        for e in targets:
            kc = template.kernel_class(p, e.kc.even_k, pl.lowered_as, static=True, fast_accum=e.kc.fast_accum)
            ints = {k: v for k, v in e.params.items() if isinstance(v, (int, bool))}
            jobs.append((e, kc, self.static_pool.submit(_compile_job, kc, p.dtype_a, p.dtype_out, ints, allow)))
        fns = {}
        for e, kc, fut in jobs:
            fn = self._static_launch(pl, e, kc, fut, allow, tensors, ref, ref_norm, deadline, st)
            if fn is not None:
                fns[id(e)] = fn
        return fns

    def _static_launch(self, pl: Planned, e: Entry, kc, fut, allow: bool, tensors: dict, ref, ref_norm: float,
                       deadline: float, st: Stats):
        """The launch of `e`'s static kernel once its compile `fut` is done and its output
        matches ATen's, else None (counted in st.static_failed, logged); `allow`: TF32, as
        the compile had it."""
        import torch
        p = pl.problem
        w0 = time.perf_counter()
        try:
            err = fut.result(timeout=max(0.0, deadline - w0))
        except cf.TimeoutError:
            err = "timeout"
        finally:
            st.compile_wait_s += time.perf_counter() - w0
        if err:
            st.static_failed += 1
            self.log(f"  static {e.offered.config}: {err[:200]}")
            return None
        try:
            grid, args, consts = template.launch_args(kc, p, tensors, e.params, allow)
            fn = _launcher(template.load(kc), grid, args, consts)
            rel = output_error(fn, tensors["c"], ref, ref_norm)
        except Exception as ex:   # OutOfResources at load (the literal sizes change nothing
            torch.cuda.synchronize()   # it needs, but the record must not depend on it)
            st.static_failed += 1
            self.log(f"  static {e.offered.config}: {type(ex).__name__}: {str(ex)[:200]}")
            return None
        if not rel <= check_tolerance(p):
            st.static_failed += 1
            self.log(f"  WARNING static {e.offered.config}: result differs from ATen (rel {rel:.3g})")
            return None
        return fn

    # -- timing --------------------------------------------------------------------------
    def run(self, pl: Planned) -> tuple[list[wire.ShardRecord], Stats]:
        import torch

        from .problems import make_inputs
        from ..inductor_compat import set_tf32
        p, t0 = pl.problem, time.perf_counter()
        st = Stats(offered=len(pl.entries), lower_s=pl.lower_s, lowered_as=pl.lowered_as)
        deadline = t0 + self.spec.timing.problem_timeout_s
        tm = self.spec.timing
        restore = set_tf32(pl.tf32)
        inputs = make_inputs(p)
        tensors = operands(p, inputs)
        a = tensors["a"]
        batched = p.op in ("bmm", "baddbmm")
        odt = getattr(torch, p.dtype_out)
        shape = (p.batch, p.m, p.n) if batched else (p.m, p.n)
        c = tensors["c"] = torch.empty(shape, dtype=odt, device=a.device)
        aten = _aten_fn(p, tensors, c)
        ref = torch.empty_like(c)
        _aten_fn(p if pl.lowered_as == p.op else dataclasses.replace(p, op=pl.lowered_as), tensors, ref)()
        ref_norm = ref.float().norm().item() or 1.0
        tol = check_tolerance(p)
        best = float("inf")
        fns = {}
        try:
            for e in pl.entries:
                if e.status:
                    continue
                if time.perf_counter() > deadline:
                    e.status = "timeout"
                    continue
                if not e.is_triton:
                    if e.offered.uid.startswith("aten"):
                        fn = aten
                    else:
                        e.status = "compile_error"   # with FLAG_NOT_RUNNABLE
                        continue
                else:
                    w0 = time.perf_counter()
                    try:
                        err = e.future.result(timeout=max(0.0, deadline - w0))
                    except cf.TimeoutError:
                        e.status = "timeout"
                        continue
                    finally:
                        st.compile_wait_s += time.perf_counter() - w0
                    if err:
                        e.status = records.classify_error(err)
                        continue
                    kernel = template.load(e.kc)
                    grid, args, consts = template.launch_args(e.kc, p, tensors, e.params,
                                                              pl.tf32 and p.dtype_a == "float32")
                    fn = _launcher(kernel, grid, args, consts)
                s0 = time.perf_counter()
                try:
                    if e.is_triton:   # ref was computed by ATen for the op Inductor lowered
                        rel = output_error(fn, c, ref, ref_norm)   # also loads the kernel
                        if not rel <= tol:   # also catches NaN: an unwritten output
                            st.mismatched += 1
                            e.status = "compile_error"
                            self.log(f"  WARNING {e.offered.config}: result differs from ATen (rel {rel:.3g})")
                            continue
                    else:
                        fn()   # shakes out launch errors
                        torch.cuda.synchronize()
                    probe = self.timer.probe(fn)
                    if probe > tm.config_timeout_s * 1000.0:
                        e.status = "timeout"
                        continue
                    n = plan.repeats_for(probe, best, tm.min_repeats, tm.repeats, tm.budget_ms_per_config)
                    e.samples = self.timer.repeat(fn, n)
                except Exception as ex:   # Triton OutOfResources at load, launch errors
                    e.status = records.classify_error(ex)
                    torch.cuda.synchronize()
                    continue
                finally:
                    st.time_s += time.perf_counter() - s0
                e.status = "ok"
                fns[id(e)] = fn
                best = min(best, summarize(e.samples).median)
            s0 = time.perf_counter()
            st.retimed = retime_suspects(pl.entries, fns, self.timer.repeat,
                                         max(tm.min_repeats, plan.RETIME_REPEATS), deadline)
            # Interleaved re-timing of the contenders, against drift between early and late
            # configs (the static stage below re-times them itself, as Inductor's kernels).
            times = {id(e): summarize(e.samples).median for e in pl.entries if e.status == "ok"}
            close = plan.contenders(times)
            if not tm.static_top and len(close) > 1 and time.perf_counter() < deadline:
                by_id = {id(e): e for e in pl.entries}
                for _ in range(3):
                    for k in close:
                        by_id[k].samples += self.timer.repeat(fns[k], max(tm.min_repeats, 10))
            st.time_s += time.perf_counter() - s0
            if tm.static_top and time.perf_counter() < deadline:
                s0 = time.perf_counter()
                self._static_stage(pl, tensors, ref, ref_norm, deadline, st, fns)
                st.static_s = time.perf_counter() - s0
        finally:
            restore()
        out = []
        best_t = aten_t = dflt = float("inf")
        for e in pl.entries:
            flags = (FLAG_DEFAULT if e.default else 0) | (FLAG_STATIC if e.static else 0)
            if not e.is_triton and not e.offered.uid.startswith("aten"):
                flags |= FLAG_NOT_RUNNABLE
            if e.status == "ok":
                s = summarize(e.samples)
                r = records.make_record(pl.idx, e.offered.config, "ok", s.median, s.iqr, s.n)
                if e.is_triton:
                    best_t = min(best_t, s.median)
                    if e.default:
                        dflt = min(dflt, s.median)
                else:
                    aten_t = min(aten_t, s.median)
            else:
                r = records.make_record(pl.idx, e.offered.config, e.status or "compile_error")
                st.failed[r.status] = st.failed.get(r.status, 0) + 1
            out.append(dataclasses.replace(r, flags=flags))
        st.ok = sum(1 for r in out if r.status == "ok")
        st.best_triton_us = best_t * 1000 if best_t < float("inf") else 0.0
        st.aten_us = aten_t * 1000 if aten_t < float("inf") else 0.0
        st.default_best_us = dflt * 1000 if dflt < float("inf") else 0.0
        st.wall_s = (time.perf_counter() - t0) + pl.lower_s
        del inputs, a, c, ref, tensors, fns
        return out, st


def output_error(fn, out, ref, ref_norm: float) -> float:
    """Relative L2 error of what one launch of `fn` writes to `out` against ATen's `ref`.
    `out` is NaN-poisoned first, so an output the kernel never wrote is NaN (and fails
    `rel <= check_tolerance(p)`), not a stale correct one. The first launch also loads the
    kernel (Triton's disk cache) and shakes out launch errors, which it raises."""
    import torch
    out.fill_(float("nan"))
    fn()
    torch.cuda.synchronize()
    return ((out.float() - ref.float()).norm().item()) / ref_norm


def warm_up(repeat, fns: list, n: int, seconds: float, deadline: float = float("inf"),
            clock=time.perf_counter, max_rounds: int = STATIC_WARMUP_ROUNDS) -> int:
    """Untimed rounds of `fns` (`repeat(fn, n)` each, in turn) until `seconds` have passed,
    at most `max_rounds` and never past `deadline`: after an idle gap (a compile) the GPU's
    clocks are down, and the first timed rounds would read high. Returns the rounds run."""
    if not fns or seconds <= 0:
        return 0
    t0, done = clock(), 0
    while done < max_rounds and not (clock() - t0 >= seconds or clock() > deadline):
        for fn in fns:
            repeat(fn, n)
        done += 1
    return done


def retime_static(targets: list, fns: dict, repeat, n: int, rounds: int, deadline: float,
                  clock=time.perf_counter, warmup_s: float | None = None) -> int:
    """Re-time each target that has a launch in `fns` (id(entry) -> launch: the static-shape
    kernel of a Triton entry, ATen's own call for an ATen entry): `rounds` rounds, each a
    batch of n repeats of every such target in turn (interleaved, against drift). The new
    samples replace the old ones, less any round disturbed past the GPU spin
    (plan.drop_disturbed_rounds); a Triton entry is marked static. Untimed warm_up rounds
    come first, for `warmup_s` (default STATIC_WARMUP_S; the GPU idled while the static
    kernels compiled). The deadline is checked between rounds, so every re-timed entry has
    the same number of batches; a target without a launch keeps its samples. Returns how
    many Triton entries became static."""
    live = [e for e in targets if id(e) in fns]
    new: dict = {id(e): [] for e in live}   # id -> that target's rounds
    warm_up(repeat, [fns[id(e)] for e in live], n, STATIC_WARMUP_S if warmup_s is None else warmup_s,
            deadline, clock)
    for _ in range(rounds):
        if not live or clock() > deadline:
            break
        for e in live:
            new[id(e)].append(repeat(fns[id(e)], n))
    done = 0
    for e in live:
        kept = [x for batch in plan.drop_disturbed_rounds(new[id(e)]) for x in batch]
        if kept:
            e.samples = kept
            if e.is_triton:
                e.static = True
                done += 1
    return done


def static_beaten(entries: list) -> int:
    """1 when some Triton entries were re-timed as static and an ok Triton entry that was
    not is still faster than all of them (the runtime pass and the static rounds disagree;
    a measure of STATIC_NEAR_FACTOR, the warm-up and the chase), else 0: the rule of
    plan.chase_targets, so what the chase leaves is what this counts."""
    tri = {id(e): e for e in entries if e.is_triton and e.status == "ok" and e.samples}
    times = {k: summarize(e.samples).median for k, e in tri.items()}
    return int(bool(plan.chase_targets(times, {k for k, e in tri.items() if e.static}, 1)))


def retime_suspects(entries: list, fns: dict, repeat, n: int, deadline: float,
                    clock=time.perf_counter) -> int:
    """Re-time each suspect ok entry (plan.suspects, worst first) once: a fresh batch of n
    repeats (`repeat(fn, n)` -> samples), keeping the batch with the lower median
    (plan.keep_lower), so one disturbed batch cannot stand. A kept batch replaces the
    samples, so the record's repeat count is that batch's. Stops at the problem deadline.
    Returns how many were re-timed."""
    timed, by_id = {}, {}
    for e in entries:
        if e.status == "ok" and e.samples:
            s = summarize(e.samples)
            timed[id(e)] = (e.offered.uid, e.params, s.median, s.iqr)
            by_id[id(e)] = e
    done = 0
    for k in plan.suspects(timed):
        if clock() > deadline:
            break
        e = by_id[k]
        e.samples = plan.keep_lower(e.samples, repeat(fns[k], n))
        done += 1
    return done


def _launcher(kernel, grid, args, consts):
    def fn():
        kernel[grid](*args, **consts)
    return fn


def operands(p: wire.Problem, inputs: tuple) -> dict:
    """problems.make_inputs' tuple by name: a, b, and bias (addmm/baddbmm, else None), or for
    scaled_mm a, b, scale_a, scale_b."""
    if p.op == "scaled_mm":
        a, b, scale_a, scale_b = inputs
        return {"a": a, "b": b, "scale_a": scale_a, "scale_b": scale_b, "bias": None}
    bias, a, b = inputs if len(inputs) == 3 else (None, *inputs)
    return {"a": a, "b": b, "bias": bias}


def _aten_fn(p: wire.Problem, tensors: dict, out):
    """ATen's own call of `p` on `tensors` (operands()), writing `out`."""
    import torch
    a, b, bias = tensors["a"], tensors["b"], tensors["bias"]
    if p.op == "scaled_mm":   # cuBLASLt; use_fast_accum as problems.make_fn calls it
        sa, sb, odt = tensors["scale_a"], tensors["scale_b"], out.dtype
        return lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=odt, use_fast_accum=False,
                                        out=out)
    if p.op == "mm":
        return lambda: torch.mm(a, b, out=out)
    if p.op == "bmm":
        return lambda: torch.bmm(a, b, out=out)
    if p.op == "addmm":
        return lambda: torch.addmm(bias, a, b, beta=p.beta, alpha=p.alpha, out=out)
    if p.op == "baddbmm":
        return lambda: torch.baddbmm(bias, a, b, beta=p.beta, alpha=p.alpha, out=out)
    raise ValueError(f"unknown op {p.op}")
