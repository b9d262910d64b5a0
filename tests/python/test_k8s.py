"""Kubernetes deployment (k8s/): offline validation, its power to catch defects,
flag consistency with the built binaries, and the secret generator."""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
BUILD = pathlib.Path(os.environ.get("DIODE_BUILD_DIR", ROOT / "build"))
VENV_PY = ROOT / ".venv" / "bin" / "python"
Z85_KEY = re.compile(r"^[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}$")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def validator():
    """Runs k8s/validate.sh once (it installs its tools); skips if it cannot."""
    p = run(["bash", str(K8S / "validate.sh")], cwd=ROOT)
    if p.returncode == 3:
        pytest.skip(f"k8s validator could not be installed: {p.stderr.strip()[-300:]}")
    return p


def test_validate_sh_passes(validator):
    out = validator.stdout + validator.stderr
    assert validator.returncode == 0, out
    assert "k8s: all checks passed" in out
    overlays = sorted(d.name for d in (K8S / "overlays").iterdir() if (d / "kustomization.yaml").is_file())
    assert {"dev", "production"} <= set(overlays), overlays
    for ov in overlays:
        assert f"ok k8s/overlays/{ov}/kustomization.yaml" in out, out
    # The alert rules and the Grafana dashboard, their expressions against the exported metrics.
    assert "ok k8s/monitoring:" in out, out
    n = int(re.search(r"(\d+) schema validations passed", out).group(1))
    assert n >= 80, out  # every resource, patched output and pod template, two versions


# Each defect is planted in a copy of k8s/; the validator must name every one.
DEFECTS = [
    # (file, old, new, expected error text)
    ("base/hub.yaml", "              memory: 16Gi\n", "",
     "container hub: no resources.limits.memory"),
    ("base/networkpolicy.yaml",
     "  name: diode-hub-ingest-from-agents\nspec:\n  podSelector:\n    matchLabels:\n      app.kubernetes.io/name: diode-hub\n"
     "  policyTypes: [\"Ingress\"]\n  ingress:\n    - from:\n        - podSelector:\n            matchLabels:\n"
     "              app.kubernetes.io/name: diode-agent\n",
     "  name: diode-hub-ingest-from-agents\nspec:\n  podSelector:\n    matchLabels:\n      app.kubernetes.io/name: diode-hub\n"
     "  policyTypes: [\"Ingress\"]\n  ingress:\n    - from:\n        - namespaceSelector: {}\n",
     "lets non-agents reach diode-hub:5557"),
    ("base/coordinator.yaml", "    type: Recreate", "    type: RollingUpdate", "strategy Recreate"),
    ("base/coordinator.yaml", "      terminationGracePeriodSeconds: 30", "      terminationGracePeriodSecond: 30",
     "terminationGracePeriodSecond"),
    ("base/training/mpijob-nvidia-h100-80gb.yaml", "cleanPodPolicy: Running", "cleanPodPolicy: Sometimes",
     "'Sometimes' is not one of"),
    ("overlays/production/agents/h200/pool.yaml", "  value: keys\n", "  value: keyz\n", "does not apply to DaemonSet/diode-agent"),
    ("overlays/production/manifests/h100.yaml", "priority: 100", "priority: 99", "differs from manifests/h100.yaml"),
    ("base/agent/agent.yaml", "      automountServiceAccountToken: false\n      # The agent", "      # The agent",
     "automountServiceAccountToken must be false"),
    # Monitoring: a metric no daemon exports, in a rule and in a dashboard panel; a bad duration.
    ("monitoring/prometheus-rules.yaml", "expr: diode_agent_spool_depth > 50", "expr: diode_agent_spool_size > 50",
     "metric diode_agent_spool_size is not exported"),
    ("monitoring/grafana-dashboard.json", "sum by (manifest, state) (diode_coordinator_shards)",
     "sum by (manifest, state) (diode_coordinator_shard_count)", "metric diode_coordinator_shard_count is not exported"),
    ("monitoring/prometheus-rules.yaml", "          for: 30m\n", "          for: 30 minutes\n",
     "is not a Prometheus duration"),
]


