"""The C++ model tools the model-scoring tests drive (diode validate, diode-train,
diode-synth-data), from the build tree (DIODE_BUILD_DIR, default build/): their paths,
the skip marker for a tree without them, and one way to run them. Shared by conftest's
synthetic_models fixture, test_validate_json and the bench tests that
score the shipped model."""
from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("DIODE_BUILD_DIR", ROOT / "build"))
DIODE = BUILD / "cli" / "diode"
TRAIN = BUILD / "models" / "diode-train"
SYNTH = BUILD / "models" / "diode-synth-data"

# conftest turns this skip into a failure where CI built everything (DIODE_REQUIRE_BUILD).
needs_model_tools = pytest.mark.skipif(not all(p.exists() for p in (DIODE, TRAIN, SYNTH)),
                                       reason="needs the C++ build (diode, diode-train, diode-synth-data not built)")


def shipped_model(hardware_key: str) -> pathlib.Path:
    """The model directory the package ships for a hardware key: its newest version."""
    return max((p for p in (ROOT / "python/torch_diode/bundles" / hardware_key).iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def run(*args, **kw) -> str:
    """Runs a command (arguments str()-ed), raises on failure, returns its stdout."""
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True, **kw).stdout
