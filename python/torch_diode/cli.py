"""The `diode` command of the torch-diode-fleet wheel (also `python -m torch_diode`).

    diode pull [--hardware KEY|auto] [--hub URL] [--cache DIR] [--root-key HEX|FILE] [--offline] [--family F]
    diode verify BUNDLE_DIR [--root-key HEX|FILE] [--family F]
    diode models list [--cache DIR] [--json]
    diode hardware [--json]

The subcommands and flags are those of the C++ `diode` (shared/bundle/src/cli.cpp), and
every check goes through the same native client the hook uses (torch_diode.native over
libdiode_client.so): this module verifies nothing itself. Its defaults are the hook's
(torch_diode/hook/sources.py): the root key is $DIODE_ROOT_PUBKEY, else the release root
key shipped in the package (torch_diode/bundles/root.pub); the cache is $DIODE_CACHE_DIR,
$XDG_CACHE_HOME/diode or ~/.cache/diode; the hardware key is $DIODE_HARDWARE_KEY, else
the GPU torch sees.

Every error is one line on stderr, "diode: error: <file or URL>: <reason>", and a
non-zero exit status (EXIT_CODES).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

from . import __version__

EXIT_OK = 0
EXIT_ERROR = 1          # anything else: file system, missing native library, unreadable key
EXIT_USAGE = 2          # bad command line (argparse), or a flag combination that cannot work
EXIT_VERIFY = 3         # a bundle was rejected: signature, root chain, hash, expiry, rollback
EXIT_UNAVAILABLE = 4    # hub unreachable or answered with an HTTP error, nothing usable cached
EXIT_NO_GPU = 5         # no GPU to derive a hardware key from (`hardware`, `pull --hardware auto`)

EXIT_CODES = f"""exit status:
  {EXIT_OK}  success
  {EXIT_ERROR}  error: file system, native client library missing, ...
  {EXIT_USAGE}  usage: bad arguments, or a --root-key / $DIODE_ROOT_PUBKEY that is not a key
  {EXIT_VERIFY}  bundle rejected: signature, root chain, file hash, expiry or rollback
  {EXIT_UNAVAILABLE}  no model: hub unreachable or HTTP error, and nothing usable in the cache
  {EXIT_NO_GPU}  no GPU: no CUDA/ROCm device to derive a hardware key from (pass --hardware KEY)"""

ENV_HARDWARE_KEY = "DIODE_HARDWARE_KEY"  # the hook's variable (hook/api.py)


class CliError(Exception):
    """One line for stderr and the exit status."""

    def __init__(self, message: str, code: int = EXIT_ERROR):
        super().__init__(" ".join(str(message).split()))  # one line, whatever the source said
        self.code = code


def _client_error(e: Exception, where: str) -> CliError:
    """A torch_diode.native error as one line naming `where`, with its exit status."""
    from . import native
    if isinstance(e, native.DiodeClientError):
        code = {"verify": EXIT_VERIFY, "network": EXIT_UNAVAILABLE, "http": EXIT_UNAVAILABLE,
                "argument": EXIT_USAGE}.get(e.kind, EXIT_ERROR)
        return CliError(f"{where}: {e}", code)
    if isinstance(e, native.NativeClientUnavailable):
        return CliError(f"{e}", EXIT_ERROR)
    return CliError(f"{where}: {type(e).__name__}: {e}", EXIT_ERROR)


def _root_key(arg: str | None) -> tuple[str, str]:
    """(the key as native.verify/pull take it, where it came from): --root-key, else the
    hook's rule (sources.root_key(): $DIODE_ROOT_PUBKEY, else the shipped release key)."""
    from . import native
    from .hook import sources
    if arg:
        value, origin = arg, "--root-key"
    else:
        try:
            value = sources.root_key()
        except sources.SourceError as e:
            raise CliError(f"no root key: pass --root-key HEX|FILE or set {sources.ENV_ROOT_KEY} ({e.detail})",
                           EXIT_USAGE) from None
        origin = sources.ENV_ROOT_KEY if os.environ.get(sources.ENV_ROOT_KEY, "").strip() else "the release root key"
    try:
        native.root_key_hex(value)  # a readable key, or one line naming the file
    except ValueError as e:
        raise CliError(f"{origin}: {e}", EXIT_USAGE) from None
    return value, origin


