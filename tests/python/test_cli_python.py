"""The Python `diode` command (torch_diode/cli.py, `python -m torch_diode`), run against the
checkout: the shipped bundles and the committed example registry (tests/data/bundles/),
served over HTTP on 127.0.0.1, through the native client the hook uses."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from _native_fixtures import lib  # noqa: F401 (a fixture)
from test_native_client import HW, REGISTRY, ROOT_PUB, _Hub, copy_with_tampered_weights
from torch_diode import cli, native
from torch_diode.hook import detect, sources

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "python" / "torch_diode" / "bundles"
# The project's release root key (the key directory's README): every shipped bundle chains to it.
RELEASE_ROOT_KEY = "80885e25d4fa0ee371b9130baa7ae22c8b5c7fce5ad1e237719e5d315db608a0"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for k in list(os.environ):
        if k.startswith("DIODE_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def run(capsys, *argv):
    """(exit status, stdout, stderr) of `diode ARGV` in this process."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err, code, expected_code, *parts):
    assert code == expected_code, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("diode: error: "), err
    for p in parts:
        assert p in lines[0], (p, err)


def shipped():
    return sorted(p for p in SHIPPED.glob("*/[0-9]*") if (p / "bundle.json").is_file())


def test_shipped_root_key_is_the_release_key():
    assert (SHIPPED / "root.pub").read_text() == RELEASE_ROOT_KEY + "\n"
    assert native.fingerprint(SHIPPED / "root.pub") == RELEASE_ROOT_KEY[:16] == native.fingerprint(RELEASE_ROOT_KEY)
    # Every shipped bundle's roots.json lists the release root key (it is what they chain to).
    for b in shipped():
        roots = json.loads((b / "roots.json").read_text())["roots"]
        publics = {k["public"] for r in roots for k in r["signed"]["keys"].values()}
        assert RELEASE_ROOT_KEY in publics, b


def test_fingerprint_refuses_what_is_not_a_key(tmp_path):
    bad = tmp_path / "root.pub"
    bad.write_text("not a key\n")
    with pytest.raises(ValueError, match="root.pub: does not hold a public key"):
        native.fingerprint(bad)
    with pytest.raises(ValueError, match="neither 64 hex characters nor a file"):
        native.fingerprint(tmp_path / "missing.pub")


