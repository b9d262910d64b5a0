"""Predict mode's launch configs (torch_diode/hook/launch_configs.py): the table format,
the lookup, and the wrapper around Inductor's real CoordescTuner.

Inductor's own CachingAutotuner._coordinate_descent_tuning and CoordescTuner run on
simulated kernels (tests/python/_coordesc_fakes.py), so no GPU or Triton is needed. Whether the
table's configs make real models faster is the GPU's question (bench/models.py
--record-coordesc, then a table, then diode_ma with TORCH_DIODE_LAUNCH_CONFIG_TABLE)."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
from torch._inductor.runtime.coordinate_descent_tuner import CoordescTuner  # noqa: E402

from torch_diode.collect import coordesc  # noqa: E402
from torch_diode.hook import api, launch_configs as lc  # noqa: E402


from _coordesc_fakes import Cfg, Kernel, tune  # noqa: E402


def features(k: Kernel) -> dict:
    return coordesc.kernel_features(k)


def entry(k: Kernel, config, ms=1.0, baseline_ms=2.0):
    f = features(k)
    return {"source_sha256": f["source_sha256"], "class": {c: f.get(c) for c in lc.CLASS_KEYS},
            "size_hints": f["size_hints"], "config": config, "ms": ms, "baseline_ms": baseline_ms}


def table_doc(entries):
    return {"format": lc.TABLE_FORMAT, "hardware": "test-gpu", "measured": {"records": 1}, "entries": entries}


def parse(doc) -> lc.LaunchConfigTable:
    return lc.parse_table(json.dumps(doc).encode(), "test")


BEST = {"XBLOCK": 1, "R0_BLOCK": 2048, "num_warps": 8}


def test_lookup_by_source_then_by_the_nearest_size_of_the_same_class():
    known = Kernel()
    t = parse(table_doc([entry(known, BEST)]))
    hit = t.lookup(features(known))
    assert hit[1] == "source" and hit[0].config_dict() == BEST
    # The same kernel compiled again under another name: the source hash masks the name.
    assert t.lookup(features(Kernel(name="triton_red_fused_sum_7")))[1] == "source"
    # Another size of the same class: within one octave in log2 size hints, the nearest entry.
    near = Kernel(size_hints={"x": 4096, "r0_": 16384})
    assert t.lookup(features(near))[1] == "nearest"
    assert t.lookup(features(Kernel(size_hints={"x": 4096, "r0_": 65536}))) is None     # three octaves
    assert t.lookup(features(Kernel(size_hints={"x": 4096}))) is None                   # other axes
    assert t.lookup(features(Kernel(num_load=2, size_hints={"x": 4096, "r0_": 16384}, src_extra="+"))) is None  # other class


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(format="x"), "format must be"),
    (lambda d: d.update(extra=1), "unknown keys"),
    (lambda d: d.pop("measured"), "measured"),
    (lambda d: d.update(entries=[]), "entries must be a list"),
    (lambda d: d["entries"][0].update(source_sha256="ABC"), "source_sha256 must be"),
    (lambda d: d["entries"].append(dict(d["entries"][0])), "a second entry"),
    (lambda d: d["entries"][0].update(config={"XBLOCK": 3}), "power of two"),
    (lambda d: d["entries"][0].update(config={"BLOCK_M": 64}), "config must be"),
    (lambda d: d["entries"][0].update(config={"num_warps": 64}), "num_warps must be an int in"),
    (lambda d: d["entries"][0].update(config={"num_stages": 9}), "num_stages must be an int in"),
    (lambda d: d["entries"][0].update(ms=-1), "ms must be a positive finite number of ms"),
    (lambda d: d["entries"][0]["class"].pop("signature"), "class must be"),
    (lambda d: d["entries"][0].update(size_hints={"x": 0}), "size_hints: x must be an int"),
    (lambda d: d["entries"][0].update(more=1), "exactly"),
])
def test_bad_tables_are_refused_with_the_reason(mutate, message):
    doc = table_doc([entry(Kernel(), BEST)])
    mutate(doc)
    with pytest.raises(lc.LaunchConfigTableError, match=message):
        parse(doc)


def test_oversized_and_non_json_tables_are_refused():
    with pytest.raises(lc.LaunchConfigTableError, match="over the"):
        lc.parse_table(b" " * (lc.MAX_TABLE_BYTES + 1), "big")
    with pytest.raises(lc.LaunchConfigTableError, match="not JSON"):
        lc.parse_table(b"\xff{", "bin")


@pytest.fixture
def predict_with_table(tmp_path, monkeypatch):
    """The hook in predict mode with a table that knows Kernel(); tables re-read."""
    p = tmp_path / "launch.json"
    p.write_text(json.dumps(table_doc([entry(Kernel(), BEST)])))
    monkeypatch.setenv(lc.ENV_TABLE, str(p))
    lc.PROCESS.launch_config_tables.clear()
    prior = api.get_options()
    api.install(mode="predict", force=True)
    api.reset_prediction_stats()
    yield p
    api.uninstall()
    api.set_options(mode=prior["mode"])
    lc.PROCESS.launch_config_tables.clear()


def faster_at(x: int):
    """A kernel's time: best at XBLOCK=x, R0_BLOCK=2048, num_warps=8."""
    return lambda c: (1.0 + abs(c.kwargs["XBLOCK"].bit_length() - x.bit_length()) * 0.2
                      + abs(c.kwargs.get("R0_BLOCK", 2048).bit_length() - 12) * 0.1 + abs(c.num_warps.bit_length() - 4) * 0.1)


