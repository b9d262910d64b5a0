"""The hook's process state: one object (`PROCESS`), one lock, a small API.

Everything the hook remembers between calls in this process lives on `PROCESS` (a
`ProcessState`): the options and counters that every install shares, the models given to
register_model(), the installed HookState and its install record, the detected hardware,
the states rebuilt for unpickled factories, the GEMV launch configs planned by predict mode
and the GEMV tables read, the handler classes built per InductorChoices base, and the
"no model" causes already warned about. Writers hold `PROCESS.lock` (re-entrant: install()
holds it while it resolves a model and activates the state); readers on the compile path
read one attribute at a time (an attribute read or dict lookup is atomic in CPython), so
that lowering a GEMM never waits on an install in another thread.

What stays in other modules is truly once per process and is not state of the hook: the
wrappers put around Inductor's aten.mm / aten.addmm decompositions (gemv._wrapped) and GEMM
lowerings (zero_config._installed), which record Inductor's own functions so that they are
wrapped once and can be put back; and constants.

Layering (imports only go down; tests/python/test_hook_layering.py checks it, with no
import of `api` from any module below it, not even inside a function):

    api       the public functions (install/uninstall, models, options, stats)
    choices   HookState, the handler class and its factory, current_state(), state_for()
    gemv      predict mode's M = 1 / N = 1 reductions
    state     this module
    ranking, stats, detect, zero_config, extract, compat, sources, ...

`api` is the only writer of `options`, `registered`, `active` and `install`.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from . import detect
from .ranking import Options
from .stats import Stats

if TYPE_CHECKING:  # annotations only: choices imports this module
    from .choices import HookState

log = logging.getLogger("torch_diode")

ENV_HARDWARE_KEY = "DIODE_HARDWARE_KEY"


class ProcessState:
    """What the hook holds for this process (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        # set_options() / install(**options): the options the next HookState gets
        self.options: Options = Options()
        # one set of counters for the process, across installs (get_prediction_stats())
        self.stats: Stats = Stats()
        # register_model() paths, newest last
        self.registered: list[str] = []
        # the installed hook's state; None when the hook is not installed
        self.active: HookState | None = None
        # api._InstallRecord of the install in force (what uninstall() restores); None when not installed
        self.install: Any = None
        # "hw": get_detected_hardware()'s answer, detected once (refresh=True detects again)
        self.hardware: dict[str, Any] = {}
        # (model path, Options) -> HookState rebuilt for an unpickled factory (choices.state_for)
        self.rebuilt: dict[tuple, HookState] = {}
        # (reason, subject) of the "no model" / "source not used" causes already warned about
        self.warned: set[tuple[str, str]] = set()
        # predict mode's planned GEMV reductions: (outputs, K) -> launch config (gemv._plan)
        self.planned: dict[tuple[int, int], dict[str, int]] = {}
        # GEMV tables read: table path -> GemvTable, or None when absent or broken (gemv.load_table)
        self.gemv_tables: dict[str, Any] = {}
        # launch-config tables read: path -> LaunchConfigTable, or None when broken (launch_configs.load_table)
        self.launch_config_tables: dict[str, Any] = {}
        # InductorChoices base class -> the handler class built on it (choices.choices_class)
        self.handler_classes: dict[type, type] = {}


PROCESS = ProcessState()


def process() -> ProcessState:
    """This process's hook state (the one ProcessState)."""
    return PROCESS


def active_state() -> HookState | None:
    """The installed hook's HookState, None when the hook is not installed."""
    return PROCESS.active


def options() -> Options:
    """The options the next HookState gets (install(**options), set_options())."""
    return PROCESS.options


def stats() -> Stats:
    """The process's counters (get_prediction_stats())."""
    return PROCESS.stats


def detected_hardware(refresh: bool = False) -> dict[str, Any]:
    """This process's accelerator: HardwareId fields and `hardware_key` (None without a GPU),
    detected once and cached (`refresh` detects again); a copy.

    `DIODE_HARDWARE_KEY` names the hardware key explicitly (e.g. to fetch and check the
    bundle of a GPU from a machine without one, as the demo does); it wins over detection
    and the result says so under "hardware_key_source".
    """
    with PROCESS.lock:
        cache = PROCESS.hardware
        if refresh or "hw" not in cache:
            try:
                cache["hw"] = detect.describe(detect.detect_hardware())
                cache["hw"]["hardware_key_source"] = "detected"
            except Exception as e:  # a broken driver must not break `import torch_diode`
                log.debug("torch_diode: hardware detection failed: %s", e)
                cache["hw"] = {"device": None, "hardware_key": None, "reason": f"detection failed: {e}"}
            forced = os.environ.get(ENV_HARDWARE_KEY, "").strip()
            if forced:
                from ..hardware import is_valid_hardware_key
                if is_valid_hardware_key(forced):
                    cache["hw"].update(hardware_key=forced, hardware_key_source=ENV_HARDWARE_KEY)
                else:
                    log.warning("torch_diode: ignoring %s=%r: not a hardware key", ENV_HARDWARE_KEY, forced)
        return dict(cache["hw"])


def hardware_key() -> str | None:
    """detected_hardware()'s hardware key (None without a GPU and without DIODE_HARDWARE_KEY)."""
    return detected_hardware().get("hardware_key")