def _detect_hardware_key() -> str:
    """The hardware key of the GPU torch sees (the hook's detection), or CliError(EXIT_NO_GPU)."""
    try:
        from .hook import detect
        hw = detect.detect_hardware()
    except ImportError as e:
        raise CliError(f"--hardware auto: cannot detect the GPU without torch ({e}); pass --hardware KEY "
                       f"or set {ENV_HARDWARE_KEY}", EXIT_NO_GPU) from None
    if hw is None:
        raise CliError(f"--hardware auto: no CUDA or ROCm device found; pass --hardware KEY or set {ENV_HARDWARE_KEY} "
                       "(e.g. nvidia-h100-80gb)", EXIT_NO_GPU)
    return detect.hardware_key(hw)


# ---------------------------------------------------------------- subcommands

def cmd_pull(a: argparse.Namespace) -> int:
    from . import native
    from .hardware import is_valid_hardware_key
    from .hook import sources
    hw = a.hardware or os.environ.get(ENV_HARDWARE_KEY, "").strip() or "auto"
    if hw == "auto":
        hw = _detect_hardware_key()
    if not is_valid_hardware_key(hw):
        raise CliError(f"--hardware: {hw!r} is not a hardware key (e.g. nvidia-h100-80gb)", EXIT_USAGE)
    hub = "" if a.offline else (a.hub or os.environ.get(sources.ENV_HUB, "").strip())
    if not hub and not a.offline:
        raise CliError(f"pass --hub URL (or set {sources.ENV_HUB}), or --offline", EXIT_USAGE)
    cache = a.cache or sources.cache_dir()
    key, _ = _root_key(a.root_key)
    where = f"{hub} {hw}" if hub else f"cache {cache} {hw}"
    if a.family != "gemm":
        where += f" {a.family}"
    try:
        r = native.pull(hub, hw, key, cache, family=a.family)
    except Exception as e:
        raise _client_error(e, where) from None
    if r.offline:
        print(f"warning: served from the cache: {r.note.removeprefix('served from the cache: ')}", file=sys.stderr)
    print(r.path)
    return EXIT_OK


def _signed(bundle_dir: str) -> dict[str, Any]:
    """bundle.json's signed part, read after the native client verified it (for the summary)."""
    try:
        with open(os.path.join(bundle_dir, "bundle.json"), "rb") as f:
            s = json.loads(f.read(64 << 20))["signed"]
        return s if isinstance(s, dict) else {}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def cmd_verify(a: argparse.Namespace) -> int:
    from . import native
    key, _ = _root_key(a.root_key)
    d = a.bundle_dir
    if not os.path.isdir(d):
        raise CliError(f"{d}: not a directory", EXIT_ERROR)
    try:
        native.verify(d, key, family=a.family)
    except Exception as e:
        raise _client_error(e, d) from None
    s = _signed(d)
    family = s.get("family", "gemm")
    print(f"OK {s.get('hardware_key', '?')}{'' if family == 'gemm' else ' family ' + str(family)} "
          f"version {s.get('version', '?')} expires {s.get('expires', '?')} root key {native.fingerprint(key)}")
    return EXIT_OK