START = Cfg({"XBLOCK": 8, "R0_BLOCK": 512}, num_warps=4)


def test_a_known_kernel_takes_the_tables_config_after_two_timings(predict_with_table):
    k = Kernel(ms=faster_at(1))
    best = tune(k, START)
    # The start and the table's config, each timed once: no walk.
    assert k.timed == [START, Cfg({"XBLOCK": 1, "R0_BLOCK": 2048}, num_warps=8)]
    assert best == Cfg({"XBLOCK": 1, "R0_BLOCK": 2048}, num_warps=8)
    assert k.saved == [best]      # Inductor caches it as coordinate descent's winner
    assert best.found_by_coordesc
    st = api.get_prediction_stats()
    assert st["launch_configs"] == {"predicted:source": 1}
    assert st["launch_config_table"]["entries"] == 1
    assert st["launch_config_table"]["source"] == str(predict_with_table)


def test_where_the_start_is_faster_the_start_is_kept(predict_with_table):
    k = Kernel(ms=lambda c: 1.0 if c == START else 2.0)
    assert tune(k, START) == START
    assert len(k.timed) == 2 and k.saved == [START]
    assert api.get_prediction_stats()["launch_configs"] == {"start_faster:source": 1}


def test_a_table_config_equal_to_the_start_is_the_start_untimed(predict_with_table):
    start = Cfg({"XBLOCK": 1, "R0_BLOCK": 2048}, num_warps=8)     # what the table says
    k = Kernel(ms=faster_at(1))
    best = tune(k, start)
    assert best is not None and best == start and k.timed == []
    assert best.found_by_coordesc      # Inductor marks the launcher's own config
    assert api.get_prediction_stats()["launch_configs"] == {"same_as_start:source": 1}


def test_a_table_config_that_fails_here_makes_the_kernel_walk(predict_with_table):
    def ms(c):
        if c.kwargs["XBLOCK"] == 1 and c.kwargs["R0_BLOCK"] == 2048:
            raise RuntimeError("out of resources")
        return faster_at(8)(c)
    k = Kernel(ms=ms)
    best = tune(k, START)
    assert len(k.timed) > 2 and best.kwargs["XBLOCK"] == 8
    assert k.timed.count(START) == 1          # the walk reuses the start's time
    assert k.saved == [best]      # Inductor's own walk, cached as usual
    assert api.get_prediction_stats()["launch_configs"] == {"tuned:entry_failed_here": 1}


def test_an_unknown_kernel_walks_as_before(predict_with_table):
    k = Kernel(num_load=3, src_extra=" tl.load(in_ptr1)", ms=faster_at(8))
    best = tune(k, START)
    assert len(k.timed) > 2 and best.kwargs["XBLOCK"] == 8
    assert api.get_prediction_stats()["launch_configs"] == {"tuned:no_entry": 1}


