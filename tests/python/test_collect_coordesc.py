"""The coordinate-descent recorder around Inductor's real CoordescTuner.

The tuner is torch's own (torch._inductor.runtime.coordinate_descent_tuner); only the
kernel is simulated: a launch config's time is a known function of XBLOCK and
num_warps, so the walk's trials and winner are known. No GPU or Triton is needed: the
tuner reads a config's ``kwargs``, ``num_warps`` and ``num_stages`` only.
"""
import json

import pytest

pytest.importorskip("torch")
from torch._inductor.runtime.coordinate_descent_tuner import CoordescTuner  # noqa: E402

from torch_diode.collect import coordesc  # noqa: E402


from _coordesc_fakes import Cfg, Kernel, tune  # noqa: E402


def kernel_ms(cfg):
    """A pointwise kernel whose best launch is XBLOCK=256, num_warps=8."""
    x, w = cfg.kwargs["XBLOCK"], cfg.num_warps
    return 1.0 + abs(x.bit_length() - 9) * 0.25 + abs(w.bit_length() - 4) * 0.1


def tuner():
    return CoordescTuner(name="triton_poi_fused_add_0", size_hints={"x": 1 << 20},
                         inductor_meta={"warp_size": 32, "max_threads_per_block": 1024})


class FakeAutotuner:
    """The CachingAutotuner attributes kernel_features reads."""
    heuristic_type = type("HeuristicType", (), {"name": "POINTWISE"})()
    size_hints = {"x": 1 << 20}
    inductor_meta = {"kernel_name": "triton_poi_fused_add_0", "num_load": 2, "num_store": 1,
                     "num_reduction": 0, "backend_hash": "ignored", "warp_size": 32}
    triton_meta = {"signature": {"in_ptr0": "*bf16", "out_ptr0": "*bf16", "xnumel": "i32"}}
    fn = type("Fn", (), {"src": "def triton_poi_fused_add_0(in_ptr0, out_ptr0, xnumel): ..."})()


def test_records_every_trial_and_the_winner_of_the_real_tuner(tmp_path):
    path = tmp_path / "coordesc.jsonl"
    seen = []

    def bench(cfg):
        seen.append(coordesc.config_dict(cfg))
        return kernel_ms(cfg)

    with coordesc.CoordescRecorder(str(path)) as rec:
        rec.tags = {"entry": "decode_b1"}
        best = tuner().autotune(bench, Cfg({"XBLOCK": 64}, num_warps=2))
        rec.tags = {"entry": "prefill_1x128"}
    assert (best.kwargs["XBLOCK"], best.num_warps) == (256, 8)
    [r] = rec.records
    assert r["name"] == "triton_poi_fused_add_0"
    assert r["features"]["size_hints"] == {"x": 1 << 20}
    # Every config the tuner benchmarked, in order, with the time the kernel gave.
    assert [t["config"] for t in r["trials"]] == seen
    assert all(t["ms"] == pytest.approx(kernel_ms(Cfg({"XBLOCK": t["config"]["XBLOCK"]},
                                                      t["config"]["num_warps"])))
               for t in r["trials"])
    assert r["baseline"] == {"config": {"XBLOCK": 64, "num_warps": 2, "num_stages": 1},
                             "ms": pytest.approx(1.0 + 2 * 0.25 + 2 * 0.1)}
    assert r["best"] == {"config": {"XBLOCK": 256, "num_warps": 8, "num_stages": 1}, "ms": pytest.approx(1.0)}
    assert r["tune_s"] >= 0
    assert r["tags"] == {"entry": "decode_b1"}
    # Appended to the file as it finished; load() reads back the same record.
    assert coordesc.load(str(path)) == [json.loads(json.dumps(r))]


def test_uninstall_restores_the_tuner():
    orig = CoordescTuner.__dict__["autotune"]
    rec = coordesc.CoordescRecorder()
    rec.install()
    assert CoordescTuner.__dict__["autotune"] is not orig
    with pytest.raises(RuntimeError):
        rec.install()
    rec.uninstall()
    assert CoordescTuner.__dict__["autotune"] is orig
    tuner().autotune(kernel_ms, Cfg({"XBLOCK": 64}))
    assert rec.records == []


def test_a_config_that_fails_is_recorded_without_a_time():
    def bench(cfg):
        if cfg.kwargs["XBLOCK"] == 128:
            raise RuntimeError("out of resources")
        return kernel_ms(cfg)

    with coordesc.CoordescRecorder() as rec:
        best = tuner().autotune(bench, Cfg({"XBLOCK": 64}, num_warps=8))
    [r] = rec.records
    failed = [t for t in r["trials"] if t["ms"] is None]
    assert [t["config"]["XBLOCK"] for t in failed] == [128]
    # The walk cannot pass the failing XBLOCK=128, so it stays at 64.
    assert best.kwargs["XBLOCK"] == 64 and r["best"]["config"]["XBLOCK"] == 64


