"""The hook's public API (re-exported by torch_diode): install, models, stats, options.

The process state these functions read and write (options, counters, registered models,
the installed state, the detected hardware) is hook/state.py's `PROCESS`, under its lock;
this module is its only writer of options, registered models and the install.
"""
from __future__ import annotations

import contextlib
import logging
import os
import dataclasses
from dataclasses import dataclass, replace
from typing import Any, Iterator

from .. import wire
from ..model import LoadedModel, ModelFormatError, load_model_dir
from . import compat, contribute, detect, gemv, launch_configs, sources, zero_config
from .choices import (ChoicesFactory, DiodeChoicesMixin, HookState, current_state,  # noqa: F401 (re-exported)
                      options_dict, state_for)
from .ranking import Options, Ranker, model_family, ranker_for_model
from .state import ENV_HARDWARE_KEY, PROCESS, active_state, detected_hardware  # noqa: F401 (re-exported)
from .stats import CallRecord, Stats  # noqa: F401 (re-exported)

log = logging.getLogger("torch_diode")

ENV_AUTO_INSTALL = "TORCH_DIODE_AUTO_INSTALL"

@dataclass
class _InstallRecord:
    """What uninstall() restores (state.PROCESS.install while installed)."""
    mode: str            # "config" (inductor_choices_class) | "thread" (V.set_choices_handler)
    prior_config: Any    # the value of inductor_choices_class before install
    prior_thread: Any    # this thread's cached handler before install, or compat.MISSING
    factory: ChoicesFactory
    forced: bool = False


# ---------------------------------------------------------------- hardware and models

def get_detected_hardware(refresh: bool = False) -> dict[str, Any]:
    """This process's accelerator: HardwareId fields and `hardware_key` (None without a GPU).

    `DIODE_HARDWARE_KEY` names the hardware key explicitly (e.g. to fetch and check the
    bundle of a GPU from a machine without one, as the demo does); it wins over detection
    and the result says so under "hardware_key_source". Detected once (state.detected_hardware).
    """
    return detected_hardware(refresh)


def _hardware_key() -> str | None:
    return get_detected_hardware().get("hardware_key")


def list_available_models() -> list[dict[str, Any]]:
    """Models the hook could use, in the order it would try them (the hub is not listed)."""
    out = []
    for c in sources.candidates(_hardware_key(), list(reversed(PROCESS.registered))):
        entry = {"name": _name(c), "path": c.path, "source": c.source, "bundle": c.is_bundle,
                 "version": c.version}
        if not c.is_bundle:
            try:
                from ..model import read_model_dir
                info, _ = read_model_dir(c.path)
                entry.update(hardware_key=info.hardware_key, model_id=info.model_id[:16])
            except ModelFormatError as e:
                entry["error"] = str(e)
        out.append(entry)
    return out


def _name(c: sources.Candidate) -> str:
    if c.source == "package":
        return f"package/{os.path.basename(os.path.dirname(c.path))}/{c.version}"
    if c.source == "cache":
        return f"{os.path.basename(os.path.dirname(c.path))}/{c.version}"
    return os.path.basename(c.path.rstrip(os.sep)) or c.path


def register_model(name_or_path: str) -> dict[str, Any]:
    """Adds a model directory, bundle directory, or a name from list_available_models().

    The registered model takes precedence over DIODE_MODEL, the hub and the cache. If the
    hook is installed, it switches to the model now. Returns the model's description;
    raises ModelFormatError / sources.SourceError if it cannot be used.
    """
    path = name_or_path
    if not os.path.isdir(os.path.expanduser(path)):
        matches = [m for m in list_available_models() if m["name"] == name_or_path]
        if not matches:
            raise sources.SourceError("model_path_missing",
                                      f"{name_or_path!r} is neither a directory nor a listed model name")
        path = matches[0]["path"]
    model = _load_candidate(sources.classify(path, "explicit"), _hardware_key())
    with PROCESS.lock:
        PROCESS.registered.append(model.info.path if not sources.is_bundle_dir(path) else os.path.abspath(path))
        if PROCESS.install is not None:
            st = PROCESS.active
            _activate(HookState(Ranker(model), PROCESS.options, PROCESS.stats,
                                family_rankers=st.family_rankers if st else None))
    return _describe(model)


