"""The Python feature extractor equals the C++ reference on the golden vectors."""
import json

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
