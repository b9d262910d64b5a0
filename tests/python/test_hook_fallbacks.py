"""Every way a model can fail to load or verify, and every runtime error, ends in
Inductor's default choices with a logged and counted reason."""
import json
import logging
import os
import shutil

import pytest

torch = pytest.importorskip("torch")

import torch_diode  # noqa: E402
from test_hook_model import write_model_dir  # noqa: E402
from test_hook_ranking import FakeMMInputs, finalize, make_choices  # noqa: E402
from torch._inductor import config as inductor_config  # noqa: E402
from torch._inductor.virtualized import V  # noqa: E402
from torch_diode.collect.enumerate import mm_configs  # noqa: E402
from torch_diode import native  # noqa: E402
from torch_diode.hook import api, compat, sources  # noqa: E402

HW = "nvidia-h100-80gb"


@pytest.fixture
def hook(monkeypatch, tmp_path):
    """A clean install slate, a pretend GPU (hardware key HW), an empty cache dir."""
    api.uninstall()
    cfg, tl = compat.get_choices_config(), compat.thread_handler()
    compat.set_thread_handler(compat.MISSING)
    inductor_config.inductor_choices_class = None
    for k in (sources.ENV_MODEL, sources.ENV_HUB):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv(sources.ENV_ROOT_KEY, "ab" * 32)
    monkeypatch.setenv(sources.ENV_CACHE, str(tmp_path / "cache"))
    monkeypatch.setitem(api.PROCESS.hardware, "hw", {"device_name": "NVIDIA H100 80GB HBM3", "hardware_key": HW})
    monkeypatch.setattr(api.PROCESS, "registered", [])
    torch_diode.reset_prediction_stats()
    yield tmp_path
    api.uninstall()
    inductor_config.inductor_choices_class = cfg
    compat.set_thread_handler(tl)
    torch_diode.set_options(top_k=5, threshold=0.05, max_kept=16, search_space="default", fallback="default")


def make_bundle(path, version_seed=0, hardware_key=HW):
    """A bundle directory as the hub serves it: model files + bundle.json (+ roots.json)."""
    write_model_dir(path, seed=version_seed, hardware_key=hardware_key)
    with open(os.path.join(path, "bundle.json"), "w") as f:
        json.dump({"signed": {"hardware_key": HW}, "signatures": []}, f)
    return path


def fake_native(monkeypatch, verify=None, pull=None):
    """The real torch_diode.native module with its two C calls replaced. `pull` serves the
    GEMM model (called without `family`); the pull of another decision family's bundle
    (family="scaled_mm") finds none, as a hub without that family answers."""
    monkeypatch.setattr(native, "load_library", lambda: None)
    if verify:
        monkeypatch.setattr(native, "verify", verify)
    if pull:
        def family_pull(url, key, root, cache_dir=None, family="gemm"):
            if family != "gemm":
                raise client_error("http", f"GET {url}/v1/models/{key}/families/{family}/index: 404")
            return pull(url, key, root, cache_dir)
        monkeypatch.setattr(native, "pull", family_pull)
    return native


def client_error(kind, msg):
    code = {v: k for k, v in native._ERROR_KINDS.items()}[kind]
    return native.DiodeClientError(code, msg)


def default_path_taken(reason):
    """One GEMM through the installed handler: Inductor's full list comes back, reason counted."""
    aten, triton = make_choices(mm_configs(256, 256, 256, 2, "DEFAULT"))
    out = finalize(V.choices, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(256, 256, 256))
    assert out == [aten] + triton
    s = torch_diode.get_prediction_stats()
    assert s["fallbacks"].get(reason, 0) >= 1, s
    assert s["model_selections"] == 0
    return s


def _corrupt_json(d):
    with open(os.path.join(d, "model.json"), "w") as f:
        f.write("{")


CASES = ["model_path_missing", "model_path_invalid", "model_invalid"]


@pytest.mark.parametrize("reason", CASES)
def test_bad_explicit_model(hook, caplog, reason):
    d = str(hook / "m")
    if reason == "model_path_invalid":
        os.makedirs(d)
    elif reason == "model_invalid":
        _corrupt_json(write_model_dir(d))
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        assert torch_diode.install(d) is False
    assert reason in caplog.text
    s = default_path_taken(reason)
    assert s["load_failures"] == {reason: 1} and s["installed"] and s["model"] is None


def test_bundle_without_native_library(hook, caplog, monkeypatch):
    # the real loading path: no libdiode_client.so where DIODE_CLIENT_LIB points
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setenv("DIODE_CLIENT_LIB", str(hook / "missing" / "libdiode_client.so"))
    b = make_bundle(str(hook / "bundle"))
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        assert torch_diode.install(b) is False
    assert "native_unavailable" in caplog.text and "libdiode_client.so" in caplog.text
    default_path_taken("native_unavailable")


def test_bundle_without_root_key(hook, monkeypatch):
    fake_native(monkeypatch, verify=lambda path, key: None)
    monkeypatch.delenv(sources.ENV_ROOT_KEY)
    assert torch_diode.install(make_bundle(str(hook / "bundle"))) is False
    default_path_taken("no_root_key")


def test_bundle_failing_verification(hook, caplog, monkeypatch):
    def verify(path, key):
        raise client_error("verify", "bundle.json: signed by unknown key 3f2a")
    fake_native(monkeypatch, verify=verify)
    b = make_bundle(str(hook / "bundle"))
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        assert torch_diode.install(b) is False
    assert "verification_failed" in caplog.text and "unknown key" in caplog.text
    default_path_taken("verification_failed")


