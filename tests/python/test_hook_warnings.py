"""Every reason the hook ends up without a model is warned about once per cause, on the
`torch_diode` logger, with what to do; repeats go to debug and every occurrence is still
counted in get_prediction_stats() (issue 17: before, the import path logged at debug only)."""
import logging
import os

import pytest

torch = pytest.importorskip("torch")

import torch_diode  # noqa: E402
from test_hook_fallbacks import client_error, default_path_taken, fake_native, hook, make_bundle  # noqa: E402,F401
from torch_diode import native  # noqa: E402
from torch_diode.hook import api, sources  # noqa: E402

HW = "nvidia-h100-80gb"
HUB = "https://hub.example"


@pytest.fixture
def fresh(hook, monkeypatch):
    """The `hook` slate plus an empty set of already-warned causes."""
    monkeypatch.setattr(api.PROCESS, "warned", set(), raising=False)
    return hook


def warnings_of(caplog, family: bool = False):
    """The hook's WARNINGs about the GEMM model, or (family=True) about the other decision
    families' models (sources.family_model: "no scaled_mm model ...")."""
    return [m for m in (r.getMessage() for r in caplog.records
                        if r.name == "torch_diode" and r.levelno >= logging.WARNING)
            if m.startswith("torch_diode: no scaled_mm model") == family]


def _pull_failing(monkeypatch, hub_error, cache_error=None):
    """The hub answers with `hub_error`; the cache (asked with url "") with `cache_error`."""
    def pull(url, key, root, cache_dir):
        raise hub_error if url else (cache_error or client_error("io", f"{cache_dir}/{key}: no current bundle"))
    fake_native(monkeypatch, pull=pull)
    monkeypatch.setenv(sources.ENV_HUB, HUB)


def setup_no_root_key(tmp, monkeypatch):
    make_bundle(str(tmp / "cache" / HW / "1"))
    fake_native(monkeypatch, pull=lambda *a: pytest.fail("pulled without a root key"))
    monkeypatch.delenv(sources.ENV_ROOT_KEY)


def setup_verification_failed(tmp, monkeypatch):
    _pull_failing(monkeypatch, client_error("verify", "bundle.json: signed by unknown key 3f2a"))


def setup_hub_unreachable(tmp, monkeypatch):
    _pull_failing(monkeypatch, client_error("network", f"{HUB}: connection refused"))


def setup_no_published_model(tmp, monkeypatch):
    # what the C client says when the hub has no index.json for this hardware key
    _pull_failing(monkeypatch, client_error(
        "http", f"index.json: hub answered HTTP 404 for {HUB}/v1/models/{HW}/index"))


def setup_hub_pull_failed(tmp, monkeypatch):
    _pull_failing(monkeypatch, client_error("http", f"weights.msgpack: hub answered HTTP 403 for {HUB}/x"))


def setup_no_cached_model(tmp, monkeypatch):
    make_bundle(str(tmp / "cache" / HW / "2"))  # a cache entry the client cannot serve

    def pull(url, key, root, cache_dir):
        raise client_error("io", f"{cache_dir}/{key}/current: missing")
    fake_native(monkeypatch, pull=pull)


def setup_native_unavailable(tmp, monkeypatch):
    # the real loader, pointed at a library that is not there
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setenv("DIODE_CLIENT_LIB", str(tmp / "missing" / "libdiode_client.so"))
    monkeypatch.setenv(sources.ENV_HUB, HUB)


def setup_hardware_mismatch(tmp, monkeypatch):
    d = make_bundle(str(tmp / "cache" / HW / "1"), hardware_key="nvidia-a100-sxm4-80gb")
    fake_native(monkeypatch, pull=lambda *a: native.PullResult(d, True, ""))


