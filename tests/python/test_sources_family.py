"""sources.family_model(): the model of a decision family other than gemm (scaled_mm),
from DIODE_MODEL_<FAMILY>, the hub / the cache of `diode pull --family`, and the bundles
shipped in the package (torch_diode/bundles/<hw>/families/<family>/<version>/), verified
by the native client. The bundles are signed here with throwaway keys by the C++ `diode`."""
import json
import logging
import os
import pathlib
import shutil

import pytest

from _native_fixtures import HttpHub, lib  # noqa: F401 (lib: a fixture)
from model_tools import DIODE, run
from torch_diode.hook import sources

HW = "nvidia-h200-144gb"
FAM = "scaled_mm"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for k in list(os.environ):
        if k.startswith("DIODE_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("DIODE_PACKAGE_MODELS", "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    sources._family_logged.clear()


class FamilyRegistry:
    """Throwaway keys (deleted from use after signing is done here), a GEMM and a scaled_mm
    example model, and a registry with GEMM version 1 and scaled_mm versions 1 and 2."""

    def __init__(self, work: pathlib.Path):
        if not DIODE.exists():
            pytest.skip(f"the C++ diode is not built ({DIODE})")
        self.work = work
        self.keys = work / "keys"
        self.registry = work / "registry"
        run(DIODE, "keys", "--keys", self.keys, "init")
        self.root_pub = self.keys / "root.pub"
        self.gemm_model = work / "gemm-model"
        self.fam_model = work / "fam-model"
        run(DIODE, "models", "example", "--out", self.gemm_model, "--hardware", HW)
        run(DIODE, "models", "example", "--out", self.fam_model, "--hardware", HW, "--family", FAM)
        for model in (self.gemm_model, self.fam_model, self.fam_model):
            run(DIODE, "publish", "--model", model, "--registry", self.registry, "--keys", self.keys)

    def fam_bundle(self, version: int = 2) -> pathlib.Path:
        return self.registry / HW / "families" / FAM / str(version)


@pytest.fixture(scope="module")
def reg(tmp_path_factory):
    return FamilyRegistry(tmp_path_factory.mktemp("family_registry"))


class StaticHub(HttpHub):
    """Serves a registry as the hub does: /v1/models/<path>/index -> <path>/index.json,
    /v1/models/<path> -> <path> (GEMM and /families/<family>/ alike)."""

    def __init__(self, registry: pathlib.Path):
        self.registry = registry
        self.requests: list[str] = []
        super().__init__()

    def body(self, request_path):
        self.requests.append(request_path)
        rel = request_path.removeprefix("/v1/models/")
        if rel.endswith("/index"):
            rel += ".json"
        path = self.registry / rel
        if rel == request_path or ".." in rel or not path.is_file():
            return None
        return path.read_bytes()


@pytest.fixture
def hub(reg):
    h = StaticHub(reg.registry)
    yield h
    h.close()


def _ship(reg, package: pathlib.Path, bundle: pathlib.Path, version: int) -> pathlib.Path:
    """A package directory like torch_diode/bundles/ holding `bundle` as the shipped scaled_mm
    bundle `version` for HW, and the throwaway root key as its release root key."""
    dest = package / HW / "families" / FAM / str(version)
    shutil.copytree(bundle, dest)
    shutil.copy(reg.root_pub, package / "root.pub")
    return dest


def test_unknown_family_and_gemm_are_refused():
    with pytest.raises(ValueError, match="family 'conv2d'.*scaled_mm"):
        sources.family_model("conv2d", HW)
    with pytest.raises(ValueError, match="resolve_model"):
        sources.family_model("gemm", HW)
    assert sources.family_env(FAM) == "DIODE_MODEL_SCALED_MM"


def test_no_model_is_none_logged_once_at_debug(lib, caplog, tmp_path, monkeypatch):
    monkeypatch.setenv("DIODE_CACHE_DIR", str(tmp_path / "empty"))
    caplog.set_level(logging.DEBUG, logger="torch_diode")
    assert sources.family_model(FAM, HW) is None
    assert sources.family_model(FAM, HW) is None
    msgs = [r for r in caplog.records if "no scaled_mm model" in r.getMessage()]
    assert len(msgs) == 1 and msgs[0].levelno == logging.DEBUG
    assert "(no_model)" in msgs[0].getMessage() and "DIODE_MODEL_SCALED_MM" in msgs[0].getMessage()
    # No GPU and no override: None (no_hardware), nothing tried.
    assert sources.family_model(FAM, None) is None


def test_env_plain_model_directory_is_used_as_is(reg, caplog, monkeypatch):
    monkeypatch.setenv("DIODE_MODEL_SCALED_MM", str(reg.fam_model))
    assert sources.family_model(FAM, HW) == str(reg.fam_model)
    assert sources.family_model(FAM, None) == str(reg.fam_model)  # named by the user: no GPU needed
    # A GEMM model named for scaled_mm: refused, with the reason logged once as a warning.
    monkeypatch.setenv("DIODE_MODEL_SCALED_MM", str(reg.gemm_model))
    caplog.set_level(logging.DEBUG, logger="torch_diode")
    assert sources.family_model(FAM, HW) is None
    assert sources.family_model(FAM, HW) is None
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "family_mismatch" in warned[0].getMessage(), caplog.text
    assert "'gemm', not 'scaled_mm'" in warned[0].getMessage()


def test_env_missing_directory_is_none(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("DIODE_MODEL_SCALED_MM", str(tmp_path / "nope"))
    caplog.set_level(logging.DEBUG, logger="torch_diode")
    assert sources.family_model(FAM, HW) is None
    assert "model_path_missing" in caplog.text


def test_env_bundle_directory_is_verified(lib, reg, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("DIODE_ROOT_PUBKEY", str(reg.root_pub))
    monkeypatch.setenv("DIODE_MODEL_SCALED_MM", str(reg.fam_bundle()))
    assert sources.family_model(FAM, HW) == str(reg.fam_bundle())
    # For another GPU: the signed hardware key does not match.
    assert sources.family_model(FAM, "nvidia-h100-80gb") is None
    assert "hardware_mismatch" in caplog.text
    # The GEMM bundle named as the scaled_mm model: its signed family is gemm.
    monkeypatch.setenv("DIODE_MODEL_SCALED_MM", str(reg.registry / HW / "1"))
    assert sources.family_model(FAM, HW) is None
    assert "not the requested scaled_mm" in caplog.text
    # Tampered weights: refused by the native client. The reason is the same as above's
    # (verification_failed), so it is logged only once the log-once memory is cleared.
    caplog.clear()
    bad = tmp_path / "bad"
    shutil.copytree(reg.fam_bundle(), bad)
    w = bytearray((bad / "weights.msgpack").read_bytes())
    w[-1] ^= 1
    (bad / "weights.msgpack").write_bytes(bytes(w))
    monkeypatch.setenv("DIODE_MODEL_SCALED_MM", str(bad))
    assert sources.family_model(FAM, HW) is None
    assert caplog.text == ""
    sources._family_logged.clear()
    assert sources.family_model(FAM, HW) is None
    assert "verification_failed" in caplog.text and "weights.msgpack" in caplog.text


def test_hub_then_cache(lib, reg, hub, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("DIODE_ROOT_PUBKEY", str(reg.root_pub))
    monkeypatch.setenv("DIODE_CACHE_DIR", str(cache))
    monkeypatch.setenv("DIODE_HUB_URL", hub.url)
    want = str(cache / HW / "families" / FAM / "2")
    assert sources.family_model(FAM, HW) == want
    assert f"/v1/models/{HW}/families/{FAM}/index" in hub.requests
    assert json.loads((cache / HW / "families" / FAM / "2" / "model.json").read_text())["family"] == FAM
    assert not (cache / HW / "1").exists()  # the GEMM bundle was not pulled
    # Without the hub: the cache, verified again by the client.
    monkeypatch.delenv("DIODE_HUB_URL")
    assert sources.family_model(FAM, HW) == want
    # The hub unreachable: the cached bundle still serves.
    monkeypatch.setenv("DIODE_HUB_URL", "http://127.0.0.1:1")
    assert sources.family_model(FAM, HW) == want


def test_shipped_bundle_and_newer_shipped_wins(lib, reg, hub, tmp_path, monkeypatch, caplog):
    package = tmp_path / "package"
    shipped = _ship(reg, package, reg.fam_bundle(2), 2)
    monkeypatch.setattr(sources, "PACKAGE_DIR", str(package))
    monkeypatch.setenv("DIODE_PACKAGE_MODELS", "1")
    monkeypatch.setenv("DIODE_CACHE_DIR", str(tmp_path / "cache"))
    # Nothing pulled: the shipped bundle, verified against the shipped root key.
    assert sources.family_model(FAM, HW) == str(shipped)
    assert sources.shipped_family_bundle(FAM, HW).version == 2
    assert sources.shipped_family_bundle(FAM, "nvidia-h100-80gb") is None
    # The cache holds version 2 too: the pulled one (not older than the shipped one).
    monkeypatch.setenv("DIODE_HUB_URL", hub.url)
    assert sources.family_model(FAM, HW) == str(tmp_path / "cache" / HW / "families" / FAM / "2")
    # The package ships a higher version (the directory name orders shipped bundles, as
    # for GEMM): newer than what the hub served, so it is used.
    newer = _ship(reg, package, reg.fam_bundle(2), 3)
    assert sources.family_model(FAM, HW) == str(newer)
    # DIODE_PACKAGE_MODELS=0: the shipped bundles are off.
    monkeypatch.setenv("DIODE_PACKAGE_MODELS", "0")
    monkeypatch.delenv("DIODE_HUB_URL")
    monkeypatch.setenv("DIODE_ROOT_PUBKEY", str(reg.root_pub))
    assert sources.shipped_family_bundle(FAM, HW) is None
    assert sources.family_model(FAM, HW) == str(tmp_path / "cache" / HW / "families" / FAM / "2")


def test_tampered_shipped_bundle_is_none(lib, reg, tmp_path, monkeypatch, caplog):
    package = tmp_path / "package"
    shipped = _ship(reg, package, reg.fam_bundle(1), 1)
    b = json.loads((shipped / "bundle.json").read_text())
    del b["signed"]["family"]  # passed off as a GEMM bundle
    (shipped / "bundle.json").write_text(json.dumps(b))
    monkeypatch.setattr(sources, "PACKAGE_DIR", str(package))
    monkeypatch.setenv("DIODE_PACKAGE_MODELS", "1")
    monkeypatch.setenv("DIODE_CACHE_DIR", str(tmp_path / "cache"))
    caplog.set_level(logging.DEBUG, logger="torch_diode")
    assert sources.family_model(FAM, HW) is None
    assert "package_verification_failed" in caplog.text and "invalid signature" in caplog.text


def test_unreachable_hub_with_nothing_cached_is_info(lib, reg, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("DIODE_ROOT_PUBKEY", str(reg.root_pub))
    monkeypatch.setenv("DIODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DIODE_HUB_URL", "http://127.0.0.1:9")  # discard port: connection refused
    caplog.set_level(logging.DEBUG, logger="torch_diode")
    assert sources.family_model(FAM, HW) is None
    (rec,) = [r for r in caplog.records if "no scaled_mm model" in r.getMessage()]
    assert rec.levelno == logging.INFO and "(hub_unreachable)" in rec.getMessage()
    assert f"/v1/models/{HW}/families/{FAM}/index" in rec.getMessage()
