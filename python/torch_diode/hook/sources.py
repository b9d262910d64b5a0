"""Where the hook's model comes from, in order of precedence:

1. an explicit path: `register_model(path)` / `install(model=path)` / env `DIODE_MODEL`.
   A *model directory* (model.json + weights.msgpack, no bundle.json) is loaded as is: the
   user named it. A *bundle directory* (it has bundle.json) is verified first.
2. the hub (env `DIODE_HUB_URL`) and the local cache, through the native pull client
   (torch_diode.native over libdiode_client.so, docs/bundle-format.md): it fetches the
   current bundle for the hardware key, checks signatures, hashes, expiry and rollback,
   and stores it in the cache (`DIODE_CACHE_DIR`, then `$XDG_CACHE_HOME/diode`, then
   ~/.cache/diode). When the hub is unreachable the client itself serves the cached
   current bundle after verifying it again; without a hub URL the hook asks it for the
   cache only.
3. the package: the signed bundles shipped in torch_diode/bundles/<hardware_key>/<version>/
   (python/release/release_bundles.sh puts them there), verified by the native client
   against the shipped release root key torch_diode/bundles/root.pub -- or, if the user
   pinned `DIODE_ROOT_PUBKEY`, against that key (a shipped bundle that does not chain to
   it is refused: `package_untrusted`). Used when 1 and 2 give nothing, or when the
   shipped version is newer than what the hub/cache served (same root, same registry).
   `DIODE_PACKAGE_MODELS=0` turns this source and the shipped root key off.

Trust is anchored at the pinned root key `DIODE_ROOT_PUBKEY` (64 hex characters or a
file holding them); when it is unset, at the package's release root key (bundles/root.pub),
so the release hub's newer bundles verify with no configuration. Signatures are checked
only by the native library; when it or every root key is missing, bundles are refused
(`native_unavailable`, `no_root_key`), never loaded unverified. Every failure is a
`SourceError` with a short reason key that the caller counts and logs.

The models of the other decision families (scaled_mm) come from the same places, each
in its own bundle: `family_model(family, hardware_key)` (DIODE_MODEL_<FAMILY>, the pull
cache's <hw>/families/<family>/<version>/, the package's bundles/<hw>/families/<family>/).
"""
from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("torch_diode")

ENV_MODEL = "DIODE_MODEL"
ENV_HUB = "DIODE_HUB_URL"
ENV_CACHE = "DIODE_CACHE_DIR"
ENV_ROOT_KEY = "DIODE_ROOT_PUBKEY"
ENV_PACKAGE = "DIODE_PACKAGE_MODELS"

# The shipped bundles and the release root key they chain to (python/release/).
PACKAGE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bundles")
_HW_DIR = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class SourceError(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Candidate:
    path: str
    source: str          # "explicit" | "env" | "hub" | "cache" | "package"
    is_bundle: bool
    version: int | None = None


def cache_dir() -> str:
    """The native client's cache directory (same precedence as `diode pull`)."""
    if os.environ.get(ENV_CACHE):
        return os.environ[ENV_CACHE]
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return os.path.join(xdg, "diode")
    return os.path.join(os.path.expanduser("~"), ".cache", "diode")


def is_bundle_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "bundle.json"))


def classify(path: str, source: str) -> Candidate:
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isdir(path):
        raise SourceError("model_path_missing", f"{path} is not a directory")
    if is_bundle_dir(path):
        return Candidate(path, source, True)
    if os.path.isfile(os.path.join(path, "model.json")):
        return Candidate(path, source, False)
    raise SourceError("model_path_invalid", f"{path} has neither model.json nor bundle.json")


# ---------------------------------------------------------------- native client

def _native() -> Any:
    """torch_diode.native with its library loaded, or SourceError('native_unavailable')."""
    try:
        from .. import native
        native.load_library()
    except Exception as e:  # ImportError, NativeClientUnavailable (library missing / wrong ABI)
        raise SourceError("native_unavailable", f"{type(e).__name__}: {e}") from None
    return native


