"""Simulated Triton kernels for Inductor's real coordinate-descent code, on the CPU.

`Kernel` has what `CachingAutotuner._coordinate_descent_tuning` (torch's own method, called
unbound with a Kernel as self) and `collect.coordesc.kernel_features` read: the kernel's
features, a real `CoordescTuner`, and a `bench` whose time is `ms(config)`. `tune` runs that
real method, so the recorder's and the predictor's wrappers are exercised as Inductor calls
them. No GPU or Triton: the tuner reads a config's kwargs, num_warps and num_stages only.
"""
from __future__ import annotations

import threading

from torch._inductor.runtime.coordinate_descent_tuner import CoordescTuner
from torch._inductor.runtime.triton_heuristics import CachingAutotuner

from torch_diode.collect import coordesc


class Cfg:
    """The attributes of triton.Config that Inductor's tuner reads and writes (hashable:
    Inductor keys launchers by config)."""

    def __init__(self, kwargs, num_warps=4, num_stages=1):
        self.kwargs, self.num_warps, self.num_stages = dict(kwargs), num_warps, num_stages

    def _key(self):
        return tuple(sorted(self.kwargs.items())), self.num_warps, self.num_stages

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, Cfg) and self._key() == other._key()

    def __repr__(self):
        return f"Cfg({self.kwargs}, num_warps={self.num_warps}, num_stages={self.num_stages})"


class Launcher:
    def __init__(self, config):
        self.config, self.n_regs, self.n_spills, self.shared, self.cache_hash = config, 0, 0, 0, "h"


class Kernel:
    """A reduction kernel (by default) as a CachingAutotuner: features and the methods
    `_coordinate_descent_tuning` calls."""

    def __init__(self, name="triton_red_fused_sum_0", size_hints=None, num_load=1, src_extra="",
                 heuristic="REDUCTION", ms=None):
        self.heuristic_type = type("HeuristicType", (), {"name": heuristic})()
        self.size_hints = size_hints or {"x": 4096, "r0_": 8192}
        self.inductor_meta = {"kernel_name": name, "num_load": num_load, "num_store": 1, "num_reduction": 1,
                              "reduction_hint": "INNER", "backend_hash": "not a feature"}
        self.triton_meta = {"signature": {"in_ptr0": "*bf16", "out_ptr0": "*fp32", "xnumel": "i32",
                                          "r0_numel": "i32"}}
        self.fn = type("Fn", (), {"src": f"def {name}(in_ptr0, out_ptr0, xnumel, r0_numel): ...{src_extra}"})()
        self.lock = threading.Lock()
        self.autotune_time_taken_ns = 0
        self.saved = []                                  # what save_cache_hook was given
        self.save_cache_hook = lambda cfg, ns, found_by_coordesc=False: self.saved.append(cfg)
        self.coordesc_tuner = CoordescTuner(name=name, size_hints=self.size_hints,
                                            inductor_meta={"warp_size": 32, "max_threads_per_block": 1024})
        self.ms = ms or (lambda cfg: 1.0)
        self.timed = []                                  # configs benchmarked, in order
        self.seen_as_current = []                        # CURRENT_KERNEL.get() at each benchmark

    def _ensure_kernel_loaded(self):
        pass

    def _precompile_config(self, cfg):
        return type("Compiled", (), {"make_launcher": lambda _: Launcher(cfg)})()

    def bench(self, launcher, *args, **kwargs):
        self.timed.append(launcher.config)
        self.seen_as_current.append(coordesc.CURRENT_KERNEL.get())
        return self.ms(launcher.config)


def tune(kernel: Kernel, start: Cfg) -> Cfg:
    """Inductor's own `CachingAutotuner._coordinate_descent_tuning` on `kernel` from `start`
    (with the process's wrappers around it); the winner's config."""
    coordesc.CURRENT_KERNEL.install()
    return CachingAutotuner._coordinate_descent_tuning(kernel, Launcher(start)).config