# reason -> (setup, a piece of the remedy the warning must carry)
CASES = {
    "no_root_key": (setup_no_root_key, "set DIODE_ROOT_PUBKEY"),
    "verification_failed": (setup_verification_failed, "DIODE_ROOT_PUBKEY is this hub's root key"),
    "hub_unreachable": (setup_hub_unreachable, "hub is up and reachable"),
    "no_published_model": (setup_no_published_model, "no model for this hardware key"),
    "hub_pull_failed": (setup_hub_pull_failed, "check DIODE_HUB_URL"),
    "no_cached_model": (setup_no_cached_model, "set DIODE_HUB_URL to pull one"),
    "native_unavailable": (setup_native_unavailable, "set DIODE_CLIENT_LIB"),
    "hardware_mismatch": (setup_hardware_mismatch, "check DIODE_HARDWARE_KEY"),
}


@pytest.mark.parametrize("reason", list(CASES))
def test_import_path_warns_once_per_cause_and_counts_every_time(fresh, caplog, monkeypatch, reason):
    setup, remedy = CASES[reason]
    setup(fresh, monkeypatch)
    with caplog.at_level(logging.DEBUG, logger="torch_diode"):
        assert api.auto_install() is False  # what `import torch_diode` runs
        first = warnings_of(caplog)
        assert api.auto_install() is False  # the same cause again: no second warning
    assert len(first) == 1, first
    assert f"({reason})" in first[0] and remedy in first[0], first[0]
    assert warnings_of(caplog) == first
    # a cause that also keeps the scaled_mm model away (no native client) is warned about
    # once for that family too, never again on the repeat
    assert len(warnings_of(caplog, family=True)) <= 1
    assert reason in caplog.text.split(first[0], 1)[1]  # the repeat is still logged, at debug
    assert torch_diode.get_prediction_stats()["load_failures"] == {reason: 2}


def test_no_model_configured_on_a_gpu_is_warned_and_counted_per_gemm(fresh, caplog):
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        assert api.auto_install() is False
        assert torch_diode.install() is False  # explicit install: same cause, not repeated
    (w,) = warnings_of(caplog)
    assert "(no_model)" in w and HW in w and "DIODE_HUB_URL and DIODE_ROOT_PUBKEY" in w
    s = default_path_taken("no_model")  # the installed handler counts it per GEMM
    assert s["no_model_reason"] == "no_model" and s["total_fallbacks"] == 1


def test_no_gpu_is_quiet_at_import_unless_a_hub_is_configured(fresh, caplog, monkeypatch):
    monkeypatch.setitem(api.PROCESS.hardware, "hw", {"device": None, "hardware_key": None, "reason": "no CUDA device"})
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        assert api.auto_install() is False  # e.g. `import torch_diode.wire` on a CPU machine
    assert warnings_of(caplog) == []
    monkeypatch.setenv(sources.ENV_HUB, HUB)  # the user asked for a model: say why there is none
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        assert api.auto_install() is False
    (w,) = warnings_of(caplog)
    assert "(no_hardware)" in w and "no CUDA device" in w and "set DIODE_HARDWARE_KEY" in w


def test_explicit_install_without_gpu_warns(fresh, caplog, monkeypatch):
    monkeypatch.setitem(api.PROCESS.hardware, "hw", {"device": None, "hardware_key": None, "reason": "no CUDA device"})
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        assert torch_diode.install() is False
    (w,) = warnings_of(caplog)
    assert "(no_hardware)" in w
    default_path_taken("no_hardware")


def test_each_named_path_is_its_own_cause(fresh, caplog):
    a, b = str(fresh / "a"), str(fresh / "b")
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        torch_diode.install(a)
        torch_diode.install(a)
        torch_diode.install(b)
    w = warnings_of(caplog)
    assert len(w) == 2 and a in w[0] and b in w[1]
    assert all("(model_path_missing)" in m and "register_model()" in m for m in w)
    assert torch_diode.get_prediction_stats()["load_failures"] == {"model_path_missing": 3}


def test_every_reason_with_a_remedy_is_documented():
    """Users look a warning's reason up in docs/hook.md (Fallbacks): it must be there."""
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "hook.md")).read()
    for reason in api.REMEDIES:
        assert f"`{reason}`" in doc, reason


