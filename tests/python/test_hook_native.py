"""The hook with the real native client: bundles signed by `diode publish`, verified and
pulled over HTTP by libdiode_client.so through torch_diode.native.

Skipped when the C++ build (the `diode` CLI and libdiode_client.so) is not there.
"""
import functools
import glob
import http.server
import os
import shutil
import subprocess
import threading

import pytest

torch = pytest.importorskip("torch")

import torch_diode  # noqa: E402
from test_hook_model import write_model_dir  # noqa: E402
from torch._inductor import config as inductor_config  # noqa: E402
from torch_diode import native  # noqa: E402
from torch_diode.hook import api, compat, sources  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HW = "nvidia-h100-80gb"


def _built(pattern):
    found = sorted(glob.glob(os.path.join(ROOT, pattern)), key=os.path.getmtime, reverse=True)
    return found[0] if found else None


DIODE = _built("build*/cli/diode")
LIB = _built("build*/shared/bundle/libdiode_client.so")
pytestmark = pytest.mark.skipif(not (DIODE and LIB), reason="C++ build (diode CLI, libdiode_client.so) not found")


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """keys + a registry with one published bundle of a tiny model."""
    t = tmp_path_factory.mktemp("reg")
    keys, reg = str(t / "keys"), str(t / "registry")
    subprocess.run([DIODE, "keys", "--keys", keys, "init"], check=True, capture_output=True)
    model = write_model_dir(str(t / "model"), hardware_key=HW)
    subprocess.run([DIODE, "publish", "--model", model, "--registry", reg, "--keys", keys],
                   check=True, capture_output=True)
    return {"root": os.path.join(keys, "root.pub"), "registry": reg, "bundle": os.path.join(reg, HW, "1")}


@pytest.fixture
def hook(monkeypatch, tmp_path, registry):
    api.uninstall()
    cfg, tl = compat.get_choices_config(), compat.thread_handler()
    compat.set_thread_handler(compat.MISSING)
    inductor_config.inductor_choices_class = None
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setenv("DIODE_CLIENT_LIB", LIB)
    monkeypatch.setenv(sources.ENV_ROOT_KEY, registry["root"])
    monkeypatch.setenv(sources.ENV_CACHE, str(tmp_path / "cache"))
    for k in (sources.ENV_MODEL, sources.ENV_HUB):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setitem(api.PROCESS.hardware, "hw", {"hardware_key": HW})
    monkeypatch.setattr(api.PROCESS, "registered", [])
    torch_diode.reset_prediction_stats()
    yield tmp_path
    api.uninstall()
    inductor_config.inductor_choices_class = cfg
    compat.set_thread_handler(tl)


def test_signed_bundle_verifies_and_tampered_one_does_not(hook, registry, caplog):
    assert torch_diode.install(registry["bundle"]) is True
    bad = str(hook / "tampered")
    shutil.copytree(registry["bundle"], bad)
    with open(os.path.join(bad, "weights.msgpack"), "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 1]))
    assert torch_diode.install(bad) is False
    s = torch_diode.get_prediction_stats()
    assert s["load_failures"] == {"verification_failed": 1}
    assert "weights.msgpack" in caplog.text


def test_wrong_root_key_is_refused(hook, registry, monkeypatch):
    monkeypatch.setenv(sources.ENV_ROOT_KEY, "00" * 32)
    assert torch_diode.install(registry["bundle"]) is False
    assert torch_diode.get_prediction_stats()["load_failures"] == {"verification_failed": 1}


class _RegistryHandler(http.server.SimpleHTTPRequestHandler):
    """The hub's model routes over a registry directory: /v1/models/{hw}/index and
    /v1/models/{hw}/{version}/{file} (docs/bundle-format.md)."""

    def translate_path(self, path):
        parts = path.split("?")[0].strip("/").split("/")
        if parts[:2] != ["v1", "models"] or ".." in parts:
            return "/nonexistent"
        rest = parts[2:]
        if len(rest) == 2 and rest[1] == "index":
            rest = [rest[0], "index.json"]
        return os.path.join(self.directory, *rest)

    def log_message(self, *args):
        pass


def test_pull_from_hub_then_offline_from_cache(hook, registry, monkeypatch):
    handler = functools.partial(_RegistryHandler, directory=registry["registry"])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv(sources.ENV_HUB, f"http://127.0.0.1:{server.server_address[1]}")
        assert torch_diode.install() is True
        pulled = torch_diode.get_prediction_stats()["model"]
        assert pulled == os.path.join(str(hook / "cache"), HW, "1")
    finally:
        server.shutdown()
        server.server_close()
    # hub gone: the client serves the cached bundle after verifying it again
    assert torch_diode.install() is True
    assert torch_diode.get_prediction_stats()["model"] == pulled
    # no hub configured at all: the cache alone
    monkeypatch.delenv(sources.ENV_HUB)
    assert torch_diode.install() is True
    assert torch_diode.get_prediction_stats()["model"] == pulled
    assert torch_diode.get_prediction_stats()["load_failures"] == {}