def test_help_names_the_commands_and_exit_codes():
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIODE_")}
    env["TORCH_DIODE_AUTO_INSTALL"] = "0"
    r = subprocess.run([sys.executable, "-m", "torch_diode", "--help"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    for want in ("pull", "verify", "models", "hardware", "exit status:", "3  bundle rejected", "5  no GPU"):
        assert want in r.stdout, want
    r = subprocess.run([sys.executable, "-m", "torch_diode", "pull", "--help"], capture_output=True, text=True,
                       env=env, timeout=120)
    for flag in ("--hardware", "--hub", "--cache", "--root-key", "--offline"):  # the C++ `diode pull` flags
        assert flag in r.stdout, flag


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["frobnicate"])
    assert e.value.code == cli.EXIT_USAGE


@pytest.mark.parametrize("bundle", shipped(), ids=lambda p: p.parent.name)
def test_verify_shipped_bundles_with_the_default_root_key(lib, capsys, bundle):
    code, out, err = run(capsys, "verify", str(bundle))
    assert code == 0, err
    s = json.loads((bundle / "bundle.json").read_text())["signed"]
    assert out == f"OK {s['hardware_key']} version {s['version']} expires {s['expires']} root key {RELEASE_ROOT_KEY[:16]}\n"


def test_verify_rejects_tampered_weights(lib, capsys, tmp_path):
    bad = copy_with_tampered_weights(REGISTRY / HW / "1", tmp_path / "bad")
    code, out, err = run(capsys, "verify", str(bad), "--root-key", str(ROOT_PUB))
    assert_one_line_error(err, code, cli.EXIT_VERIFY, str(bad) + ":", "weights.msgpack: SHA-256")
    assert out == ""


def test_verify_names_a_wrong_root_key_by_its_fingerprint(lib, capsys):
    """The example bundle does not chain to the release key: the message names the pinned key
    by the first 16 hex of root.pub, the notation the user can match."""
    bundle = REGISTRY / HW / "1"
    code, _, err = run(capsys, "verify", str(bundle))
    assert_one_line_error(err, code, cli.EXIT_VERIFY, str(bundle),
                          f"no root version lists the pinned root key {RELEASE_ROOT_KEY[:16]}")


def test_verify_missing_directory_and_bad_root_key(lib, capsys, tmp_path):
    code, _, err = run(capsys, "verify", str(tmp_path / "nope"), "--root-key", str(ROOT_PUB))
    assert_one_line_error(err, code, cli.EXIT_ERROR, str(tmp_path / "nope"), "not a directory")
    code, _, err = run(capsys, "verify", str(REGISTRY / HW / "1"), "--root-key", str(tmp_path / "missing.pub"))
    assert_one_line_error(err, code, cli.EXIT_USAGE, "--root-key", str(tmp_path / "missing.pub"))


def test_no_root_key_anywhere_is_a_clear_error(lib, capsys, monkeypatch):
    monkeypatch.setenv(sources.ENV_PACKAGE, "0")  # the shipped root key is off
    code, _, err = run(capsys, "verify", str(REGISTRY / HW / "1"))
    assert_one_line_error(err, code, cli.EXIT_USAGE, "no root key", "--root-key", "DIODE_ROOT_PUBKEY")


def test_pull_list_and_offline(lib, capsys, tmp_path):
    cache = tmp_path / "cache"
    hub = _Hub(REGISTRY)
    try:
        code, out, err = run(capsys, "pull", "--hub", hub.url, "--hardware", HW, "--cache", str(cache),
                             "--root-key", str(ROOT_PUB))
    finally:
        hub.close()
    assert code == 0, err
    assert out == f"{cache / HW / '1'}\n" and err == ""
    assert (cache / HW / "1" / "weights.msgpack").read_bytes() == (REGISTRY / HW / "1" / "weights.msgpack").read_bytes()

    code, out, err = run(capsys, "models", "list", "--cache", str(cache), "--json")
    assert code == 0, err
    got = json.loads(out)
    cached = [m for m in got["models"] if m["source"] == "cache"]
    assert [(m["hardware_key"], m["version"], m["path"]) for m in cached] == [(HW, 1, str(cache / HW / "1"))]
    pkg = {m["hardware_key"]: m["version"] for m in got["models"]
           if m["source"] == "package" and m.get("family", "gemm") == "gemm"}
    assert pkg == {b.parent.name: int(b.name) for b in shipped()}
    # Family bundles (bundles/<key>/families/<family>/<N>) are listed with their family.
    fam = {(m["hardware_key"], m["family"], m["version"]) for m in got["models"]
           if m["source"] == "package" and m.get("family", "gemm") != "gemm"}
    assert fam == {(b.parents[2].name, b.parent.name, int(b.name))
                   for b in SHIPPED.glob("*/families/*/[0-9]*") if (b / "bundle.json").is_file()}
    code, out, err = run(capsys, "models", "list", "--cache", str(cache))
    assert code == 0 and out.splitlines()[0].startswith(f"{HW}\tversion 1\tverified ")

    # The hub is gone: --offline serves the verified cached bundle, with a warning.
    code, out, err = run(capsys, "pull", "--offline", "--hardware", HW, "--cache", str(cache), "--root-key", str(ROOT_PUB))
    assert code == 0, err
    assert out == f"{cache / HW / '1'}\n" and err.startswith("warning: served from the cache: ")

    # The same cache with another root key: refused, both keys named by fingerprint.
    code, _, err = run(capsys, "pull", "--offline", "--hardware", HW, "--cache", str(cache))
    assert_one_line_error(err, code, cli.EXIT_VERIFY, f"cache {cache} {HW}",
                          f"anchored to root key {native.fingerprint(ROOT_PUB)}",
                          f"not the given root key {RELEASE_ROOT_KEY[:16]}")


def test_pull_env_defaults_mirror_the_hook(lib, capsys, monkeypatch, tmp_path):
    hub = _Hub(REGISTRY)
    monkeypatch.setenv("DIODE_HUB_URL", hub.url)
    monkeypatch.setenv("DIODE_HARDWARE_KEY", HW)
    monkeypatch.setenv("DIODE_ROOT_PUBKEY", ROOT_PUB.read_text().strip())
    monkeypatch.setenv("DIODE_CACHE_DIR", str(tmp_path / "envcache"))
    try:
        code, out, err = run(capsys, "pull")
    finally:
        hub.close()
    assert code == 0, err
    assert out == f"{tmp_path / 'envcache' / HW / '1'}\n"


def test_pull_errors(lib, capsys, monkeypatch, tmp_path):
    cache = str(tmp_path / "c")
    code, _, err = run(capsys, "pull", "--hardware", HW, "--cache", cache)
    assert_one_line_error(err, code, cli.EXIT_USAGE, "--hub URL", "--offline")
    code, _, err = run(capsys, "pull", "--offline", "--hardware", HW, "--cache", cache, "--root-key", str(ROOT_PUB))
    assert_one_line_error(err, code, cli.EXIT_UNAVAILABLE, f"cache {cache} {HW}", "no cached bundle")
    code, _, err = run(capsys, "pull", "--offline", "--hardware", "Not A Key", "--cache", cache)
    assert_one_line_error(err, code, cli.EXIT_USAGE, "--hardware", "not a hardware key")
    hub = _Hub(REGISTRY)
    try:
        # Nothing published for this GPU: the hub answers 404.
        code, _, err = run(capsys, "pull", "--hub", hub.url, "--hardware", "nvidia-a100-80gb", "--cache", cache,
                           "--root-key", str(ROOT_PUB))
        assert_one_line_error(err, code, cli.EXIT_UNAVAILABLE, f"{hub.url} nvidia-a100-80gb", "404")
        # The release key does not anchor the example registry.
        code, _, err = run(capsys, "pull", "--hub", hub.url, "--hardware", HW, "--cache", cache)
        assert_one_line_error(err, code, cli.EXIT_VERIFY, f"pinned root key {RELEASE_ROOT_KEY[:16]}")
    finally:
        hub.close()
    assert not (tmp_path / "c" / HW / "1").exists()
    # --hardware auto on a machine without a GPU.
    monkeypatch.setattr(detect, "detect_hardware", lambda device_index=None: None)
    code, _, err = run(capsys, "pull", "--offline", "--cache", cache)
    assert_one_line_error(err, code, cli.EXIT_NO_GPU, "--hardware auto", "DIODE_HARDWARE_KEY")


def test_hardware(capsys, monkeypatch):
    from torch_diode.wire import HardwareId
    monkeypatch.setattr(detect, "detect_hardware", lambda device_index=None: None)
    code, out, err = run(capsys, "hardware")
    assert_one_line_error(err, code, cli.EXIT_NO_GPU, "no GPU", "DIODE_HARDWARE_KEY")
    monkeypatch.setenv("DIODE_HARDWARE_KEY", "nvidia-h200-144gb")
    code, out, err = run(capsys, "hardware")
    assert code == 0 and out.splitlines()[0] == "nvidia-h200-144gb", (out, err)
    monkeypatch.delenv("DIODE_HARDWARE_KEY")
    h100 = HardwareId(vendor="nvidia", device_name="NVIDIA H100 80GB HBM3", arch="sm_90", compute_capability="9.0",
                      sm_count=132, memory_bytes=85520809984, runtime_version="cuda 12.8", torch_version="2.13.0",
                      triton_version="3.5.0")
    monkeypatch.setattr(detect, "detect_hardware", lambda device_index=None: h100)
    code, out, err = run(capsys, "hardware", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["hardware_key"] == "nvidia-h100-80gb" and d["device_name"] == "NVIDIA H100 80GB HBM3"
