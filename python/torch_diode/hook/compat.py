"""PyTorch-version handling for the hook: a thin layer over torch_diode.inductor_compat.

torch_diode.inductor_compat (shared with the collector) owns the version differences
both need: the finalize hook's name (`_finalize_template_configs`, or
`_finalize_mm_configs` before Sept 2025), KTC params (`.params.to_kwargs()` / `.kwargs`),
template uids, the supported-version check. They are re-exported here so the hook's
modules import one place.

What only the hook needs, and lives here until it moves into inductor_compat:
* `bind_finalize_args` and `choices_subclass` (the one InductorChoices subclass factory,
  shared with the collector) now live in inductor_compat and are re-exported here;
* the installed handler: `config.inductor_choices_class` (a zero-argument factory) where
  it exists, else the per-thread slot of `V.set_choices_handler`. Inductor's
  `_choices_default` caches the handler it builds in that thread-local slot, so a later
  change of `inductor_choices_class` is invisible to a thread that already compiled;
  `thread_handler()` / `set_thread_handler()` (from inductor_compat, which the
  collector needs too) read and write the slot, so install()/uninstall() restore it;
* `gemm_search_space`: patches `config.max_autotune_gemm_search_space` for the duration
  of the hook's own config enumeration (heuristic generators read it when iterated).
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from ..inductor_compat import (  # noqa: F401  (re-exports)
    MISSING,
    UnsupportedTorch,
    bind_finalize_args,
    choices_subclass,
    exhaustive_flag_supported,
    finalize_hook_name,
    ktc_extra,
    ktc_params,
    ktc_params_views,
    ktc_template_uid,
    require_supported_torch,
    set_thread_handler,
    template_uid,
    thread_handler,
    torch_version,
)


def choices_base() -> type:
    require_supported_torch()
    from torch._inductor.choices import InductorChoices
    return InductorChoices


ktc_uid = ktc_template_uid
ktc_kwargs = ktc_params
ktc_extra_kwargs = ktc_extra


# ---------------------------------------------------------------- installation

def inductor_config():
    from torch._inductor import config
    return config


def has_choices_config() -> bool:
    return hasattr(inductor_config(), "inductor_choices_class")


def get_choices_config() -> Any:
    return inductor_config().inductor_choices_class


def set_choices_config(value: Any) -> None:
    inductor_config().inductor_choices_class = value


# ---------------------------------------------------------------- search space

@contextlib.contextmanager
def gemm_search_space(space: str | None, prune_shared_mem: bool = False) -> Iterator[None]:
    """Within the block, Inductor's GEMM heuristics enumerate `space` ("DEFAULT"/"EXHAUSTIVE").

    Used only while the hook iterates the Triton templates' config generators, so the
    user's setting is untouched outside that loop. `prune_shared_mem` also turns on
    Inductor's own shared-memory pruning (`max_autotune_prune_choices_based_on_shared_mem`,
    off by default; it drops configs whose estimated shared memory exceeds the device's)
    where this torch has it. None leaves the config alone.
    """
    if space is None or not exhaustive_flag_supported():
        yield
        return
    cfg = inductor_config()
    patch = {"max_autotune_gemm_search_space": space}
    if prune_shared_mem and hasattr(cfg, "max_autotune_prune_choices_based_on_shared_mem"):
        patch["max_autotune_prune_choices_based_on_shared_mem"] = True
    with cfg.patch(**patch):
        yield


def cublas_tf32_enabled() -> bool:
    """Whether cuBLAS may use TF32 for fp32 matmuls (torch.backends, old or new API)."""
    import torch
    m = torch.backends.cuda.matmul
    prec = getattr(m, "fp32_precision", None)
    if isinstance(prec, str) and prec not in ("none", ""):
        return prec == "tf32"
    return bool(getattr(m, "allow_tf32", False))
