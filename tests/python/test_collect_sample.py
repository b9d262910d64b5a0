import hashlib
import json
import math
import statistics

import pytest

from torch_diode import wire
from torch_diode.collect import sample
from torch_diode.collect.spec import load_spec


def test_deterministic_and_seed_dependent():
    a = sample.sample_problems(40, seed=1)
    assert a == sample.sample_problems(40, seed=1)
    assert a != sample.sample_problems(40, seed=2)


def test_ops_dtypes_cycle_and_shapes_are_valid():
    ps = sample.sample_problems(80, seed=2026)
    pairs = {(p.op, p.dtype_a) for p in ps}
    assert len(pairs) == 8  # 4 ops x 2 dtypes
    b = sample.Bounds()
    for p in ps:
        wire.validate_problem(p)
        for d in (p.m, p.n, p.k):
            assert d % 8 == 0 and b.min_dim <= d <= b.max_dim
        assert sample.gflop(p) <= b.max_gflop and sample.problem_bytes(p) <= b.max_bytes
        assert (p.batch > 1) == (p.op in ("bmm", "baddbmm"))
        assert (p.bias == "row") == (p.op in ("addmm", "baddbmm"))


def test_follows_the_log_normal_statistics():
    # Clamping and the FLOP cap shrink the spread, but the centre must stay where the
    # statistics put it: the median of ln N within 0.3 of its mean (N is clamped least).
    ps = sample.sample_problems(2000, seed=7, ops=("mm",), dtypes=("float16",))
    med = statistics.median(math.log(p.n) for p in ps)
    assert abs(med - sample.LOG_MEAN["n"]) < 0.3
    assert len({p.m for p in ps}) > 300  # a wide spread of shapes, not a few values


def test_rejects_bad_arguments():
    with pytest.raises(ValueError):
        sample.sample_problems(3, 0, ops=("conv",))
    with pytest.raises(ValueError):
        sample.sample_problems(3, 0, dtypes=("int8",))
    with pytest.raises(ValueError):
        sample.sample_problems(-1, 0)


def test_round8():
    assert sample.round8(11.9, 16, 64) == 16
    assert sample.round8(30, 16, 64) == 32
    assert sample.round8(1e9, 16, 64) == 64


def test_cli_writes_a_loadable_spec(tmp_path):
    out = tmp_path / "spec.json"
    assert sample.main(["--n", "10", "--seed", "3", "--shard-id", "t/1", "--out", str(out)]) == 0
    s = load_spec(str(out))
    assert s.shard_id == "t/1" and list(s.problems) == sample.sample_problems(10, 3)
    assert json.loads(out.read_text())["search_space"] == "EXHAUSTIVE"


def test_output_is_pinned_for_fixed_seeds():
    # bench/collector_throughput.py and committed datasets name problems by (n, seed): the
    # draws must never change (the dataset mix lives in sample_dataset_problems instead).
    got = [(p.op, p.batch, p.m, p.n, p.k, p.dtype_a, p.trans_b, p.bias) for p in sample.sample_problems(8, 2026)]
    assert got == [
        ("mm", 1, 6544, 1416, 16, "float16", False, "none"),
        ("addmm", 1, 488, 952, 1248, "float16", False, "row"),
        ("bmm", 64, 48, 104, 872, "float16", False, "none"),
        ("baddbmm", 32, 32, 512, 40, "float16", False, "row"),
        ("mm", 1, 600, 384, 2352, "bfloat16", False, "none"),
        ("addmm", 1, 1984, 456, 600, "bfloat16", False, "row"),
        ("bmm", 8, 7120, 112, 208, "bfloat16", False, "none"),
        ("baddbmm", 4, 2096, 96, 328, "bfloat16", False, "row"),
    ]
    digest = lambda n, seed: hashlib.sha256(b"".join(wire.encode(p) for p in sample.sample_problems(n, seed))).hexdigest()
    assert digest(50, 2026) == "f51c6e96d06a8e290168da6ec0dd66c9af9fea1dff06bde9290d8d002e435ce8"
    assert digest(200, 7) == "b3e09a22d2df2a54a65c6d15f5e752eef8d1fb8ecff41c0af1f24f615deb46d6"