def package_enabled() -> bool:
    return os.environ.get(ENV_PACKAGE, "1").strip().lower() not in ("0", "false", "no", "off")


def package_root_key() -> str | None:
    """The shipped release root public key file, or None (none shipped, or DIODE_PACKAGE_MODELS=0)."""
    p = os.path.join(PACKAGE_DIR, "root.pub")
    return p if package_enabled() and os.path.isfile(p) else None


def root_key() -> str:
    """DIODE_ROOT_PUBKEY, else the package's release root key, else SourceError('no_root_key')."""
    key = os.environ.get(ENV_ROOT_KEY, "").strip()
    if key:
        return key
    shipped = package_root_key()
    if shipped:
        return shipped
    raise SourceError("no_root_key", f"{ENV_ROOT_KEY} is not set and the package ships no root key "
                                     f"({ENV_PACKAGE}=0 or no {os.path.join(PACKAGE_DIR, 'root.pub')}): "
                                     "bundles cannot be verified")


def bundle_version(path: str) -> int | None:
    """The `version` in a bundle directory's bundle.json (read after verification), or None."""
    import json
    try:
        with open(os.path.join(path, "bundle.json"), "rb") as f:
            v = json.loads(f.read(1 << 20))["signed"]["version"]
        return v if isinstance(v, int) and not isinstance(v, bool) else None
    except Exception:
        return None


# The C client's message for a hub that has no index for the hardware key (http_fetch.cpp:
# "index.json: hub answered HTTP 404 for <url>"). It gets its own reason because the
# remedy differs from other HTTP errors: nothing is published for this GPU (or the URL
# is not the hub's base URL).
_NO_INDEX = re.compile(r"index\.json: hub answered HTTP 404\b")


def _client_error(e: Exception, what: str) -> SourceError:
    kind = getattr(e, "kind", "")
    reason = {"verify": "verification_failed", "network": "hub_unreachable"}.get(kind, "hub_pull_failed")
    if kind == "http" and _NO_INDEX.search(str(e)):
        reason = "no_published_model"
    return SourceError(reason, f"{what}: {e}")


def verify_bundle(path: str) -> str:
    """Verifies a bundle directory (signatures, root chain from its roots.json anchored at
    the pinned root key, hashes, expiry); returns it. The caller checks the hardware key."""
    native = _native()
    key = root_key()
    try:
        native.verify(path, key)
    except Exception as e:
        raise SourceError("verification_failed", f"{path}: {e}") from None
    return path


# The C client's message when no root in a bundle's chain lists the pinned key (trust.cpp).
_NOT_CHAINED = "no root version lists the pinned root key"


def verify_shipped(path: str, family: str | None = None) -> str:
    """Verifies a shipped bundle against DIODE_ROOT_PUBKEY if the user pinned one (a bundle
    not chaining to it is refused: package_untrusted), else against the shipped root key.
    `family` given: the bundle's signed decision family must be that one."""
    native = _native()
    pinned = os.environ.get(ENV_ROOT_KEY, "").strip()
    key = pinned or package_root_key()
    if not key:
        raise SourceError("package_verification_failed",
                          f"{path}: the package ships no root key ({os.path.join(PACKAGE_DIR, 'root.pub')})")
    try:
        if family is None:
            native.verify(path, key)
        else:
            native.verify(path, key, family=family)
    except Exception as e:
        msg = str(e)
        if pinned and _NOT_CHAINED in msg:
            raise SourceError("package_untrusted", f"{path} does not chain to {ENV_ROOT_KEY}: {msg}") from None
        if "expired" in msg:
            raise SourceError("package_expired", f"{path}: {msg}") from None
        raise SourceError("package_verification_failed", f"{path}: {msg}") from None
    return path


