"""The README's main command end to end (python -m torch_diode.tools.fleet_demo).

Starts a hub, a coordinator and agents on loopback, runs a sweep, trains with
mpirun -np 2, publishes a signed bundle and pulls it through `import torch_diode`;
afterwards no process of the demo is left running.
"""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("DIODE_BUILD_DIR", ROOT / "build"))
NEEDED = [BUILD / "cli" / "diode", BUILD / "hub" / "diode-hub", BUILD / "coordinator" / "diode-coordinator",
          BUILD / "agent" / "diode-agent", BUILD / "models" / "diode-train",
          BUILD / "shared" / "bundle" / "libdiode_client.so"]


@pytest.mark.skipif(not all(p.exists() for p in NEEDED) or not shutil.which("mpirun"),
                    reason="needs the full C++ build (bash .ci/setup) and mpirun")
def test_whole_pipeline():
    r = subprocess.run([sys.executable, "-m", "torch_diode.tools.fleet_demo", "--build", str(BUILD),
                        "--agents", "3", "--problems", "60"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    out = r.stdout
    assert "sweep: 30/30 shards done" in out
    assert "identical on all 2 ranks" in out
    assert "published a signed bundle for nvidia-h100-80gb" in out
    assert "bundle version 1 pulled over HTTP and verified, installed=True" in out
    assert "all processes stopped" in out
    leftover = subprocess.run(["pgrep", "-f", "diode-fleet-demo-"], capture_output=True, text=True).stdout
    assert not leftover.strip(), leftover
