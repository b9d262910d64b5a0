"""bench/fleet_gpu.py and its shell driver bench/fleet_gpu.sh (`carry` packs the binaries here,
then it runs fleet_gpu.py with them on the GPU machine): the CPU-side checks.
The run itself needs a GPU and the built fleet binaries (bench/README.md)."""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def test_help_lists_the_options_the_shell_driver_passes():
    r = subprocess.run([sys.executable, str(BENCH / "fleet_gpu.py"), "--help"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    driver = (BENCH / "fleet_gpu.sh").read_text()
    line = next(l for l in driver.splitlines() if "bench/fleet_gpu.py" in l and not l.startswith("#"))
    cont = driver[driver.index(line):].split("\n\n")[0]
    for opt in re.findall(r"(--[a-z][a-z-]+)", cont):
        assert opt in r.stdout, opt


def test_missing_required_options_are_refused():
    r = subprocess.run([sys.executable, str(BENCH / "fleet_gpu.py")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--bin" in r.stderr


def test_shell_driver_parses_and_carry_packs_the_four_binaries(tmp_path):
    r = subprocess.run(["bash", "-n", str(BENCH / "fleet_gpu.sh")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    build = tmp_path / "build"
    for b in ("cli/diode", "hub/diode-hub", "coordinator/diode-coordinator", "agent/diode-agent"):
        (build / b).parent.mkdir(parents=True, exist_ok=True)
        (build / b).write_bytes(pathlib.Path(sys.executable).resolve().read_bytes())
    dest = tmp_path / "pack"
    r = subprocess.run(["bash", str(BENCH / "fleet_gpu.sh"), "carry", str(build), str(dest)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (dest / "bin").iterdir()) == ["diode", "diode-agent", "diode-coordinator",
                                                                 "diode-hub"]
    assert not any(p.name.startswith(("libc.so", "libstdc++", "ld-linux")) for p in (dest / "lib").iterdir())