def _describe(model: LoadedModel) -> dict[str, Any]:
    i = model.info
    return {"path": i.path, "hardware_key": i.hardware_key, "model_id": i.model_id,
            "architecture": dataclasses.asdict(i.architecture), "features": len(i.feature_spec.names)}


def _load_candidate(c: sources.Candidate, hw_key: str | None, verified: bool = False) -> LoadedModel:
    """Loads a candidate; a bundle is verified by the native client first (unless it just was)."""
    model_dir = c.path
    if c.is_bundle and not verified:
        model_dir = sources.verify_shipped(c.path) if c.source == "package" else sources.verify_bundle(c.path)
    try:
        model = load_model_dir(model_dir)
    except ModelFormatError as e:
        raise sources.SourceError("model_invalid", str(e)) from None
    except Exception as e:  # torch failing to build the module, out of memory, ...
        raise sources.SourceError("model_load_failed", f"{type(e).__name__}: {e}") from None
    if model_family(model) != "gemm":   # e.g. DIODE_MODEL pointing at a scaled_mm model directory
        raise sources.SourceError("model_invalid", f"{model_dir} is a model of decision family "
                                  f"{model_family(model)!r}; the GEMM model's place takes a gemm model "
                                  f"(other families: DIODE_MODEL_<FAMILY>)")
    model.source = c.source
    model.bundle_version = c.version if c.version is not None else (
        sources.bundle_version(c.path) if c.is_bundle else None)
    if hw_key and model.info.hardware_key != hw_key:
        if c.source in ("hub", "cache", "package"):
            raise sources.SourceError("hardware_mismatch",
                                      f"{model_dir} is for {model.info.hardware_key}, this is {hw_key}")
        log.warning("torch_diode: model %s was trained for %s, this device is %s; using it as asked",
                    model_dir, model.info.hardware_key, hw_key)
    return model


# What the user should do, per reason the hook ends up without a model (docs/hook.md,
# *Fallbacks*). Before these warnings the import path logged most of them at debug, and a
# user only found out from get_prediction_stats() why max-autotune was as slow as ever.
REMEDIES = {
    "no_hardware": "the hook ranks GPU kernels only; to use the model of a given GPU anyway, "
                   "set DIODE_HARDWARE_KEY (e.g. nvidia-h100-80gb)",
    "no_model": "set DIODE_HUB_URL and DIODE_ROOT_PUBKEY to pull the newest signed model for this GPU, "
                "or DIODE_MODEL to a model directory (docs/hook.md); TORCH_DIODE_AUTO_INSTALL=0 turns the "
                "hook off",
    "package_verification_failed": "the model shipped with torch_diode does not verify against the shipped "
                                   "root key (files changed after install?): reinstall the package "
                                   "(pip install --force-reinstall torch-diode-fleet) or set DIODE_HUB_URL",
    "package_expired": "the signed metadata of the model shipped with torch_diode has expired: upgrade "
                       "torch-diode-fleet, or set DIODE_HUB_URL to pull a current model",
    "package_untrusted": "DIODE_ROOT_PUBKEY pins a root key the shipped models do not chain to: unset it to "
                         "use the shipped models (verified against the package's release root key), or pull "
                         "from your own hub (DIODE_HUB_URL)",
    "model_path_missing": "check the path given to install(model=...), register_model() or DIODE_MODEL",
    "model_path_invalid": "name a model directory (model.json + weights.msgpack) or a bundle directory "
                          "(bundle.json)",
    "model_invalid": "the model files are damaged or of another format: fetch the model again or "
                     "re-export it (docs/model-format.md)",
    "model_load_failed": "torch could not build the model: check the torch installation and free memory",
    "native_unavailable": "signed bundles are verified by libdiode_client.so: build it "
                          "(cmake --build build --target diode_client) or set DIODE_CLIENT_LIB to its path",
    "no_root_key": "set DIODE_ROOT_PUBKEY to the hub's root public key (64 hex characters, or a file "
                   "holding them such as keys/root.pub)",
    "verification_failed": "the bundle is not used: check that DIODE_ROOT_PUBKEY is this hub's root key; "
                           "if it is, tell the hub's operator (bad signature, expired or rolled back)",
    "hub_unreachable": "check DIODE_HUB_URL and that the hub is up and reachable from here; once a bundle "
                       "was pulled, its verified copy in the cache is used while the hub is down",
    "no_published_model": "the hub has no model for this hardware key: check that DIODE_HUB_URL is the "
                          "hub's base URL and DIODE_HARDWARE_KEY (if set); a model for new hardware is "
                          "requested with a manifest (docs/operations.md)",
    "hub_pull_failed": "the hub answered with an error: check DIODE_HUB_URL, then retry later",
    "no_cached_model": "no verified bundle in the cache (DIODE_CACHE_DIR) and no hub set: set "
                       "DIODE_HUB_URL to pull one",
    "hardware_mismatch": "the hub/cache/package model is for another GPU: check DIODE_HARDWARE_KEY, or "
                         "remove that cache entry",
}


