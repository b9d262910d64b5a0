"""Every PyTorch-version difference in Inductor's GEMM autotuning, in one place.

Used by the collector (torch_diode.collect) and the Inductor hook (torch_diode.hook).
Import is cheap; torch is imported lazily by each function.

Public API
----------
MIN_TORCH                      oldest supported torch (tuple)
UnsupportedTorch               raised, with the reason, when this torch cannot be driven
require_supported_torch()      check the running torch; returns its (major, minor)
finalize_hook_name(base=None)  "_finalize_template_configs" (>= Sept 2025) or "_finalize_mm_configs"
choices_subclass(finalize, base=None, name=, mixins=, namespace=)
                               THE InductorChoices subclass factory (collector and hook):
                               finalize(self, parent, args, kwargs) replaces the finalize hook
make_choices_class(on_finalize, base=None)
                               the collector's subclass: its finalize hook calls
                               on_finalize(ktcs: list, kernel_inputs, op_name) -> list of KTCs
bind_finalize_args(m, a, kw)   a finalize call's arguments by parameter name
mm_scalars(kernel_inputs)      alpha / beta of addmm / baddbmm
install_choices(cls)           context manager: Inductor uses `cls` for the duration
ktc_params(ktc) -> dict        the per-config template kwargs (`.params.to_kwargs()` / `.kwargs`)
ktc_params_views(ktcs)         the same kwargs of many KTCs without copying them (read-only), or
                               None where a KTC's params is not Inductor's plain dict params
ktc_extra(ktc) -> dict         per-op kwargs (ALLOW_TF32, epilogue_fn, ...)
ktc_template_uid(ktc) -> str   e.g. "triton::mm", "aten::mm"
choice_ktc(choice)             the KTC a ChoiceCaller was built from, or None
feedback_saver(fn)             context manager: fn(timings, name, input_nodes, choices) after
                               every autotune (adapts to 4..6 positional arguments)
benchmark_interceptor(timer, gate=None)
                               context manager: Inductor's per-choice benchmark calls timer(choice, fn)
                               -> float ms instead of its own do_bench (choice-aware); gate(choice)
                               may raise to skip a choice before it is loaded
precompile_error_tap(sink)     context manager: sink(choice, exception) for each failed precompile
set_tf32(enabled)              cuBLAS / Inductor TF32 switch across versions (returns a restore fn)
triton_heuristics_module()     module holding CUDAConfigHeuristic (template_heuristics moved twice)
size_hint_stub()               context manager: a V.graph stand-in so config heuristics run without
                               a graph (CPU enumeration, tests)
gemm_template_source(kind)     Jinja source of Inductor's Triton mm / bmm template (collector v2)
template_hashes(names=None)    sorted (name, sha256 hex) of those sources ("triton_mm", "triton_bmm"):
                               a shard's `templates` (the sources its kernels were rendered from)
mm_operand_indices(inputs)     positions of mat1 / mat2 among MMKernelInputs' nodes
ktc_built_choice(ktc)          the ChoiceCaller a KTC already built, or None
coordesc_kernel_method()       (CachingAutotuner, name) of the private method that runs coordinate
                               descent for one kernel (calls CoordescTuner.autotune), or None
"""
from __future__ import annotations

import contextlib
import importlib
import inspect
import operator
import threading
from typing import Any, Callable

MIN_TORCH = (2, 8)


class UnsupportedTorch(RuntimeError):
    """This torch lacks a hook the collector needs; the message says which and what to install."""


def torch_version() -> tuple[int, int]:
    import torch
    parts = torch.__version__.split("+")[0].split(".")
    return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)


def require_supported_torch() -> tuple[int, int]:
    try:
        v = torch_version()
    except ImportError as e:
        raise UnsupportedTorch(f"torch is not installed ({e}); the collector needs torch >= "
                               f"{MIN_TORCH[0]}.{MIN_TORCH[1]}") from None
    if v < MIN_TORCH:
        raise UnsupportedTorch(f"torch {v[0]}.{v[1]} is too old: need >= {MIN_TORCH[0]}.{MIN_TORCH[1]} "
                               "(InductorChoices template hooks and KernelTemplateChoice)")
    finalize_hook_name()
    return v


def _choices_base():
    from torch._inductor.choices import InductorChoices
    return InductorChoices


def finalize_hook_name(base: type | None = None) -> str:
    base = base or _choices_base()
    for name in ("_finalize_template_configs", "_finalize_mm_configs"):
        if hasattr(base, name):
            return name
    raise UnsupportedTorch("torch._inductor.choices.InductorChoices has neither "
                           "_finalize_template_configs nor _finalize_mm_configs")


