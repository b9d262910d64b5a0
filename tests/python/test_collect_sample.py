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
