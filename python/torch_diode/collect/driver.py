"""One problem through Inductor's own max-autotune, with the collector's hooks in place.

torch.compile lowers the op; Inductor's heuristics build the full search space; our
InductorChoices subclass sees every KernelTemplateChoice (finalize hook), refuses
configs that cannot fit (smem pre-filter, recorded as out_of_resources) and passes
the rest on. Inductor then generates each kernel, precompiles them in parallel on
all cores and benchmarks them in-process, where our interceptor replaces its
do_bench with GpuTimer (median and IQR of cold-L2 repeats). Failed precompiles are
tapped for their error; the feedback saver confirms which choices were timed.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from .. import inductor_compat as ic
from .. import wire
from . import records, smem
from .spec import Spec
from .timing import GpuTimer

_DTYPE_SIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float8_e4m3fn": 1}
GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm")
AUTOTUNED_OPS = GEMM_OPS + ("scaled_mm",)   # op_names whose choices are recorded (space.AUTOTUNED_OPS)


class ProblemTimeout(RuntimeError):
    """Raised by the gate once problem_timeout_s has passed. A RuntimeError, because
    Inductor's benchmark loop logs those and marks the choice failed (inf), whereas it
    re-raises other exception types and would abort the whole compile."""


@dataclass
class ProblemStats:
    offered: int = 0
    refused: int = 0
    ok: int = 0
    failed: dict = field(default_factory=dict)
    hook_s: float = 0.0          # compile start -> finalize hook (tracing, lowering)
    compile_s: float = 0.0       # hook -> first benchmark (codegen + parallel precompile)
    bench_s: float = 0.0         # first -> last benchmark
    timer_s: float = 0.0         # of bench_s, inside our GPU timer (the rest: Inductor loading kernels)
    wall_s: float = 0.0
    bypassed: int = 0            # choices Inductor timed itself (interceptor not routed): not recorded as ok
    lowered_as: str = ""         # op_name Inductor autotuned (may differ: e.g. baddbmm -> bmm)
    best_triton_us: float = 0.0
    aten_us: float = 0.0


def inductor_settings(spec: Spec) -> dict:
    """Inductor config for collection through Inductor's own autotuning (engine v1)."""
    return inductor_settings_base(spec.search_space, spec.timing.compile_timeout_s)


# What the collector passes to torch.compile instead of mode="max-autotune-no-cudagraphs".
# That mode also turns on coordinate_descent_tuning, under which Inductor's decomposition
# table rewrites mm and bmm with M == 1 or N == 1 as a multiply + sum reduction
# (torch/_inductor/decomposition.py: mm, bmm): no GEMM template is offered and such a
# problem had no space to time ("did not autotune this problem as a GEMM"). max_autotune
# itself comes from inductor_settings_base; coordinate descent stays off, so every problem
# is lowered as the GEMM that `torch._inductor.config.max_autotune = True` compiles.
# (Options given to torch.compile override an enclosing config.patch: a mode's
# coordinate_descent_tuning would win over one set in inductor_settings_base.)
COMPILE_OPTIONS = {"coordinate_descent_tuning": False}


def inductor_settings_base(search_space: str, compile_timeout_s: int = 600) -> dict:
    """Inductor config for lowering a problem under max-autotune; keys this torch lacks are skipped."""
    from torch._inductor import config
    wanted = {
        "max_autotune": True,
        "max_autotune_gemm": True,
        "max_autotune_gemm_backends": "TRITON,ATEN",
        "max_autotune_gemm_search_space": search_space,
        "force_disable_caches": True,   # a cached graph skips lowering: no hook, no timings
        "fx_graph_cache": False,
        "autotune_local_cache": False,
        "autotune_remote_cache": False,
        "autotune_in_subproc": False,   # our timer must run where the kernels are loaded
        "compile_threads": os.cpu_count() or 1,
        "precompilation_timeout_seconds": compile_timeout_s,
        "autotune_num_choices_displayed": 0,
        # Benchmark right after precompile, not deferred to the scheduler (MultiTemplateBuffer):
        # our one-op graph has no epilogue to fuse. Set after the device runs of 2026-11-22 saw
        # deferred benchmarking load kernels one by one (~1 s each); not yet measured on the GPU.
        "benchmark_epilogue_fusion": False,
    }
    return {k: v for k, v in wanted.items() if hasattr(config, k)}


