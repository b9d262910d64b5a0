"""Operating the agent and the hub (issue 17): keygen's .pub files, flags from
environment variables, JSON logs, the agent's /healthz and /metrics, no retry
of a permanent hub rejection, and the replay runner's hardware check.

Real processes on loopback, like test_fleet.py (whose Fleet helper starts the
coordinator, the fake hub and agents)."""
from __future__ import annotations

import json
import os
import pathlib
import re
import stat
import subprocess
import sys
import time
import urllib.error

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# test_fleet.py's harness; its fleet_factory fixture reaches pytest through this import.
from test_fleet import (AGENT, BUILD, COORD, FAKE_HUB, REAL_HUB, REPLAY_DATA, Fleet,  # noqa: E402
                        fleet_factory, free_port, http_get)

Z85 = re.compile(r"^[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}$")


def wait_http(url: str, timeout: float = 15) -> tuple[int, str]:
    end = time.time() + timeout
    while True:
        try:
            return http_get(url)
        except (urllib.error.URLError, ConnectionError):
            if time.time() > end:
                raise
            time.sleep(0.05)


def metric(text: str, name: str) -> float:
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    assert m, f"{name} not in\n{text}"
    return float(m.group(1))


# ------------------------------------------------------------------ keys ----

@pytest.mark.parametrize("argv", [
    [AGENT, "keygen"], [COORD, "keygen"], [REAL_HUB, "keygen"], [REAL_HUB, "--generate-key"]],
    ids=["agent", "coordinator", "hub", "hub-generate-key-alias"])
def test_keygen_writes_key_pair_and_pub_file(tmp_path, argv):
    if not pathlib.Path(argv[0]).exists():
        pytest.skip(f"{argv[0]} not built")
    key = tmp_path / "d.key"
    p = subprocess.run([str(a) for a in argv] + [str(key)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    pub = p.stdout.strip()
    assert Z85.match(pub), p.stdout
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert json.loads(key.read_text())["public"] == pub
    assert (tmp_path / "d.key.pub").read_text() == pub + "\n"
    assert f"{key}.pub" in p.stderr, p.stderr  # the path is printed


def test_pub_file_is_accepted_by_the_key_flags(fleet_factory, tmp_path):
    """An agent given the servers' .pub files (as files) works like one given the keys."""
    f = fleet_factory(2)
    f.coord_pub = str(tmp_path / "coord.key.pub")
    f.hub_pub = str(tmp_path / "hub.key.pub")
    f.start(agents=1)
    f.wait(lambda: f.counts().get("done") == 2, 30, "2 shards done")


# ------------------------------------------------ env vars, JSON logs ----

def agent_env(f: Fleet, i: int, **extra) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "DIODE_AGENT_COORDINATOR": f.coord_ep, "DIODE_AGENT_COORDINATOR_KEY": f.coord_pub,
        "DIODE_AGENT_HUB": f.hub_ep, "DIODE_AGENT_HUB_KEY": f.hub_pub,
        "DIODE_AGENT_KEYS": str(f.tmp / f"agent{i}.key"), "DIODE_AGENT_SPOOL": str(f.tmp / f"spool{i}"),
        "DIODE_AGENT_NAME": f"node{i}", "DIODE_AGENT_FAKE_GPUS": "1",
        "DIODE_AGENT_DEVICE_NAME": "NVIDIA H100 80GB HBM3", "DIODE_AGENT_COMPUTE_CAPABILITY": "9.0",
        "DIODE_AGENT_RUNNER": "replay", "DIODE_AGENT_REPLAY_DATA": str(REPLAY_DATA),
        "DIODE_AGENT_REQUEST_TIMEOUT_MS": "500", "DIODE_AGENT_PUSH_TIMEOUT_MS": "2000",
        "DIODE_AGENT_BACKOFF_MAX_MS": "300"})
    env.update(extra)
    return env


def test_help_lists_environment_variables():
    for exe, sub, names in [(AGENT, ["run"], ["DIODE_AGENT_HUB_KEY", "DIODE_AGENT_METRICS_LISTEN", "DIODE_AGENT_LOG_JSON"]),
                            (REAL_HUB, [], ["DIODE_HUB_SERVER_KEY", "DIODE_HUB_LOG_JSON", "DIODE_HUB_HTTP"])]:
        if not exe.exists():
            pytest.skip(f"{exe} not built")
        text = subprocess.run([str(exe), *sub, "--help"], capture_output=True, text=True).stdout
        for n in names:
            assert n in text, f"{n} not in {exe.name} --help:\n{text}"
    hub_help = subprocess.run([str(REAL_HUB), "--help"], capture_output=True, text=True).stdout
    assert "--log-json" in hub_help and "keygen" in hub_help