def test_warning_reaches_stderr_without_logging_configured(tmp_path):
    """A plain script (no logging setup) must see the warning: the package adds no
    NullHandler, so Python's last-resort handler prints WARNING+ on stderr."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DIODE_", "TORCH_DIODE_"))}
    env.update(PYTHONPATH=os.path.join(root, "python") + os.pathsep + env.get("PYTHONPATH", ""),
               DIODE_HARDWARE_KEY=HW, DIODE_CACHE_DIR=str(tmp_path / "empty-cache"),
               DIODE_PACKAGE_MODELS="0")  # else the shipped H100 model is found
    code = "import torch_diode; torch_diode.install(); print('DONE', torch_diode.is_installed())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and "DONE True" in r.stdout, r.stderr
    assert r.stderr.count("(no_model)") == 1, r.stderr  # import + install(): one cause, one warning
    assert "set DIODE_HUB_URL and DIODE_ROOT_PUBKEY" in r.stderr


@pytest.fixture
def gemv_table_env(fresh, monkeypatch):
    """`fresh` plus a one-entry GEMV table named by TORCH_DIODE_GEMV_TABLE (not looked up yet)."""
    import json
    from test_hook_gemv import CFG, table_doc
    from torch_diode.hook import gemv
    p = fresh / "gemv.json"
    p.write_text(json.dumps(table_doc([{"dtype": "float16", "layout": "inner", "n": 4096, "k": 4096, "config": CFG,
                                        "reduction_us": 10.0, "cublas_us": 13.0}], hardware=HW)))
    monkeypatch.setenv(gemv.ENV_TABLE, str(p))
    monkeypatch.setattr(gemv.PROCESS, "gemv_tables", {})
    prior = api.get_options()
    yield p
    api.uninstall()
    api.set_options(mode=prior["mode"], gemv_reduction=prior["gemv_reduction"])


def test_a_gpu_without_a_model_but_with_a_gemv_table_is_installed_at_import(gemv_table_env, caplog):
    api.set_options(mode="predict", gemv_reduction=True)
    api.uninstall()
    with caplog.at_level(logging.INFO, logger="torch_diode"):
        assert api.auto_install() is True        # for the M = 1 reductions alone
    assert torch_diode.is_installed()
    (w,) = warnings_of(caplog)                   # the missing model is still warned about, once
    assert "(no_model)" in w
    assert any("without a model (no_model) for the GEMV table's M = 1 reductions" in r.getMessage()
               and str(gemv_table_env) in r.getMessage() for r in caplog.records)
    s = default_path_taken("no_model")           # every other GEMM: Inductor's default path, counted
    assert s["no_model_reason"] == "no_model"
    assert s["gemv_table"]["source"] == str(gemv_table_env) and s["gemv_table"]["entries"] == 1


def test_without_a_model_no_table_topk_mode_or_gpu_means_not_installed_at_import(gemv_table_env, monkeypatch):
    api.set_options(mode="topk", gemv_reduction=True)        # the table is predict mode's only
    api.uninstall()
    assert api.auto_install() is False and not torch_diode.is_installed()
    api.set_options(mode="predict", gemv_reduction=False)    # the reduction switched off
    api.uninstall()
    assert api.auto_install() is False and not torch_diode.is_installed()
    api.set_options(gemv_reduction=True)
    api.uninstall()
    # a hardware key without a GPU (DIODE_HARDWARE_KEY on a CPU machine): nothing to reduce on
    monkeypatch.setitem(api.PROCESS.hardware, "hw", {"device": None, "hardware_key": HW,
                                              "hardware_key_source": "DIODE_HARDWARE_KEY"})
    assert api.auto_install() is False and not torch_diode.is_installed()
    monkeypatch.setitem(api.PROCESS.hardware, "hw", {"device_name": "NVIDIA H100 80GB HBM3", "hardware_key": HW})
    monkeypatch.delenv("TORCH_DIODE_GEMV_TABLE")             # a GPU, and no table for it (none ships for HW)
    assert api.auto_install() is False and not torch_diode.is_installed()