def test_validator_catches_planted_defects(tmp_path, validator):
    if validator.returncode != 0:
        pytest.fail("the unmodified tree must pass first:\n" + validator.stdout + validator.stderr)
    copy = tmp_path / "repo"
    (copy / "manifests").mkdir(parents=True)
    for m in (ROOT / "manifests").glob("*.yaml"):
        shutil.copy(m, copy / "manifests" / m.name)
    shutil.copytree(K8S, copy / "k8s", ignore=shutil.ignore_patterns("secrets"))
    # The daemons' sources: validate.py reads the exported metric names from them.
    for src in ("hub/main.cpp", "hub/src", "coordinator/src", "agent/main.cpp", "agent/src"):
        if (ROOT / src).is_dir():
            shutil.copytree(ROOT / src, copy / src)
        elif (ROOT / src).is_file():
            (copy / src).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / src, copy / src)
    for rel, old, new, _ in DEFECTS:
        f = copy / "k8s" / rel
        text = f.read_text()
        assert text.count(old) >= 1, f"{rel}: fixture text not found (update DEFECTS): {old!r}"
        f.write_text(text.replace(old, new, 1))
    p = run([str(VENV_PY), str(copy / "k8s" / "validate.py")], cwd=copy)
    assert p.returncode == 1, p.stdout + p.stderr
    for rel, _, _, expected in DEFECTS:
        assert expected in p.stderr, f"planted defect in {rel} not reported ({expected!r}):\n{p.stderr}"


# ------------------------------------------------ flags vs the real binaries --

def k8s_docs():
    for f in sorted(K8S.rglob("*.yaml")):
        if "secrets" in f.parts or f.name == "kustomization.yaml":
            continue
        for d in yaml.safe_load_all(f.read_text()):
            if isinstance(d, dict) and "kind" in d:
                yield f, d


def containers(doc):
    def walk(o):
        if isinstance(o, dict):
            for key in ("containers", "initContainers"):
                for c in o.get(key, []) or []:
                    if isinstance(c, dict) and "image" in c:
                        yield c
            for v in o.values():
                yield from walk(v)
        elif isinstance(o, list):
            for v in o:
                yield from walk(v)
    yield from walk(doc)


def used_flags(image_prefix, first_arg=None):
    """--flags the k8s/ containers of an image pass (args after the subcommand)."""
    flags = set()
    for _, d in k8s_docs():
        for c in containers(d):
            if not c["image"].startswith(image_prefix + ":"):
                continue
            args = list(c.get("command", [])[1:]) + list(c.get("args", []))
            if first_arg is not None and (not args or args[0] != first_arg):
                continue
            flags |= {a.split("=", 1)[0] for a in args if a.startswith("--")}
    return flags


def help_text(binary, *sub):
    exe = BUILD / binary
    if not exe.is_file():
        pytest.skip(f"{exe} not built")
    p = run([str(exe), *sub, "--help"])
    text = p.stdout + p.stderr
    if "not implemented yet" in text:
        pytest.skip(f"{binary} is still a placeholder")
    usage = f"Usage: {exe.name}{''.join(' ' + s for s in sub)} "
    if sub and usage not in text:
        pytest.skip(f"{binary} has no '{' '.join(sub)}' subcommand in this build")
    assert p.returncode == 0, text
    return text


@pytest.mark.parametrize("image,binary,sub", [
    ("diode-hub", "hub/diode-hub", ()),
    ("diode-coordinator", "coordinator/diode-coordinator", ("serve",)),
    ("diode-agent", "agent/diode-agent", ("run",)),
])
def test_container_flags_exist(image, binary, sub):
    flags = used_flags(image, sub[0] if sub else None)
    assert flags, f"no {image} container args found in k8s/"
    text = help_text(binary, *sub)
    missing = sorted(f for f in flags if not re.search(re.escape(f) + r"\b", text))
    assert not missing, f"k8s/ passes {missing} to {binary} {' '.join(sub)}, which does not know them:\n{text}"