def pull(hub_url: str | None, hardware_key: str, family: str = "gemm") -> tuple[str, bool, str]:
    """(verified bundle directory, served offline, note) from the hub or, with no hub, the cache.

    A hub that answers with an HTTP or I/O error is retried once from the cache (the
    client verifies the cached bundle again); a verification failure is never papered
    over with the cache: it is the reason reported.
    """
    native = _native()
    key = root_key()
    try:
        res = native.pull(hub_url or "", hardware_key, key, cache_dir(), family=family)
    except Exception as e:
        err = _client_error(e, f"{hub_url or 'cache'} {hardware_key}" + ("" if family == "gemm" else f" {family}"))
        if not hub_url:
            if err.reason != "verification_failed":
                err = SourceError("no_cached_model", err.detail)
            raise err from None
        if err.reason == "verification_failed":
            raise err from None
        # an HTTP / I/O error from the hub: the cached bundle, verified again, is still good
        log.debug("torch_diode: hub pull failed (%s), trying the cache: %s", err.reason, err.detail)
        try:
            res = native.pull("", hardware_key, key, cache_dir(), family=family)
        except Exception:
            raise err from None
    path = os.fspath(res.path)
    if not os.path.isdir(path):
        raise SourceError("hub_pull_failed", f"native pull returned {path!r}, not a directory")
    return path, bool(getattr(res, "offline", False)), str(getattr(res, "note", ""))


# ---------------------------------------------------------------- enumeration

def cached_versions(hardware_key: str) -> list[Candidate]:
    """Bundle directories under <cache>/<hardware_key>/<version>/, newest first."""
    root = os.path.join(cache_dir(), hardware_key)
    out = []
    if os.path.isdir(root):
        for name in os.listdir(root):
            p = os.path.join(root, name)
            if name.isdigit() and os.path.isdir(p) and is_bundle_dir(p):
                out.append(Candidate(p, "cache", True, int(name)))
    out.sort(key=lambda c: -(c.version or 0))
    return out


def shipped_hardware_keys() -> list[str]:
    """Hardware keys the package ships a bundle for (empty with DIODE_PACKAGE_MODELS=0)."""
    if not package_enabled() or not os.path.isdir(PACKAGE_DIR):
        return []
    return sorted(n for n in os.listdir(PACKAGE_DIR) if _HW_DIR.match(n) and shipped_bundle(n))


def shipped_bundle(hardware_key: str) -> Candidate | None:
    """The newest bundle the package ships for the hardware key (not yet verified), or None."""
    if not package_enabled() or not _HW_DIR.match(hardware_key or ""):
        return None
    return _newest_shipped(os.path.join(PACKAGE_DIR, hardware_key))


def _newest_shipped(root: str) -> Candidate | None:
    """The highest-numbered bundle directory directly under `root` (not yet verified), or None."""
    best = None
    if os.path.isdir(root):
        for name in os.listdir(root):
            p = os.path.join(root, name)
            if name.isdigit() and is_bundle_dir(p) and (best is None or int(name) > best.version):
                best = Candidate(p, "package", True, int(name))
    return best


def candidates(hardware_key: str | None, explicit: list[str]) -> list[Candidate]:
    """What list_available_models() shows; resolution tries them in this order."""
    out: list[Candidate] = []
    for p in explicit:
        try:
            out.append(classify(p, "explicit"))
        except SourceError as e:
            log.debug("torch_diode: registered model %s skipped: %s", p, e)
    env = os.environ.get(ENV_MODEL)
    if env:
        try:
            out.append(classify(env, "env"))
        except SourceError as e:
            log.debug("torch_diode: %s=%s skipped: %s", ENV_MODEL, env, e)
    if hardware_key:
        out.extend(cached_versions(hardware_key))
        shipped = shipped_bundle(hardware_key)
        if shipped:
            out.append(shipped)
    return out


# ---------------------------------------------------------------- other decision families

# DIODE_MODEL_<FAMILY> (e.g. DIODE_MODEL_SCALED_MM) names the model of one decision family.
ENV_MODEL_FAMILY_PREFIX = ENV_MODEL + "_"

