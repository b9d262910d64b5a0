"""Issue 17, contributors and model users: `diode contribute`, `dataset export|stats`,
`pull` and `models list` against a real `diode-hub` on 127.0.0.1 (its registry
holds the committed example bundle, tests/data/bundles/)."""
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("DIODE_BUILD_DIR") or ROOT / "build")
DIODE = BUILD / "cli" / "diode"
HUB = BUILD / "hub" / "diode-hub"
DATA = ROOT / "tests" / "data" / "datasets" / "nvidia-h100-80gb"
BUNDLES = ROOT / "tests" / "data" / "bundles"
HW = "nvidia-h100-80gb"
TOKEN = "contrib-test-token-0123456789"

if not DIODE.exists() or not HUB.exists():
    pytest.skip(f"diode and diode-hub not built in {BUILD} (set DIODE_BUILD_DIR)", allow_module_level=True)


def diode(*args, env=None, check=True, timeout=60):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DIODE_")}
    e.update(env or {})
    r = subprocess.run([str(DIODE), *map(str, args)], capture_output=True, text=True, env=e, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"diode {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


class Hub:
    """A real diode-hub on 127.0.0.1 with a write token (TOKEN) and, with `registry`, the
    committed example bundle in its model registry (tests/data/bundles/)."""

    def __init__(self, tmp: pathlib.Path, registry: bool = True):
        self.tmp = tmp
        self.data = tmp / "hub"
        (self.data / "models").mkdir(parents=True)
        if registry:
            shutil.copytree(BUNDLES / "registry" / HW, self.data / "models" / HW)
        pub = subprocess.run([str(HUB), "--generate-key", str(tmp / "hub.key")], check=True, capture_output=True,
                             text=True).stdout.strip().split()[-1]
        (tmp / "allow.txt").write_text(pub + "\n")
        (tmp / "token").write_text(TOKEN + "\n")
        ready = tmp / "ready.json"
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ingest = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
        self.log_path = tmp / "hub.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [str(HUB), "--data", str(self.data), "--ingest", ingest, "--http", "127.0.0.1:0",
             "--server-key", str(tmp / "hub.key"), "--allowlist", str(tmp / "allow.txt"),
             "--write-token-file", str(tmp / "token"), "--ready-file", str(ready), "--log-level", "warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not ready.exists():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("diode-hub did not start:\n" + self.log_path.read_text())
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{json.loads(ready.read_text())['http_port']}"

    def get_json(self, path):
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return json.loads(r.read())

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture
def hub(tmp_path):
    h = Hub(tmp_path)
    yield h
    h.close()


@pytest.fixture
def contributor_key(tmp_path):
    key = tmp_path / "contributor.pem"
    diode("contributor-key", key)
    return key


def contribute(hub, key, dataset, *extra, name="Jane Doe <jane@example.org>", check=True):
    return diode("contribute", dataset, "--hub", hub.url, "--key", key, "--token", TOKEN, "--name", name, *extra,
                 check=check)


# ---- 1. the documented contributor name ----------------------------------------------------

def test_documented_contributor_name_is_accepted_end_to_end(hub, contributor_key):
    r = contribute(hub, contributor_key, DATA / "2026-11-22-part1.msgpack.gz")
    assert " stored: " in r.stdout
    stats = hub.get_json(f"/v1/datasets/{HW}/stats?community=include")
    assert [c["contributor_name"] for c in stats["contributions"]] == ["Jane Doe <jane@example.org>"]


@pytest.mark.parametrize("name", ["Jane\tDoe", "Jane Doe <jane>", "Jane Doe <jane@example.org", "<jane@example.org>",
                                  "x" * 65, "Jane Doe <" + "j" * 70 + "@example.org>"])
def test_bad_contributor_names_are_refused_before_upload(hub, contributor_key, name):
    r = contribute(hub, contributor_key, DATA / "2026-11-22-part1.msgpack.gz", name=name, check=False)
    assert r.returncode != 0
    assert "local@domain" in r.stderr, r.stderr
    assert hub.get_json("/healthz")["shards"] == 0


# ---- 2. help text; 3. no token over plain http to a remote host --------------------------

def test_contribute_help_points_to_contributor_key():
    out = diode("contribute", "--help").stdout
    assert "diode contributor-key" in out
    assert "diode keys" not in out


@pytest.mark.parametrize("url", ["http://example.org", "http://10.0.0.5:8080", "ftp://127.0.0.1/"])
def test_contribute_refuses_to_send_the_token_in_clear(tmp_path, url):
    r = diode("contribute", DATA / "2026-11-22-part1.msgpack.gz", "--hub", url, "--key", tmp_path / "missing.pem",
              "--token", TOKEN, check=False)
    assert r.returncode != 0
    assert "use https" in r.stderr or "scheme must be https" in r.stderr, r.stderr
    # The same words as `diode pull` (one shared rule, diode::bundle::check_hub_url).
    p = diode("pull", "--hub", url, "--hardware", HW, "--root-key", BUNDLES / "root.pub", check=False)
    assert r.stderr.splitlines()[-1].split(": ", 1)[-1] == p.stderr.splitlines()[-1].split(": ", 1)[-1]


# ---- 4. upload progress --------------------------------------------------------------------

def test_contribute_prints_progress_unless_quiet(hub, contributor_key):
    r = contribute(hub, contributor_key, DATA / "2026-11-22-part2.msgpack.gz")
    lines = [l for l in r.stderr.splitlines() if l.startswith("uploading: ")]
    assert lines and lines[-1].endswith("(100%)"), r.stderr
    assert re.fullmatch(r"uploading: \d+\.\d / \d+\.\d (KiB|MiB) \(100%\)", lines[-1])
    q = contribute(hub, contributor_key, DATA / "2026-11-22-part3.msgpack.gz", "--quiet")
    assert "uploading" not in q.stderr
    assert " stored: " in q.stdout


# ---- 5. export takes OUT as a positional argument ------------------------------------------

def test_export_positional_out_and_deprecated_flag(hub, contributor_key, tmp_path):
    contribute(hub, contributor_key, DATA / "2026-11-22-part1.msgpack.gz", "--quiet")
    out = tmp_path / "a.msgpack.gz"
    r = diode("dataset", "export", "--hub", hub.url, "--hardware", HW, "--include-community", out)
    assert out.stat().st_size > 0 and "deprecated" not in r.stderr
    old = tmp_path / "b.msgpack.gz"
    r = diode("dataset", "export", "--hub", hub.url, "--hardware", HW, "--include-community", "--out", old)
    assert old.read_bytes() == out.read_bytes()
    assert "--out is deprecated" in r.stderr
    helptext = diode("dataset", "export", "--help").stdout
    assert not re.search(r"^\s+--out\b", helptext, re.M), helptext  # no option line of its own
    assert "deprecated" in helptext
    assert diode("dataset", "export", "--hub", hub.url, "--hardware", HW, check=False).returncode != 0
    assert diode("dataset", "export", "--hub", hub.url, "--hardware", HW, out, "--out", old, check=False).returncode != 0


# ---- 6. stats: uncounted community shards, numeric log2 order, --json completeness ---------

def test_stats_say_how_many_community_shards_were_left_out(hub, contributor_key):
    contribute(hub, contributor_key, DATA / "2026-11-22-part1.msgpack.gz", "--quiet")
    contribute(hub, contributor_key, DATA / "2026-11-22-part2.msgpack.gz", "--quiet")
    n = next(h["community_shards"] for h in hub.get_json("/v1/hardware")["hardware"] if h["key"] == HW)
    assert n >= 2
    note = f"({n} community shards not counted; --include-community to include them)"
    for source in (["--hub", hub.url], ["--data", hub.data]):
        text = diode("dataset", "stats", "--hardware", HW, *source).stdout
        assert note in text, text
        j = json.loads(diode("dataset", "stats", "--hardware", HW, *source, "--json").stdout)
        assert j["community_shards_not_counted"] == n
        inc = diode("dataset", "stats", "--hardware", HW, *source, "--include-community").stdout
        assert "not counted" not in inc
        assert f"({n} community)" in inc


def _log2_buckets(text, dim):
    line = next(l for l in text.splitlines() if l.startswith(f"coverage {dim}"))
    return [int(b) for b in re.findall(r"2\^(\d+)=", line)]


def test_stats_log2_buckets_in_numeric_order():
    text = diode("dataset", "stats", DATA).stdout
    for dim in "mnk":
        buckets = _log2_buckets(text, dim)
        assert buckets == sorted(buckets), text
    assert any(b >= 10 for dim in "mnk" for b in _log2_buckets(text, dim))


def test_stats_json_reports_completeness():
    j = json.loads(diode("dataset", "stats", DATA, "--json").stdout)
    assert j["hardware_key"] == HW
    for key in ("problems", "ops", "dtypes", "configs_per_problem", "records_by_status"):
        assert key in j
    assert set(j["configs_per_problem"]) == {"min", "median", "max"}
    cov = j["coverage"]
    records = sum(j["records_by_status"].values())
    assert cov["records_final_share"] == pytest.approx(1 - j["records_by_status"].get("timeout", 0) / records)
    assert 0 <= cov["problems_with_aten"] <= j["problems"]
    assert 0 <= cov["problems_with_default"] <= j["problems"]
    assert {"m", "n", "k"} <= set(cov)


# ---- 7. pull: environment, GET /v1/models on 404; models list of the cache -----------------

def test_get_models_lists_the_registry(hub):
    j = hub.get_json("/v1/models")
    assert j["truncated"] is False
    assert [(m["hardware_key"], m["version"]) for m in j["models"]] == [(HW, 1)]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", j["models"][0]["published_at"])


def test_pull_honours_environment_and_lists_models_on_404(hub, tmp_path):
    cache = tmp_path / "cache"
    env = {"DIODE_HUB_URL": hub.url, "DIODE_HARDWARE_KEY": HW, "DIODE_ROOT_PUBKEY": (BUNDLES / "root.pub").read_text().strip()}
    r = diode("pull", "--cache", cache, env=env)
    assert r.stdout.strip() == str(cache / HW / "1")
    # A flag wins over the environment.
    r = diode("pull", "--cache", cache, "--hardware", "nvidia-a100-40gb", env=env, check=False)
    assert r.returncode != 0
    assert "no model for nvidia-a100-40gb" in r.stderr
    assert "the hub serves models for:" in r.stderr and f"{HW}\tversion 1\tpublished 20" in r.stderr, r.stderr
    r = diode("pull", "--cache", cache, env={**env, "DIODE_HARDWARE_KEY": "nvidia-a100-40gb"}, check=False)
    assert "no model for nvidia-a100-40gb" in r.stderr

    # models list: the cache, by default (DIODE_CACHE_DIR) and with --cache; the registry with --registry.
    for args, e in ((["--cache", cache], {}), ([], {"DIODE_CACHE_DIR": str(cache)})):
        out = diode("models", "list", *args, env=e).stdout
        assert re.fullmatch(rf"{HW}\tversion 1\tverified \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ\t{re.escape(str(cache / HW / '1'))}\n",
                            out), out
    out = diode("models", "list", "--registry", hub.data / "models").stdout
    assert out.startswith(f"{HW}\tcurrent 1\t")
    out = diode("models", "list", env={"DIODE_REGISTRY": str(hub.data / "models")}).stdout
    assert out.startswith(f"{HW}\tcurrent 1\t")
    empty = diode("models", "list", "--cache", tmp_path / "nothing")
    assert empty.stdout == "" and "no models cached" in empty.stderr
    assert "pull cache" in diode("models", "list", "--help").stdout


# ---- issue 54, fault 8: contributions are rate-limited per contributor key ----------------

def test_contributions_are_rate_limited_per_key_on_a_running_hub(tmp_path, monkeypatch, contributor_key):
    # burst 1, then one a minute: a key's second contribution within the minute is refused
    # with 429; another key is not held back by the first one's limit.
    monkeypatch.setenv("DIODE_HUB_CONTRIBUTION_BURST", "1")
    monkeypatch.setenv("DIODE_HUB_CONTRIBUTIONS_PER_MINUTE", "1")
    h = Hub(tmp_path / "limited")
    try:
        assert " stored: " in contribute(h, contributor_key, DATA / "2026-11-22-part1.msgpack.gz").stdout
        r = contribute(h, contributor_key, DATA / "2026-11-22-part2.msgpack.gz", check=False)
        assert r.returncode != 0, r.stdout
        assert "429" in r.stderr or "rate" in r.stderr.lower(), r.stderr
        other = tmp_path / "other.pem"
        diode("contributor-key", other)
        assert " stored: " in contribute(h, other, DATA / "2026-11-22-part2.msgpack.gz",
                                         name="John Roe <john@example.org>").stdout
        stats = h.get_json(f"/v1/datasets/{HW}/stats?community=include")
        assert sorted(c["contributor_name"] for c in stats["contributions"]) == [
            "Jane Doe <jane@example.org>", "John Roe <john@example.org>"]
    finally:
        h.close()
