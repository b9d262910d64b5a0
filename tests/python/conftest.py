import json
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"


@pytest.fixture(autouse=True)
def _no_shipped_models(monkeypatch):
    """Tests are hermetic: the models and root key shipped in torch_diode/bundles are off
    unless a test turns them on (tests/python/test_hook_shipped_bundle.py deletes this)."""
    monkeypatch.setenv("DIODE_PACKAGE_MODELS", "0")


@pytest.fixture(scope="session")
def golden_cases():
    return json.loads((GOLDEN / "cases.json").read_text())


@pytest.fixture(scope="session")
def golden_dir():
    return GOLDEN


@pytest.fixture(scope="session")
def synthetic_models(tmp_path_factory):
    """(work dir, a synthetic dataset of 150 problems, [two tiny models trained on it with
    seeds 2 and 5]) from the C++ build (diode-synth-data, diode-train), trained once for
    every test that scores models (test_validate_json). Tests
    that use it skip themselves when the build is absent; the models are not to be
    modified (copy one first)."""
    from model_tools import SYNTH, TRAIN, run

    work = tmp_path_factory.mktemp("synthetic_models")
    data = work / "data"
    run(SYNTH, "--out", data / "a.msgpack.gz", "--problems", 150,
        "--config-stride", 8, "--seed", 3)
    models = []
    for seed in (2, 5):
        run(TRAIN, "--hardware", "nvidia-h100-80gb", "--data", data,
            "--out", work / f"seed-{seed}", "--epochs", 3, "--hidden", 32, "--blocks", 1, "--seed", seed, "--quiet")
        models.append(work / f"seed-{seed}")
    return work, data, models


# CI builds everything first (.ci/run sets DIODE_REQUIRE_BUILD=1): there a test that
# would skip because a binary, library or subcommand is missing must fail instead, so a
# broken build can never pass as "skipped". Skips for other reasons (no GPU, a torch
# without some hook, a validator that could not be downloaded) stay skips.
REQUIRE_BUILD = os.environ.get("DIODE_REQUIRE_BUILD") == "1"
_MISSING_BUILD = ("not built", "not found", "placeholder", "subcommand", "C++ build", "DIODE_BUILD_DIR")


def _missing_build(longrepr) -> str | None:
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text if any(m in text for m in _MISSING_BUILD) else None


def _fail_if_build_missing(report) -> None:
    if REQUIRE_BUILD and report.skipped:
        why = _missing_build(report.longrepr)
        if why:
            report.outcome = "failed"
            report.longrepr = f"DIODE_REQUIRE_BUILD=1 but the build is incomplete: {why}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_if_build_missing(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_if_build_missing(outcome.get_result())