def test_kernel_features_of_a_caching_autotuner():
    f = coordesc.kernel_features(FakeAutotuner())
    assert f["heuristic_type"] == "POINTWISE"
    assert f["size_hints"] == {"x": 1 << 20}
    assert (f["num_load"], f["num_store"], f["num_reduction"]) == (2, 1, 0)
    assert "backend_hash" not in f
    assert f["signature"] == {"in_ptr0": "*bf16", "out_ptr0": "*bf16", "xnumel": "i32"}
    # The source hash is free of the kernel's name: the same code named differently by
    # another compile hashes the same; other size hints do not.
    other = FakeAutotuner()
    other.inductor_meta = dict(other.inductor_meta, kernel_name="triton_poi_fused_add_7")
    other.fn = type("Fn", (), {"src": FakeAutotuner.fn.src.replace("_0", "_7")})()
    assert coordesc.kernel_features(other)["source_sha256"] == f["source_sha256"]
    other.size_hints = {"x": 1 << 10}
    assert coordesc.kernel_features(other)["source_sha256"] != f["source_sha256"]


def test_inductors_own_tuning_method_gives_the_record_its_kernel_features():
    # torch's CachingAutotuner._coordinate_descent_tuning, wrapped by CURRENT_KERNEL, runs the walk.
    k = Kernel(size_hints={"x": 1 << 20, "r0_": 1024},
               ms=lambda c: 1.0 + abs(c.kwargs["XBLOCK"].bit_length() - 9) * 0.1)
    with coordesc.CoordescRecorder() as rec:
        best = tune(k, Cfg({"XBLOCK": 1024, "R0_BLOCK": 8}, num_warps=4))
    assert best.kwargs["XBLOCK"] == 256
    assert k.seen_as_current and all(x is k for x in k.seen_as_current)
    assert coordesc.CURRENT_KERNEL.get() is None
    [r] = rec.records
    assert r["features"]["heuristic_type"] == "REDUCTION"
    assert r["features"]["num_load"] == 1
    assert r["best"]["config"]["XBLOCK"] == 256
    assert [t["config"] for t in r["trials"]] == [coordesc.config_dict(c) for c in k.timed]
    assert k.saved == [best]          # Inductor saved its walk's winner, as without the recorder


def test_load_skips_a_torn_last_line_and_names_a_bad_one(tmp_path):
    good = {"format": coordesc.FORMAT, "name": "k", "features": {}, "baseline": {"config": {}, "ms": 2.0},
            "best": {"config": {"XBLOCK": 8}, "ms": 1.0}, "trials": [{"config": {}, "ms": 2.0}], "tune_s": 0.5}
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps(good) + "\n" + '{"format": "torch_di')
    assert coordesc.load(str(p)) == [good]
    p.write_text('{"oops"\n' + json.dumps(good) + "\n")
    with pytest.raises(ValueError, match=r"c.jsonl:1: not a JSON record"):
        coordesc.load(str(p))
    p.write_text(json.dumps(dict(good, format="other/1")) + "\n")
    with pytest.raises(ValueError, match=r"c.jsonl:1: format 'other/1'"):
        coordesc.load(str(p))


def test_summarize():
    def rec(base, best, changed, n, s, kind):
        return {"baseline": {"config": {"XBLOCK": 1}, "ms": base},
                "best": {"config": {"XBLOCK": 2 if changed else 1}, "ms": best},
                "trials": [{}] * n, "tune_s": s, "features": {"heuristic_type": kind}}
    s = coordesc.summarize([rec(4.0, 1.0, True, 5, 1.5, "POINTWISE"), rec(1.0, 1.0, False, 3, 0.5, "REDUCTION"),
                            rec(None, 1.0, False, 1, 9.0, "REDUCTION")])   # no baseline time: left out
    assert s["kernels"] == 2
    assert s["kernels_by_heuristic_type"] == {"POINTWISE": 1, "REDUCTION": 1}
    assert s["configs_timed"] == 8
    assert s["tune_s"] == pytest.approx(2.0)
    assert s["kernels_improved"] == 1
    assert s["speedup_geomean"] == pytest.approx(2.0)          # sqrt(4 * 1)
    assert (s["baseline_ms"], s["best_ms"]) == (pytest.approx(5.0), pytest.approx(2.0))
    assert s["best_over_baseline_time"] == pytest.approx(2.0 / 5.0)


def test_uninstall_keeps_a_wrapper_installed_after_the_recorder():
    orig = CoordescTuner.__dict__["autotune"]
    rec = coordesc.CoordescRecorder().install()
    recorder_wrapper = CoordescTuner.__dict__["autotune"]
    calls = []

    def later(tuner, func, baseline, timing=None):     # e.g. the hook's predictor, installed later
        calls.append(1)
        return recorder_wrapper(tuner, func, baseline, timing)
    CoordescTuner.autotune = later
    try:
        rec.uninstall()
        assert CoordescTuner.__dict__["autotune"] is later      # not dropped
        tuner().autotune(kernel_ms, Cfg({"XBLOCK": 64}))
        assert calls == [1] and rec.records == []               # the recorder passes through
    finally:
        CoordescTuner.autotune = orig


def test_a_reinstalled_recorder_records_once_beneath_a_later_wrapper():
    orig = CoordescTuner.__dict__["autotune"]
    rec = coordesc.CoordescRecorder().install()
    first = CoordescTuner.__dict__["autotune"]
    CoordescTuner.autotune = lambda tuner, func, b, t=None: first(tuner, func, b, t)   # installed later
    later = CoordescTuner.__dict__["autotune"]
    try:
        rec.uninstall()                      # the first wrapper stays beneath, passing through
        rec.install()                        # a second wrapper above the later one
        tuner().autotune(kernel_ms, Cfg({"XBLOCK": 64}))
        assert len(rec.records) == 1
        rec.uninstall()
        assert CoordescTuner.__dict__["autotune"] is later
    finally:
        CoordescTuner.autotune = orig
