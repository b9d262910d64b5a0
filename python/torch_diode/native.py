"""ctypes wrapper of libdiode_client.so, the C pull client (docs/bundle-format.md).

The hook fetches and verifies signed model bundles through this library, so it
needs no Python crypto or HTTP package. The library is found, in order, at
``$DIODE_CLIENT_LIB`` (a file path), then inside the installed package
(``torch_diode/_lib/libdiode_client.so.1``, put there by the platform wheel,
python/build_wheel.sh), then in the build directories of this checkout
(``build*/shared/bundle/libdiode_client.so*``), then by the loader's search
path. A missing library raises ``NativeClientUnavailable`` naming every place
that was tried.
"""
from __future__ import annotations

import ctypes
import glob
import os
import pathlib
import threading
from typing import NamedTuple, Optional

__all__ = ["NativeClientUnavailable", "DiodeClientError", "PullResult", "load_library", "version", "pull", "verify",
           "root_key_hex", "fingerprint"]

ABI_VERSION = 1

# Status codes of diode_client.h.
OK = 0
OK_OFFLINE = 1
_ERROR_KINDS = {
    -1: "argument",
    -2: "network",
    -3: "verify",
    -4: "http",
    -5: "io",
    -6: "buffer",
}

# Where the platform wheel installs the library, relative to this file's directory
# (the DIODE_CLIENT_ONLY install rule in shared/bundle/CMakeLists.txt).
_PACKAGE_LIB_DIR = "_lib"

_PATH_LEN = 4096
_ERR_LEN = 4096


class NativeClientUnavailable(RuntimeError):
    """libdiode_client.so could not be found or loaded."""


class DiodeClientError(RuntimeError):
    """The C client refused or failed; ``kind`` is argument, network, verify, http, io or buffer."""

    def __init__(self, code: int, message: str):
        self.code = code
        self.kind = _ERROR_KINDS.get(code, "unknown")
        super().__init__(f"diode client {self.kind} error ({code}): {message}")


class PullResult(NamedTuple):
    path: pathlib.Path  # the verified bundle directory in the cache
    offline: bool  # served from the cache because the hub was unreachable or not given
    note: str  # why it was served offline ("" otherwise)


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None


def _candidates() -> tuple[list[str], list[str]]:
    """The paths to try, in order, and the places searched that held nothing (for the error)."""
    env = os.environ.get("DIODE_CLIENT_LIB")
    if env:
        # An explicit choice is the only one tried: silently loading another
        # copy would hide a misconfiguration.
        return [env], []
    empty = []
    here = pathlib.Path(__file__).resolve().parent
    # The wheel's own copy first: it was built from this very package's sources, and
    # auditwheel gave it an RPATH to the libcurl/libcrypto bundled beside it.
    pattern = str(here / _PACKAGE_LIB_DIR / f"libdiode_client.so.{ABI_VERSION}*")
    packaged = sorted(glob.glob(pattern))
    if not packaged:
        empty.append(f"{pattern} (nothing there: torch_diode was not installed from the platform wheel)")
    repo = here.parent.parent
    pattern = str(repo / "build*" / "shared" / "bundle" / "libdiode_client.so*")
    found = sorted(glob.glob(pattern))
    if not found:
        empty.append(f"{pattern} (nothing there: no build in a checkout)")
    # Prefer the unversioned symlink of the most recently built tree.
    found.sort(key=lambda p: (os.path.getmtime(p), p.endswith(".so")), reverse=True)
    return packaged + found + ["libdiode_client.so.1", "libdiode_client.so"], empty


