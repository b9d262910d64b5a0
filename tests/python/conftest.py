import json
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


# CI builds everything first (.ci/run sets DIODE_REQUIRE_BUILD=1): there a test that
# would skip because a binary, library or subcommand is missing must fail instead, so a
# broken build can never pass as "skipped". Skips for other reasons (no GPU, a torch
# without some hook, a validator that could not be downloaded) stay skips.
import os  # noqa: E402

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