def test_agent_flags_from_environment_and_healthz_before_the_coordinator(fleet_factory):
    """Every flag from DIODE_AGENT_*: the agent starts, serves /healthz and
    answers 503 while no coordinator has answered, with the reason."""
    f = fleet_factory(2)
    port = free_port()
    log = open(f.tmp / "agent0.log", "wb")
    p = subprocess.Popen([str(AGENT), "run"], env=agent_env(f, 0, DIODE_AGENT_METRICS_LISTEN=f"127.0.0.1:{port}",
                                                            DIODE_AGENT_LOG_JSON="true"),
                         stdout=log, stderr=subprocess.STDOUT)
    f.procs["agent0"] = p
    code, body = wait_http(f"http://127.0.0.1:{port}/healthz")
    assert code == 503, body
    j = json.loads(body)
    assert j["status"] == "unhealthy" and "coordinator not reached yet" in j["reason"], j
    assert j["workers"][0]["name"] == "node0/gpu0"
    # Now the coordinator and hub come up: healthy, and the shards get done.
    f.start_hub()
    f.start_coordinator()
    f.wait(lambda: f.counts().get("done") == 2, 30, "2 shards done")
    code, body = http_get(f"http://127.0.0.1:{port}/healthz")
    assert code == 200 and json.loads(body)["status"] == "ok", body
    assert f.stop("agent0") == 0
    log.close()
    lines = [ln for ln in f.log("agent0").splitlines() if ln.strip()]
    assert lines
    for ln in lines:  # --log-json (from DIODE_AGENT_LOG_JSON): one JSON object per line
        rec = json.loads(ln)
        assert set(rec) == {"ts", "level", "msg"}, rec
    assert any("registered" in json.loads(ln)["msg"] for ln in lines)