def bind_finalize_args(method, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Maps a call of a finalize method (args exclude self) to its parameter names.

    Every known signature names template_choices, kernel_inputs, templates and op_name;
    one old variant has an extra `layout` before `templates`."""
    bound = inspect.signature(method).bind(None, *args, **kwargs)
    return dict(bound.arguments)


def choices_subclass(finalize: Callable[[Any, Callable, tuple, dict], Any], base: type | None = None, *,
                     name: str = "DiodeChoices", mixins: tuple = (), namespace: dict | None = None) -> type:
    """THE InductorChoices subclass factory of torch_diode: the collector
    (make_choices_class) and the hook (hook.choices.choices_class) both build through it.

    The class derives from `mixins` + `base` (default InductorChoices) and overrides
    whichever finalize hook this torch calls (`_finalize_template_configs`, or
    `_finalize_mm_configs` before Sept 2025) with
        finalize(self, parent, args, kwargs) -> list of KTCs
    where `parent` is the base's unbound finalize method (also on the class as
    `_diode_base_finalize`) and args/kwargs the call's arguments after self.
    `namespace` adds attributes (uuid, __init__, ...)."""
    base = base or _choices_base()
    hook_name = finalize_hook_name(base)
    parent = getattr(base, hook_name)

    def hook(self, *args, **kwargs):
        return finalize(self, parent, args, kwargs)

    hook.__name__ = hook_name
    hook.__doc__ = f"torch_diode override of {base.__name__}.{hook_name}"
    ns = {"_diode_base_finalize": staticmethod(parent), "_diode_choices_factory": "inductor_compat.choices_subclass",
          **(namespace or {}), hook_name: hook}
    return type(name, (*mixins, base), ns)


def make_choices_class(on_finalize: Callable[[list, Any, str], list], base: type | None = None) -> type:
    """Subclass of InductorChoices (or `base`) routing the finalize hook to `on_finalize`.

    The parent's finalize runs first (it flattens the per-template generators and
    logs), so on_finalize sees exactly the choices Inductor would compile.
    """

    def finalize(self, parent, args, kwargs):
        ktcs = list(parent(self, *args, **kwargs))
        bound = bind_finalize_args(parent, args, kwargs)
        return on_finalize(ktcs, bound.get("kernel_inputs"), bound.get("op_name") or "")

    def uuid(self) -> str:  # newer Inductor keys its caches on the handler's uuid
        return f"torch_diode.{type(self).__name__}.{id(on_finalize):x}"

    return choices_subclass(finalize, base, name="DiodeChoices", namespace={"uuid": uuid})


def mm_scalars(kernel_inputs) -> dict:
    """alpha / beta of addmm / baddbmm (MMKernelInputs' private `_scalars` on 2.10-2.13);
    {} where this torch does not keep them."""
    return dict(getattr(kernel_inputs, "_scalars", None) or {})


MISSING = object()  # "no choices handler cached in this thread"


def _choices_virtual():
    from torch._inductor import virtualized
    v = getattr(virtualized, "_choices", None)
    tl = getattr(virtualized, "threadlocal", None)
    if v is None or tl is None or not hasattr(v, "_key"):
        raise UnsupportedTorch("torch._inductor.virtualized has no _choices slot (torch too old or too new)")
    return v, tl


def thread_handler() -> Any:
    """The choices handler cached in this thread, or MISSING (Inductor builds one lazily).

    Inductor's `_choices_default` builds the handler from `config.inductor_choices_class`
    on first use in a thread and caches it in a thread-local slot, so a later change of
    the config is invisible to a thread that already compiled.
    """
    v, tl = _choices_virtual()
    return getattr(tl, v._key, MISSING)


def set_thread_handler(value: Any) -> None:
    """Puts `value` in this thread's slot; MISSING empties it, so Inductor rebuilds from config."""
    v, tl = _choices_virtual()
    if value is MISSING:
        if hasattr(tl, v._key):
            delattr(tl, v._key)
    else:
        setattr(tl, v._key, value)


@contextlib.contextmanager
def install_choices(cls: type):
    """Makes Inductor use a fresh `cls()` for compiles inside the block, then restores.

    The thread's cached handler is cleared on entry: otherwise the handler built for an
    earlier compile in this thread (e.g. the collector's previous problem, whose
    closures hold that problem's state) would silently keep serving.
    """
    from torch._inductor import config
    if hasattr(config, "inductor_choices_class"):
        saved = thread_handler()
        set_thread_handler(MISSING)
        try:
            with config.patch(inductor_choices_class=cls):
                yield
        finally:
            set_thread_handler(saved)
        return
    from torch._inductor.virtualized import V
    old = V.choices if hasattr(V, "choices") else None
    V.set_choices_handler(cls())
    try:
        yield
    finally:
        V.set_choices_handler(old if old is not None else _choices_base()())


def ktc_params(ktc) -> dict:
    p = getattr(ktc, "params", None)
    if p is not None and hasattr(p, "to_kwargs"):
        return dict(p.to_kwargs())
    if hasattr(ktc, "kwargs"):
        return dict(ktc.kwargs)
    raise UnsupportedTorch("KernelTemplateChoice has neither .params nor .kwargs")


_DICT_PARAMS: Any = None   # DictKernelTemplateParams when its to_kwargs() is a copy of .kwargs, else False
_get_params = operator.attrgetter("params")
_get_params_kwargs = operator.attrgetter("params.kwargs")


def _dict_params_class():
    """Inductor's DictKernelTemplateParams, if this torch has it and its to_kwargs() returns
    a plain copy of its `.kwargs` dict (as in 2.13, read here; checked once on a probe, so a
    torch whose to_kwargs() adds defaults or converts values falls back to to_kwargs())."""
    global _DICT_PARAMS
    if _DICT_PARAMS is None:
        cls = False
        try:
            from torch._inductor.template_heuristics.params import DictKernelTemplateParams as D
            probe = {"BLOCK_M": 64, "EVEN_K": True}
            p = D(probe)
            if isinstance(getattr(p, "kwargs", None), dict) and p.to_kwargs() == probe == p.kwargs:
                cls = D
        except Exception:  # moved or changed: every KTC goes through to_kwargs()
            pass
        _DICT_PARAMS = cls
    return _DICT_PARAMS


def ktc_params_views(ktcs: list) -> list[dict] | None:
    """[ktc_params(k) for k in ktcs] without the copies: each KTC's own kwargs dict, which
    the caller must not modify. None unless every KTC's params is exactly Inductor's
    DictKernelTemplateParams (what make_ktc_generator builds for every template in 2.13):
    a subclass, or another params class, may compute its kwargs, so those
    are read with ktc_params().

    Why: the hook reads ~1,400 KTCs per GEMM in the EXHAUSTIVE space; to_kwargs() copies
    a dict per KTC and is a Python call, ~0.1 ms of the hook's ~2 ms budget. Inductor builds
    new params objects for every problem (make_ktc_generator), so there is nothing to cache
    per params object; reading `.kwargs` is the saving."""
    cls = _dict_params_class()
    if not cls:
        return None
    # C-level loops (map / set): a Python loop over 1,400 KTCs would cost what we save
    try:
        if set(map(type, map(_get_params, ktcs))) != {cls}:
            return None
    except AttributeError:
        return None
    return list(map(_get_params_kwargs, ktcs))  # the class was probed: .kwargs is its kwargs mapping


def ktc_extra(ktc) -> dict:
    return dict(getattr(ktc, "extra_kwargs", None) or {})


def template_uid(t) -> str:
    """A KernelTemplate's / ExternKernelChoice's uid (its name, else its class name)."""
    return getattr(t, "uid", None) or getattr(t, "name", type(t).__name__)


def ktc_template_uid(ktc) -> str:
    return template_uid(ktc.template)


def choice_ktc(choice):
    ann = getattr(choice, "annotations", None) or {}
    return ann.get("ktc")


def _selector_cache():
    from torch._inductor import select_algorithm as sa
    if hasattr(sa, "get_algorithm_selector_cache"):
        return sa.get_algorithm_selector_cache()
    if getattr(sa, "_ALGORITHM_SELECTOR_CACHE", None) is None:
        sa._ALGORITHM_SELECTOR_CACHE = sa.AlgorithmSelectorCache()
    return sa._ALGORITHM_SELECTOR_CACHE


@contextlib.contextmanager
def feedback_saver(fn: Callable[[dict, str, Any, list], None]):
    """Register fn for the duration; removes only our saver (clear_feedback_savers removes all)."""
    from torch._inductor import select_algorithm as sa

    def saver(timings, name, input_nodes, choices, *rest):  # 4 args (old) .. 6 (2.11+)
        fn(timings, name, input_nodes, choices)

    sa.add_feedback_saver(saver)
    try:
        yield
    finally:
        fns = getattr(_selector_cache(), "feedback_saver_fns", None)
        if isinstance(fns, list) and saver in fns:
            fns.remove(saver)


_current = threading.local()


@contextlib.contextmanager
def benchmark_interceptor(timer: Callable[[Any, Callable[[], Any]], float],
                          gate: Callable[[Any], None] | None = None):
    """Route Inductor's per-choice GPU benchmarking through timer(choice, fn) -> ms.

    Inductor benchmarks a choice via AlgorithmSelectorCache.benchmark_choice ->
    choice.benchmark -> ... -> benchmarker.benchmark_gpu(fn). We note the choice in
    the first call and replace benchmark_gpu on the shared benchmarker instance, so
    Inductor still builds the inputs, loads the compiled kernel and handles errors.
    gate(choice), if given, runs before Inductor loads the choice; an exception it
    raises makes Inductor skip the choice as failed (used for a per-problem deadline).
    """
    from torch._inductor import select_algorithm as sa
    from torch._inductor.runtime import benchmarking

    cls = sa.AlgorithmSelectorCache
    if "benchmark_choice" not in cls.__dict__:
        raise UnsupportedTorch("AlgorithmSelectorCache.benchmark_choice not found")
    orig_choice = cls.__dict__["benchmark_choice"]
    bm = benchmarking.benchmarker
    had_attr = "benchmark_gpu" in bm.__dict__
    old_attr = bm.__dict__.get("benchmark_gpu")
    orig_gpu = bm.benchmark_gpu

    inner = getattr(orig_choice, "__func__", orig_choice)
    is_static = isinstance(orig_choice, staticmethod)

    def benchmark_choice(klass, choice, autotune_args):
        if gate is not None:
            gate(choice)
        _current.choice = choice
        try:
            return inner(choice, autotune_args) if is_static else inner(klass, choice, autotune_args)
        finally:
            _current.choice = None

    def benchmark_gpu(fn, *args, **kwargs):
        choice = getattr(_current, "choice", None)
        if choice is None:  # someone else benchmarking (e.g. the final graph): leave as is
            return orig_gpu(fn, *args, **kwargs)
        return timer(choice, fn)

    cls.benchmark_choice = classmethod(benchmark_choice)
    bm.benchmark_gpu = benchmark_gpu
    try:
        yield
    finally:
        cls.benchmark_choice = orig_choice
        if had_attr:
            bm.benchmark_gpu = old_attr
        else:
            del bm.benchmark_gpu


@contextlib.contextmanager
def precompile_error_tap(sink: Callable[[Any, BaseException], None]):
    """sink(choice, exc) for each choice whose precompile failed (when this torch reports them)."""
    from torch._inductor import select_algorithm as sa
    orig = getattr(sa, "_log_autotune_exceptions", None)
    if orig is None:
        yield
        return

    def tap(exceptions, *a, **kw):
        for choice, exc in exceptions or ():
            sink(choice, exc)
        return orig(exceptions, *a, **kw)

    sa._log_autotune_exceptions = tap
    try:
        yield
    finally:
        sa._log_autotune_exceptions = orig


def set_tf32(enabled: bool) -> Callable[[], None]:
    """Switch TF32 for cuBLAS and Inductor's ALLOW_TF32 heuristic; returns a restore function.

    Through the legacy setter `torch.backends.cuda.matmul.allow_tf32`: on torch 2.9+ it
    also sets the new API's `fp32_precision` ("tf32" / "ieee"), so every reader agrees.
    Setting only `fp32_precision` leaves the legacy readers (`allow_tf32`,
    `torch.get_float32_matmul_precision()`, which max-autotune's benchmarking reads) raising
    "mix of the legacy and new APIs" (seen on an H100 with torch 2.11, fp32 max-autotune)."""
    import torch
    m = torch.backends.cuda.matmul
    try:
        saved = bool(m.allow_tf32)
    except RuntimeError:  # the process already mixed the APIs: the new one's state is the truth
        saved = getattr(m, "fp32_precision", "ieee") == "tf32"
    m.allow_tf32 = bool(enabled)

    def restore():
        m.allow_tf32 = saved
    return restore


def triton_heuristics_module():
    for name in ("torch._inductor.template_heuristics.triton",
                 "torch._inductor.heuristics.triton",
                 "torch._inductor.template_heuristics"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "CUDAConfigHeuristic"):
            return mod
    raise UnsupportedTorch("cannot find Inductor's CUDAConfigHeuristic (template heuristics module moved?)")


class _HintSizeVars:
    """Enough of GraphLowering.sizevars for config heuristics on concrete ints."""

    def statically_known_true(self, expr) -> bool:
        return bool(expr)

    def __getattr__(self, name):
        if "hint" in name:  # size_hint, optimization_hint_with_override, size_hint_with_override
            return lambda x, *a, **kw: int(x)
        raise AttributeError(name)


class _StubGraph:
    sizevars = _HintSizeVars()


@contextlib.contextmanager
def size_hint_stub():
    from torch._inductor.virtualized import V
    with V.set_graph_handler(_StubGraph()):
        yield


def exhaustive_flag_supported() -> bool:
    from torch._inductor import config
    return hasattr(config, "max_autotune_gemm_search_space")


_TEMPLATE_VARS = {"mm": "mm_template", "bmm": "bmm_template"}


def gemm_template_source(kind: str) -> str:
    """Jinja source of Inductor's Triton `mm` or `bmm` template in the running torch.

    Newer torch keeps them as files (kernel/templates/triton_mm.py.jinja, loaded by
    mm_common.load_kernel_template); older torch passes an inline `source=r\"\"\"...\"\"\"`
    to TritonTemplate in kernel/mm.py / kernel/bmm.py, which is read from the module's
    source text."""
    if kind not in _TEMPLATE_VARS:
        raise ValueError(f"no Triton GEMM template '{kind}' (known: mm, bmm)")
    try:
        from torch._inductor.kernel.mm_common import load_kernel_template
        return load_kernel_template(f"triton_{kind}")
    except (ImportError, AttributeError, FileNotFoundError, OSError):
        pass
    import re
    mod = importlib.import_module(f"torch._inductor.kernel.{kind}")
    text = inspect.getsource(mod)
    m = re.search(_TEMPLATE_VARS[kind] + r'\s*=\s*TritonTemplate\(.*?source=r?"""(.*?)"""', text, re.S)
    if not m:
        raise UnsupportedTorch(f"cannot find the source of Inductor's {_TEMPLATE_VARS[kind]} in {mod.__file__}")
    return m.group(1)


TEMPLATE_NAMES = {"mm": "triton_mm", "bmm": "triton_bmm"}   # gemm_template_source kind -> template name


def template_hashes(names=None) -> tuple[tuple[str, str], ...]:
    """Sorted (template name, sha256 hex of its UTF-8 source) of Inductor's Triton GEMM
    templates in the running torch (gemm_template_source): "triton_bmm" and "triton_mm", or
    only those in `names`. The collector writes these into a shard's `templates`, so data
    rendered from a changed template can be told apart. A name that is not a GEMM template
    raises ValueError; a template this torch lacks raises UnsupportedTorch."""
    import hashlib
    kinds = {v: k for k, v in TEMPLATE_NAMES.items()}
    wanted = sorted(kinds) if names is None else sorted(set(names))
    unknown = [n for n in wanted if n not in kinds]
    if unknown:
        raise ValueError(f"unknown template name(s) {', '.join(unknown)} (known: {', '.join(sorted(kinds))})")
    return tuple((n, hashlib.sha256(gemm_template_source(kinds[n]).encode("utf-8")).hexdigest())
                 for n in wanted)


def mm_operand_indices(kernel_inputs) -> tuple[int, int]:
    """Positions of mat1 and mat2 among MMKernelInputs' nodes (after any bias: addmm's
    inputs are (bias, mat1, mat2)). Private attributes of MMKernelInputs on 2.10-2.13."""
    i1, i2 = getattr(kernel_inputs, "_mat1_idx", None), getattr(kernel_inputs, "_mat2_idx", None)
    if i1 is None or i2 is None:
        n = len(kernel_inputs.strides_hinted())
        i1, i2 = n - 2, n - 1   # mat1 and mat2 are the last two inputs of every GEMM op
    return int(i1), int(i2)


def ktc_built_choice(ktc):
    """The ChoiceCaller a KernelTemplateChoice built, or None if it was never built or its
    codegen failed. Reads the lazy slot (`ktc.choice` would build it now)."""
    return getattr(ktc, "_choice", None)


def coordesc_kernel_method() -> tuple[type, str] | None:
    """(class, method name) of the private method that runs coordinate descent for one
    kernel: `CachingAutotuner._coordinate_descent_tuning(self, launcher, *args)` (torch
    2.8-2.13), which calls `self.coordesc_tuner.autotune(bench, launcher.config, None)` and
    compiles, caches and returns the winner's launcher. None where this torch has no such
    method (or no Triton runtime module)."""
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except ImportError:
        return None
    name = "_coordinate_descent_tuning"
    return (CachingAutotuner, name) if callable(CachingAutotuner.__dict__.get(name)) else None
