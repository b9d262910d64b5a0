"""torch_diode.native: the ctypes wrapper of libdiode_client.so, exercised
against the committed example registry (tests/data/bundles/) served by a
stdlib HTTP server on 127.0.0.1."""
import hashlib
import json
import pathlib
import shutil

import pytest

from _native_fixtures import HttpHub, lib  # noqa: F401 (lib: a fixture)
from torch_diode import native

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUNDLES = ROOT / "tests" / "data" / "bundles"
REGISTRY = BUNDLES / "registry"
HW = "nvidia-h100-80gb"
ROOT_PUB = BUNDLES / "root.pub"


class _Hub(HttpHub):
    """Serves a registry directory at /v1/models/{hw}/index and /v1/models/{hw}/{version}/{file}."""

    def __init__(self, registry):
        self.registry = pathlib.Path(registry)
        self.mutate = None  # (relative path, bytes) -> bytes
        super().__init__()

    def body(self, request_path):
        parts = request_path.split("/")
        if len(parts) == 5 and parts[:3] == ["", "v1", "models"] and parts[4] == "index":
            rel = f"{parts[3]}/index.json"
        elif len(parts) == 6 and parts[:3] == ["", "v1", "models"]:
            rel = "/".join(parts[3:])
        else:
            rel = None
        path = self.registry / rel if rel and ".." not in rel else None
        if path is None or not path.is_file():
            return None
        body = path.read_bytes()
        if self.mutate:
            body = self.mutate(rel, body)
        return body


@pytest.fixture
def hub():
    h = _Hub(REGISTRY)
    yield h
    h.close()


def _tree(d):
    d = pathlib.Path(d)
    if not d.exists():
        return {}
    return {str(p.relative_to(d)): (p.read_bytes() if p.is_file() else b"")
            for p in d.rglob("*") if p.suffix != ".lock"}


def test_version_reports_the_abi(lib):
    v = native.version()
    assert v.startswith("diode-client ") and v.endswith("abi 1")


def test_missing_library_raises_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setenv("DIODE_CLIENT_LIB", str(tmp_path / "nope.so"))
    with pytest.raises(native.NativeClientUnavailable, match="DIODE_CLIENT_LIB|nope.so"):
        native.load_library()


def test_installed_package_copy_comes_before_checkout_builds(lib, monkeypatch, tmp_path):
    # As in an installed platform wheel: torch_diode/_lib/libdiode_client.so.1. (_PACKAGE_LIB_DIR
    # is joined to the package directory, so an absolute path stands in for it here.)
    shutil.copy(lib._name, tmp_path / "libdiode_client.so.1")
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_PACKAGE_LIB_DIR", str(tmp_path))
    monkeypatch.delenv("DIODE_CLIENT_LIB", raising=False)
    assert native.load_library()._name == str(tmp_path / "libdiode_client.so.1")
    assert native.version().endswith("abi 1")


def test_missing_library_error_lists_every_place_searched(monkeypatch, tmp_path):
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_PACKAGE_LIB_DIR", str(tmp_path / "empty"))
    monkeypatch.delenv("DIODE_CLIENT_LIB", raising=False)

    def refuse(path, *a, **k):
        raise OSError(f"{path}: refused by the test")

    monkeypatch.setattr(native.ctypes, "CDLL", refuse)
    with pytest.raises(native.NativeClientUnavailable) as e:
        native.load_library()
    msg = str(e.value)
    assert f"{tmp_path / 'empty'}/libdiode_client.so.1* (nothing there: torch_diode was not installed from the platform wheel)" in msg
    assert "libdiode_client.so.1 (libdiode_client.so.1: refused by the test)" in msg  # the loader's search path
    assert "build_wheel.sh" in msg and "DIODE_CLIENT_LIB" in msg


def test_verify_committed_example_bundle(lib):
    native.verify(REGISTRY / HW / "1", ROOT_PUB)
    native.verify(REGISTRY / HW / "1", ROOT_PUB.read_text().strip())