def _cache_entries(cache: str) -> list[dict[str, Any]]:
    """The pull cache's current bundles: <cache>/<hw>/state.json, and for another decision
    family <cache>/<hw>/families/<family>/state.json (written by the native client after it
    verified the bundle), names the version; as `diode models list --cache`."""
    from .hardware import is_valid_hardware_key
    from .wire import FAMILIES
    out = []
    if not os.path.isdir(cache):
        return out
    for hw in sorted(os.listdir(cache)):
        if not is_valid_hardware_key(hw):
            continue
        places = [("gemm", os.path.join(cache, hw))]
        places += [(f, os.path.join(cache, hw, "families", f)) for f in FAMILIES if f != "gemm"]
        for family, d in places:
            entry = _cache_entry(hw, family, d)
            if entry is not None:
                out.append(entry)
    return out


def _cache_entry(hw: str, family: str, d: str) -> dict[str, Any] | None:
    """One cached bundle: <d>/state.json names its version (None when there is none)."""
    st = os.path.join(d, "state.json")
    if not os.path.isfile(st):
        return None
    try:
        with open(st, "rb") as f:
            j = json.loads(f.read(4096))
        version = int(j["highest_version"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CliError(f"{st}: unreadable cache state ({type(e).__name__}: {e})", EXIT_ERROR) from None
    verified = j.get("verified_at")
    if not isinstance(verified, str):
        import time
        verified = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(st)))
    return {"hardware_key": hw, "family": family, "version": version, "source": "cache",
            "verified_at": verified, "path": os.path.join(d, str(version))}


def cmd_models_list(a: argparse.Namespace) -> int:
    from .hook import sources
    cache = a.cache or sources.cache_dir()
    entries = _cache_entries(cache)
    from .wire import FAMILIES
    for hw in sources.shipped_hardware_keys():
        c = sources.shipped_bundle(hw)
        if c is not None:
            entries.append({"hardware_key": hw, "family": "gemm", "version": c.version, "source": "package",
                            "verified_at": None, "path": c.path})
        for family in FAMILIES:
            f = sources.shipped_family_bundle(family, hw) if family != "gemm" else None
            if f is not None:
                entries.append({"hardware_key": hw, "family": family, "version": f.version, "source": "package",
                                "verified_at": None, "path": f.path})
    if a.json:
        print(json.dumps({"cache": cache, "models": entries}, indent=2))
        return EXIT_OK
    if not any(e["source"] == "cache" for e in entries):
        print(f"no models cached in {cache}", file=sys.stderr)
    for e in entries:
        how = f"verified {e['verified_at']}" if e["source"] == "cache" else "shipped in the package"
        # A GEMM model's line starts with its hardware key and version (as the C++ `diode`
        # prints it); another family's has a family column after the hardware key.
        family = "" if e["family"] == "gemm" else f"\tfamily {e['family']}"
        print(f"{e['hardware_key']}{family}\tversion {e['version']}\t{how}\t{e['path']}")
    return EXIT_OK


def cmd_hardware(a: argparse.Namespace) -> int:
    from .hook import detect
    try:
        hw = detect.detect_hardware()
    except ImportError as e:
        raise CliError(f"cannot detect the GPU without torch ({e}): install torch", EXIT_NO_GPU) from None
    forced = os.environ.get(ENV_HARDWARE_KEY, "").strip()
    d = detect.describe(hw)
    if forced:
        d.update(hardware_key=forced, hardware_key_source=ENV_HARDWARE_KEY)
    if a.json:
        print(json.dumps(d, indent=2))
    elif hw is not None or forced:
        print(d.get("hardware_key") or "?")
        if hw is not None:
            print(f"device  {hw.device_name} ({hw.arch}, {hw.sm_count} SMs, {hw.memory_bytes / (1 << 30):.1f} GiB, "
                  f"{hw.runtime_version or 'no runtime'}, torch {hw.torch_version})")
        if forced:
            print(f"(from {ENV_HARDWARE_KEY})")
    if hw is None and not forced:
        import torch
        raise CliError(f"no GPU: torch {torch.__version__} sees no CUDA or ROCm device; set {ENV_HARDWARE_KEY} "
                       "to name one (e.g. nvidia-h100-80gb)", EXIT_NO_GPU)
    return EXIT_OK


# ---------------------------------------------------------------- parser