def _warn_no_model(reason: str, detail: str, subject: str, warn: bool = True) -> None:
    """One WARNING per cause (reason + what it concerns: a path, the hub, a hardware key);
    repeats (every install(), set_options() re-resolve, ...) go to debug."""
    key = (reason, subject)
    if warn and key not in PROCESS.warned:     # (reason, subject) already warned about in this process
        PROCESS.warned.add(key)
        log.warning("torch_diode: no model, Inductor's default GEMM configs are used (%s): %s. To fix: %s",
                    reason, detail, REMEDIES.get(reason, "see docs/hook.md, Fallbacks"))
    else:
        log.debug("torch_diode: no model (%s): %s", reason, detail)


def _warn_not_used(reason: str, detail: str, subject: str, used: LoadedModel) -> None:
    """One WARNING per cause for a source that failed although a later one (the package)
    gave a model: the message must not claim that Inductor's defaults are used."""
    key = (reason, subject)
    if key not in PROCESS.warned:
        PROCESS.warned.add(key)
        log.warning("torch_diode: %s (%s): %s; using the model shipped with the package instead (%s version %s). "
                    "To fix: %s", "model source not used", reason, detail, used.info.hardware_key,
                    used.bundle_version, REMEDIES.get(reason, "see docs/hook.md, Fallbacks"))
    else:
        log.debug("torch_diode: model source not used (%s): %s", reason, detail)