def copy_with_tampered_weights(bundle: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    """A copy of a bundle directory whose weights are one bit off from what its signature covers."""
    shutil.copytree(bundle, dest)
    w = bytearray((dest / "weights.msgpack").read_bytes())
    w[-5] ^= 1
    (dest / "weights.msgpack").write_bytes(bytes(w))
    return dest


def test_verify_rejects_tampered_weights(lib, tmp_path):
    copy = copy_with_tampered_weights(REGISTRY / HW / "1", tmp_path / "b")
    with pytest.raises(native.DiodeClientError, match="weights.msgpack: SHA-256") as e:
        native.verify(copy, ROOT_PUB)
    assert e.value.kind == "verify"


def test_verify_rejects_a_wrong_root_key(lib):
    with pytest.raises(native.DiodeClientError, match="pinned root key") as e:
        native.verify(REGISTRY / HW / "1", "ab" * 32)
    assert e.value.kind == "verify"
    with pytest.raises(native.DiodeClientError) as e:
        native.verify(REGISTRY / HW / "1", "not-a-key")
    assert e.value.kind == "argument"


def test_pull_then_offline(lib, hub, tmp_path):
    cache = tmp_path / "cache"
    r = native.pull(hub.url, HW, ROOT_PUB, cache)
    assert not r.offline
    assert r.path == cache / HW / "1"
    meta = json.loads((r.path / "bundle.json").read_text())["signed"]
    assert meta["hardware_key"] == HW
    got = hashlib.sha256((r.path / "weights.msgpack").read_bytes()).hexdigest()
    assert got == meta["files"]["weights.msgpack"]["sha256"]
    hub.close()
    r2 = native.pull(hub.url, HW, ROOT_PUB, cache)
    assert r2.offline and r2.path == r.path
    assert "cannot reach the hub" in r2.note
    r3 = native.pull(None, HW, ROOT_PUB, cache)
    assert r3.offline and r3.path == r.path


def test_pull_rejects_oversized_download_and_keeps_the_cache(lib, hub, tmp_path):
    cache = tmp_path / "cache"
    hub.mutate = lambda rel, body: body + b"x" * 4096 if rel.endswith("weights.msgpack") else body
    with pytest.raises(native.DiodeClientError, match="download aborted") as e:
        native.pull(hub.url, HW, ROOT_PUB, cache)
    assert e.value.kind == "verify"
    assert _tree(cache) == {}


def test_pull_rejects_tampered_index_and_keeps_the_cache(lib, hub, tmp_path):
    cache = tmp_path / "cache"
    native.pull(hub.url, HW, ROOT_PUB, cache)
    before = _tree(cache)

    def bump(rel, body):
        if not rel.endswith("index.json"):
            return body
        j = json.loads(body)
        j["index"]["signed"]["version"] = 9
        return json.dumps(j).encode()

    hub.mutate = bump
    with pytest.raises(native.DiodeClientError, match="invalid signature"):
        native.pull(hub.url, HW, ROOT_PUB, cache)
    assert _tree(cache) == before


def test_pull_errors_are_precise(lib, hub, tmp_path):
    with pytest.raises(native.DiodeClientError, match="only to loopback") as e:
        native.pull("http://hub.example.com", HW, ROOT_PUB, tmp_path)
    assert e.value.kind == "argument"
    with pytest.raises(native.DiodeClientError, match="HTTP 404") as e:
        native.pull(hub.url, "nvidia-b200-192gb", ROOT_PUB, tmp_path)
    assert e.value.kind == "http"
    with pytest.raises(native.DiodeClientError, match="not a valid hardware key"):
        native.pull(hub.url, "../../etc", ROOT_PUB, tmp_path)
    with pytest.raises(native.DiodeClientError, match="pull it online first") as e:
        native.pull(None, HW, ROOT_PUB, tmp_path / "empty")
    assert e.value.kind == "network"
