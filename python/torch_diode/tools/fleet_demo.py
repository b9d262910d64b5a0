"""The whole pipeline on one machine (the README's main command, `bash .ci/demo`).

keys -> hub + coordinator + N agents (replay runner: no GPU here) -> a manifest's
sweep -> dataset export -> `mpirun -np 2 diode-train` -> signed bundle published
into the hub's registry -> `import torch_diode` pulls and verifies it over HTTP.
Every process is started by this script and stopped at the end, also on error.

The replay runner answers each requested problem with the records of the nearest
problem of the committed real H100 dataset (datasets/nvidia-h100-80gb, collector v2),
flagged "replayed": the demo shows the machinery, not model quality.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[3]
HW_KEY = "nvidia-h100-80gb"
DEVICE = "NVIDIA H100 80GB HBM3"

MANIFEST = """version: 1
name: demo-h100
requester: fleet-demo
priority: 10
max_attempts: 3
hardware:
  vendor: nvidia
  device_name: "H100"
  compute_capability: ["9.0"]
  min_memory_gib: 79
sweep:
  ops: [mm, addmm, bmm, baddbmm]
  dtypes: [float16, bfloat16]
  problems: {problems}
  problems_per_shard: 2
  seed: 2026
  search_space: EXHAUSTIVE
  shapes:
    distribution: lognormal
    m: {{mean: 6.5725, std: 2.5562}}
    n: {{mean: 5.9139, std: 1.6697}}
    k: {{mean: 6.2049, std: 2.1647}}
