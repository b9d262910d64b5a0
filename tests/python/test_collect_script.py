"""datasets/collect.sh on CPU: the collector is replaced by a stub (DIODE_COLLECTOR) that
writes a part the way the real one does (sidecar, then the part, after every problem), so
what the script brings back to $OUT can be checked, including when the device call that
runs it is killed at its time limit (a killed call once left 35 problems only on the
machine)."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

# Writes two "problems" a second apart (sidecar first, as collect/cli.py's save() does),
# then either exits 5 (deadline reached) or sleeps until it is killed.
STUB = r'''
import json, os, sys, time
a = sys.argv[1:]
out = a[a.index("--out") + 1]
first = int(a[a.index("--first") + 1])
print("stub collector: first", first, "gpu", os.environ.get("CUDA_VISIBLE_DEVICES"),
      "workers", a[a.index("--compile-workers") + 1] if "--compile-workers" in a else None,
      "cores", ",".join(map(str, sorted(os.sched_getaffinity(0)))), flush=True)
for n in (1, 2):
    probs = [{"index": first + i} for i in range(n)]
    for path, data in ((out + ".stats.json", json.dumps({"engine": "v2", "problems": probs})),
                       (out, "PART %d" % n)):
        with open(path + ".tmp", "w") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
    print("stub collector: problem", first + n - 1, "written", flush=True)
    time.sleep(0.5)
if os.environ.get("STUB_HANG"):
    time.sleep(600)
sys.exit(5)
'''


def _setup(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    for d in ("python", "bench"):
        (work / d).symlink_to(REPO / d)
    (work / "datasets").mkdir()
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    # A wrapper, not a symlink: a virtual environment's python is found by its own path.
    py = fakebin / "python"
    py.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    py.chmod(0o755)
    smi = fakebin / "nvidia-smi"
    # FAKE_GPUS lines, as `nvidia-smi --query-gpu=...` prints one per GPU
    smi.write_text('#!/bin/sh\ni=0; while [ $i -lt "${FAKE_GPUS:-1}" ]; do echo "Fake GPU, 0.0"; i=$((i+1)); done\n')
    smi.chmod(0o755)
    stub = tmp_path / "stub.py"
    stub.write_text(STUB)
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, OUT=str(out), PATH=f"{fakebin}:{os.environ['PATH']}",
               DIODE_COLLECTOR=f"{sys.executable} {stub}", DIODE_MIRROR_S="0.1")
    env.pop("PYTHONPATH", None)
    return work, out, env


def _run(work, env, **kw):
    return subprocess.Popen(["bash", str(REPO / "datasets/collect.sh"), "2026990001", "3", "60", "dataset2"],
                            cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, **kw)


def test_finished_run_brings_back_spec_part_sidecar_and_log(tmp_path):
    work, out, env = _setup(tmp_path)
    p = _run(work, env)
    log, _ = p.communicate(timeout=120)
    assert p.returncode == 0, log
    assert "collector exit 5" in log
    dest = out / "2026990001"
    names = sorted(f.name for f in dest.iterdir())
    assert names == ["log-0.txt", "part-000.msgpack", "part-000.msgpack.stats.json", "spec.json"], names
    assert (dest / "part-000.msgpack").read_text() == "PART 2"
    assert [q["index"] for q in json.loads((dest / "part-000.msgpack.stats.json").read_text())["problems"]] == [0, 1]
    assert "problem 1 written" in (dest / "log-0.txt").read_text()
    assert len(json.loads((dest / "spec.json").read_text())["problems"]) == 3


def test_killed_run_still_has_every_finished_problem_in_out(tmp_path):
    work, out, env = _setup(tmp_path)
    env["STUB_HANG"] = "1"
    p = _run(work, env)
    part = out / "2026990001" / "part-000.msgpack"
    sidecar = out / "2026990001" / "part-000.msgpack.stats.json"

    def indexes():
        try:
            return [q["index"] for q in json.loads(sidecar.read_text())["problems"]]
        except (OSError, ValueError):
            return []

    # The sidecar that comes back never lists a problem its part lacks (the mirror copies a pair
    # only between the collector's writes, and puts the part in place first).
    deadline = time.time() + 60
    while time.time() < deadline and not (part.exists() and part.read_text() == "PART 2" and indexes() == [0, 1]):
        assert not part.exists() or len(indexes()) <= int(part.read_text().split()[1])
        time.sleep(0.05)
    # What a device call's time limit does: the whole command is killed, no clean-up runs.
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    assert part.read_text() == "PART 2"
    assert indexes() == [0, 1]
    assert not list((out / "2026990001").glob("*.copying"))


def test_resume_skips_problems_already_on_the_machine(tmp_path):
    work, out, env = _setup(tmp_path)
    p = _run(work, env)
    p.communicate(timeout=120)
    # Second call on the same (warm) machine: the stub starts after the two done problems.
    p = _run(work, env)
    log, _ = p.communicate(timeout=120)
    assert "problems 2.. of 3" in log
    assert "stub collector: first 2" in (out / "2026990001" / "log-2.txt").read_text()


def _gpus(work, env, gpus, *seeds, secs="60"):
    env = dict(env, FAKE_GPUS=str(gpus))
    return subprocess.run(["bash", str(REPO / "datasets/collect_gpus.sh"), "3", secs, "dataset2", *seeds],
                          cwd=work, env=env, capture_output=True, text=True, timeout=120)


def test_one_seed_per_gpu_each_with_its_share_of_the_cores(tmp_path):
    work, out, env = _setup(tmp_path)
    r = _gpus(work, env, 2, "2026990001", "2026990002")
    assert r.returncode == 0, r.stdout + r.stderr
    workers = max(1, os.cpu_count() // 2 - 1)
    for gpu, seed in enumerate(("2026990001", "2026990002")):
        dest = out / seed
        # two seeds: everything collect.sh brings back (8 files in all, the device's limit)
        assert sorted(f.name for f in dest.iterdir()) == ["log-0.txt", "part-000.msgpack",
                                                          "part-000.msgpack.stats.json", "spec.json"]
        assert (dest / "part-000.msgpack").read_text() == "PART 2"
        assert f"stub collector: first 0 gpu {gpu} workers {workers}" in (dest / "log-0.txt").read_text()
        assert f"== seed {seed} on GPU {gpu}" in r.stdout


def test_three_seeds_bring_back_their_parts_only(tmp_path):
    work, out, env = _setup(tmp_path)
    seeds = ("2026990001", "2026990002", "2026990003")
    r = _gpus(work, env, 4, *seeds)
    assert r.returncode == 0, r.stdout + r.stderr
    files = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file())
    assert files == sorted(f"{s}/part-000.msgpack" for s in seeds)
    assert all((out / s / "part-000.msgpack").read_text() == "PART 2" for s in seeds)
    assert "gpu 2" in (work / ".carry/collect-2026990003/log-0.txt").read_text()


def test_chained_seeds_run_one_after_another_on_their_gpu(tmp_path):
    """SEED+SEED: the second seed runs on the same GPU after the first, with the seconds the
    first left (the stub takes ~1 s of the 100); parts only come back, as with 3 seeds."""
    work, out, env = _setup(tmp_path)
    r = _gpus(work, env, 2, "2026990001+2026990003", "2026990002", secs="100")
    assert r.returncode == 0, r.stdout + r.stderr
    files = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file())
    assert files == sorted(f"{s}/part-000.msgpack" for s in ("2026990001", "2026990002", "2026990003"))
    assert "gpu 0" in (work / ".carry/collect-2026990003/log-0.txt").read_text()
    assert "gpu 1" in (work / ".carry/collect-2026990002/log-0.txt").read_text()
    log3 = (work / ".carry/collect_gpus-2026990003.log").read_text()
    left = int(log3.split("problems 0.. of 3 for ")[1].split(" s")[0])
    assert 60 <= left < 100, log3   # what the first seed left of the slot's 100 s
    assert r.stdout.index("== seed 2026990001 on GPU 0") < r.stdout.index("== seed 2026990003 on GPU 0")


def test_a_chained_seed_without_a_minute_left_is_not_started(tmp_path):
    work, out, env = _setup(tmp_path)
    r = _gpus(work, env, 1, "2026990001+2026990002", secs="61")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "seed 2026990002 (GPU 0) not started" in r.stderr
    assert not (out / "2026990002").exists()


@pytest.mark.parametrize("gpus, seeds, why", [
    (1, ("2026990001", "2026990002"), "2 seeds but 1 GPUs"),
    (2, ("2026990001", "2026990001"), "given twice"),
    (2, ("2026990001+2026990002", "2026990002"), "given twice"),
    (8, tuple(str(2026990001 + i) for i in range(5)), "at most 4 seeds"),
    (4, tuple(f"{2026990001 + i}+{2026990011 + i}+{2026990021 + i}" for i in range(3)), "9 seeds in all, at most 8"),
    (2, ("2026990001+", "2026990002"), "is not a seed or seeds joined by '+'"),
    (2, ("abc",), "is not a seed"),
])
def test_refuses_what_cannot_work(tmp_path, gpus, seeds, why):
    work, out, env = _setup(tmp_path)
    r = _gpus(work, env, gpus, *seeds)
    assert r.returncode == 2 and why in r.stderr, r.stderr
    assert not list(out.iterdir())


def test_skip_gpus_leaves_the_first_ones_to_other_work(tmp_path):
    """DIODE_SKIP_GPUS=1: the seeds go to GPUs 1.., and the cores are shared as if the skipped
    GPU's work were one more collector."""
    work, out, env = _setup(tmp_path)
    r = _gpus(work, dict(env, DIODE_SKIP_GPUS="1"), 4, "2026990001", "2026990002")
    assert r.returncode == 0, r.stdout + r.stderr
    workers = max(1, os.cpu_count() // 3 - 1)
    for gpu, seed in ((1, "2026990001"), (2, "2026990002")):
        assert f"stub collector: first 0 gpu {gpu} workers {workers}" in (out / seed / "log-0.txt").read_text()
        assert f"== seed {seed} on GPU {gpu}" in r.stdout
    # The collectors run on the cores above the skipped GPU's share, which the other work takes.
    cores = sorted(os.sched_getaffinity(0))
    mine = ",".join(str(c) for c in cores[len(cores) // 3:])
    assert f"taskset -c {mine}" in r.stdout
    assert f"cores {mine}" in (out / "2026990001" / "log-0.txt").read_text()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to leave core 0 out")
def test_pinning_uses_the_cores_this_process_may_run_on(tmp_path):
    """Under an affinity that leaves core 0 out (a container's cpuset), the collectors are pinned
    to cores of that set, never to a range counted from core 0."""
    work, out, env = _setup(tmp_path)
    last = max(os.sched_getaffinity(0))
    r = subprocess.run(["taskset", "-c", str(last), "bash", str(REPO / "datasets/collect_gpus.sh"), "3", "60",
                        "dataset2", "2026990001"], cwd=work, env=dict(env, FAKE_GPUS="2", DIODE_SKIP_GPUS="1"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"stub collector: first 0 gpu 1" in (out / "2026990001" / "log-0.txt").read_text()
    assert f"cores {last}" in (out / "2026990001" / "log-0.txt").read_text()


def test_out_minimal_brings_back_parts_only_with_two_seeds(tmp_path):
    """DIODE_OUT_MINIMAL=1: with other work in the same call, two seeds bring back their parts only."""
    work, out, env = _setup(tmp_path)
    seeds = ("2026990001", "2026990002")
    r = _gpus(work, dict(env, DIODE_OUT_MINIMAL="1"), 2, *seeds)
    assert r.returncode == 0, r.stdout + r.stderr
    files = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file())
    assert files == sorted(f"{s}/part-000.msgpack" for s in seeds)


@pytest.mark.parametrize("skip, gpus, seeds, why", [
    ("4", 4, ("2026990001",), "must be a whole number below the 4 GPUs"),
    ("one", 4, ("2026990001",), "must be a whole number"),
    ("2", 3, ("2026990001", "2026990002"), "2 seeds but 3 GPUs (2 left to other work)"),
])
def test_skip_gpus_refuses_what_cannot_work(tmp_path, skip, gpus, seeds, why):
    work, out, env = _setup(tmp_path)
    r = _gpus(work, dict(env, DIODE_SKIP_GPUS=skip), gpus, *seeds)
    assert r.returncode == 2 and why in r.stderr, r.stderr
    assert not list(out.iterdir())


def test_a_spec_placed_before_the_run_is_the_one_collected(tmp_path):
    """A re-collection (torch_diode.collect.respec) places its spec at .carry/collect-ID/spec.json:
    collect.sh runs that spec instead of drawing the dataset mix's."""
    work, out, env = _setup(tmp_path)
    d = work / ".carry" / "collect-2026990001"
    d.mkdir(parents=True)
    placed = {"shard_id": "dataset-recollect/2026990001", "sweep_id": "dataset-recollect",
              "search_space": "EXHAUSTIVE", "tf32": [True],
              "problems": [{"op": "mm", "batch": 1, "m": 64 * (i + 1), "n": 128, "k": 256,
                            "dtype_a": "float16", "dtype_b": "float16", "dtype_out": "float16",
                            "trans_a": False, "trans_b": False, "bias": "none", "alpha": 1.0, "beta": 1.0}
                           for i in range(5)]}
    (d / "spec.json").write_text(json.dumps(placed))
    p = _run(work, env)
    log, _ = p.communicate(timeout=120)
    assert p.returncode == 0, log
    assert json.loads((out / "2026990001" / "spec.json").read_text()) == placed


def test_resume_skips_problems_committed_under_datasets(tmp_path):
    """A fresh machine (no parts in .carry) starts after the last problem of the seed's
    committed files, read as add_parts.py names them (torch_diode.collect.committed)."""
    work, out, env = _setup(tmp_path)
    hw = work / "datasets" / "nvidia-h100-80gb"
    hw.mkdir()
    (hw / "2026-11-26-mix2-2026990001-p000-001.msgpack.gz").write_bytes(b"")
    (hw / "2026-11-26-mix2-2026990002-p000-002.msgpack.gz").write_bytes(b"")  # another seed: ignored
    p = _run(work, env)
    log, _ = p.communicate(timeout=120)
    assert "problems 2.. of 3" in log, log
    assert "stub collector: first 2" in (out / "2026990001" / "log-2.txt").read_text()


def test_model_top_draws_a_spec_with_the_shipped_model_of_the_gpu(tmp_path):
    """DIODE_MODEL_TOP=N: the drawn spec times the N top picks of the package's newest bundle
    for the detected hardware (DIODE_HARDWARE_KEY here, no GPU); with no model for the
    hardware the script stops before collecting, saying why."""
    work, out, env = _setup(tmp_path)
    shipped = REPO / "python/torch_diode/bundles/nvidia-h100-80gb"
    newest = max((d for d in shipped.iterdir() if d.name.isdigit()), key=lambda d: int(d.name))
    env["DIODE_PACKAGE_MODELS"] = "1"   # conftest turns the package's models off for the tests
    p = _run(work, dict(env, DIODE_MODEL_TOP="10", DIODE_HARDWARE_KEY="nvidia-h100-80gb"))
    log, _ = p.communicate(timeout=120)
    assert p.returncode == 0, log
    timing = json.loads((work / ".carry/collect-2026990001/spec.json").read_text())["timing"]
    assert timing["model_top"] == 10
    assert pathlib.Path(timing["model"]).resolve() == newest.resolve()

    (tmp_path / "other").mkdir()
    work, out, env = _setup(tmp_path / "other")
    env["DIODE_PACKAGE_MODELS"] = "1"
    p = _run(work, dict(env, DIODE_MODEL_TOP="10", DIODE_HARDWARE_KEY="nvidia-a100-sxm4-80gb"))
    log, _ = p.communicate(timeout=120)
    assert p.returncode == 2, log
    assert "ships no model for this GPU (hardware key 'nvidia-a100-sxm4-80gb')" in log
    assert not (work / ".carry/collect-2026990001/spec.json").exists()


def test_model_top_is_on_by_default_where_a_model_ships(tmp_path):
    """Unset DIODE_MODEL_TOP means 10 where the package ships a model for the GPU; where
    none ships the spec is drawn without timing.model_top and the log says why (only an
    explicit N stops); DIODE_MODEL_TOP=0 turns it off even where a model ships."""
    def spec_timing(sub, **extra):
        (tmp_path / sub).mkdir()
        work, out, env = _setup(tmp_path / sub)
        env["DIODE_PACKAGE_MODELS"] = "1"   # conftest turns the package's models off for the tests
        env.pop("DIODE_MODEL_TOP", None)
        p = _run(work, dict(env, **extra))
        log, _ = p.communicate(timeout=120)
        assert p.returncode == 0, log
        return json.loads((work / ".carry/collect-2026990001/spec.json").read_text()).get("timing"), log

    timing, log = spec_timing("h100", DIODE_HARDWARE_KEY="nvidia-h100-80gb")
    assert timing["model_top"] == 10 and "nvidia-h100-80gb" in timing["model"], log
    timing, log = spec_timing("a100", DIODE_HARDWARE_KEY="nvidia-a100-sxm4-80gb")
    assert timing is None or "model_top" not in timing
    assert "ships no model for this GPU (hardware key 'nvidia-a100-sxm4-80gb'): the spec is drawn without" in log
    timing, log = spec_timing("off", DIODE_HARDWARE_KEY="nvidia-h100-80gb", DIODE_MODEL_TOP="0")
    assert timing is None or "model_top" not in timing
    assert "timing.model_top" not in log
