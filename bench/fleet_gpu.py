"""Collect a manifest's sweep through the real fleet on a GPU machine (issue 18).

  python bench/fleet_gpu.py --bin DIR --manifest manifests/h100-mix-2026112505.yaml \
      --work .carry/fleet --deadline-s 520 --out "$OUT"

hub (CURVE ingest) + coordinator (the manifests: --manifest may be given more than once;
the coordinator leases by each manifest's priority) + one diode-agent with the `inductor`
runner on this machine's GPUs (found by nvidia-smi, nothing faked), all on loopback. At
the deadline the agent is stopped with SIGTERM (it releases its lease), then the hub's
dataset for the manifest's hardware is exported with `diode dataset export` and checked:
every shard the coordinator recorded as done (the content hash the agent reported in
COMPLETE) must be in the export with the same content hash, and nothing else.

Resumable: --work keeps the hub's store, the coordinator's database, the keys and the
agent's spool, so a second call continues the sweep (device machines keep .carry/ while
warm). Copies the export, `diode status`, `diode dataset stats` and the logs to --out.

The agent takes its other settings from the environment (docs/operations.md): with
DIODE_AGENT_PERSISTENT_COLLECTOR=1 it keeps one collector across shards; compare the
`diode dataset stats` first-problem and other-problem medians of the two ways.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
from torch_diode.tools.fleet_demo import free_port  # noqa: E402


def say(msg: str) -> None:
    print(f"[fleet {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(*args, env=None) -> str:
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"fleet: {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


class Fleet:
    def __init__(self, bindir: pathlib.Path, work: pathlib.Path):
        self.bin = {n: bindir / n for n in ("diode", "diode-hub", "diode-coordinator", "diode-agent")}
        for p in self.bin.values():
            if not p.exists():
                raise SystemExit(f"fleet: {p} is missing")
        self.work = work
        self.procs: list[subprocess.Popen] = []

    def spawn(self, name: str, *args, env=None) -> subprocess.Popen:
        log = open(self.work / f"{name}.log", "ab")
        p = subprocess.Popen([str(a) for a in args], stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True, env=env)
        self.procs.append(p)
        return p

    def stop(self, p: subprocess.Popen, grace_s: float) -> None:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()

    def keys(self) -> None:
        w = self.work
        if (w / "coord_allow.txt").exists():
            return  # a resumed run keeps its identities (the hub and coordinator know them)
        coord = self.bin["diode-coordinator"]
        for name in ("coord", "hub", "agent0", "operator"):
            run(coord, "keygen", w / f"{name}.key")
        pub = {n: json.loads((w / f"{n}.key").read_text())["public"] for n in ("coord", "hub", "agent0", "operator")}
        (w / "coord_allow.txt").write_text(f"{pub['agent0']} agent0\n{pub['operator']} operator\n")
        (w / "hub_allow.txt").write_text(f"{pub['agent0']}\n")
        (w / "token").write_text("fleet-" + os.urandom(12).hex())

    def start(self, manifests: list[pathlib.Path], replay: pathlib.Path | None) -> None:
        w = self.work
        pub = lambda n: json.loads((w / f"{n}.key").read_text())["public"]  # noqa: E731
        self.coord_ep = f"tcp://127.0.0.1:{free_port()}"
        self.hub_ep = f"tcp://127.0.0.1:{free_port()}"
        (w / "hub.ready").unlink(missing_ok=True)
        self.spawn("hub", self.bin["diode-hub"], "--data", w / "hub", "--ingest", self.hub_ep,
                   "--http", "127.0.0.1:0", "--server-key", w / "hub.key", "--allowlist", w / "hub_allow.txt",
                   "--write-token-file", w / "token", "--ready-file", w / "hub.ready")
        self.spawn("coordinator", self.bin["diode-coordinator"], "serve", "--db", w / "coord.db",
                   "--bind", self.coord_ep, "--keys", w / "coord.key", "--allowlist", w / "coord_allow.txt",
                   "--manifests", *manifests, "--lease-ms", "120000", "--heartbeat-ms", "5000")
        deadline = time.time() + 30
        while not (w / "hub.ready").exists():
            if time.time() > deadline:
                raise SystemExit("fleet: the hub did not start; see hub.log")
            time.sleep(0.1)
        self.http = f"http://127.0.0.1:{json.loads((w / 'hub.ready').read_text())['http_port']}"
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   PYTHONUNBUFFERED="1", TORCH_DIODE_AUTO_INSTALL="0")
        runner = ["--runner", "inductor", "--python", sys.executable]
        if replay:  # a rehearsal of this script without a GPU: replayed records, a fake GPU
            runner = ["--runner", "replay", "--replay-data", replay, "--fake-gpus", "1"]
        self.agent = self.spawn("agent0", self.bin["diode-agent"], "run", "--coordinator", self.coord_ep,
                                "--coordinator-key", pub("coord"), "--hub", self.hub_ep, "--hub-key", pub("hub"),
                                "--keys", w / "agent0.key", "--spool", w / "spool0", "--name", "gpu-node",
                                *runner, env=env)
        say(f"hub ({self.hub_ep}, {self.http}), coordinator ({self.coord_ep}), agent ({runner[1]} runner) started")

    def states(self) -> dict[str, int]:
        try:
            with sqlite3.connect(f"file:{self.work / 'coord.db'}?mode=ro", uri=True, timeout=1) as db:
                return dict(db.execute("SELECT state, COUNT(*) FROM shards GROUP BY state"))
        except sqlite3.Error:
            return {}

    def done_hashes(self) -> dict[str, str]:
        with sqlite3.connect(f"file:{self.work / 'coord.db'}?mode=ro", uri=True, timeout=5) as db:
            return dict(db.execute("SELECT id, sha256 FROM shards WHERE state = 'done'"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, type=pathlib.Path, help="directory with diode, diode-hub, "
                    "diode-coordinator and diode-agent")
    ap.add_argument("--manifest", required=True, type=pathlib.Path, action="append",
                    help="a manifest to serve (repeat for more)")
    ap.add_argument("--work", required=True, type=pathlib.Path)
    ap.add_argument("--deadline-s", type=float, default=520)
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--hardware-key", default="", help="the key this GPU's shards carry (default: the one "
                    "key the hub holds data for, from GET /v1/hardware)")
    ap.add_argument("--replay-data", type=pathlib.Path,
                    help="rehearse without a GPU: the agent's replay runner answers from this dataset")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    a.out.mkdir(parents=True, exist_ok=True)
    f = Fleet(a.bin.resolve(), a.work.resolve())
    start = time.time()
    f.keys()
    for m in a.manifest:
        print(run(f.bin["diode"], "manifest", "validate", m), end="")
    try:
        f.start([m.resolve() for m in a.manifest], a.replay_data.resolve() if a.replay_data else None)
        last = ""
        while time.time() - start < a.deadline_s:
            st = f.states()
            line = " ".join(f"{k}={v}" for k, v in sorted(st.items()))
            if line != last:
                say(f"shards: {line}")
                last = line
            if st and set(st) <= {"done", "failed"}:
                break
            for p in f.procs:
                if p.poll() is not None:
                    raise SystemExit(f"fleet: {p.args[0]} exited ({p.returncode}); see {f.work}/*.log")
            time.sleep(2)
        say("deadline or sweep end: stopping the agent (SIGTERM releases its lease)")
        f.stop(f.agent, 60)
        status = run(f.bin["diode"], "status", "--db", f.work / "coord.db")
        print(status, end="")
        # The export is the dataset the issue commits: the hub's, not the agent's files.
        export = a.out / "export.msgpack.gz"
        key = a.hardware_key
        if not key:
            import urllib.request
            with urllib.request.urlopen(f.http + "/v1/hardware", timeout=10) as r:
                keys = [h["key"] for h in json.load(r)["hardware"]]
            if len(keys) != 1:
                raise SystemExit(f"fleet: the hub holds data for {keys}; say which with --hardware-key")
            key = keys[0]
        say(f"exporting the hub's dataset for {key}")
        run(f.bin["diode"], "dataset", "export", "--hub", f.http, "--hardware", key, export)
        stats = run(f.bin["diode"], "dataset", "stats", export)
        print(stats, end="")
        from torch_diode.dataset import load_dataset
        exported = {s.id: bytes(s.sha256).hex() for s in load_dataset(export).shards}
        done = f.done_hashes()
        same = {k for k in done if exported.get(k) == done[k]}
        say(f"content hashes: {len(same)}/{len(done)} done shards identical in the hub's export; "
            f"{len(set(exported) - set(done))} exported shards not done at the coordinator")
        (a.out / "fleet-check.json").write_text(json.dumps(
            {"done": done, "exported": exported, "identical": sorted(same)}, indent=1))
        (a.out / "status.txt").write_text(status)
        (a.out / "stats.txt").write_text(stats)
    finally:
        for p in f.procs:
            f.stop(p, 20)
        for log in f.work.glob("*.log"):
            (a.out / log.name).write_bytes(log.read_bytes()[-2_000_000:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