def _family_arg(value: str) -> str:
    from .wire import FAMILIES
    if value not in FAMILIES:
        raise argparse.ArgumentTypeError(f"unknown decision family {value!r} (known: {', '.join(FAMILIES)})")
    return value


def _parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(
        prog="diode", formatter_class=fmt,
        description="torch_diode's model tool: pull and verify the signed GEMM-selection models "
                    "(bundles) through the same native client the torch.compile hook uses.",
        epilog=EXIT_CODES + "\n\nroot key: --root-key, else $DIODE_ROOT_PUBKEY, else the release root key "
                            "shipped in torch_diode/bundles/root.pub. Keys are named by their 64-hex public "
                            "key or its first 16 hex characters.")
    p.add_argument("--version", action="version", version=f"diode (torch_diode {__version__})")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    key_help = "pinned root public key: 64 hex or a file (default $DIODE_ROOT_PUBKEY, else the shipped release root key)"

    pl = sub.add_parser("pull", help="fetch and verify the current bundle for a GPU into the cache",
                        formatter_class=fmt, epilog=EXIT_CODES,
                        description="Fetch, verify and cache the current bundle; print its directory.")
    pl.add_argument("--hardware", help=f"hardware key, or auto (the GPU torch sees; default ${ENV_HARDWARE_KEY}, "
                                       "else auto)")
    pl.add_argument("--hub", help="hub URL (https://, or http:// to loopback; default $DIODE_HUB_URL)")
    pl.add_argument("--cache", help="cache directory (default $DIODE_CACHE_DIR, $XDG_CACHE_HOME/diode or "
                                    "~/.cache/diode)")
    pl.add_argument("--root-key", help=key_help)
    pl.add_argument("--offline", action="store_true", help="use the cache only")
    pl.add_argument("--family", default="gemm", type=_family_arg,
                    help="decision family of the model (default gemm; another family's bundle comes from "
                         "/v1/models/<hw>/families/<family>/ and is cached under <cache>/<hw>/families/<family>/)")
    pl.set_defaults(func=cmd_pull)

    v = sub.add_parser("verify", help="verify a bundle directory (signatures, root chain, hashes, expiry)",
                       formatter_class=fmt, epilog=EXIT_CODES)
    v.add_argument("bundle_dir", metavar="BUNDLE_DIR", help="bundle directory (bundle.json, roots.json, files)")
    v.add_argument("--root-key", help=key_help)
    v.add_argument("--family", default=None, type=_family_arg,
                   help="also require this decision family (default: any; a bundle.json without one is gemm)")
    v.set_defaults(func=cmd_verify)

    m = sub.add_parser("models", help="models in the local cache and the package")
    msub = m.add_subparsers(dest="models_command", metavar="COMMAND", required=True)
    ml = msub.add_parser("list", help="list the pull cache's current bundles and the models shipped in the package",
                         formatter_class=fmt, epilog=EXIT_CODES,
                         description="One line per bundle: hardware key, version, when verified (or shipped), "
                                     "directory. A decision family other than gemm has a 'family F' column after "
                                     "the hardware key; --json gives every entry's 'family'.")
    ml.add_argument("--cache", help="pull cache to list (default $DIODE_CACHE_DIR, $XDG_CACHE_HOME/diode or "
                                    "~/.cache/diode)")
    ml.add_argument("--json", action="store_true", help="print JSON")
    ml.set_defaults(func=cmd_models_list)

    h = sub.add_parser("hardware", help="this machine's GPU and its hardware key", formatter_class=fmt,
                       epilog=EXIT_CODES)
    h.add_argument("--json", action="store_true", help="print the HardwareId fields and hardware_key as JSON")
    h.set_defaults(func=cmd_hardware)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # exits 2 on a usage error
    try:
        return args.func(args)
    except CliError as e:
        print(f"diode: error: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug or an unexpected OS error: still one line, still non-zero
        print(f"diode: error: {type(e).__name__}: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
