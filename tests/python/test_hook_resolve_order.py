"""resolve_model() with both a hub/cache bundle and a newer or older shipped bundle:
the versions are compared from the bundles' metadata before anything is loaded, so only
the chosen model is loaded; the other one only when the chosen one fails (docs/hook.md,
*Where the model comes from*)."""
import json
import logging
import os

import pytest

torch = pytest.importorskip("torch")

import torch_diode  # noqa: E402
from test_hook_fallbacks import _corrupt_json, fake_native, hook, make_bundle  # noqa: E402,F401
from torch_diode import native  # noqa: E402
from torch_diode.hook import api, sources  # noqa: E402

HW = "nvidia-h100-80gb"
HUB = "https://hub.example"


def versioned_bundle(path, version, hardware_key=HW):
    """make_bundle() with the signed `version` in bundle.json, as the hub and package have it."""
    make_bundle(path, version_seed=version, hardware_key=hardware_key)
    meta_path = os.path.join(path, "bundle.json")
    with open(meta_path) as f:
        meta = json.load(f)
    meta["signed"]["version"] = version
    with open(meta_path, "w") as f:
        json.dump(meta, f)
    return os.path.abspath(path)


@pytest.fixture
def both(hook, monkeypatch):
    """The hub serves `pulled` (a bundle in the cache), the package ships `shipped`; every
    model load is recorded in `loads`. Returns make(pulled_version, shipped_version)."""
    monkeypatch.delenv(sources.ENV_PACKAGE)  # conftest turns the shipped models off
    monkeypatch.setattr(sources, "PACKAGE_DIR", str(hook / "pkg"))
    monkeypatch.setattr(api.PROCESS, "warned", set())
    monkeypatch.setenv(sources.ENV_HUB, HUB)
    loads = []
    real_load = api.load_model_dir

    def counting_load(path):
        loads.append(os.path.abspath(path))
        return real_load(path)

    monkeypatch.setattr(api, "load_model_dir", counting_load)

    def make(pulled_version, shipped_version, pulled_hw=HW, verify=None):
        pulled = versioned_bundle(str(hook / "cache" / HW / str(pulled_version)), pulled_version, pulled_hw)
        shipped = versioned_bundle(str(hook / "pkg" / HW / str(shipped_version)), shipped_version)
        fake_native(monkeypatch, verify=verify or (lambda path, key: None),
                    pull=lambda url, key, root, cache_dir: native.PullResult(pulled, False, ""))
        return pulled, shipped, loads

    return make


def used():
    s = torch_diode.get_prediction_stats()
    return s["model_source"], s["model_version"], s["model"]


def test_newer_shipped_bundle_is_the_only_model_loaded(both):
    pulled, shipped, loads = both(1, 2)
    assert torch_diode.install() is True
    assert loads == [shipped]  # the hub's version 1 is never loaded
    assert used() == ("package", 2, shipped)
    assert torch_diode.get_prediction_stats()["load_failures"] == {}


def test_newer_pulled_bundle_is_the_only_model_loaded(both):
    pulled, shipped, loads = both(3, 2)
    assert torch_diode.install() is True
    assert loads == [pulled]
    assert used() == ("hub", 3, pulled)
    assert torch_diode.get_prediction_stats()["load_failures"] == {}


def test_chosen_shipped_model_failing_to_load_falls_back_to_the_pulled_one(both, caplog):
    pulled, shipped, loads = both(1, 2)
    _corrupt_json(shipped)
    with caplog.at_level(logging.INFO, logger="torch_diode"):
        assert torch_diode.install() is True
    assert loads == [shipped, pulled]
    assert used() == ("hub", 1, pulled)
    assert torch_diode.get_prediction_stats()["load_failures"] == {"model_invalid": 1}
    # a newer shipped bundle refused while the hub/cache model is used: INFO only
    assert [r.levelno for r in caplog.records if "version 2 is not used (model_invalid)" in r.getMessage()] \
        == [logging.INFO]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_chosen_shipped_bundle_failing_verification_falls_back_to_the_pulled_one(both, monkeypatch):
    def verify(path, key):
        if os.path.abspath(path).startswith(str(sources.PACKAGE_DIR)):
            raise RuntimeError("weights.msgpack: sha256 mismatch")

    pulled, shipped, loads = both(1, 2, verify=verify)
    assert torch_diode.install() is True
    assert loads == [pulled]  # the shipped model is refused before it is loaded
    assert used() == ("hub", 1, pulled)
    assert torch_diode.get_prediction_stats()["load_failures"] == {"package_verification_failed": 1}


def test_chosen_pulled_model_failing_to_load_falls_back_to_the_shipped_one(both, caplog):
    pulled, shipped, loads = both(3, 2)
    _corrupt_json(pulled)
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        assert torch_diode.install() is True
    assert loads == [pulled, shipped]
    assert used() == ("package", 2, shipped)
    assert torch_diode.get_prediction_stats()["load_failures"] == {"model_invalid": 1}
    (msg,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "model source not used (model_invalid)" in msg and "using the model shipped with the package" in msg


def test_both_failing_counts_both_and_reports_the_shipped_reason(both, caplog):
    pulled, shipped, loads = both(1, 2, pulled_hw="nvidia-a100-sxm4-80gb")
    _corrupt_json(shipped)
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        assert torch_diode.install() is False
    assert loads == [shipped, pulled]
    s = torch_diode.get_prediction_stats()
    assert s["load_failures"] == {"model_invalid": 1, "hardware_mismatch": 1}
    assert s["no_model_reason"] == "model_invalid"
    msgs = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(msgs) == 2 and "(hardware_mismatch)" in msgs[0] and "(model_invalid)" in msgs[1], msgs