_family_logged: set[tuple[str, str, str]] = set()  # (family, hardware key, reason) already logged
_family_lock = threading.Lock()


def family_env(family: str) -> str:
    """The environment variable that overrides `family`'s model: DIODE_MODEL_SCALED_MM."""
    return ENV_MODEL_FAMILY_PREFIX + family.upper()


def _check_family(family: str) -> None:
    from .. import wire
    if family not in wire.FAMILIES or family == "gemm":
        known = ", ".join(f for f in wire.FAMILIES if f != "gemm")
        raise ValueError(f"family {family!r}: family_model() serves the families other than gemm ({known}); "
                         "the GEMM model is resolved by api.resolve_model()")


def _model_json_family(path: str) -> str:
    """The `family` a model directory's model.json declares (absent: gemm); SourceError if unreadable."""
    import json
    p = os.path.join(path, "model.json")
    try:
        with open(p, "rb") as f:
            doc = json.loads(f.read(1 << 20))
    except (OSError, ValueError) as e:
        raise SourceError("model_invalid", f"{p}: {e}") from None
    if not isinstance(doc, dict):
        raise SourceError("model_invalid", f"{p}: top level is not an object")
    fam = doc.get("family", "gemm")
    if not isinstance(fam, str):
        raise SourceError("model_invalid", f"{p}: field 'family' is not a string")
    return fam


def family_cached_versions(family: str, hardware_key: str) -> list[Candidate]:
    """Bundle directories of `family` in the pull cache, <cache>/<hw>/families/<family>/<version>/,
    newest first (not yet verified)."""
    root = os.path.join(cache_dir(), hardware_key, "families", family)
    out = []
    if _HW_DIR.match(hardware_key or "") and os.path.isdir(root):
        for name in os.listdir(root):
            p = os.path.join(root, name)
            if name.isdigit() and os.path.isdir(p) and is_bundle_dir(p):
                out.append(Candidate(p, "cache", True, int(name)))
    out.sort(key=lambda c: -(c.version or 0))
    return out


def shipped_family_bundle(family: str, hardware_key: str) -> Candidate | None:
    """The newest bundle of `family` the package ships for the hardware key,
    torch_diode/bundles/<hw>/families/<family>/<version>/ (not yet verified), or None."""
    if not package_enabled() or not _HW_DIR.match(hardware_key or ""):
        return None
    return _newest_shipped(os.path.join(PACKAGE_DIR, hardware_key, "families", family))


