"""Zero configuration: the model's GEMM choice under plain `torch.compile(model)`.

Without max-autotune Inductor offers a GEMM nothing but its ATen (cuBLAS) kernel, so the
hook's finalize call has nothing to choose from. In predict mode, with a model, this module
turns Inductor's GEMM template lowering on for the lowering of one mm / addmm / bmm /
baddbmm at a time (`config.max_autotune_gemm` patched on around that call only, on a GPU
input): Inductor then enumerates its Triton configs, the hook scores them with ATen and
hands exactly ONE choice back, so nothing is benchmarked. Every other op, kernel and
scheduler decision of the graph sees the user's own config, unchanged.

Under an engaged lowering (`active()`), the handler never lets Inductor benchmark: a GEMM
the model cannot decide (outside its sizes, a prediction error, ...) gets ATen alone,
which is what plain `torch.compile` runs (choices.py, `_diode_finalize`). Inductor may
split one lowering into several finalize calls (ATen templates first, Triton templates
after); `Lowering.chosen` makes sure that the calls of one lowering hand over one choice
in all.

The FP8 `aten._scaled_mm` lowering (Inductor's op_name "scaled_mm": cuBLASLt's
`aten::_scaled_mm` and `triton::mm` with the scale epilogue) is wrapped the same way and
engaged when a model of the scaled_mm decision family is loaded (HookState.ranker_for):
without one Inductor lowers it as before (it offers the Triton configs of `_scaled_mm` even
without max-autotune, and benchmarks them).

Not engaged when: the user's config already turns GEMM autotuning on (mode="max-autotune",
`max_autotune_gemm`: the user's path, where the hook filters as before), the input is not on
a CUDA device, the hook has no model of the op's decision family or is not in predict mode, the option
`zero_config` is off, or `TORCH_DIODE_ZERO_CONFIG=0`.
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

log = logging.getLogger("torch_diode")

ENV_ZERO_CONFIG = "TORCH_DIODE_ZERO_CONFIG"
GEMM_LOWERINGS = ("mm", "addmm", "bmm", "baddbmm")
# aten op (overload packet name) -> Inductor's op_name of its lowering, for every lowering wrapped
LOWERINGS = {**{op: op for op in GEMM_LOWERINGS}, "_scaled_mm": "scaled_mm"}
# the operand whose device decides: addmm / baddbmm take the bias first
_MAT1_INDEX = {"mm": 0, "bmm": 0, "addmm": 1, "baddbmm": 1, "scaled_mm": 0}


def env_enabled() -> bool:
    """TORCH_DIODE_ZERO_CONFIG: unset or anything but 0/false/no/off means on."""
    return os.environ.get(ENV_ZERO_CONFIG, "1").strip().lower() not in ("0", "false", "no", "off")


@dataclass
class Lowering:
    """One engaged lowering (GEMM or scaled_mm; `op` is Inductor's op_name): `chosen` once a
    finalize call of it handed a choice over."""
    op: str
    chosen: bool = False


_local = threading.local()


def current() -> Lowering | None:
    """The engaged lowering on this thread, None outside one (plain or user max-autotune)."""
    return getattr(_local, "lowering", None)


def active() -> bool:
    return current() is not None


@contextlib.contextmanager
def _engaged(op: str) -> Iterator[Lowering]:
    prior = current()
    _local.lowering = lowering = Lowering(op)
    try:
        yield lowering
    finally:
        _local.lowering = prior


def user_autotunes_gemms(config: Any) -> bool:
    """The user's own config turns GEMM autotuning on (mode="max-autotune", options
    {"max_autotune_gemm": True}, or the environment): then it is the user's path. An explicit
    False cannot be told from the default (Inductor's config module marks every option a
    `config.patch` ever touched as set, this module's own patch included), so the opt-out is
    TORCH_DIODE_ZERO_CONFIG=0 or `torch_diode.set_options(zero_config=False)`. Inductor's
    `max_autotune_gemm_backends` is honoured as it is: without TRITON no Triton config is
    offered, and the model's only candidate is ATen."""
    return bool(config.max_autotune or config.max_autotune_gemm)


def _on_cuda(node: Any) -> bool:
    try:
        dev = node.get_device()
    except Exception:  # noqa: BLE001 - not an IR node with a device
        return False
    return getattr(dev, "type", None) == "cuda"


def should_engage(state: Any, op: str, args: tuple) -> bool:
    """Whether this lowering (Inductor's op_name `op`) runs with GEMM templates on: see the
    module docstring."""
    if state is None:
        return False
    ranker_for = getattr(state, "ranker_for", None)   # HookState's: the model of op's family
    ranker = ranker_for(op) if ranker_for is not None else getattr(state, "ranker", None)
    if ranker is None:
        return False
    opts = state.options
    if opts.mode != "predict" or not opts.zero_config:
        return False
    from torch._inductor import config
    if user_autotunes_gemms(config):
        return False
    i = _MAT1_INDEX[op]
    return len(args) > i and _on_cuda(args[i])


# Once per process, not hook state (that is hook/state.py's PROCESS): Inductor's own lowering
# functions that install_lowerings() replaced, lowering key -> function, so that they are wrapped
# once whatever installs and uninstalls follow, and uninstall_lowerings() can put them back.
# The wrappers read the hook's state through `get_state` (api passes state.active_state): this
# module is below ranking and state and imports neither.
_installed: dict[Any, Callable] = {}
_install_lock = threading.Lock()


def install_lowerings(get_state: Callable[[], Any]) -> bool:
    """Wraps Inductor's lowerings of mm / addmm / bmm / baddbmm and _scaled_mm (every overload
    key) once per process; the wrapper calls the original with `max_autotune_gemm` patched on when
    `should_engage(get_state(), ...)`, else exactly as before. Returns whether the wrappers
    are in place (False on a torch without these lowerings)."""
    with _install_lock:
        if _installed:
            return True
        try:
            import torch
            from torch._inductor import config
            from torch._inductor.lowering import lowerings
        except Exception as e:  # noqa: BLE001 - no Inductor: nothing to wrap
            log.debug("torch_diode: zero configuration unavailable: %s", e)
            return False
        aten = torch.ops.aten
        wrapped = 0
        for aten_name, op in LOWERINGS.items():
            packet = getattr(aten, aten_name, None)
            if packet is None:   # a torch without _scaled_mm
                continue
            for key, fn in list(lowerings.items()):
                if key is not packet and getattr(key, "overloadpacket", None) is not packet:
                    continue
                lowerings[key] = _wrap(op, fn, get_state, config)
                _installed[key] = fn
                wrapped += 1
        if not wrapped:
            log.debug("torch_diode: zero configuration unavailable: no GEMM lowerings found")
            return False
        return True


def _wrap(op: str, fn: Callable, get_state: Callable[[], Any], config: Any) -> Callable:
    def lowering(*args, **kwargs):
        try:
            engage = should_engage(get_state(), op, args)
        except Exception as e:  # noqa: BLE001 - deciding must never break a compile
            log.debug("torch_diode: zero configuration not engaged for %s: %s", op, e)
            engage = False
        if not engage:
            return fn(*args, **kwargs)
        with _engaged(op), config.patch(max_autotune_gemm=True):
            return fn(*args, **kwargs)

    lowering.__wrapped__ = fn  # type: ignore[attr-defined]
    lowering.__name__ = getattr(fn, "__name__", op)
    return lowering


def uninstall_lowerings() -> None:
    """Puts Inductor's own lowering functions back (tests)."""
    with _install_lock:
        if not _installed:
            return
        from torch._inductor.lowering import lowerings
        for key, fn in _installed.items():
            lowerings[key] = fn
        _installed.clear()


def lowerings_installed() -> bool:
    return bool(_installed)