class ProblemDriver:
    def __init__(self, spec: Spec, device: int = 0):
        import torch
        self.spec = spec
        self.timer = GpuTimer(spec.timing, device)
        props = torch.cuda.get_device_properties(device)
        self.smem_limit = int(getattr(props, "shared_memory_per_block_optin", 0)) if spec.smem_prefilter else 0

    def run(self, p: wire.Problem, idx: int, tf32: bool) -> tuple[list[wire.ShardRecord], ProblemStats]:
        import torch
        import torch._dynamo
        from torch._inductor import config

        from .problems import make_fn, make_inputs

        st = ProblemStats()
        dtype_size = _DTYPE_SIZE[p.dtype_a]
        extern_tf32 = tf32 and p.dtype_a == "float32"
        cfg_of: dict[int, wire.KernelConfig] = {}
        kept: list = []
        refused: list[wire.KernelConfig] = []
        measured: dict[int, object] = {}
        errors: dict[int, str] = {}
        feedback: dict[int, float] = {}
        t = {"start": time.perf_counter(), "hook": None, "b0": None, "b1": None}

        def on_finalize(ktcs, kernel_inputs, op_name):
            # The graph holds one GEMM; Inductor may lower it as another op (a baddbmm with
            # small K as bmm + add, say): record what torch.compile really autotunes.
            if op_name not in AUTOTUNED_OPS or t["hook"] is not None:
                return ktcs
            t["hook"] = time.perf_counter()
            st.lowered_as = op_name
            out = []
            for ktc in ktcs:
                uid = ic.ktc_template_uid(ktc)
                params = ic.ktc_params(ktc)
                cfg = records.to_config(uid, {**params, **ic.ktc_extra(ktc)},
                                        allow_tf32=extern_tf32 if not uid.startswith("triton") else False)
                if uid.startswith("triton") and "BLOCK_M" in params:
                    if smem.refuse_reason(params, dtype_size, self.smem_limit):
                        refused.append(cfg)
                        continue
                cfg_of[id(ktc)] = cfg
                kept.append(ktc)
                out.append(ktc)
            st.offered, st.refused = len(ktcs), len(refused)
            return out

        def gate(choice):
            if time.perf_counter() - t["start"] > self.spec.timing.problem_timeout_s:
                errors[id(choice)] = "timeout"
                raise ProblemTimeout("collector: problem_timeout_s reached; choice skipped")

        def time_choice(choice, fn):
            now = time.perf_counter()
            t["b0"] = t["b0"] or now
            try:
                m = self.timer.measure(fn)
                st.timer_s += time.perf_counter() - now
            except Exception as e:  # e.g. Triton's OutOfResources at first launch
                errors[id(choice)] = records.classify_error(e)
                t["b1"] = time.perf_counter()
                raise  # Inductor records it as a failed choice, as it would without us
            t["b1"] = time.perf_counter()
            measured[id(choice)] = m
            return m.median_ms if m.status == "ok" else float("inf")

        def on_error(choice, exc):
            errors[id(choice)] = records.classify_error(exc)

        def on_feedback(timings, name, input_nodes, choices):
            for ch, ms in timings.items():
                feedback[id(ch)] = ms

        restore_tf32 = ic.set_tf32(tf32)
        torch._dynamo.reset()
        inputs = make_inputs(p)
        try:
            with config.patch(inductor_settings(self.spec)), \
                    ic.install_choices(ic.make_choices_class(on_finalize)), \
                    ic.benchmark_interceptor(time_choice, gate), ic.precompile_error_tap(on_error), \
                    ic.feedback_saver(on_feedback):
                fn = torch.compile(make_fn(p), dynamic=False, fullgraph=True, options=COMPILE_OPTIONS)
                fn(*inputs)
                torch.cuda.synchronize()
        finally:
            restore_tf32()
            torch._dynamo.reset()
            del inputs
            torch.cuda.empty_cache()

        out = [records.make_record(idx, c, "out_of_resources") for c in refused]
        best_triton = aten = float("inf")
        for ktc in kept:
            cfg = cfg_of[id(ktc)]
            choice = ic.ktc_built_choice(ktc)
            if choice is None:
                status = "compile_error"  # codegen refused it (choice_or_none returned None)
                out.append(records.make_record(idx, cfg, status))
            elif id(choice) in measured and measured[id(choice)].status == "ok":
                m = measured[id(choice)]
                out.append(records.make_record(idx, cfg, "ok", m.median_ms, m.iqr_ms, m.repeats))
                if cfg.is_triton:
                    best_triton = min(best_triton, m.median_ms)
                elif cfg.template == "aten":
                    aten = min(aten, m.median_ms)
                continue
            elif id(choice) in measured:
                status = measured[id(choice)].status
                out.append(records.make_record(idx, cfg, status))
            else:
                status = errors.get(id(choice), "compile_error")
                ms = feedback.get(id(choice), float("inf"))
                if status == "compile_error" and 0 < ms < float("inf"):
                    # Inductor timed it with its own do_bench: our timer never saw it, so
                    # this torch routes benchmarking differently. Say so; keep no time.
                    st.bypassed += 1
                out.append(records.make_record(idx, cfg, status))
            st.failed[status] = st.failed.get(status, 0) + 1
        st.ok = sum(1 for r in out if r.status == "ok")
        end = time.perf_counter()
        st.wall_s = end - t["start"]
        if t["hook"]:
            st.hook_s = t["hook"] - t["start"]
            st.compile_s = (t["b0"] or end) - t["hook"]
            st.bench_s = (t["b1"] - t["b0"]) if t["b0"] else 0.0
        st.best_triton_us = best_triton * 1000 if best_triton < float("inf") else 0.0
        st.aten_us = aten * 1000 if aten < float("inf") else 0.0
        return out, st
