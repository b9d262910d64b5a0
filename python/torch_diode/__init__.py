"""torch_diode: fleet-learned GEMM kernel selection for torch.compile.

`import torch_diode` detects the GPU, finds the newest verified model for it
(DIODE_MODEL, the hub at DIODE_HUB_URL, the local cache, or the signed model the
package ships for known hardware, torch_diode/bundles/) and, if one is found,
installs the Inductor hook (docs/hook.md). Set TORCH_DIODE_AUTO_INSTALL=0 to import
without any side effect and call `torch_diode.install()` yourself. The `diode` command
(`python -m torch_diode` or the `diode` console script) never auto-installs: pulling,
verifying or listing models must not import torch or patch Inductor.

The wire format (`torch_diode.wire`) and features (`torch_diode.features`) import
without torch: torch is only imported by the hook, and a missing torch is logged at
debug level, never raised. When the hook finds no model it warns once per cause (logger
"torch_diode") with what to do.

Distribution `torch-diode-fleet`, import name `torch_diode`: it cannot be installed
beside the seed's `torch-diode`, which has the same import name (docs/hook.md, Install).
"""
import logging as _logging

__version__ = "0.1.0"

# No NullHandler on the "torch_diode" logger: in an application that has not configured
# logging, Python's last-resort handler then prints WARNING and above on stderr, so the
# one warning per cause of "no model" (with what to do) reaches the user; debug and info
# stay silent. Applications that configure logging decide as usual.

# Public hook API, loaded on first use so that `import torch_diode.wire` needs no torch.
_API = ("get_detected_hardware", "list_available_models", "register_model", "install", "uninstall",
        "is_installed", "get_prediction_stats", "reset_prediction_stats", "set_log_level",
        "profile_predictions", "set_options", "get_options")
__all__ = list(_API) + ["__version__"]


def __getattr__(name):
    if name in _API:
        from .hook import api
        return getattr(api, name)
    raise AttributeError(f"module 'torch_diode' has no attribute {name!r}")


def __dir__():
    # The hook API is resolved lazily by __getattr__, so without this dir(), help() and
    # tab completion would not show it. Listing names imports nothing (no torch).
    return sorted(set(globals()) | set(_API))


def _is_cli_process() -> bool:
    """True while this import is the `diode` command's own: `python -m torch_diode ...`
    (runpy imports the package while it locates torch_diode/__main__.py, with sys.argv[0]
    still "-m") or the `diode` console script (the __main__ module is the script that
    sys.argv[0] names)."""
    import os
    import sys
    argv = sys.argv if isinstance(getattr(sys, "argv", None), list) else []
    if argv[:1] == ["-m"]:
        orig = list(getattr(sys, "orig_argv", ()))
        for i, arg in enumerate(orig):
            if arg == "-m":
                return orig[i + 1:i + 2] == ["torch_diode"]
            if arg.startswith("-m"):
                return arg[2:] == "torch_diode"
        return False
    if not argv or os.path.basename(argv[0]) not in ("diode", "diode.exe", "diode-script.py"):
        return False
    main = sys.modules.get("__main__")
    main_file = getattr(main, "__file__", None)
    if not main_file or getattr(main, "__spec__", None) is not None:
        return False
    try:
        return os.path.samefile(main_file, argv[0])
    except OSError:
        return False


def _auto_install() -> None:
    import os
    if _is_cli_process():
        return
    if os.environ.get("TORCH_DIODE_AUTO_INSTALL", "1").strip().lower() in ("0", "false", "no", "off"):
        return
    try:
        from .hook import api
    except Exception as e:  # no torch, or a torch the hook cannot use: importing stays harmless
        _logging.getLogger("torch_diode").debug("torch_diode: hook not loaded: %s: %s", type(e).__name__, e)
        return
    api.auto_install()


_auto_install()
