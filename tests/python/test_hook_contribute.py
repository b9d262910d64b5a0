"""Opt-in feedback (issue 20): TORCH_DIODE_CONTRIBUTE=DIR writes the timings Inductor
measured for the choices the hook offered as a community dataset (wire v2, method
"inductor-autotune"), once at exit. Off by default."""
import json
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")

import torch_diode  # noqa: E402
from test_hook_model import write_model_dir  # noqa: E402
from test_hook_ranking import (M, K, N, FakeMMInputs, finalize, make_choices,  # noqa: E402,F401
                               model, real_configs)
from torch_diode import dataset, wire  # noqa: E402
from torch_diode.hardware import hardware_key  # noqa: E402
from torch_diode.hook import api, compat, contribute, detect, extract  # noqa: E402
from torch_diode.hook.choices import HookState, choices_class  # noqa: E402
from torch_diode.hook.ranking import Options, Ranker  # noqa: E402
from torch_diode.hook.stats import Stats  # noqa: E402

HW = wire.HardwareId(vendor="nvidia", device_name="NVIDIA H100 80GB HBM3", arch="sm_90",
                     compute_capability="9.0", sm_count=132, memory_bytes=85 << 30, driver_version="550",
                     runtime_version="12.4", torch_version=torch.__version__, triton_version="3.3")


class FakeChoice:
    """A ChoiceCaller as Inductor's feedback saver sees it: annotations["ktc"] is the KTC."""

    def __init__(self, ktc):
        self.annotations = {"ktc": ktc}


def _savers():
    from torch._inductor import select_algorithm as sa
    return sa.get_algorithm_selector_cache().feedback_saver_fns


def _ours(exits):
    return [f for f in exits if isinstance(getattr(f, "__self__", None), contribute.Contributor)]


@pytest.fixture
def exits(monkeypatch):
    """atexit.register calls, captured instead of registered."""
    calls = []
    monkeypatch.setattr(contribute.atexit, "register", lambda fn, *a: calls.append(fn))
    yield calls
    contribute.disable(flush=False)


def test_contributor_writes_a_dataset_with_inductor_autotune_method(tmp_path, exits):
    c = contribute.enable(str(tmp_path / "out"), HW)
    assert _ours(exits) == [c.flush] and contribute.active() is c
    p1, p2 = wire.Problem(op="mm", m=64, n=128, k=256), wire.Problem(op="bmm", batch=4, m=32, n=32, k=32)
    k1, k2, k3 = object(), object(), object()
    c1 = wire.KernelConfig(block_m=64, block_n=64, block_k=32, group_m=8, num_stages=3, num_warps=4)
    c2 = wire.KernelConfig(block_m=128, block_n=64, block_k=32, group_m=8, num_stages=4, num_warps=8)
    c3 = wire.KernelConfig(template="aten")
    c.offer(p1, [(k1, c1), (k2, c2)])
    c.offer(p2, [(k3, c3)])
    # what Inductor's feedback saver passes after autotuning p1: ms per choice, inf = failed
    _savers()[-1]({FakeChoice(k1): 0.0125, FakeChoice(k2): float("inf"), FakeChoice(object()): 1.0},
                  "mm", [], [], None, {})
    path = contribute.disable()
    assert path and os.path.dirname(path) == str(tmp_path / "out") and contribute.active() is None
    d = dataset.load_dataset(path)
    assert d.hardware_key == hardware_key(HW) and d.hardware_key.startswith("nvidia-h100") and len(d.shards) == 1
    s = d.shards[0]
    assert s.method == wire.CollectionMethod("inductor-autotune", contribute.COLLECTOR)
    assert s.wire_version == 2 and s.hardware == HW
    assert s.problems == [p1]  # p2 was offered but never timed
    got = {(r.config, r.status, r.median_us) for r in s.records}
    assert got == {(c1, "ok", 12.5), (c2, "compile_error", 0.0)}
    assert c.flush() == path  # one file per process: a second flush writes nothing new
    assert len(os.listdir(tmp_path / "out")) == 1