"""


def say(msg: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Demo:
    def __init__(self, build: pathlib.Path, work: pathlib.Path, agents: int, problems: int):
        self.build, self.work, self.n_agents, self.problems = build, work, agents, problems
        self.procs: list[subprocess.Popen] = []
        self.bin = {"diode": build / "cli" / "diode", "hub": build / "hub" / "diode-hub",
                    "coord": build / "coordinator" / "diode-coordinator", "agent": build / "agent" / "diode-agent",
                    "train": build / "models" / "diode-train"}
        for name, path in self.bin.items():
            if not path.exists():
                raise SystemExit(f"demo: {path} is missing; run .ci/setup first")

    # ------------------------------------------------------------ processes
    def run(self, *args, **kw) -> str:
        r = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
        if r.returncode != 0:
            raise SystemExit(f"demo: {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        return r.stdout

    def spawn(self, name: str, *args) -> subprocess.Popen:
        log = open(self.work / f"{name}.log", "ab")
        p = subprocess.Popen([str(a) for a in args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        return p

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.time() + 10
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        left = [p.pid for p in self.procs if p.poll() is None]
        say("all processes stopped" if not left else f"processes left: {left}")

    # ------------------------------------------------------------ stages
    def keys(self) -> None:
        w = self.work
        self.coord_pub = json.loads(self.run(self.bin["coord"], "keygen", w / "coord.key") and
                                    (w / "coord.key").read_text())["public"]
        self.run(self.bin["coord"], "keygen", w / "hub.key")
        self.hub_pub = json.loads((w / "hub.key").read_text())["public"]
        agent_keys = []
        for i in range(self.n_agents + 1):  # the last one is the operator's, for `diode status`
            self.run(self.bin["coord"], "keygen", w / f"agent{i}.key")
            agent_keys.append(json.loads((w / f"agent{i}.key").read_text())["public"])
        (w / "coord_allow.txt").write_text("".join(f"{k} agent{i}\n" for i, k in enumerate(agent_keys)))
        (w / "hub_allow.txt").write_text("".join(f"{k}\n" for k in agent_keys[:-1]))
        (w / "token").write_text("demo-" + os.urandom(12).hex())
        self.run(self.bin["diode"], "keys", "--keys", w / "signing", "init")
        say(f"keys: CurveZMQ for hub, coordinator and {self.n_agents} agents; Ed25519 root + signing keys")

    def start_services(self) -> None:
        w = self.work
        self.coord_ep = f"tcp://127.0.0.1:{free_port()}"
        self.hub_ep = f"tcp://127.0.0.1:{free_port()}"
        self.spawn("hub", self.bin["hub"], "--data", w / "hub", "--ingest", self.hub_ep, "--http", "127.0.0.1:0",
                   "--server-key", w / "hub.key", "--allowlist", w / "hub_allow.txt",
                   "--write-token-file", w / "token", "--ready-file", w / "hub.ready")
        (w / "manifest.yaml").write_text(MANIFEST.format(problems=self.problems))
        self.run(self.bin["diode"], "manifest", "validate", w / "manifest.yaml")
        self.spawn("coordinator", self.bin["coord"], "serve", "--db", w / "coord.db", "--bind", self.coord_ep,
                   "--keys", w / "coord.key", "--allowlist", w / "coord_allow.txt",
                   "--manifests", w / "manifest.yaml", "--lease-ms", "20000", "--heartbeat-ms", "1000")
        deadline = time.time() + 30
        while not (w / "hub.ready").exists():
            if time.time() > deadline:
                raise SystemExit("demo: the hub did not start; see hub.log")
            time.sleep(0.1)
        self.http_port = json.loads((w / "hub.ready").read_text())["http_port"]
        replay = ROOT / "datasets" / HW_KEY
        say(f"replay agents answer from {replay_problem_count(replay)} measured H100 problems in {replay}")
        for i in range(self.n_agents):
            self.spawn(f"agent{i}", self.bin["agent"], "run", "--coordinator", self.coord_ep,
                       "--coordinator-key", self.coord_pub, "--hub", self.hub_ep, "--hub-key", self.hub_pub,
                       "--keys", w / f"agent{i}.key", "--spool", w / f"spool{i}", "--name", f"node{i}",
                       "--fake-gpus", "1", "--device-name", DEVICE, "--compute-capability", "9.0",
                       "--runner", "replay", "--replay-data", replay, "--replay-delay-ms", "50")
        say(f"hub (ingest {self.hub_ep}, http :{self.http_port}), coordinator ({self.coord_ep}), "
            f"{self.n_agents} replay agents started")

    def shard_states(self) -> dict[str, int]:
        try:
            with sqlite3.connect(f"file:{self.work / 'coord.db'}?mode=ro", uri=True, timeout=1) as db:
                return dict(db.execute("SELECT state, COUNT(*) FROM shards GROUP BY state"))
        except sqlite3.Error:
            return {}

    def sweep(self) -> None:
        start, last = time.time(), ""
        total = (self.problems + 1) // 2
        while True:
            states = self.shard_states()
            done = states.get("done", 0)
            line = f"sweep: {done}/{total} shards done " + " ".join(f"{k}={v}" for k, v in sorted(states.items()))
            if line != last:
                say(line)
                last = line
            if done == total:
                break
            if states.get("failed"):
                raise SystemExit(f"demo: shards failed: {states}; see agent*.log")
            if time.time() - start > 300:
                raise SystemExit(f"demo: sweep not finished after 300 s: {states}")
            for p in self.procs:
                if p.poll() is not None:
                    raise SystemExit(f"demo: a process exited early ({p.args[0]}); see the logs in {self.work}")
            time.sleep(0.5)
        print(self.run(self.bin["diode"], "status", "--db", self.work / "coord.db"), end="")

    def train_and_publish(self) -> dict:
        w = self.work
        export = w / "dataset.msgpack.gz"
        self.run(self.bin["diode"], "dataset", "export", "--hub", f"http://127.0.0.1:{self.http_port}",
                 "--hardware", HW_KEY, export)
        print(self.run(self.bin["diode"], "dataset", "stats", export), end="")
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        say("training: mpirun -np 2 diode-train")
        out = self.run("mpirun", "-np", "2", "--oversubscribe", self.bin["train"], "--hardware", HW_KEY,
                       "--data", export, "--out", w / "model", "--epochs", "15", "--seed", "1",
                       "--include-replayed", env=env)
        print("\n".join(line for line in out.splitlines()[-6:]))
        self.run(self.bin["diode"], "publish", "--model", w / "model", "--registry", w / "hub" / "models",
                 "--keys", w / "signing")
        model = json.loads((w / "model" / "model.json").read_text())
        say(f"published a signed bundle for {HW_KEY} into the hub's registry")
        return model

    def pull_with_hook(self) -> dict:
        env = dict(os.environ, DIODE_HUB_URL=f"http://127.0.0.1:{self.http_port}",
                   DIODE_ROOT_PUBKEY=str(self.work / "signing" / "root.pub"), DIODE_HARDWARE_KEY=HW_KEY,
                   DIODE_CACHE_DIR=str(self.work / "cache"),
                   DIODE_CLIENT_LIB=str(self.build / "shared" / "bundle" / "libdiode_client.so"))
        code = ("import json, torch_diode as d; "
                "print(json.dumps({'hardware': d.get_detected_hardware(), 'installed': d.is_installed(), "
                "'models': d.list_available_models(), 'stats': d.get_prediction_stats()}, default=str))")
        out = self.run(sys.executable, "-c", code, env=env)
        info = json.loads(out.strip().splitlines()[-1])
        if not info["installed"]:
            raise SystemExit(f"demo: import torch_diode did not install the model: {info}")
        return info


def replay_problem_count(path: pathlib.Path) -> int:
    """Problems in the dataset the replay agents answer from (what the demo replays)."""
    sys.path.insert(0, str(ROOT / "python"))
    from torch_diode.dataset import load_dataset
    return sum(len(s.problems) for s in load_dataset(path).shards)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--problems", type=int, default=120)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)
    work = pathlib.Path(tempfile.mkdtemp(prefix="diode-fleet-demo-"))
    demo = Demo(pathlib.Path(args.build), work, args.agents, args.problems)
    t0 = time.time()
    try:
        demo.keys()
        demo.start_services()
        demo.sweep()
        model = demo.train_and_publish()
        info = demo.pull_with_hook()
    finally:
        demo.stop_all()
        if not args.keep:
            subprocess.run(["rm", "-rf", str(work)])
    cached = [m for m in info["models"] if m.get("source") == "cache"]
    m = model.get("metrics", {})
    print("\n=== summary")
    print(f"  sweep          {args.problems} problems in {(args.problems + 1) // 2} shards, "
          f"{model.get('dataset', {}).get('records', '?')} records (replayed from the measured H100 data)")
    print(f"  model          {model.get('architecture')}")
    print(f"  metrics        {json.dumps(m)[:300]}")
    print(f"  hook           hardware {info['hardware'].get('hardware_key')} "
          f"({info['hardware'].get('hardware_key_source')}), bundle version "
          f"{cached[0]['version'] if cached else '?'} pulled over HTTP and verified, installed={info['installed']}")
    print(f"  time           {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
