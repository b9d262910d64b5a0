import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"


@pytest.fixture(scope="session")
def golden_cases():
    return json.loads((GOLDEN / "cases.json").read_text())


@pytest.fixture(scope="session")
def golden_dir():
    return GOLDEN