def test_a_config_this_kernel_cannot_take_is_not_forced(predict_with_table):
    # A persistent reduction's config has no R0_BLOCK, which the table's config sets.
    k = Kernel()
    tune(k, Cfg({"XBLOCK": 8}))
    assert len(k.timed) > 2
    assert api.get_prediction_stats()["launch_configs"] == {"tuned:entry_not_valid_here": 1}


def test_a_nearest_entry_beyond_this_kernels_limits_is_not_forced(tmp_path, monkeypatch):
    # The table knows a kernel of x size hint 64 at XBLOCK=64; this one, the nearest of its
    # class, has x hint 32: XBLOCK=64 is beyond the walk's bound (min(TRITON_MAX_BLOCK, hint)).
    big = Kernel(size_hints={"x": 64, "r0_": 8192})
    p = tmp_path / "t.json"
    p.write_text(json.dumps(table_doc([entry(big, {"XBLOCK": 64, "num_warps": 8})])))
    monkeypatch.setenv(lc.ENV_TABLE, str(p))
    lc.PROCESS.launch_config_tables.clear()
    api.install(mode="predict", force=True)
    api.reset_prediction_stats()
    try:
        small = Kernel(size_hints={"x": 32, "r0_": 8192}, src_extra="#small")
        assert small.coordesc_tuner.value_too_large("XBLOCK", 64)
        tune(small, Cfg({"XBLOCK": 8, "R0_BLOCK": 512}))
        assert api.get_prediction_stats()["launch_configs"] == {"tuned:entry_not_valid_here": 1}
        cfg = lc.predicted_config(small.coordesc_tuner, Cfg({"XBLOCK": 8, "R0_BLOCK": 512}), {"num_warps": 64})
        assert cfg is None        # beyond the GPU's warps (1024 threads / 32)
    finally:
        api.uninstall()
        lc.PROCESS.launch_config_tables.clear()


def test_without_the_hook_in_predict_mode_every_kernel_walks(predict_with_table):
    api.uninstall()
    k = Kernel(ms=faster_at(8))
    tune(k, START)
    assert len(k.timed) > 2


def test_a_broken_table_is_logged_and_every_kernel_walks(tmp_path, monkeypatch, caplog):
    p = tmp_path / "broken.json"
    p.write_text("{}")
    monkeypatch.setenv(lc.ENV_TABLE, str(p))
    lc.PROCESS.launch_config_tables.clear()
    with caplog.at_level("WARNING", logger="torch_diode"):
        assert lc.load_table() is None
        assert lc.load_table() is None
    assert [r.getMessage() for r in caplog.records].count(
        f"torch_diode: launch-config table not used: {p}: format must be '{lc.TABLE_FORMAT}'") == 1
    lc.PROCESS.launch_config_tables.clear()


def test_install_tuner_wraps_once():
    assert lc.install_tuner() and lc.install_tuner()
    assert CoordescTuner.autotune.__wrapped__ is lc._wrapped["autotune"]


def test_mutated_tables_are_refused_with_the_tables_error_only():
    """Random truncations, byte flips and value swaps of a valid table: each parses, or is
    refused with LaunchConfigTableError naming the source; no other exception escapes."""
    import random
    rng = random.Random(47)
    good = json.dumps(table_doc([entry(Kernel(), BEST), entry(Kernel(src_extra="#2"), {"XBLOCK": 64})])).encode()
    odd = [b"null", b"-1", b"1e999", b"[]", b"{}", b'"x"', b"true", b"99999999999999999999", b"0.5"]
    for i in range(600):
        data = bytearray(good)
        op = i % 3
        if op == 0:
            data = data[:rng.randrange(len(data))]
        elif op == 1:
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        else:   # replace one JSON value with an odd one
            s = data.decode()
            pos = [j for j, c in enumerate(s) if c == ":"]
            j = rng.choice(pos) + 1
            end = min([k for k in (s.find(",", j), s.find("}", j)) if k != -1])
            data = bytearray((s[:j] + " " + rng.choice(odd).decode() + s[end:]).encode())
        try:
            lc.parse_table(bytes(data), "fuzz")
        except lc.LaunchConfigTableError as e:
            assert str(e).startswith("fuzz")