def test_verified_bundle_is_used(hook, monkeypatch):
    seen = []
    fake_native(monkeypatch, verify=lambda path, key: seen.append((path, key)))
    b = make_bundle(str(hook / "bundle"))
    assert torch_diode.install(b) is True
    assert seen == [(os.path.abspath(b), "ab" * 32)]
    assert torch_diode.get_prediction_stats()["model"] == os.path.abspath(b)


def test_hub_http_error_falls_back_to_verified_cache(hook, caplog, monkeypatch):
    cached = make_bundle(str(hook / "cache" / HW / "3"), version_seed=3)
    calls = []

    def pull(url, key, root, cache_dir):
        calls.append(url)
        assert (key, root, cache_dir) == (HW, "ab" * 32, str(hook / "cache"))
        if url:
            raise client_error("http", f"GET {url}/v1/models/{key}/index: 503")
        return native.PullResult(cached, True, "served from the cache")

    fake_native(monkeypatch, pull=pull)
    monkeypatch.setenv(sources.ENV_HUB, "https://hub.example")
    assert [m["name"] for m in torch_diode.list_available_models()] == [f"{HW}/3"]
    with caplog.at_level(logging.DEBUG, logger="torch_diode"):
        assert torch_diode.install() is True
    assert calls == ["https://hub.example", ""]
    assert torch_diode.get_prediction_stats()["model"] == cached
    assert "503" in caplog.text


def test_hub_verification_failure_is_not_hidden_by_the_cache(hook, monkeypatch):
    make_bundle(str(hook / "cache" / HW / "3"))
    calls = []

    def pull(url, key, root, cache_dir):
        calls.append(url)
        raise client_error("verify", "index: rollback from version 3 to 2")

    fake_native(monkeypatch, pull=pull)
    monkeypatch.setenv(sources.ENV_HUB, "https://hub.example")
    assert torch_diode.install() is False
    assert calls == ["https://hub.example"]
    default_path_taken("verification_failed")


def test_hub_pull_success(hook, monkeypatch):
    def pull(url, key, root, cache_dir):
        return native.PullResult(make_bundle(os.path.join(cache_dir, key, "7"), version_seed=7), False, "")
    fake_native(monkeypatch, pull=pull)
    monkeypatch.setenv(sources.ENV_HUB, "https://hub.example")
    assert torch_diode.install() is True
    assert torch_diode.get_prediction_stats()["model"].endswith(os.path.join(HW, "7"))


def test_cache_model_for_other_hardware_is_refused(hook, monkeypatch):
    d = make_bundle(str(hook / "cache" / HW / "1"), hardware_key="nvidia-a100-sxm4-80gb")
    fake_native(monkeypatch, pull=lambda url, key, root, cache_dir: native.PullResult(d, True, ""))
    assert torch_diode.install() is False
    default_path_taken("hardware_mismatch")


def test_no_model_anywhere(hook):
    assert torch_diode.install() is False
    default_path_taken("no_model")


def test_runtime_errors_fall_back_and_are_counted(hook, caplog, monkeypatch):
    d = write_model_dir(str(hook / "m"))
    assert torch_diode.install(d, top_k=3)
    ranker = api.active_state().ranker
    monkeypatch.setattr(ranker.model.module, "forward", lambda x: torch.full((x.shape[0],), float("nan")))
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        default_path_taken("non_finite_prediction")
        default_path_taken("non_finite_prediction")
    assert caplog.text.count("non_finite_prediction") == 1  # warned once, counted every time
    assert torch_diode.get_prediction_stats()["fallbacks"]["non_finite_prediction"] == 2

    monkeypatch.setattr(ranker.model.module, "forward", lambda x: (_ for _ in ()).throw(RuntimeError("boom")))
    ranker.clear_cache()
    default_path_taken("prediction_error")

    class BrokenInputs(FakeMMInputs):
        def strides_hinted(self):
            raise AttributeError("no V.graph")
    aten, triton = make_choices(mm_configs(64, 64, 64, 2, "DEFAULT"))
    out = finalize(V.choices, {"aten::mm": [aten], "triton::mm": triton}, BrokenInputs(64, 64, 64))
    assert out == [aten] + triton
    assert torch_diode.get_prediction_stats()["fallbacks"]["feature_error"] == 1

    torch_diode.set_options(fallback="raise")
    with pytest.raises(AttributeError, match="no V.graph"):
        finalize(V.choices, {"aten::mm": [aten], "triton::mm": triton}, BrokenInputs(64, 64, 64))


def test_register_model_switches_the_installed_model(hook, tmp_path):
    a = write_model_dir(str(tmp_path / "a"), seed=1)
    b = write_model_dir(str(tmp_path / "b"), seed=2)
    assert torch_diode.install(a)
    u = inductor_config.inductor_choices_class.uuid()
    info = torch_diode.register_model(b)
    assert info["path"] == os.path.abspath(b)
    assert torch_diode.get_prediction_stats()["model"] == os.path.abspath(b)
    assert inductor_config.inductor_choices_class.uuid() != u
    listed = torch_diode.list_available_models()
    assert listed[0]["path"] == os.path.abspath(b) and listed[0]["model_id"] == info["model_id"][:16]
    shutil.rmtree(b)
    with pytest.raises(sources.SourceError):
        torch_diode.register_model(b)
