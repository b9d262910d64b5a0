"""The GPU side shared by the benches that re-time recorded configs (aten_triton_clock,
pick_retime): one problem's inputs and its ATen reference made as the collector makes them,
TF32 as the problem was collected, launches as the collector launches them, and the
collector's clock (torch_diode.collect.timing.BatchTimer: CUDA events behind a GPU spin,
cold L2). Imported only on the GPU machine: --dry-run's FAKE clocks never touch it."""
from __future__ import annotations

MAX_REL_ERR = 5e-2  # the collector's output check (engine: relative L2 error against ATen at most 5e-2)


class CollectorClock:
    """Base of the benches' GPU clocks. A subclass's setup() calls problem(), then aten() and
    triton() for its launches and check() on each; teardown() restores TF32."""
    fake = False

    def __init__(self, name: str):
        import torch
        if not torch.cuda.is_available():
            raise SystemExit(f"{name}: no CUDA GPU here (torch.cuda.is_available() is False); run it on the "
                             "GPU machine, or pass --dry-run for FAKE timings on CPU")
        from torch_diode.collect.timing import BatchTimer
        self.torch = torch
        self.timer = BatchTimer(0, True)
        self.device = torch.cuda.get_device_name()
        self._restore = None

    def problem(self, p, recs) -> dict:
        """Problem p's tensors (bias, a, b, the output c) and ATen's output (ref, ref_norm), with
        TF32 on where its Triton records were collected with it (restored by teardown)."""
        torch = self.torch
        from torch_diode.collect.engine import _aten_fn
        from torch_diode.collect.problems import make_inputs
        from torch_diode.inductor_compat import set_tf32
        self._restore = set_tf32(any(r.config.allow_tf32 for r in recs if r.config.is_triton))
        inputs = make_inputs(p)
        bias, a, b = inputs if len(inputs) == 3 else (None, *inputs)
        shape = (p.batch, p.m, p.n) if p.op in ("bmm", "baddbmm") else (p.m, p.n)
        c = torch.empty(shape, dtype=getattr(torch, p.dtype_out), device="cuda")
        ref = torch.empty_like(c)
        _aten_fn(p, bias, a, b, ref)()
        return {"p": p, "bias": bias, "a": a, "b": b, "c": c, "ref": ref, "ref_norm": ref.float().norm().item() or 1.0}

    @staticmethod
    def aten(io: dict):
        """ATen as the collector calls it (engine._aten_fn: out= the output buffer)."""
        from torch_diode.collect.engine import _aten_fn
        return _aten_fn(io["p"], io["bias"], io["a"], io["b"], io["c"])

    @staticmethod
    def triton(io: dict, cfg):
        """The config as the problem's static-shape kernel, as the collector's static stage times it."""
        from collector_fidelity import our_kernel
        return our_kernel(io["p"], cfg, {"a": io["a"], "b": io["b"], "c": io["c"], "bias": io["bias"]}, static=True)

    @staticmethod
    def check(fn, io: dict) -> float:
        """fn's relative L2 error against ATen's output (NaN-poisoned output first, as the collector)."""
        from torch_diode.collect.engine import output_error
        return output_error(fn, io["c"], io["ref"], io["ref_norm"])

    def teardown(self):
        if self._restore:
            self._restore()
            self._restore = None

    def warm(self, fns, n):
        """Untimed rounds first (the collector's STATIC_WARMUP_S): after a compile the GPU idled."""
        from torch_diode.collect.engine import STATIC_WARMUP_S, warm_up
        warm_up(self.timer.repeat, fns, n, STATIC_WARMUP_S)

    def events_us(self, fn, n) -> list[float]:
        return [t * 1000.0 for t in self.timer.repeat(fn, n)]