def _bundle_signed(path: str) -> dict:
    """The `signed` block of a verified bundle directory's bundle.json."""
    import json
    p = os.path.join(path, "bundle.json")
    try:
        with open(p, "rb") as f:
            signed = json.loads(f.read(1 << 20))["signed"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SourceError("verification_failed", f"{p}: {e}") from None
    if not isinstance(signed, dict):
        raise SourceError("verification_failed", f"{p}: 'signed' is not an object")
    return signed


def _check_family_bundle(path: str, family: str, hardware_key: str) -> str:
    """A verified bundle's signed family and hardware key must be the ones asked for."""
    signed = _bundle_signed(path)
    got = signed.get("family", "gemm")
    if got != family:
        raise SourceError("family_mismatch", f"{path}: bundle of family {got!r}, wanted {family!r}")
    if signed.get("hardware_key") != hardware_key:
        raise SourceError("hardware_mismatch",
                          f"{path}: bundle for {signed.get('hardware_key')!r}, this GPU is {hardware_key}")
    return path


def _family_model(family: str, hardware_key: str | None) -> str:
    env = family_env(family)
    named = os.environ.get(env, "").strip()
    if named:
        # The user named it: a plain model directory is used as is (its family must match),
        # a bundle directory is verified; nothing else is tried when it fails.
        c = classify(named, "env")
        if c.is_bundle:
            native = _native()
            key = root_key()
            try:
                native.verify(c.path, key, family=family)
            except Exception as e:
                raise SourceError("verification_failed", f"{env}={c.path}: {e}") from None
            if hardware_key:
                _check_family_bundle(c.path, family, hardware_key)
            return c.path
        got = _model_json_family(c.path)
        if got != family:
            raise SourceError("family_mismatch", f"{env}={c.path}: model.json is of family {got!r}, not {family!r}")
        return c.path
    if not hardware_key:
        raise SourceError("no_hardware", f"no GPU hardware key and no {env}")
    hub = os.environ.get(ENV_HUB)
    errors: list[SourceError] = []
    pulled: str | None = None
    pulled_version = 0
    if hub or family_cached_versions(family, hardware_key):
        try:
            path, offline, note = pull(hub, hardware_key, family)
            if note:
                log.info("torch_diode: %s", note)
            pulled = _check_family_bundle(path, family, hardware_key)
            pulled_version = bundle_version(path) or 0
        except SourceError as e:
            errors.append(e)
    shipped = shipped_family_bundle(family, hardware_key)
    if shipped is not None and (pulled is None or pulled_version < (shipped.version or 0)):
        try:
            return _check_family_bundle(verify_shipped(shipped.path, family), family, hardware_key)
        except SourceError as e:
            errors.append(e)
    if pulled is not None:
        return pulled
    if errors:
        raise errors[-1]
    where = f"at {hub} or " if hub else ""
    raise SourceError("no_model", f"no {family} model for {hardware_key} (no {env}, nothing for it {where}"
                                  f"in {cache_dir()}, none shipped in {PACKAGE_DIR})")


def family_model(family: str, hardware_key: str | None) -> str | None:
    """The verified model directory of decision family `family` (not gemm) for `hardware_key`, or None.

    The directory holds model.json and weights.msgpack of that family's model
    (model.json carries `"family": family`). It comes from, in order:

    1. `DIODE_MODEL_<FAMILY>` (e.g. `DIODE_MODEL_SCALED_MM`): a plain model directory is
       used as is (its model.json must declare the family); a bundle directory is verified
       (signatures anchored at the pinned/shipped root key, hashes, expiry, signed family).
       When it is set and fails, nothing else is tried.
    2. the hub (`DIODE_HUB_URL`) through the native client, or without a hub the cache of
       `diode pull --family <family>` (<cache>/<hw>/families/<family>/<version>/), verified
       again by the client.
    3. the bundle the package ships, torch_diode/bundles/<hw>/families/<family>/<version>/,
       verified against `DIODE_ROOT_PUBKEY` or the shipped root key; also used when it is
       newer than what the hub/cache served.

    Every returned bundle has been verified for this family and hardware key. On failure it
    returns None and logs the reason once per (family, hardware key, reason): at WARNING
    when something was there and failed, at INFO for an unreachable hub (the GEMM
    model's resolution warns about the same hub), at DEBUG when there is simply no model
    (none named, published on the hub, cached or shipped).
    `hardware_key` None (no GPU) only allows the `DIODE_MODEL_<FAMILY>` override.
    Raises ValueError for an unknown family or for "gemm" (api.resolve_model() finds that one).
    """
    _check_family(family)
    try:
        return _family_model(family, hardware_key)
    except SourceError as e:
        key = (family, hardware_key or "", e.reason)
        with _family_lock:
            first = key not in _family_logged
            _family_logged.add(key)
        if first:
            # Nothing there (no GPU, nothing published, cached or shipped) is not a failure;
            # an unreachable hub is the GEMM model's resolution's warning (the same
            # DIODE_HUB_URL), so here it is INFO.
            quiet = e.reason in ("no_model", "no_hardware", "no_published_model", "no_cached_model")
            level = logging.DEBUG if quiet else logging.INFO if e.reason == "hub_unreachable" else logging.WARNING
            log.log(level,
                    "torch_diode: no %s model for %s (%s): %s", family, hardware_key or "this machine",
                    e.reason, e.detail)
        return None