def resolve_model(explicit: str | None = None, *, quiet: bool = False) -> tuple[LoadedModel | None, str]:
    """The model to use and "" -- or None and the reason of the last failure.

    Order (docs/hook.md, *Where the model comes from*): a named path, the hub / cache, then
    the bundle shipped in the package (also when it is newer than what the hub or cache
    served; the versions are compared before loading, so only the chosen model is loaded,
    the other one only if that fails). Each failure is counted in
    get_prediction_stats()["load_failures"] and warned about once per cause with what to
    do. `quiet` (the import path) stays at debug only where nothing was asked of the hook:
    no GPU and no DIODE_HUB_URL (e.g. `import torch_diode.wire` on a CPU machine).
    """
    hw_key = _hardware_key()
    hub = os.environ.get(sources.ENV_HUB)
    named: list[str] = []  # paths the user gave, newest registration first
    if explicit:
        named.append(explicit)
    else:
        named += reversed(PROCESS.registered)
        if os.environ.get(sources.ENV_MODEL):
            named.append(os.environ[sources.ENV_MODEL])
    reason = "no_model"
    failed: list[tuple[sources.SourceError, str]] = []  # warned about once the outcome is known

    def fail(e: sources.SourceError, subject: str) -> str:
        PROCESS.stats.count_load_failure(e.reason)
        failed.append((e, subject))
        return e.reason

    def none(why: str) -> tuple[None, str]:
        for e, subject in failed:
            _warn_no_model(e.reason, e.detail, subject)
        return None, why

    for path in named:
        try:
            return _load_candidate(sources.classify(path, "explicit"), hw_key), ""
        except sources.SourceError as e:
            reason = fail(e, os.path.abspath(os.path.expanduser(path)))
    if named:
        return none(reason)  # a named model failed: do not silently use another one
    if not hw_key:
        _warn_no_model("no_hardware", "no CUDA/ROCm GPU hardware key (%s)" % get_detected_hardware().get(
            "reason", "no GPU detected"), "", warn=not quiet or bool(hub))
        return None, "no_hardware"
    pulled: sources.Candidate | None = None  # verified by the pull, not loaded yet
    pulled_subject = f"{hub or sources.cache_dir()} {hw_key}"
    if hub or sources.cached_versions(hw_key):
        try:
            path, offline, note = sources.pull(hub, hw_key)
            if note:
                log.info("torch_diode: %s", note)
            pulled = sources.Candidate(path, "hub" if hub and not offline else "cache", True,
                                       sources.bundle_version(path))
        except sources.SourceError as e:
            reason = fail(e, pulled_subject)
    shipped = sources.shipped_bundle(hw_key)

    def use_shipped(model: LoadedModel) -> tuple[LoadedModel, str]:
        for e, subject in failed:
            _warn_not_used(e.reason, e.detail, subject, model)
        return model, ""

    # The versions come from the bundles' metadata, so they are compared before anything
    # is loaded: only the chosen model is loaded, the other one only if that one fails.
    shipped_first = shipped is not None and (pulled is None or (pulled.version or 0) < (shipped.version or 0))
    shipped_error: sources.SourceError | None = None
    if shipped_first:
        try:
            model = _load_candidate(shipped, hw_key)
        except sources.SourceError as e:
            PROCESS.stats.count_load_failure(e.reason)
            shipped_error = e  # warned about below if the hub/cache model fails too
        else:
            if pulled is not None:
                log.info("torch_diode: the package ships %s version %s, newer than the %s's version %s: using it",
                         hw_key, shipped.version, pulled.source, pulled.version)
            return use_shipped(model)
    if pulled is not None:
        try:
            model = _load_candidate(pulled, hw_key, verified=True)
        except sources.SourceError as e:
            reason = fail(e, pulled_subject)
        else:
            if shipped_error is not None:  # a deployment with its own root lands here
                log.info("torch_diode: the package's newer %s version %s is not used (%s): %s", hw_key,
                         shipped.version, shipped_error.reason, shipped_error.detail)
            return model, ""
    if shipped_error is not None:  # counted above
        failed.append((shipped_error, shipped.path))
        reason = shipped_error.reason
    elif shipped is not None:  # the newer hub/cache model failed to load: the older shipped one
        try:
            return use_shipped(_load_candidate(shipped, hw_key))
        except sources.SourceError as e:
            reason = fail(e, shipped.path)
    if reason == "no_model":
        keys = sources.shipped_hardware_keys()
        shipped_note = (f"; the package ships models for {', '.join(keys)} only" if keys else
                        "; the package ships no models" + (f" ({sources.ENV_PACKAGE}=0)"
                                                           if not sources.package_enabled() else ""))
        _warn_no_model("no_model", f"no model for {hw_key} (no {sources.ENV_MODEL}, no {sources.ENV_HUB}, "
                       f"nothing in {sources.cache_dir()}{shipped_note})", hw_key)
    return none(reason)


def resolve_family_models() -> dict[str, Any]:
    """The models of the decision families other than gemm (wire.FAMILIES: scaled_mm) for this
    hardware, family -> ranker (ranking.ranker_for_model); a family without a usable model is
    left out. Each comes from sources.family_model (DIODE_MODEL_<FAMILY>, the hub / cache,
    the package: a verified model directory); a directory that does not load, or whose
    model.json declares another family, is counted in get_prediction_stats()["load_failures"]
    and warned about once."""
    hw_key = _hardware_key()
    out: dict[str, Any] = {}
    for fam in wire.FAMILIES:
        if fam == "gemm":
            continue
        try:
            path = sources.family_model(fam, hw_key)
        except Exception as e:  # noqa: BLE001 - a family's source must never break install
            log.debug("torch_diode: no %s model: %s: %s", fam, type(e).__name__, e)
            continue
        if path is None:   # family_model logged why
            continue
        try:
            model = load_model_dir(path)
        except Exception as e:  # noqa: BLE001 - a damaged model, torch failing to build it, ...
            reason = "model_invalid" if isinstance(e, ModelFormatError) else "model_load_failed"
            PROCESS.stats.count_load_failure(reason)
            _warn_no_model(reason, f"the {fam} model {path}: {type(e).__name__}: {e}", f"{fam} {path}")
            continue
        got = model_family(model)
        if got != fam:
            PROCESS.stats.count_load_failure("model_invalid")
            _warn_no_model("model_invalid", f"{path} is a model of family {got!r}, not {fam!r}", f"{fam} {path}")
            continue
        if hw_key and model.info.hardware_key != hw_key:
            log.warning("torch_diode: the %s model %s was trained for %s, this device is %s; using it as asked",
                        fam, path, model.info.hardware_key, hw_key)
        out[fam] = ranker_for_model(model)
    return out