def test_hub_flags_from_environment_and_json_logs(tmp_path):
    if not REAL_HUB.exists():
        pytest.skip("diode-hub not built")
    key = tmp_path / "hub.key"
    subprocess.run([str(REAL_HUB), "keygen", str(key)], check=True, capture_output=True)
    (tmp_path / "allow.txt").write_text("")
    ready = tmp_path / "ready.json"
    env = dict(os.environ, DIODE_HUB_DATA=str(tmp_path / "data"), DIODE_HUB_SERVER_KEY=str(key),
               DIODE_HUB_ALLOWLIST=str(tmp_path / "allow.txt"), DIODE_HUB_HTTP="127.0.0.1:0",
               DIODE_HUB_INGEST=f"tcp://127.0.0.1:{free_port()}", DIODE_HUB_READY_FILE=str(ready),
               DIODE_HUB_LOG_JSON="1", DIODE_HUB_LOG_LEVEL="debug")
    logf = tmp_path / "hub.log"
    with open(logf, "wb") as log:
        p = subprocess.Popen([str(REAL_HUB)], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        end = time.time() + 30
        while not ready.exists():
            assert p.poll() is None and time.time() < end, logf.read_text()
            time.sleep(0.05)
        port = json.loads(ready.read_text())["http_port"]
        assert http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200
    finally:
        p.terminate()
        p.wait(timeout=20)
    lines = [ln for ln in logf.read_text().splitlines() if ln.strip()]
    recs = [json.loads(ln) for ln in lines]
    assert all(set(r) == {"ts", "level", "msg"} for r in recs), lines
    assert any("ready" in r["msg"] for r in recs) and any(r["level"] == "warn" for r in recs), recs
    # A bad level is refused, not silently "off".
    bad = subprocess.run([str(REAL_HUB), "--log-level", "loud"], env=env, capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "--log-level" in bad.stderr, bad.stderr


# ------------------------------------------------------------ /metrics ----

def test_agent_metrics_count_the_work(fleet_factory):
    f = fleet_factory(3)
    port = free_port()
    f.start(agents=0)
    f.start_agent(0, extra=["--runner", "replay", "--replay-data", str(REPLAY_DATA),
                            "--metrics-listen", f"127.0.0.1:{port}"])
    f.wait(lambda: f.counts().get("done") == 3, 30, "3 shards done")
    time.sleep(0.3)
    code, text = http_get(f"http://127.0.0.1:{port}/metrics")
    assert code == 200
    assert metric(text, 'diode_agent_shards_run_total{status="done"}') == 3
    assert metric(text, 'diode_agent_shards_run_total{status="failed"}') == 0
    assert metric(text, "diode_agent_push_retries_total") == 0
    assert metric(text, "diode_agent_spool_depth") == 0
    assert metric(text, "diode_agent_gpus") == 1
    assert metric(text, "diode_agent_leases_active") == 0
    assert "# TYPE diode_agent_shards_run_total counter" in text


def test_transient_push_failures_are_retried_and_counted(fleet_factory):
    f = fleet_factory(1)
    port = free_port()
    f.outage.touch()
    f.start(agents=0)
    f.start_agent(0, extra=["--runner", "replay", "--replay-data", str(REPLAY_DATA),
                            "--metrics-listen", f"127.0.0.1:{port}"])
    f.wait(lambda: metric(wait_http(f"http://127.0.0.1:{port}/metrics")[1], "diode_agent_push_retries_total") >= 2,
           20, "retries during the outage")
    text = http_get(f"http://127.0.0.1:{port}/metrics")[1]
    assert metric(text, "diode_agent_spool_depth") == 1
    assert metric(text, "diode_agent_leases_active") == 1
    f.outage.unlink()
    f.wait(lambda: f.counts().get("done") == 1, 30, "the shard done after the outage")
    time.sleep(0.3)
    text = http_get(f"http://127.0.0.1:{port}/metrics")[1]
    assert metric(text, "diode_agent_spool_depth") == 0
    assert metric(text, 'diode_agent_shards_run_total{status="done"}') == 1


# ------------------------------------------------- permanent rejection ----

def test_permanent_rejection_is_pushed_once_and_reported_failed(fleet_factory):
    # max_attempts 3: the shard is failed after the first attempt only because the agent
    # reports the hub's rejection as permanent (FAIL ... permanent), not by running out.
    f = fleet_factory(1, max_attempts=3)
    port = free_port()
    reason = "shard.records[1965].median_us: implausibly slow (over 60 s)"
    push_log = f.tmp / "pushes.txt"
    f._spawn("hub", [str(FAKE_HUB), "--bind", f.hub_ep, "--keys", str(f.tmp / "hub.key"), "--allowlist",
                     str(f.tmp / "hub_allow.txt"), "--dir", str(f.hub_dir), "--reject", f"invalid_shard:{reason}",
                     "--push-log", str(push_log)])
    f.start_coordinator()
    f.start_agent(0, extra=["--runner", "replay", "--replay-data", str(REPLAY_DATA),
                            "--metrics-listen", f"127.0.0.1:{port}"])
    f.wait(lambda: f.counts().get("failed") == 1, 30, "the shard failed")
    time.sleep(1.5)  # several backoff periods: a retry would have shown by now
    assert push_log.read_text().splitlines() == ["fleet-test/s000000"], push_log.read_text()
    (err,) = f.sql("SELECT error FROM shards")[0]
    assert err == f"hub rejected shard: invalid_shard: {reason}", err
    text = http_get(f"http://127.0.0.1:{port}/metrics")[1]
    assert metric(text, 'diode_agent_shards_run_total{status="failed"}') == 1
    assert metric(text, "diode_agent_push_retries_total") == 0
    assert metric(text, "diode_agent_spool_depth") == 0  # not kept for another push
    assert not list((f.tmp / "spool0" / "gpu0").glob("*.msgpack"))


# ------------------------------------------------------------- replay ----

def test_replay_refuses_data_of_another_hardware_key(fleet_factory):
    f = fleet_factory(1)
    base = [str(AGENT), "run", "--coordinator", f.coord_ep, "--coordinator-key", f.coord_pub, "--hub", f.hub_ep,
            "--hub-key", f.hub_pub, "--keys", str(f.tmp / "agent0.key"), "--spool", str(f.tmp / "spool0"),
            "--fake-gpus", "1", "--device-name", "NVIDIA A100-SXM4-80GB", "--compute-capability", "8.0",
            "--runner", "replay", "--replay-data", str(REPLAY_DATA)]
    p = subprocess.run(base, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p.stderr
    assert "nvidia-h100-80gb" in p.stderr and "--replay-any-hardware" in p.stderr, p.stderr
    # With the override it starts (and keeps trying to reach the coordinator).
    q = subprocess.Popen(base + ["--replay-any-hardware"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(1.0)
        assert q.poll() is None
    finally:
        q.terminate()
        out, _ = q.communicate(timeout=15)
    assert "--replay-any-hardware" in out