def load_library() -> ctypes.CDLL:
    """Loads (once) and returns the library, with argument types declared."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        candidates, tried = _candidates()
        for cand in candidates:
            try:
                lib = ctypes.CDLL(cand)
            except OSError as e:
                tried.append(f"{cand} ({e})")
                continue
            _declare(lib)
            _lib = lib
            return lib
        hint = ("install the platform wheel (python/build_wheel.sh), set DIODE_CLIENT_LIB to the library's path, "
                "or build it: cmake --build <build dir> --target diode_client")
        raise NativeClientUnavailable("libdiode_client.so not found; tried: " + "; ".join(tried) + ". " + hint)


def _declare(lib: ctypes.CDLL) -> None:
    c = ctypes
    lib.diode_client_pull.argtypes = [c.c_char_p, c.c_char_p, c.c_char_p, c.c_char_p, c.c_char_p, c.c_size_t,
                                      c.c_char_p, c.c_size_t]
    lib.diode_client_pull.restype = c.c_int
    lib.diode_client_verify.argtypes = [c.c_char_p, c.c_char_p, c.c_char_p, c.c_size_t]
    lib.diode_client_verify.restype = c.c_int
    # The family entry points (decision families other than gemm) are optional: a library
    # built before them still serves GEMM bundles, and asking it for a family says so.
    if hasattr(lib, "diode_client_pull_family"):
        lib.diode_client_pull_family.argtypes = [c.c_char_p, c.c_char_p, c.c_char_p, c.c_char_p, c.c_char_p,
                                                 c.c_char_p, c.c_size_t, c.c_char_p, c.c_size_t]
        lib.diode_client_pull_family.restype = c.c_int
    if hasattr(lib, "diode_client_verify_family"):
        lib.diode_client_verify_family.argtypes = [c.c_char_p, c.c_char_p, c.c_char_p, c.c_char_p, c.c_size_t]
        lib.diode_client_verify_family.restype = c.c_int
    lib.diode_client_version.argtypes = []
    lib.diode_client_version.restype = c.c_char_p
    v = lib.diode_client_version().decode()
    if f"abi {ABI_VERSION}" not in v:
        raise NativeClientUnavailable(f"libdiode_client.so reports '{v}', this wrapper needs abi {ABI_VERSION}")


def _enc(s: Optional[os.PathLike | str]) -> Optional[bytes]:
    return None if s is None else os.fsencode(s)


_HEX = frozenset("0123456789abcdef")


def _is_key_hex(s: str) -> bool:
    return len(s) == 64 and all(ch in _HEX for ch in s)


def _root_key(root_pubkey: str | os.PathLike) -> bytes:
    """Accepts the 64 hex characters or a file holding them (e.g. root.pub)."""
    s = os.fspath(root_pubkey)
    if not _is_key_hex(s):
        p = pathlib.Path(s)
        if p.is_file():
            s = p.read_text()[:200].strip()
    return s.encode()


def root_key_hex(root_pubkey: str | os.PathLike) -> str:
    """The 64-hex public key that ``root_pubkey`` (hex or a file holding it) names.

    Raises ValueError naming the file or value when it is not one; the C client checks
    the same again (this only reads text, it verifies nothing)."""
    s = os.fspath(root_pubkey)
    if _is_key_hex(s):
        return s
    p = pathlib.Path(s)
    if not p.is_file():
        raise ValueError(f"{s}: neither 64 hex characters nor a file")
    try:
        text = p.read_text()[:200].strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{s}: cannot read the root key ({e})") from None
    if not _is_key_hex(text):
        raise ValueError(f"{s}: does not hold a public key (64 lowercase hex characters)")
    return text


def fingerprint(root_pubkey: str | os.PathLike) -> str:
    """How every message names a key: the first 16 hex characters of the public key
    itself (the C++ PublicKey::fingerprint(); root.pub starts with it)."""
    return root_key_hex(root_pubkey)[:16]


def version() -> str:
    return load_library().diode_client_version().decode()


def _family_fn(lib: ctypes.CDLL, name: str):
    fn = getattr(lib, name, None)
    if fn is None:
        raise NativeClientUnavailable(f"libdiode_client.so ({version()}) has no {name}: it predates decision "
                                      "families other than gemm; rebuild or reinstall it")
    return fn


def pull(hub_url: Optional[str], hardware_key: str, root_pubkey: str | os.PathLike,
         cache_dir: Optional[str | os.PathLike] = None, family: str = "gemm") -> PullResult:
    """Fetches, verifies and caches the current bundle of decision ``family`` for ``hardware_key``.

    ``hub_url`` None or "" uses the cache only. A family other than gemm is the bundle
    at ``<hw>/families/<family>/`` (cached under the same path). Raises DiodeClientError
    with the C client's precise message when the bundle is rejected or unavailable."""
    lib = load_library()
    out = ctypes.create_string_buffer(_PATH_LEN)
    err = ctypes.create_string_buffer(_ERR_LEN)
    if family == "gemm":
        rc = lib.diode_client_pull(_enc(hub_url or ""), hardware_key.encode(), _enc(cache_dir), _root_key(root_pubkey),
                                   out, _PATH_LEN, err, _ERR_LEN)
    else:
        rc = _family_fn(lib, "diode_client_pull_family")(
            _enc(hub_url or ""), hardware_key.encode(), family.encode(), _enc(cache_dir), _root_key(root_pubkey), out,
            _PATH_LEN, err, _ERR_LEN)
    message = err.value.decode(errors="replace")
    if rc not in (OK, OK_OFFLINE):
        raise DiodeClientError(rc, message)
    return PullResult(pathlib.Path(os.fsdecode(out.value)), rc == OK_OFFLINE, message)


def verify(bundle_dir: str | os.PathLike, root_pubkey: str | os.PathLike, family: Optional[str] = None) -> None:
    """Verifies a bundle directory on its own; raises DiodeClientError if it is rejected.

    ``family`` given: the bundle's signed family (absent: gemm) must also be that one."""
    lib = load_library()
    err = ctypes.create_string_buffer(_ERR_LEN)
    if family is None:
        rc = lib.diode_client_verify(_enc(bundle_dir), _root_key(root_pubkey), err, _ERR_LEN)
    else:
        rc = _family_fn(lib, "diode_client_verify_family")(_enc(bundle_dir), family.encode(), _root_key(root_pubkey),
                                                           err, _ERR_LEN)
    if rc != OK:
        raise DiodeClientError(rc, err.value.decode(errors="replace"))