def test_nothing_timed_writes_nothing(tmp_path, exits):
    contribute.enable(str(tmp_path / "out"), HW)
    assert contribute.disable() is None and not (tmp_path / "out").exists()


def test_topk_handler_offers_what_it_hands_over(model, real_configs, tmp_path, exits):
    c = contribute.enable(str(tmp_path / "out"), HW)
    aten, triton = make_choices(real_configs)
    h = choices_class()(HookState(Ranker(model), Options(top_k=3, threshold=0.0, mode="topk", aten_shortcut=False), Stats()))
    out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    assert len(out) == 4
    # Inductor benchmarks exactly what it was handed
    _savers()[-1]({FakeChoice(k): 0.01 * (i + 1) for i, k in enumerate(out)}, "mm", [], [], None, {})
    # predict mode benchmarks nothing and offers nothing
    hp = choices_class()(HookState(Ranker(model), Options(mode="predict"), Stats()))
    a2, t2 = make_choices(real_configs)
    assert len(finalize(hp, {"aten::mm": [a2], "triton::mm": t2}, FakeMMInputs(M, N, K))) == 1
    assert c.record_count == 4
    d = dataset.decode_dataset(c.shard_bytes())
    s = d.shards[0]
    assert s.problems == [wire.Problem(op="mm", m=M, n=N, k=K)]
    want = {extract.config_from_ktc(k) for k in out[1:]} | {wire.KernelConfig(template="aten")}
    assert {r.config for r in s.records} == want
    assert all(r.status == "ok" and r.repeats == 1 for r in s.records)


def test_off_by_default_and_on_with_the_environment(tmp_path, monkeypatch, exits):
    api.uninstall()
    cfg, tl = compat.get_choices_config(), compat.thread_handler()
    monkeypatch.setattr(detect, "detect_hardware", lambda *a: HW)
    n = len(_savers())
    try:
        monkeypatch.delenv(contribute.ENV_CONTRIBUTE, raising=False)
        torch_diode.install(write_model_dir(str(tmp_path / "m")))
        assert contribute.active() is None and len(_savers()) == n and _ours(exits) == []
        api.uninstall()
        monkeypatch.setenv(contribute.ENV_CONTRIBUTE, str(tmp_path / "fb"))
        torch_diode.install(write_model_dir(str(tmp_path / "m")))
        c = contribute.active()
        assert c is not None and c.directory == str(tmp_path / "fb") and c.hardware == HW
        assert len(_savers()) == n + 1 and _ours(exits) == [c.flush]
        # no GPU: nothing is recorded (warned)
        contribute.disable(flush=False)
        api.uninstall()
        monkeypatch.setattr(detect, "detect_hardware", lambda *a: None)
        torch_diode.install(write_model_dir(str(tmp_path / "m")))
        assert contribute.active() is None
    finally:
        api.uninstall()
        contribute.disable(flush=False)
        compat.set_choices_config(cfg)
        compat.set_thread_handler(tl)
    assert len(_savers()) == n


def test_cpp_reads_the_contributed_dataset(tmp_path, exits):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    build = os.environ.get("DIODE_BUILD_DIR") or os.path.join(root, "build")
    exe = os.path.join(build, "cli", "diode")
    if not os.path.isfile(exe):
        pytest.skip("C++ build not found (cli/diode; set DIODE_BUILD_DIR)")
    c = contribute.enable(str(tmp_path / "out"), HW)
    k = object()
    c.offer(wire.Problem(op="mm", m=64, n=64, k=64), [(k, wire.KernelConfig(block_m=32, block_n=32, block_k=32,
                                                                          group_m=8, num_stages=2, num_warps=4))])
    _savers()[-1]({FakeChoice(k): 0.005}, "mm", [], [], None, {})
    path = contribute.disable()
    out = subprocess.run([exe, "dataset", "stats", path, "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    assert j["records"] == 1 and j["shards"] == 1
    assert "inductor-autotune" in json.dumps(j["timing_methods"])
