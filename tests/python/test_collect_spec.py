import json

import pytest

from torch_diode import wire
from torch_diode.collect.spec import SpecError, Timing, load_spec, parse_spec, spec_to_json

BASE = {"shard_id": "s1", "problems": [{"op": "mm", "m": 64, "n": 32, "k": 16, "dtype_a": "float16"}]}


def spec(**over):
    d = json.loads(json.dumps(BASE))
    d.update(over)
    return d


def test_minimal_spec_fills_defaults():
    s = parse_spec(spec())
    assert s.search_space == "EXHAUSTIVE" and s.timing == Timing() and s.tf32 == (False, True)
    p = s.problems[0]
    assert (p.op, p.batch, p.m, p.n, p.k) == ("mm", 1, 64, 32, 16)
    assert p.dtype_b == p.dtype_out == "float16" and p.bias == "none"


def test_bias_ops_default_to_row_bias():
    s = parse_spec(spec(problems=[{"op": "baddbmm", "batch": 4, "m": 8, "n": 8, "k": 8, "dtype_a": "bfloat16"}]))
    assert s.problems[0].bias == "row" and s.problems[0].batch == 4


def test_model_top_round_trips():
    s = parse_spec(spec(timing={"model_top": 5, "model": "python/torch_diode/bundles/nvidia-h100-80gb/7"}))
    assert s.timing.model_top == 5 and s.timing.model.endswith("/7")
    assert parse_spec(spec_to_json(s)) == s
    assert Timing().model_top == 0 and Timing().model == "" and Timing().extra_models == ()
    s = parse_spec(spec(timing={"model_top": 5, "model": "a", "extra_models": ["b", "c"]}))
    assert s.timing.extra_models == ("b", "c")
    assert parse_spec(json.loads(json.dumps(spec_to_json(s)))) == s


def test_round_trip_through_json():
    assert parse_spec(spec(search_space="exhaustive")).search_space == "EXHAUSTIVE"  # any case
    s = parse_spec(spec(search_space="DEFAULT", timing={"repeats": 7, "min_repeats": 3}))
    assert parse_spec(spec_to_json(s)) == s


@pytest.mark.parametrize("bad,msg", [
    ({"shard_id": "no spaces allowed"}, "spec.shard_id"),
    ({"search_space": "HUGE"}, "spec.search_space"),
    ({"problems": []}, "spec.problems: empty"),
    ({"problems": [{"op": "conv", "m": 1, "n": 1, "k": 1, "dtype_a": "float16"}]}, "unknown op 'conv'"),
    ({"problems": [{"op": "mm", "m": 1, "n": 1, "k": 1, "dtype_a": "int8"}]}, "unknown dtype 'int8'"),
    ({"problems": [{"op": "mm", "m": 0, "n": 1, "k": 1, "dtype_a": "float16"}]}, "spec.problems[0].m"),
    ({"problems": [{"op": "mm", "m": "8", "n": 1, "k": 1, "dtype_a": "float16"}]}, "expected integer"),
    ({"problems": [{"op": "mm", "batch": 2, "m": 8, "n": 8, "k": 8, "dtype_a": "float16"}]}, "needs batch 1"),
    ({"problems": [{"op": "mm", "m": 8, "n": 8, "k": 8, "dtype_a": "float16", "dtype_b": "float32"}]},
     "mixed dtypes"),
    ({"problems": [{"op": "mm", "m": 8, "n": 8, "dtype_a": "float16"}]}, "missing field(s) k"),
    ({"problems": [{"op": "mm", "m": 8, "n": 8, "k": 8, "dtype_a": "float16", "colour": 1}]}, "unknown field(s) colour"),
    ({"timing": {"repeats": 0}}, "spec.timing.repeats"),
    ({"timing": {"min_repeats": 50}}, "spec.timing.min_repeats"),
    ({"timing": {"warmup": True}}, "spec.timing.warmup: expected int"),
    ({"timing": {"problem_timeout_s": 0}}, "problem_timeout_s"),
    ({"timing": {"model_top": 5}}, "give both"),
    ({"timing": {"model": "m"}}, "give both"),
    ({"timing": {"model_top": 21, "model": "m"}}, "model_top: 21 out of range"),
    ({"timing": {"model_top": 3, "model": "m", "static_top": 0}}, "needs the static stage"),
    ({"timing": {"model_top": 3, "model": 7}}, "spec.timing.model: expected str"),
    ({"timing": {"extra_models": ["b"]}}, "extra_models: needs model and model_top"),
    ({"timing": {"model_top": 3, "model": "a", "extra_models": "b"}}, "extra_models: expected a list of strings"),
    ({"timing": {"model_top": 3, "model": "a", "extra_models": ["b", 1]}}, "expected a list of strings"),
    ({"timing": {"model_top": 3, "model": "a", "extra_models": ["a"]}}, "empty or repeated"),
    ({"timing": {"model_top": 3, "model": "a", "extra_models": ["b", "c", "d", "e"]}}, "at most 3"),
    ({"tf32": []}, "spec.tf32"),
    ({"tf32": [True, True]}, "spec.tf32"),
    ({"producer": {"name": ""}}, "spec.producer"),
    ({"extra_field": 1}, "unknown field(s) extra_field"),
])
def test_invalid_specs_name_the_field(bad, msg):
    with pytest.raises(SpecError) as e:
        parse_spec(spec(**bad))
    assert msg in str(e.value)


def test_not_an_object():
    with pytest.raises(SpecError, match="expected an object"):
        parse_spec([1, 2])


def test_load_spec_errors(tmp_path):
    with pytest.raises(SpecError, match="cannot read spec"):
        load_spec(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SpecError, match="not valid JSON"):
        load_spec(str(bad))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(BASE))
    assert load_spec(str(good)).problems[0] == wire.Problem("mm", 1, 64, 32, 16)