# state_for() (unpickled factories), current_state() (the active state, or one without a
# model) and active_state() (None when not installed) are choices.py's and state.py's,
# imported above and part of this module's API as before.


# ---------------------------------------------------------------- install / uninstall

def install(model: str | None = None, *, force: bool = False, **options: Any) -> bool:
    """Makes Inductor use the diode handler; returns True when a model is loaded.

    `model`: a model or bundle directory (default: registered, DIODE_MODEL, hub, cache).
    Options: top_k, threshold, max_kept, search_space ("default"/"exhaustive", any case:
    "EXHAUSTIVE" as in manifests works too), fallback ("default"/"raise"), mode ("topk": the
    model's top-k configs are benchmarked by Inductor; "predict", the default: the model's
    single best choice is used with no benchmarking; env TORCH_DIODE_MODE sets the default),
    aten_margin (predict mode: a Triton config replaces ATen only when predicted faster by more
    than this share; default None: the model's own, model.json selection.aten_margin, else
    0.05), aten_rule (predict mode with an ensemble: "mean", the ensemble's score, or
    "every_member", every member alone must predict the Triton config faster by the margin;
    default None: the model's own, model.json selection.aten_rule, else "mean"),
    aten_shortcut (topk mode: when predict mode would pick
    ATen, ATen alone is handed over and nothing is benchmarked; default True).
    Without a
    usable model the handler is still installed and takes Inductor's default path on
    every GEMM, counting the reason (and warning once per cause why there is no model).
    Raises RuntimeError if another InductorChoices handler is installed, unless `force`
    (uninstall() restores it); compat.UnsupportedTorch on a torch without the hook.
    """
    with PROCESS.lock:
        if options:
            PROCESS.options = replace(PROCESS.options, **options)
        loaded, reason = resolve_model(model)
        state = HookState(Ranker(loaded) if loaded else None, PROCESS.options, PROCESS.stats,
                          reason or "no_model", resolve_family_models())
        _activate(state, force=force)
        return loaded is not None


def _maybe_contribute() -> None:
    """TORCH_DIODE_CONTRIBUTE=DIR: record Inductor's autotune timings of what the hook
    offers (hook/contribute.py). Off by default; needs a detected GPU."""
    if not os.environ.get(contribute.ENV_CONTRIBUTE, "").strip() or contribute.active() is not None:
        return
    try:
        hw = detect.detect_hardware()
    except Exception as e:
        log.debug("torch_diode: contribute: hardware detection failed: %s", e)
        hw = None
    contribute.enable_from_env(hw)


