"""Fleet tests: coordinator + hub + replay agents as real processes on loopback.

Covers: a 200-shard sweep with 4 agents; an agent SIGKILLed mid-shard (its
shard is re-leased and stored exactly once); the coordinator SIGKILLed and
restarted mid-sweep (nothing lost or duplicated); a hub outage (shards wait in
the spool); SIGTERM drain; inductor-runner crash isolation; an unknown agent
key. Short leases and heartbeats keep the suite fast.

Binaries come from $DIODE_BUILD_DIR (default: build-fleet, then build). The hub
is the in-tree test server `diode-fake-hub` (DIODE-INGEST/1, fsync'd) except in
test_sweep_against_real_hub, which runs `diode-hub` when it is built.
"""
from __future__ import annotations

import json
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
from torch_diode import wire  # noqa: E402
from torch_diode.tools.fleet_demo import free_port  # noqa: E402


def _build_dir() -> pathlib.Path:
    for cand in (os.environ.get("DIODE_BUILD_DIR"), ROOT / "build-fleet", ROOT / "build"):
        if cand and (pathlib.Path(cand) / "coordinator" / "diode-coordinator").exists():
            return pathlib.Path(cand)
    pytest.skip("fleet binaries not built (set DIODE_BUILD_DIR)", allow_module_level=True)


BUILD = _build_dir()
COORD = BUILD / "coordinator" / "diode-coordinator"
AGENT = BUILD / "agent" / "diode-agent"
FAKE_HUB = BUILD / "agent" / "diode-fake-hub"
REAL_HUB = BUILD / "hub" / "diode-hub"
DIODE = BUILD / "cli" / "diode"
REPLAY_DATA = ROOT / "tests" / "golden" / "shard.msgpack"
if (ROOT / "tests" / "data" / "datasets" / "nvidia-h100-80gb").is_dir():
    REPLAY_DATA = ROOT / "tests" / "data" / "datasets" / "nvidia-h100-80gb"

LEASE_MS, HEARTBEAT_MS = 1200, 150


def keygen(path: pathlib.Path) -> str:
    return subprocess.run([str(COORD), "keygen", str(path)], check=True, capture_output=True,
                          text=True).stdout.strip()


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


MANIFEST = """version: 1
name: {name}
requester: fleet-tests
priority: 10
max_attempts: {max_attempts}
hardware:
  vendor: nvidia
  device_name: "H100"
  compute_capability: ["9.0"]
  min_memory_gib: 79
sweep:
  ops: [mm, addmm]
  dtypes: [float16, bfloat16]
  problems: {problems}
  problems_per_shard: 2
  seed: 11
  search_space: DEFAULT
  shapes:
    distribution: lognormal
    m: {{mean: 6.5725, std: 2.5562}}
    n: {{mean: 5.9139, std: 1.6697}}
    k: {{mean: 6.2049, std: 2.1647}}
"""


