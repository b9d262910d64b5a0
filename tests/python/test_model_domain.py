"""model.json dataset.domain (written by diode-train): parsed strictly, a malformed one refuses
the model with the rest of model.json."""
import json

import pytest

from torch_diode.model import ModelFormatError, parse_domain


def test_absent_domain_is_none():
    assert parse_domain({}) is None and parse_domain(None) is None and parse_domain({"problems": 3}) is None


def test_valid_domain():
    d = parse_domain({"domain": {"batch": [1, 64], "m": [4, 8192], "n": [16, 8192], "k": [16, 8192]}})
    assert d == {"batch": (1, 64), "m": (4, 8192), "n": (16, 8192), "k": (16, 8192)}


@pytest.mark.parametrize("dom", [
    [],
    {"batch": [1, 64], "m": [4, 8192], "n": [16, 8192]},                          # a key missing
    {"batch": [1, 64], "m": [4, 8192], "n": [16, 8192], "k": [16, 8192], "x": [1, 1]},
    {"batch": [1, 64], "m": [8192, 4], "n": [16, 8192], "k": [16, 8192]},          # min > max
    {"batch": [1, 64], "m": [0, 4], "n": [16, 8192], "k": [16, 8192]},             # below 1
    {"batch": [1, 64], "m": [4.0, 8], "n": [16, 8192], "k": [16, 8192]},           # not integers
    {"batch": [1, 64], "m": [True, 8], "n": [16, 8192], "k": [16, 8192]},
    {"batch": [1, 64], "m": [4, 8, 9], "n": [16, 8192], "k": [16, 8192]},
    {"batch": [1, 64], "m": "4..8", "n": [16, 8192], "k": [16, 8192]},
])
def test_malformed_domain_is_refused(dom):
    with pytest.raises(ModelFormatError, match="dataset.domain"):
        parse_domain(json.loads(json.dumps({"domain": dom})))
