"""Issue 52, item 3: every committed dataset contributes cleanly to an empty hub.

A real `diode-hub` on 127.0.0.1 receives every `datasets/<key>` directory through
`diode contribute`; its figures must equal those of `diode dataset stats
datasets/<key> --json`. Several part files there carry one shard id (the
collector writes every part of a resumed seed under its seed's id), which the
hub used to refuse as a 409 conflict after the whole upload. Contributing the
same data again must say that nothing new was credited (exit status 3), a hub
export must contribute cleanly to another empty hub, and a shard the hub would
refuse must be refused before the upload, naming its file."""
import dataclasses
import gzip
import json
import os
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("DIODE_BUILD_DIR") or ROOT / "build")
DIODE = BUILD / "cli" / "diode"
HUB = BUILD / "hub" / "diode-hub"
DATASETS = sorted(p for p in (ROOT / "datasets").iterdir() if p.is_dir() and any(p.glob("*.msgpack*")))
import test_contrib_cli as contrib_cli  # noqa: E402  (skips this module too when nothing is built)

TOKEN = contrib_cli.TOKEN
NAME = "Jane Doe <jane@example.org>"

if not DIODE.exists() or not HUB.exists():
    pytest.skip(f"diode and diode-hub not built in {BUILD} (set DIODE_BUILD_DIR)", allow_module_level=True)

# The figures that must agree between a dataset on disk and the hub holding it.
SAME = ("hardware_key", "shards", "records", "problems", "configs_per_problem", "records_by_status", "coverage",
        "ops", "dtypes", "templates", "timing_methods")


def diode(*args, check=True, timeout=120):
    return contrib_cli.diode(*args, check=check, timeout=timeout)


def Hub(tmp: pathlib.Path):
    """test_contrib_cli's hub (one definition of starting one), without a model registry."""
    tmp.mkdir(parents=True, exist_ok=True)
    return contrib_cli.Hub(tmp, registry=False)


@pytest.fixture
def hub(tmp_path):
    h = Hub(tmp_path / "a")
    yield h
    h.close()


@pytest.fixture
def key(tmp_path):
    k = tmp_path / "contributor.pem"
    diode("contributor-key", k)
    return k


def contribute(hub, key, path, check=True):
    return diode("contribute", path, "--hub", hub.url, "--key", key, "--token", TOKEN, "--name", NAME, "--quiet",
                 check=check)


def file_stats(path):
    return json.loads(diode("dataset", "stats", path, "--json").stdout)


def hub_stats(hub, hw, *flags):
    return json.loads(diode("dataset", "stats", "--hub", hub.url, "--hardware", hw, *flags, "--json").stdout)


def test_every_committed_dataset_contributes_cleanly_and_once(hub, key, tmp_path):
    assert {p.name for p in DATASETS} >= {"nvidia-h100-80gb", "nvidia-h200-144gb"}
    expected = {p.name: file_stats(p) for p in DATASETS}
    for p in DATASETS:
        want = expected[p.name]
        r = contribute(hub, key, p)
        assert r.returncode == 0
        assert f" stored: {want['shards']} new shards credited to {NAME}; 0 already on the hub; " in r.stdout, r.stdout

    contributors = hub.get_json("/v1/contributors")
    assert [c["name"] for c in contributors["contributors"]] == [NAME]
    me = contributors["contributors"][0]
    assert me["contributions"] == len(DATASETS)
    assert sorted(me["hardware_keys"]) == sorted(expected)
    for p in DATASETS:
        want = expected[p.name]
        got = hub_stats(hub, p.name, "--include-community")
        for k in SAME:
            assert got[k] == want[k], (p.name, k)
        assert got["community_shards"] == want["shards"]
        mine = hub.get_json(f"/v1/contributors?hardware={p.name}")
        assert mine["community_shards"] == want["shards"] and mine["community_records"] == want["records"]
        assert [(c["name"], c["shards"], c["records"]) for c in mine["contributors"]] == \
            [(NAME, want["shards"], want["records"])]
        # Without --include-community the figures are the fleet's (none here), and the
        # community data is shown apart, labelled, with its contributor.
        text = diode("dataset", "stats", "--hub", hub.url, "--hardware", p.name).stdout
        assert (f"community           {want['shards']} shards, {want['records']} records from 1 contributor "
                "(not counted above; --include-community to count them)") in text, text
        assert f"  {me['fingerprint']} {NAME}: {want['shards']} shards, {want['records']} records in 1 contribution, " \
               "last 20" in text, text
        assert hub_stats(hub, p.name)["community"]["contributors"][0]["fingerprint"] == me["fingerprint"]

    # The smallest directory again: the same body, nothing new, exit status 3.
    again = min(DATASETS, key=lambda p: sum(f.stat().st_size for f in p.iterdir()))
    n = expected[again.name]["shards"]
    r = contribute(hub, key, again, check=False)
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert f"nothing new credited: all {n} shards" in r.stdout and "already stored on the hub" in r.stdout, r.stdout
    # A hub export of it (another body, the same shards, another order): nothing new either.
    export = tmp_path / "export.msgpack.gz"
    diode("dataset", "export", "--hub", hub.url, "--hardware", again.name, "--include-community", export)
    r = contribute(hub, key, export, check=False)
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert f"nothing new credited: all {n} shards" in r.stdout, r.stdout
    assert hub.get_json("/v1/contributors")["contributors"][0]["contributions"] == len(DATASETS)
    assert hub.get_json("/healthz")["shards"] == sum(e["shards"] for e in expected.values())

    # The export contributes cleanly to another empty hub, with the same figures.
    other = Hub(tmp_path / "b")
    try:
        r = contribute(other, key, export)
        assert f" stored: {n} new shards credited" in r.stdout, r.stdout
        got = hub_stats(other, again.name, "--include-community")
        for k in SAME:
            assert got[k] == expected[again.name][k], k
    finally:
        other.close()

    help_text = diode("contribute", "--help").stdout
    assert "Exit status: 0 new data stored" in help_text and "3 nothing new credited" in help_text, help_text


def test_a_shard_the_hub_would_refuse_is_refused_before_upload_naming_its_file(hub, key, tmp_path):
    from torch_diode import wire
    from torch_diode.dataset import load_dataset

    # The smallest committed part (one problem), copied, and a shard of it dated before 2020.
    src = min((f for p in DATASETS for f in p.glob("*.msgpack.gz")), key=lambda f: f.stat().st_size)
    d = tmp_path / "mine"
    d.mkdir()
    shutil.copy(src, d / src.name)
    shard = load_dataset(src).shards[0]
    bad = wire.seal(dataclasses.replace(shard, id=shard.id + "-old", created_ms=1_000))
    (d / "zz-old.msgpack.gz").write_bytes(gzip.compress(wire.encode(bad)))
    r = contribute(hub, key, d, check=False)
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "refused before upload" in lines[0] and str(d / "zz-old.msgpack.gz") in lines[0], lines[0]
    assert "created_ms" in lines[0], lines[0]
    assert hub.get_json("/healthz")["shards"] == 0  # nothing was sent
