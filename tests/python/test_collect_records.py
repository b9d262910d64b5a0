import gzip

import pytest

from torch_diode import wire
from torch_diode.collect import records
from torch_diode.collect.stats import summarize

HW = wire.HardwareId("nvidia", "NVIDIA H100 80GB HBM3", "sm_90", "9.0", 132, 85017493504, "580.159.04",
                     "cuda 13.0", "2.11.0+cu130", "3.6.0")
P = [wire.Problem("mm", 1, 64, 64, 64), wire.Problem("bmm", 4, 32, 32, 32)]
KW = {"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 8, "num_stages": 3, "num_warps": 4,
      "EVEN_K": True, "ALLOW_TF32": False, "USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32", "hint_override": None}


def test_triton_kwargs_to_config():
    c = records.to_config("triton::mm", KW)
    assert c == wire.KernelConfig("triton::mm", 64, 32, 16, 8, 3, 4, True, False, False, "float32", ())


def test_aten_and_extra_kwargs():
    assert records.to_config("aten::addmm", {}, allow_tf32=True).template == "aten"
    assert records.to_config("aten::addmm", {}, allow_tf32=True).allow_tf32
    assert records.to_config("aten::bias_addmm", {}).template == "aten::bias_addmm"
    c = records.to_config("decompose_k", {"k_split": 4, "NUM_SMS": 132, "epilogue_fn": object(), "FLAG": True})
    assert c.extra == (("FLAG", 1), ("NUM_SMS", 132), ("k_split", 4))  # byte-sorted, non-ints dropped


@pytest.mark.parametrize("v,name", [("tl.float32", "float32"), ("torch.bfloat16", "bfloat16"), (None, ""),
                                    ("tl.int32", ""), ("fp16", "float16")])
def test_acc_type_names(v, name):
    assert records.acc_type_name(v) == name


@pytest.mark.parametrize("err,status", [
    ("OutOfMemoryError: out of resource: triton_mm Required: 294912 Hardware limit:232448", "out_of_resources"),
    (TimeoutError("Precompilation timed out after 60s"), "timeout"),
    ("collector: problem_timeout_s reached", "timeout"),
    ("CompilationError: at 12:4: invalid", "compile_error"),
    (None, "compile_error"),
])
def test_classify_error(err, status):
    assert records.classify_error(err) == status


def test_make_record_units_and_failures():
    c = records.to_config("triton::mm", KW)
    r = records.make_record(0, c, "ok", 0.0123, 0.0004, 20)
    assert r.median_us == pytest.approx(12.3) and r.spread_us == pytest.approx(0.4) and r.repeats == 20
    assert records.make_record(0, c, "timeout", 5.0).median_us == 0.0
    # An "ok" without a usable time would be rejected by decoders: it becomes a failure.
    assert records.make_record(0, c, "ok", float("inf")).status == "compile_error"


def test_dedupe_prefers_ok():
    c = records.to_config("triton::mm", KW)
    rs = [records.make_record(0, c, "compile_error"), records.make_record(0, c, "ok", 0.01, 0, 5),
          records.make_record(1, c, "ok", 0.02, 0, 5)]
    out = records.dedupe(rs)
    assert len(out) == 2 and all(r.status == "ok" for r in out)


def test_compact_renumbers_problems():
    c = records.to_config("triton::mm", KW)
    probs, recs = records.compact(P + [wire.Problem("mm", 1, 8, 8, 8)], [records.make_record(2, c, "ok", 1, 0, 3)])
    assert probs == [wire.Problem("mm", 1, 8, 8, 8)] and recs[0].problem_index == 0


def test_build_shard_is_decodable_and_sealed():
    c = records.to_config("triton::mm", KW)
    rs = [records.make_record(0, c, "ok", 0.01, 0.001, 20), records.make_record(1, c, "out_of_resources")]
    data = records.build_shard("sweep/x/1", "sweep", HW, "host/gpu0", "", P, rs, created_ms=123)
    s = wire.decode_shard(data)
    assert s.created_ms == 123 and s.producer.runner == "inductor" and s.producer.software_version.startswith("diode ")
    assert [r.status for r in s.records] == ["ok", "out_of_resources"]
    assert s.hardware == HW
    assert wire.decode_shard(gzip.decompress(gzip.compress(data))) == s


def test_build_shard_rejects_bad_ids():
    with pytest.raises(wire.WireError):
        records.build_shard("bad id", "", HW, "x", "", P, [], created_ms=1)


def test_summarize_median_and_iqr():
    s = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.median, s.iqr, s.n) == (3.0, 2.0, 5)
    assert summarize([7.0]).iqr == 0.0
    with pytest.raises(ValueError):
        summarize([])