def _activate(state: HookState, force: bool = False) -> None:
    """Installs `state` (PROCESS.lock held by the caller)."""
    base = compat.choices_base()  # raises UnsupportedTorch with the reason on old torch
    from . import staleness   # issue 54: templates changed since a model's data pass through
    # The GEMM model is checked here; another family's model at the first lowering of one of
    # its ops (choices.py, staleness.disabled_ops), so a process that never runs, say, an FP8
    # GEMM is not warned about the FP8 model.
    if state.ranker is not None:
        staleness.apply(state.ranker.model)
    _maybe_contribute()
    if PROCESS.install is not None:      # re-install: restore first so the prior values stay exact
        force = force or PROCESS.install.forced
        _uninstall_locked()
    factory = ChoicesFactory(state)
    prior_thread = compat.thread_handler()
    foreign_thread = (prior_thread is not compat.MISSING and type(prior_thread) is not base
                      and not isinstance(prior_thread, DiodeChoicesMixin))
    if compat.has_choices_config():
        prior_config = compat.get_choices_config()
        foreign = foreign_thread or (prior_config is not None and not isinstance(prior_config, ChoicesFactory))
        if foreign and not force:
            raise RuntimeError(
                f"torch_diode: another InductorChoices handler is installed "
                f"(inductor_choices_class={prior_config!r}, this thread's handler "
                f"{type(prior_thread).__name__ if prior_thread is not compat.MISSING else None}); "
                "install(force=True) replaces it and uninstall() restores it")
        compat.set_choices_config(factory)
        # Inductor caches the handler it built from the old config in this thread; drop
        # it so the next compile builds ours. uninstall() puts it back.
        compat.set_thread_handler(compat.MISSING)
        record = _InstallRecord("config", prior_config, prior_thread, factory, force)
    else:
        if foreign_thread and not force:
            raise RuntimeError(f"torch_diode: this thread already has choices handler "
                               f"{type(prior_thread).__name__}; install(force=True) replaces it")
        compat.set_thread_handler(factory())
        record = _InstallRecord("thread", None, prior_thread, factory, force)
    PROCESS.install, PROCESS.active = record, state
    # Predict mode's GEMV reductions need Inductor's mm decomposition wrapped (once per
    # process; the wrapper passes through whenever the hook is not installed in predict mode).
    if state.gemv_table_in_use is not None and not gemv.install_decomposition():
        log.info("torch_diode: this torch has no aten.mm decomposition to wrap; no GEMV reductions")
    # Predict mode with a launch-config table: coordinate descent's walk is replaced by the
    # table's config for the kernels it knows (once per process; passes through otherwise).
    if state.options.mode == "predict" and launch_configs.load_table() is not None \
            and not launch_configs.install_tuner():
        log.info("torch_diode: this torch has no coordinate-descent tuner to wrap; no launch-config table")
    # Zero configuration: plain torch.compile's GEMM lowerings engage the model (predict mode
    # with a model; the wrapper decides per lowering, hook/zero_config.py).
    zc = (state.has_model and state.options.mode == "predict" and state.options.zero_config
          and zero_config.install_lowerings(active_state))
    for fam, r in sorted(state.family_rankers.items()):
        fm = r.model
        log.info("torch_diode: %s model %s (%s, %s)", fam, fm.info.hardware_key, fm.info.path, fm.info.model_id[:16])
    m = state.ranker.model if state.ranker else None
    if m is not None:
        log.info("torch_diode: installed: model %s version %s (%s, %s), mode %s, %s", m.info.hardware_key,
                 m.bundle_version if m.bundle_version is not None else "-", m.source or "explicit",
                 m.info.model_id[:16], state.options.mode,
                 "plain torch.compile engaged (zero configuration)" if zc
                 else "engaged under max-autotune only")
    else:
        log.info("torch_diode: installed (%s) without a model (%s)", record.mode, state.no_model_reason)


def uninstall() -> bool:
    """Restores exactly the handler/config that install() found. False if not installed."""
    with PROCESS.lock:
        return _uninstall_locked()


def _uninstall_locked() -> bool:
    rec = PROCESS.install
    if rec is None:
        return False
    if rec.mode == "config":
        if compat.get_choices_config() is rec.factory:
            compat.set_choices_config(rec.prior_config)
        else:
            log.warning("torch_diode: inductor_choices_class was changed after install; left as is")
    cur = compat.thread_handler()
    if cur is compat.MISSING or isinstance(cur, DiodeChoicesMixin):
        compat.set_thread_handler(rec.prior_thread)
    PROCESS.install, PROCESS.active = None, None
    return True


def is_installed() -> bool:
    return PROCESS.install is not None


def auto_install() -> bool:
    """`import torch_diode`: install if a model is found, or, without one, if a GPU is
    present and predict mode has a GEMV table for it (its M = 1 reductions then still apply;
    every other GEMM takes Inductor's default path, counted as "no_model"); never raises.
    Returns whether it installed. Why no model was found is warned about by resolve_model();
    other problems are logged at debug/info."""
    if os.environ.get(ENV_AUTO_INSTALL, "1").strip().lower() in ("0", "false", "no", "off"):
        log.debug("torch_diode: %s=0, not installing", ENV_AUTO_INSTALL)
        return False
    try:
        with PROCESS.lock:
            loaded, reason = resolve_model(quiet=True)
            state = HookState(Ranker(loaded) if loaded else None, PROCESS.options, PROCESS.stats,
                              reason or "no_model", resolve_family_models())
            table = None
            if loaded is None and get_detected_hardware().get("device_name"):  # a GPU, not a forced key
                table = state.gemv_table_in_use  # a GPU without a model may still have one
            if loaded is None and table is None and not state.family_rankers:
                log.debug("torch_diode: not installed at import (%s)", reason)
                return False
            try:
                _activate(state)
            except RuntimeError as e:  # someone else's handler is installed: leave it alone
                log.info("torch_diode: %s but not installed at import: %s",
                         "model found" if loaded else "GEMV table found", e)
                return False
            if loaded is None and table is not None:
                log.info("torch_diode: installed at import without a model (%s) for the GEMV table's "
                         "M = 1 reductions (%s, %d entries); other GEMMs take Inductor's default path",
                         reason, table.source, len(table.entries))
            return True
    except Exception as e:  # resolve_model() reports its own causes: this is unexpected, say it
        log.warning("torch_diode: not installed at import (%s: %s); Inductor's own choices are used",
                    type(e).__name__, e)
        return False