def test_trainer_commands_exist():
    """What the MPIJob templates and diode-train-job call, against the CLI."""
    export = help_text("cli/diode", "dataset", "export")
    job_flags = set()
    for _, d in k8s_docs():
        for c in containers(d):
            if c.get("args", [None])[:3] == ["diode", "dataset", "export"]:
                job_flags |= {a.split("=", 1)[0] for a in c["args"] if a.startswith("--")}
                # The output file is positional (OUT); `--out` is the deprecated spelling.
                positional = [a for a in c["args"][3:] if not a.startswith("-")]
                assert positional == ["/work/dataset.msgpack.gz"], c["args"]
    assert job_flags, "no dataset export in the MPIJob templates"
    assert "--out" not in job_flags, f"MPIJobs pass the deprecated --out to dataset export: {job_flags}"
    assert all(f in export for f in job_flags), (job_flags, export)
    publish = help_text("cli/diode", "publish")
    for f in ("--model", "--registry", "--keys"):
        assert f in publish
    script = (K8S / "images" / "trainer" / "diode-train-job").read_text()
    assert "diode publish --model" in script and "--registry" in script and "--keys" in script
    train = help_text("models/diode-train")
    for f in ("--hardware", "--data", "--out"):
        assert f in train, f"diode-train-job passes {f} to diode-train:\n{train}"


# ------------------------------------------------------ metrics scraping ----

# The port each daemon serves GET /metrics on (docs/operations.md).
SCRAPE = {"diode-agent": ("9103", "metrics"), "diode-hub": ("8080", "http"), "diode-coordinator": ("9102", "metrics")}