class Fleet:
    def __init__(self, tmp: pathlib.Path, shards: int, max_attempts: int = 3, real_hub: bool = False):
        self.tmp = tmp
        self.procs: dict[str, subprocess.Popen] = {}
        self.coord_port, self.hub_port = free_port(), free_port()
        self.coord_ep = f"tcp://127.0.0.1:{self.coord_port}"
        self.hub_ep = f"tcp://127.0.0.1:{self.hub_port}"
        self.coord_pub = keygen(tmp / "coord.key")
        self.hub_pub = keygen(tmp / "hub.key")
        self.agent_keys = []
        for i in range(6):
            keygen(tmp / f"agent{i}.key")
            self.agent_keys.append(json.loads((tmp / f"agent{i}.key").read_text())["public"])
        self.status_pub = keygen(tmp / "status.key")
        (tmp / "coord_allow.txt").write_text(
            "\n".join(f"{k} agent{i}" for i, k in enumerate(self.agent_keys)) + f"\n{self.status_pub} status\n")
        (tmp / "hub_allow.txt").write_text("\n".join(self.agent_keys) + "\n")
        self.manifest = tmp / "sweep.yaml"
        self.manifest.write_text(MANIFEST.format(name="fleet-test", problems=2 * shards, max_attempts=max_attempts))
        self.db = tmp / "coord.db"
        self.hub_dir = tmp / "hub"
        self.outage = tmp / "hub_outage"
        self.real_hub = real_hub

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "ab")
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.procs[name] = p
        return p

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def start_coordinator(self, extra: list[str] | None = None):
        return self._spawn("coordinator", [
            str(COORD), "serve", "--db", str(self.db), "--bind", self.coord_ep, "--keys", str(self.tmp / "coord.key"),
            "--allowlist", str(self.tmp / "coord_allow.txt"), "--manifests", str(self.manifest),
            "--lease-ms", str(LEASE_MS), "--heartbeat-ms", str(HEARTBEAT_MS), *(extra or [])])

    def diode(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """`diode ARGS` against this fleet's coordinator, with the operators' key."""
        out = subprocess.run([str(DIODE), *args, "--coordinator", self.coord_ep, "--keys", str(self.tmp / "status.key"),
                              "--server-key", self.coord_pub], capture_output=True, text=True, timeout=20)
        if check:
            assert out.returncode == 0, out.stdout + out.stderr
        return out

    def start_hub(self):
        if self.real_hub:
            return self._spawn("hub", [
                str(REAL_HUB), "--data", str(self.hub_dir), "--ingest", self.hub_ep, "--http", "127.0.0.1:0",
                "--server-key", str(self.tmp / "hub.key"), "--allowlist", str(self.tmp / "hub_allow.txt")])
        return self._spawn("hub", [
            str(FAKE_HUB), "--bind", self.hub_ep, "--keys", str(self.tmp / "hub.key"), "--allowlist",
            str(self.tmp / "hub_allow.txt"), "--dir", str(self.hub_dir), "--unavailable-file", str(self.outage)])

    def start_agent(self, i: int, delay_ms: int = 0, gpus: int = 1, extra: list[str] | None = None,
                    key: str | None = None):
        args = [str(AGENT), "run", "--coordinator", self.coord_ep, "--coordinator-key", self.coord_pub,
                "--hub", self.hub_ep, "--hub-key", self.hub_pub, "--keys", key or str(self.tmp / f"agent{i}.key"),
                "--spool", str(self.tmp / f"spool{i}"), "--name", f"node{i}", "--fake-gpus", str(gpus),
                "--device-name", "NVIDIA H100 80GB HBM3", "--compute-capability", "9.0",
                "--request-timeout-ms", "1000", "--push-timeout-ms", "2000", "--backoff-max-ms", "500"]
        args += extra or ["--runner", "replay", "--replay-data", str(REPLAY_DATA), "--replay-delay-ms", str(delay_ms)]
        return self._spawn(f"agent{i}", args)

    def start(self, agents: int, delay_ms: int = 0):
        self.start_hub()
        self.start_coordinator()
        for i in range(agents):
            self.start_agent(i, delay_ms)

    def sql(self, q: str, *args):
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute(q, args).fetchall()
        finally:
            con.close()

    def counts(self) -> dict[str, int]:
        try:
            return dict(self.sql("SELECT state, COUNT(*) FROM shards GROUP BY state"))
        except sqlite3.OperationalError:
            return {}

    def wait(self, pred, timeout: float, what: str):
        end = time.time() + timeout
        while time.time() < end:
            try:
                if pred():
                    return
            except sqlite3.OperationalError:  # the coordinator has not created the database yet
                pass
            time.sleep(0.05)
        # The processes' last log lines say why (a flake under load must be diagnosable from CI).
        tails = []
        for name, proc in self.procs.items():
            lines = self.log(name).splitlines()[-8:]
            tails.append(f"--- {name} (exit {proc.poll()}):\n" + "\n".join(lines))
        raise AssertionError(f"timed out waiting for {what}; shards: {self.counts()}\n" + "\n".join(tails))

    def hub_files(self) -> list[pathlib.Path]:
        return sorted(self.hub_dir.glob("*.msgpack"))

    def stop(self, name: str, sig=signal.SIGTERM, timeout: float = 10) -> int:
        p = self.procs.pop(name)
        p.send_signal(sig)
        return p.wait(timeout)

    def close(self):
        for name in list(self.procs):
            p = self.procs.pop(name)
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture
def fleet_factory(tmp_path):
    made = []

    def make(*args, **kw):
        f = Fleet(tmp_path, *args, **kw)
        made.append(f)
        return f
    yield make
    for f in made:
        f.close()


# The inductor runner's collector, faked by a shell script passed as the agent's
# --python: the agent sees a crash or a hang exactly as it would from a real one.
CRASHING_COLLECTOR = "#!/bin/sh\necho 'CUDA error: an illegal memory access' >&2\nkill -SEGV $$\n"
HANGING_COLLECTOR = "#!/bin/sh\nsleep 60\n"


def start_inductor_agent(f: Fleet, collector: str, timeout_s: int) -> subprocess.Popen:
    """Agent 0 with the inductor runner, running COLLECTOR as its collector for at most TIMEOUT_S."""
    python = f.tmp / "collector.sh"
    python.write_text(collector)
    python.chmod(0o755)
    return f.start_agent(0, extra=["--runner", "inductor", "--python", str(python),
                                   "--collect-timeout-s", str(timeout_s)])


def assert_each_shard_completed_once(f: Fleet, n: int):
    assert f.counts() == {"done": n}
    # Exactly one accepted completion per shard; any other completion was a duplicate.
    rows = f.sql("SELECT shard_id, COUNT(*) FROM leases WHERE state='completed' GROUP BY shard_id")
    assert len(rows) == n and all(c == 1 for _, c in rows)


def check_hub_shards(f: Fleet, n: int):
    files = f.hub_files()
    assert len(files) == n  # stored exactly once each (the hub names files by shard id)
    ids = set()
    for p in files:
        s = wire.decode_shard(p.read_bytes())
        ids.add(s.id)
        assert s.producer.runner == "replay"
        assert s.records and all(r.flags & 1 for r in s.records)
    expected = {row[0] for row in f.sql("SELECT id FROM shards")}
    assert ids == expected
    # The coordinator recorded the hash of what the hub holds (unknown only when
    # a re-leased copy met the hub's stored one: hub_result "conflict").
    sha = {i: (h, r) for i, h, r in f.sql("SELECT id, sha256, hub_result FROM shards")}
    for p in files:
        s = wire.decode_shard(p.read_bytes())
        h, r = sha[s.id]
        assert h == s.sha256.hex() if r != "conflict" else h is None


def test_sweep_200_shards_4_agents(fleet_factory):
    f = fleet_factory(200)
    f.start(agents=4)
    f.wait(lambda: f.counts().get("done") == 200, 60, "200 shards done")
    assert_each_shard_completed_once(f, 200)
    check_hub_shards(f, 200)
    # All four agents took part.
    workers = {w for (w,) in f.sql("SELECT DISTINCT done_by FROM shards")}
    assert workers == {f"node{i}/gpu0" for i in range(4)}
    # Each worker is bound to the CURVE key it connected with.
    assert dict(f.sql("SELECT id, public_key FROM workers")) == {
        f"node{i}/gpu0": f.agent_keys[i] for i in range(4)}
    # No lease expired in a healthy run: nothing was done twice.
    assert f.sql("SELECT COUNT(*) FROM leases WHERE state!='completed'")[0][0] == 0
    if DIODE.exists():
        out = subprocess.run([str(DIODE), "status", "--coordinator", f.coord_ep, "--keys",
                              str(f.tmp / "status.key"), "--server-key", f.coord_pub],
                             capture_output=True, text=True, timeout=10)
        assert out.returncode == 0, out.stderr
        assert "[##############################] 100.0%  200/200 done" in out.stdout
        assert "live workers: 4" in out.stdout
    for i in range(4):
        assert f.stop(f"agent{i}") == 0  # SIGTERM: clean exit
    assert f.stop("coordinator") == 0


def test_agent_sigkill_mid_shard_is_released_and_stored_once(fleet_factory):
    f = fleet_factory(6)
    f.start(agents=0)
    f.start_agent(0, delay_ms=4000)  # slow: will be killed mid-shard
    f.wait(lambda: f.sql("SELECT COUNT(*) FROM shards WHERE state='leased' AND worker_id='node0/gpu0'")[0][0] == 1,
           10, "agent0 to hold a lease")
    (victim,) = f.sql("SELECT id FROM shards WHERE state='leased' AND worker_id='node0/gpu0'")[0]
    f.stop("agent0", signal.SIGKILL)
    f.start_agent(1, delay_ms=50)
    f.wait(lambda: f.counts().get("done") == 6, 30, "6 shards done")
    leases = f.sql("SELECT worker_id, state FROM leases WHERE shard_id=? ORDER BY issued_ms", victim)
    assert leases[0] == ("node0/gpu0", "expired")
    assert leases[-1] == ("node1/gpu0", "completed")
    assert f.sql("SELECT attempts FROM shards WHERE id=?", victim)[0][0] == 2
    assert_each_shard_completed_once(f, 6)
    check_hub_shards(f, 6)


def test_coordinator_restart_loses_and_duplicates_nothing(fleet_factory):
    f = fleet_factory(60)
    f.start(agents=0)
    f.start_agent(0, delay_ms=40, gpus=2)  # a 2-GPU node: two workers
    f.start_agent(1, delay_ms=40)
    f.wait(lambda: f.counts().get("done", 0) >= 15, 30, "15 shards done")
    f.stop("coordinator", signal.SIGKILL)
    time.sleep(0.5)  # agents keep working, their requests time out and back off
    done_before = f.counts().get("done", 0)
    f.start_coordinator()
    f.wait(lambda: f.counts().get("done") == 60, 60, "60 shards done after restart")
    assert done_before >= 15
    assert {w for (w,) in f.sql("SELECT DISTINCT done_by FROM shards")} == {"node0/gpu0", "node0/gpu1", "node1/gpu0"}
    assert "open lease(s) from before the restart" in f.log("coordinator")
    assert_each_shard_completed_once(f, 60)
    check_hub_shards(f, 60)


def test_hub_outage_keeps_shards_in_spool(fleet_factory):
    f = fleet_factory(4)
    f.outage.touch()
    f.start(agents=1)
    f.wait(lambda: len(list((f.tmp / "spool0" / "gpu0").glob("*.json"))) == 1, 15, "a spooled shard")
    time.sleep(1.0)
    assert f.counts().get("done", 0) == 0 and not f.hub_files()
    assert "push of fleet-test/s000000 failed (unavailable: simulated outage)" in f.log("agent0")
    # Stop the agent during the outage: the shard stays spooled on disk.
    assert f.stop("agent0") == 0
    assert len(list((f.tmp / "spool0" / "gpu0").glob("*.msgpack"))) == 1
    f.outage.unlink()
    f.start_agent(0)
    f.wait(lambda: f.counts().get("done") == 4, 30, "4 shards done after the outage")
    # The agent removes a spooled shard right after the coordinator took its COMPLETE
    # (agent/src/worker.cpp, deliver), so "done" can be read a moment before the file goes
    # (seen under ASan+UBSan in CI): wait for it rather than assert at once.
    f.wait(lambda: not list((f.tmp / "spool0" / "gpu0").glob("*.msgpack")), 10, "the spool emptied after COMPLETE")
    assert_each_shard_completed_once(f, 4)
    check_hub_shards(f, 4)


def test_sigterm_releases_the_current_lease(fleet_factory):
    f = fleet_factory(2)
    f.start(agents=1, delay_ms=10000)
    f.wait(lambda: f.counts().get("leased") == 1, 10, "a lease")
    t0 = time.time()
    assert f.stop("agent0") == 0
    assert time.time() - t0 < 5
    assert f.counts() == {"pending": 2}
    assert f.sql("SELECT state FROM leases") == [("released",)]
    assert f.sql("SELECT MAX(attempts) FROM shards")[0][0] == 0  # a release does not use an attempt


def test_inductor_runner_crash_fails_lease_with_reason(fleet_factory):
    f = fleet_factory(1, max_attempts=2)
    f.start(agents=0)
    start_inductor_agent(f, CRASHING_COLLECTOR, timeout_s=5)
    f.wait(lambda: f.counts().get("failed") == 1, 20, "the shard to fail")
    (err,) = f.sql("SELECT error FROM shards")[0]
    assert "collector crashed (signal 11)" in err and "illegal memory access" in err
    assert f.sql("SELECT attempts FROM shards")[0][0] == 2
    assert f.procs["agent0"].poll() is None  # the agent survived its collector


def test_inductor_runner_timeout(fleet_factory):
    f = fleet_factory(1, max_attempts=1)
    f.start(agents=0)
    start_inductor_agent(f, HANGING_COLLECTOR, timeout_s=1)
    f.wait(lambda: f.counts().get("failed") == 1, 20, "the shard to time out")
    assert "collector timed out after 1 s" in f.sql("SELECT error FROM shards")[0][0]


def test_unknown_agent_key_is_refused(fleet_factory, tmp_path):
    f = fleet_factory(2)
    f.start(agents=0)
    keygen(tmp_path / "intruder.key")
    f.start_agent(5, key=str(tmp_path / "intruder.key"))
    f.wait(lambda: "refused CURVE connection" in f.log("coordinator"), 10, "the refusal to be logged")
    time.sleep(0.5)
    assert f.sql("SELECT COUNT(*) FROM workers")[0][0] == 0
    assert f.counts() == {"pending": 2}


@pytest.mark.skipif(not REAL_HUB.exists(), reason="diode-hub not built")
def test_sweep_against_real_hub(fleet_factory):
    """Issue 4's acceptance as written: coordinator + the real hub + 4 replay agents, 200 shards."""
    f = fleet_factory(200, real_hub=True)
    f.start(agents=4)
    f.wait(lambda: f.counts().get("done") == 200, 120, "200 shards done via diode-hub")
    assert_each_shard_completed_once(f, 200)
    assert set(r for (r,) in f.sql("SELECT DISTINCT hub_result FROM shards")) == {"stored"}
    if DIODE.exists():  # the hub's own export holds each shard once, with the hash the coordinator recorded
        out = f.tmp / "export.msgpack"
        subprocess.run([str(DIODE), "dataset", "export", "--data", str(f.hub_dir), "--hardware", "nvidia-h100-80gb",
                        "--out", str(out)], check=True, capture_output=True, timeout=30)
        from torch_diode import dataset
        shards = dataset.load_dataset(str(out)).shards
        assert sorted(s.id for s in shards) == sorted(i for (i,) in f.sql("SELECT id FROM shards"))
        sha = dict(f.sql("SELECT id, sha256 FROM shards"))
        assert all(sha[s.id] == s.sha256.hex() and all(r.flags & 1 for r in s.records) for s in shards)


def test_operator_commands_failed_requeue_submit_metrics(fleet_factory, tmp_path):
    """Issue 17: failed shards stay failed and are shown apart; `diode requeue` puts
    them back; `diode manifest submit` adds a manifest at runtime; /metrics,
    /healthz and JSON logs; a changed manifest file does not stop a restart."""
    if not DIODE.exists():
        pytest.skip("no diode CLI in this build")
    f = fleet_factory(2, max_attempts=1)
    metrics = f"127.0.0.1:{free_port()}"
    f.start_hub()
    f.start_coordinator(["--metrics-listen", metrics, "--log-json"])
    start_inductor_agent(f, CRASHING_COLLECTOR, timeout_s=5)
    f.wait(lambda: f.counts().get("failed") == 2, 20, "both shards to fail")
    time.sleep(0.5)
    assert f.counts() == {"failed": 2}  # failed for good: never leased again
    out = f.diode("status").stdout
    assert "0/2 done, 2 failed, 0 leased, 0 pending" in out, out
    assert "failed 2 shard(s) for good" in out and "finished with 2 failed" in out, out
    assert "ETA finished" not in out, out
    assert f.stop("agent0") == 0

    # Requeue onto a working agent: done, attempts reset.
    f.start_agent(1)
    assert "requeued 2 failed shard(s) of fleet-test" in f.diode("requeue", "--manifest", "fleet-test", "--failed").stdout
    f.wait(lambda: f.counts().get("done") == 2, 20, "the requeued shards to be done")
    assert f.sql("SELECT MAX(attempts) FROM shards")[0][0] == 1
    out = f.diode("status").stdout
    assert "2/2 done, 0 failed" in out and "shards/min, finished\n" in out, out
    bad = f.diode("requeue", "--manifest", "nope", "--failed", check=False)
    assert bad.returncode != 0 and "not_found" in bad.stderr, bad.stderr

    # A manifest submitted at runtime, for hardware no agent has.
    a100 = tmp_path / "a100.yaml"
    a100.write_text(MANIFEST.format(name="fleet-a100", problems=4, max_attempts=1).replace('"H100"', '"A100"')
                    .replace('"9.0"', '"8.0"').replace("min_memory_gib: 79", "min_memory_gib: 39"))
    assert "added manifest fleet-a100: 2 shards" in f.diode("manifest", "submit", str(a100)).stdout
    assert "unchanged" in f.diode("manifest", "submit", str(a100)).stdout
    changed = tmp_path / "changed.yaml"
    changed.write_text(a100.read_text().replace("priority: 10", "priority: 20"))
    out = f.diode("manifest", "submit", str(changed), check=False)
    assert out.returncode != 0 and "conflict" in out.stderr and "priority 10 -> 20" in out.stderr, out.stderr
    out = f.diode("status").stdout
    assert ("not scheduled: no live agent matches hardware rules vendor=nvidia device_name=A100 cc=8.0 "
            "min_memory_gib=39") in out, out

    # Metrics and health.
    code, body = http_get(f"http://{metrics}/healthz")
    assert code == 200 and json.loads(body)["status"] == "ok", body
    def metric_line():
        return http_get(f"http://{metrics}/metrics")[1]
    f.wait(lambda: 'diode_coordinator_shards{manifest="fleet-a100",state="pending"} 2' in metric_line(), 10,
           "the submitted manifest in /metrics")
    body = metric_line()
    for line in ('diode_coordinator_shards{manifest="fleet-test",state="done"} 2',
                 'diode_coordinator_shards{manifest="fleet-test",state="failed"} 0',
                 'diode_coordinator_leases_active{manifest="fleet-test"} 0',
                 "diode_coordinator_completions_total 2", "diode_coordinator_failures_total 2",
                 "diode_coordinator_agents_live 1"):
        assert line + "\n" in body, body
    # --log-json: every line is one JSON object.
    lines = [ln for ln in f.log("coordinator").splitlines() if ln.strip()]
    assert lines and all(json.loads(ln)["level"] for ln in lines)

    # Restart with the manifest file edited in place: skipped, logged, shown; no crash loop.
    assert f.stop("coordinator") == 0
    f.manifest.write_text(f.manifest.read_text().replace("priority: 10", "priority: 11"))
    f.start_coordinator()
    f.wait(lambda: "changed since it was loaded" in f.log("coordinator"), 10, "the changed manifest to be logged")
    time.sleep(0.3)
    assert f.procs["coordinator"].poll() is None, f.log("coordinator")
    assert "[error]" in f.log("coordinator") and "priority 10 -> 11" in f.log("coordinator")
    out = f.diode("status").stdout
    assert "manifest files skipped at start" in out and "the stored version stays active" in out, out
    assert f.sql("SELECT priority FROM manifests WHERE name='fleet-test'") == [(10,)]