# ---------------------------------------------------------------- options, stats, logging

def set_options(**options: Any) -> dict[str, Any]:
    """Changes top_k / threshold / max_kept / search_space / fallback / mode / aten_margin /
    aten_rule / aten_shortcut (validated); applies now."""
    with PROCESS.lock:
        PROCESS.options = replace(PROCESS.options, **options)
        st = PROCESS.active
        if st is not None:
            _activate(HookState(st.ranker, PROCESS.options, PROCESS.stats, st.no_model_reason, st.family_rankers))
        return get_options()


def get_options() -> dict[str, Any]:
    return options_dict(PROCESS.options)     # the same keys a pickled factory carries


def get_prediction_stats() -> dict[str, Any]:
    s = PROCESS.stats.snapshot()
    st = PROCESS.active
    s["installed"] = PROCESS.install is not None
    s["model"] = st.model_path if st else None
    s["model_id"] = st.model_id if st and st.ranker else None
    m = st.ranker.model if st and st.ranker else None
    s["model_source"] = m.source if m else None        # explicit, env, hub, cache or package
    s["model_version"] = m.bundle_version if m else None  # signed bundle version, None for a plain directory
    s["model_hardware_key"] = m.info.hardware_key if m else None
    s["no_model_reason"] = st.no_model_reason if st and not st.ranker else None
    # the models of the other decision families (scaled_mm), family -> where it is and its id
    s["family_models"] = {f: {"path": r.model.info.path, "model_id": r.model.info.model_id,
                              "hardware_key": r.model.info.hardware_key}
                          for f, r in sorted(st.family_rankers.items())} if st else {}
    s["options"] = get_options()
    # the margin in force: the option, else the model's own, else the default (HookState.aten_margin)
    s["aten_margin"] = st.aten_margin if st else None
    s["aten_rule"] = st.aten_rule if st else None      # the same for the rule (HookState.aten_rule)
    # the GEMV table in use (predict mode's M = 1 / N = 1 reduction): None when this GPU has none,
    # outside predict mode, or with gemv_reduction off
    t = st.gemv_table_in_use if st else None
    s["gemv_table"] = {"source": t.source, "hardware": t.hardware, "digest": t.digest,
                       "entries": len(t.entries)} if t else None
    # the launch-config table named by TORCH_DIODE_LAUNCH_CONFIG_TABLE (hook/launch_configs.py), if any
    lt = launch_configs.load_table() if st else None
    s["launch_config_table"] = {"source": lt.source, "hardware": lt.hardware, "digest": lt.digest,
                                "entries": len(lt.entries)} if lt else None
    return s


def reset_prediction_stats() -> None:
    PROCESS.stats.reset()


def set_log_level(level: int | str) -> None:
    """Level of the "torch_diode" logger, e.g. "DEBUG" to see every selection."""
    lg = logging.getLogger("torch_diode")
    lg.setLevel(level.upper() if isinstance(level, str) else level)
    # torch_diode/__init__ adds a NullHandler; give messages somewhere to go if nothing else does
    if not any(not isinstance(h, logging.NullHandler) for h in lg.handlers) and not logging.getLogger().handlers:
        lg.addHandler(logging.StreamHandler())


@contextlib.contextmanager
def profile_predictions() -> Iterator[list[CallRecord]]:
    """Collects a CallRecord per finalize call made inside the block (any thread)."""
    sink: list[CallRecord] = []
    PROCESS.stats.add_profile(sink)
    try:
        yield sink
    finally:
        PROCESS.stats.remove_profile(sink)