def test_pods_carry_scrape_annotations():
    seen = set()
    for f, d in k8s_docs():
        if d["kind"] not in ("DaemonSet", "StatefulSet", "Deployment"):
            continue
        tmpl = d["spec"]["template"]
        name = tmpl["metadata"].get("labels", {}).get("app.kubernetes.io/name")
        if name not in SCRAPE:
            continue
        seen.add(name)
        port, port_name = SCRAPE[name]
        ann = tmpl["metadata"].get("annotations", {})
        assert ann.get("prometheus.io/scrape") == "true", (f, ann)
        assert ann.get("prometheus.io/port") == port, (f, ann)
        assert ann.get("prometheus.io/path") == "/metrics", (f, ann)
        c = tmpl["spec"]["containers"][0]
        if port_name:
            assert {p["name"]: p["containerPort"] for p in c.get("ports", [])}.get(port_name) == int(port), (f, c)
        if name in ("diode-agent", "diode-coordinator"):
            assert f"--metrics-listen=0.0.0.0:{port}" in c["args"], c["args"]
        if name == "diode-agent":
            assert c["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert seen == set(SCRAPE), seen
    # The scrapers can reach the ports (default deny otherwise).
    policies = [d for _, d in k8s_docs() if d["kind"] == "NetworkPolicy"]
    for name, (port, _) in SCRAPE.items():
        assert any(p["spec"].get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/name") == name
                   and any(int(port) in {pp["port"] for pp in r.get("ports", [])} and not r.get("from")
                           for r in p["spec"].get("ingress", []))
                   for p in policies), f"no NetworkPolicy admits {name}:{port}"


# --------------------------------------------------------- gen-secrets.sh ----

def test_gen_secrets(tmp_path):
    help_text("coordinator/diode-coordinator", "keygen")
    if "keys" not in help_text("cli/diode"):
        pytest.skip("diode has no keys subcommand")
    copy = tmp_path / "repo"
    shutil.copytree(K8S, copy / "k8s", ignore=shutil.ignore_patterns("secrets"))
    env = dict(os.environ, DIODE_BUILD_DIR=str(BUILD), HOME=str(tmp_path / "home"))
    sk = tmp_path / "signing"
    cmd = ["bash", str(copy / "k8s" / "gen-secrets.sh"), "production", "--signing-keys", str(sk)]
    p = run(cmd, env=env)
    assert p.returncode == 0, p.stderr
    out = copy / "k8s" / "overlays" / "production" / "secrets"
    kz = yaml.safe_load((copy / "k8s" / "overlays" / "production" / "kustomization.yaml").read_text())
    for g in kz["secretGenerator"]:
        for entry in g["files"]:
            f = copy / "k8s" / "overlays" / "production" / entry.split("=", 1)[1]
            assert f.is_file() and f.stat().st_size > 0, f
            assert f.stat().st_mode & 0o077 == 0, f"{f} readable by others"
    pools = ["h100", "h200", "a100"]
    hub_allow = [ln.split()[0] for ln in (out / "hub-agents.allowlist").read_text().splitlines() if not ln.startswith("#")]
    coord_allow = [ln.split()[0] for ln in (out / "coordinator-agents.allowlist").read_text().splitlines() if not ln.startswith("#")]
    assert len(hub_allow) == len(pools) and all(Z85_KEY.match(k) for k in hub_allow), hub_allow
    assert coord_allow[: len(pools)] == hub_allow and len(coord_allow) == len(pools) + 1
    assert len(set(coord_allow)) == len(coord_allow), "every pool and the operators need their own key"
    # Public keys come from the .pub files every keygen writes (no JSON parsing).
    for server in ("hub", "coordinator"):
        pub = (out / f"{server}.key.pub").read_text()
        assert Z85_KEY.match(pub.strip()) and pub == pub.strip() + "\n", pub
        assert (out / f"{server}.pub").read_text() == pub, f"{server}.pub is not a copy of {server}.key.pub"
    assert hub_allow == [(out / f"agent-{p}.key.pub").read_text().strip() for p in pools]
    assert coord_allow[-1] == (out / "ops.key.pub").read_text().strip()
    token = (out / "write-token").read_text()
    assert len(token) >= 16 and token.isprintable() and " " not in token
    with tarfile.open(out / "signing-keys.tar.gz") as t:
        names = t.getnames()
    assert "root.pub" in names and any(n.startswith("targets/") and n.endswith(".key") for n in names)
    assert not any(n.startswith(("root/", "revoked/")) for n in names), f"root private keys leaked: {names}"
    assert (sk / "root").is_dir(), "the root keys stay in the (offline) key directory"
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    p = run(cmd, env=env)
    assert p.returncode == 0, p.stderr
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before, "a re-run must change nothing"
    p = run(cmd + ["--rotate-agent", "h200"], env=env)
    assert p.returncode == 0, p.stderr
    new_allow = [ln.split()[0] for ln in (out / "hub-agents.allowlist").read_text().splitlines() if not ln.startswith("#")]
    assert new_allow[0] == hub_allow[0] and new_allow[2] == hub_allow[2] and new_allow[1] != hub_allow[1]


# ------------------------------------------- the trainer image's scripts ----

TRAINER = K8S / "images" / "trainer"


def stub(bindir: pathlib.Path, name: str, body: str) -> None:
    f = bindir / name
    f.write_text("#!/usr/bin/env bash\n" + body)
    f.chmod(0o755)


def make_signing_archive(tmp_path, with_root=False):
    keys = tmp_path / ("keysrc-root" if with_root else "keysrc")
    shutil.rmtree(keys, ignore_errors=True)
    (keys / "targets").mkdir(parents=True)
    (keys / "roots").mkdir()
    (keys / "targets" / "abc.key").write_text("targets key\n")
    (keys / "roots" / "1.json").write_text("{}\n")
    (keys / "root.pub").write_text("00" * 32 + "\n")
    members = ["targets", "roots", "root.pub"]
    if with_root:
        (keys / "root").mkdir()
        (keys / "root" / "r.key").write_text("root key\n")
        members.append("root")
    archive = tmp_path / ("keys-root.tar.gz" if with_root else "keys.tar.gz")
    with tarfile.open(archive, "w:gz") as t:
        for m in members:
            t.add(keys / m, arcname=m)
    return archive


def train_job_env(tmp_path):
    """Stub mpirun (runs the command after its options, records them), diode-train
    (writes a model) and diode (records publish/list and the key directory)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "calls.log"
    stub(bindir, "mpirun", f'echo "mpirun $*" >> {log}\nshift 4\nexec "$@"\n')
    stub(bindir, "diode-train", f'echo "diode-train $*" >> {log}\n'
         'while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done\n'
         'mkdir -p "$out" && echo "{}" > "$out/model.json" && echo w > "$out/weights.msgpack"\n')
    stub(bindir, "diode", f'echo "diode $*" >> {log}\n'
         'if [ "$1" = publish ]; then while [ $# -gt 0 ]; do [ "$1" = --keys ] && k=$2; shift; done\n'
         f'  ls -R "$k" >> {log}; fi\n')
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("job-launcher.job.ns.svc slots=2\njob-worker-0.job.ns.svc slots=2\njob-worker-1.job.ns.svc slots=2\n")
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", OMPI_MCA_orte_default_hostfile=str(hostfile),
               TMPDIR=str(tmp_path))
    return env, log


def test_train_job_trains_over_all_slots_then_publishes(tmp_path):
    env, log = train_job_env(tmp_path)
    work, registry = tmp_path / "work", tmp_path / "registry"
    work.mkdir()
    archive = make_signing_archive(tmp_path)
    p = run([str(TRAINER / "diode-train-job"), "--hardware=nvidia-h100-80gb", f"--data={work}/dataset.msgpack.gz",
             f"--work={work}", f"--registry={registry}", f"--signing-keys={archive}"], env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    calls = log.read_text()
    assert f"mpirun -np 6 --bind-to none diode-train --hardware nvidia-h100-80gb --data {work}/dataset.msgpack.gz --out {work}/model" in calls
    pub = [ln for ln in calls.splitlines() if ln.startswith("diode publish")]
    assert len(pub) == 1 and f"--model {work}/model --registry {registry} --keys " in pub[0], calls
    assert "abc.key" in calls and "root.pub" in calls  # the unpacked key directory publish got
    keydir = pub[0].split("--keys ")[1].strip()
    assert not os.path.exists(keydir), "the unpacked signing keys must be removed after publishing"


def _gated_run(tmp_path, validate_rc, *extra):
    """diode-train-job with version 3 of the hardware current in the registry (a version 4
    directory left by a publish that never switched the index), a stub `diode models list`
    that says so as the CLI does, and a stub `diode validate` that exits validate_rc."""
    env, log = train_job_env(tmp_path)
    stub(tmp_path / "bin", "diode", f'echo "diode $*" >> {log}\n'
         '[ "$1 $2" = "models list" ] && printf "nvidia-h100-80gb\\tcurrent 7\\texpires 2027-01-01T00:00:00Z\\tversions 7\\n'
         'nvidia-h200-144gb\\tcurrent 3\\texpires 2027-01-01T00:00:00Z\\tversions 2 3\\n"\n'
         f'[ "$1" = validate ] && exit {validate_rc}\nexit 0\n')
    work, registry = tmp_path / "work", tmp_path / "registry"
    work.mkdir()
    for v in ("2", "3", "4"):
        (registry / "nvidia-h200-144gb" / v).mkdir(parents=True)
    p = run([str(TRAINER / "diode-train-job"), "--hardware=nvidia-h200-144gb", f"--data={work}/dataset.msgpack.gz",
             f"--work={work}", f"--registry={registry}", f"--signing-keys={make_signing_archive(tmp_path)}", *extra],
            env=env)
    return p, log.read_text(), work, registry


def test_train_job_gates_on_the_newest_version_and_passes_the_recipe(tmp_path):
    p, calls, work, registry = _gated_run(tmp_path, 0, "--train-args=--keep-aten --epochs 200")
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"--out {work}/model --keep-aten --epochs 200" in calls
    assert (f"diode validate --model {work}/model --compare {registry}/nvidia-h200-144gb/3 "
            f"--dataset {work}/dataset.msgpack.gz --gate") in calls
    assert "passed the gate against version 3" in p.stdout
    assert calls.index("diode validate") < calls.index("diode publish")


def test_train_job_keeps_the_published_model_when_the_candidate_loses(tmp_path):
    p, calls, _, _ = _gated_run(tmp_path, 3)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "kept version 3" in p.stdout and "diode publish" not in calls


def test_train_job_fails_when_the_gate_cannot_run_and_skips_it_on_request(tmp_path):
    p, calls, _, _ = _gated_run(tmp_path, 1)
    assert p.returncode == 1 and "diode validate failed (exit 1)" in p.stderr and "diode publish" not in calls
    (tmp_path / "again").mkdir()
    p, calls, _, _ = _gated_run(tmp_path / "again", 3, "--no-gate")
    assert p.returncode == 0 and "diode validate" not in calls and "diode publish" in calls


def test_h200_training_job_uses_the_release_recipe():
    # the release trains the H200 with the trainer's default recipe (CHANGELOG.md): the
    # cluster's job must not train another one
    text = (K8S / "overlays" / "production" / "training" / "mpijob-nvidia-h200-144gb.yaml").read_text()
    assert "--train-args" not in text.replace("# No --train-args", "")


def test_train_job_refuses_root_keys_and_missing_model(tmp_path):
    env, log = train_job_env(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    args = [str(TRAINER / "diode-train-job"), "--hardware=nvidia-h100-80gb", f"--data={work}/d",
            f"--work={work}", f"--registry={tmp_path}/r"]
    p = run(args + [f"--signing-keys={make_signing_archive(tmp_path, with_root=True)}"], env=env)
    assert p.returncode != 0 and "root private keys" in p.stderr
    assert "diode publish" not in log.read_text()
    # A trainer that writes nothing: no publish.
    stub(tmp_path / "bin", "diode-train", "exit 0\n")
    p = run(args + [f"--signing-keys={make_signing_archive(tmp_path)}"], env=env)
    assert p.returncode != 0 and "model.json missing" in p.stderr
    p = run(args[:-1] + ["--np=2"], env=env)
    assert p.returncode == 2 and "missing --registry" in p.stderr


def test_create_mpijobs_posts_each_template(tmp_path):
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "namespace").write_text("diode")
    (sa / "token").write_text("tok123")
    (sa / "ca.crt").write_text("ca")
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    for hw in ("nvidia-h100-80gb", "nvidia-h200-144gb"):
        shutil.copy(K8S / "base" / "training" / "mpijob-nvidia-h100-80gb.yaml", jobs / f"mpijob-{hw}.yaml")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "curl.log"
    # Fails for the second template, like an API error would.
    stub(bindir, "curl", f'printf "%s\\n" "$*" >> {log}\n'
         'case "$*" in *h200*) echo \'{"kind":"Status","message":"forbidden"}\'; exit 22;; esac\n'
         'echo \'{"apiVersion":"kubeflow.org/v2beta1","kind":"MPIJob","metadata":{"name":"diode-train-nvidia-h100-80gb-x7k2p"}}\'\n')
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", DIODE_SA_DIR=str(sa),
               KUBERNETES_SERVICE_HOST="10.0.0.1", KUBERNETES_SERVICE_PORT="443")
    p = run(["bash", str(TRAINER / "diode-create-mpijobs"), str(jobs)], env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "created MPIJob diode/diode-train-nvidia-h100-80gb-x7k2p from mpijob-nvidia-h100-80gb.yaml" in p.stdout
    assert "forbidden" in p.stderr
    calls = log.read_text().splitlines()
    assert len(calls) == 2
    for c in calls:
        assert "https://10.0.0.1:443/apis/kubeflow.org/v2beta1/namespaces/diode/mpijobs" in c
        assert "Authorization: Bearer tok123" in c and "Content-Type: application/yaml" in c
        assert f"--cacert {sa}/ca.crt" in c and "--fail-with-body" in c
    empty = tmp_path / "empty"
    empty.mkdir()
    p = run(["bash", str(TRAINER / "diode-create-mpijobs"), str(empty)], env=env)
    assert p.returncode == 1 and "no MPIJob templates" in p.stderr


def test_train_job_joins_seeds_into_an_ensemble(tmp_path):
    """--seeds=3: one training per seed (the job's --seed), each scored on the validation
    split, then `diode ensemble` with the lowest validation top-1 first; a --seed in the
    recipe is refused with it."""
    env, log = train_job_env(tmp_path)
    # diode validate answers per seed directory (seed-2 is best), the rest as train_job_env
    stub(tmp_path / "bin", "diode", f'echo "diode $*" >> {log}\n'
         'if [ "$1" = validate ]; then case "$*" in *seed-1*) t=1.0400 ;; *seed-2*) t=1.0300 ;; *) t=1.0500 ;; esac\n'
         '  printf "overall (every measured candidate)\\n  model top1   %s   1.1000\\n" "$t"; fi\n')
    work, registry = tmp_path / "work", tmp_path / "registry"
    work.mkdir()
    args = [str(TRAINER / "diode-train-job"), "--hardware=nvidia-h100-80gb", f"--data={work}/d", f"--work={work}",
            f"--registry={registry}", f"--signing-keys={make_signing_archive(tmp_path)}"]
    p = run(args + ["--seeds=3", "--train-args=--epochs 20"], env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    calls = log.read_text()
    for s in (1, 2, 3):
        assert f"--out {work}/seed-{s} --epochs 20 --seed {s}" in calls, calls
    assert (f"diode ensemble --member {work}/seed-2 --member {work}/seed-1 --member {work}/seed-3 "
            f"--out {work}/model") in calls, calls
    assert "joined 3 seeds into one ensemble, seed 2 first" in p.stdout
    assert calls.index("diode ensemble") < calls.index("diode publish")
    for bad in (["--seeds=3", "--train-args=--epochs 20 --seed 4"], ["--seeds=17"], ["--seeds=x"]):
        p = run(args + bad, env=env)
        assert p.returncode == 2, (bad, p.stdout + p.stderr)
