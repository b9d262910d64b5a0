"""The Python feature extractor equals the C++ reference on the golden vectors."""
import json
import pathlib

import pytest

from torch_diode import features, wire


def test_features_identical_to_cpp(golden_dir):
    golden = json.loads((golden_dir / "features.json").read_text())
    spec = features.FeatureSpec.from_json(golden["spec"])
    assert len(golden["cases"]) > 10
    for case in golden["cases"]:
        p = wire.problem_from_json(case["problem"])
        c = wire.config_from_json(case["config"])
        got = features.raw_features(spec, p, c)
        assert got == case["raw"], (case["problem"], case["config"])


def test_spec_round_trip_and_normalisation(golden_dir):
    golden = json.loads((golden_dir / "features.json").read_text())
    spec = features.FeatureSpec.from_json(golden["spec"])
    n = len(spec.names)
    spec.mean = [1.0] * n
    spec.stddev = [2.0] * n
    back = features.FeatureSpec.from_json(spec.to_json())
    case = golden["cases"][0]
    p, c = wire.problem_from_json(case["problem"]), wire.config_from_json(case["config"])
    raw = features.raw_features(back, p, c)
    assert features.features(back, p, c) == [features._f32((x - 1.0) / 2.0) for x in raw]


def test_scaled_mm_features_identical_to_cpp(golden_dir):
    golden = json.loads((golden_dir / "features_scaled_mm.json").read_text())
    spec = features.FeatureSpec.from_json(golden["spec"])
    assert spec.family == "scaled_mm"
    assert len(golden["cases"]) > 40
    scales, fast = set(), set()
    for case in golden["cases"]:
        p = wire.problem_from_json(case["problem"])
        c = wire.config_from_json(case["config"])
        assert p.op == "scaled_mm"
        got = features.raw_features(spec, p, c)
        assert got == case["raw"], (case["problem"], case["config"])
        scales.add(p.scale)
        fast.add(c.use_fast_accum)
    assert scales == {"tensor", "row"} and fast == {False, True}


def test_family_feature_names_match_the_schema():
    root = pathlib.Path(__file__).resolve().parents[2]
    schema = json.loads((root / "shared/schema/contracts.json").read_text())
    fams = schema["families"]
    assert set(fams) == set(features.FAMILY_FEATURE_NAMES)
    for family, f in fams.items():
        want = schema["features"]["base_names"] if isinstance(f["features"], str) else f["features"]
        assert list(features.FAMILY_FEATURE_NAMES[family]) == want, family
        for op in f["ops"]:
            assert wire.family_of(op) == family


def test_spec_family_round_trip_and_refusals():
    gemm = features.FeatureSpec()
    assert "family" not in gemm.to_json()  # a GEMM spec's JSON is unchanged
    fp8 = features.FeatureSpec(family="scaled_mm")
    j = fp8.to_json()
    assert j["family"] == "scaled_mm" and j["names"][-7:-5] == ["scale_rowwise", "fast_accum"]
    assert features.FeatureSpec.from_json(j).names == fp8.names
    for bad_family in ("conv", 3):
        with pytest.raises(wire.WireError, match="family"):
            features.FeatureSpec.from_json({**j, "family": bad_family})
    without = {k: v for k, v in j.items() if k != "family"}
    with pytest.raises(wire.WireError, match="names differ"):
        features.FeatureSpec.from_json(without)
    p = wire.Problem(op="scaled_mm", batch=1, m=64, n=64, k=64, dtype_a="float8_e4m3fn",
                     dtype_b="float8_e4m3fn", dtype_out="bfloat16", trans_b=True, scale="row")
    c = wire.KernelConfig(block_m=64, block_n=64, block_k=64, group_m=8, num_stages=3, num_warps=4,
                          use_fast_accum=True)
    v = features.raw_features(fp8, p, c)
    nb = len(features.BASE_FEATURE_NAMES)
    assert v[4] == 1.0 and v[5] == 0.0 and v[nb] == 1.0 and v[nb + 1] == 1.0
    with pytest.raises(ValueError, match="family"):
        features.raw_features(gemm, p, c)
