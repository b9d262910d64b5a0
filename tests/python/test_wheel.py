"""The platform wheel (python/build_wheel.sh): built from this checkout, installed into a
fresh venv outside the checkout that sees neither the checkout nor this environment's
site-packages -- torch first (the user's choice, not a dependency of the wheel), then the
wheel, which must bring numpy and msgpack itself -- and used there, through its own `diode`
command and its Python API, to pull and verify a real signed bundle (tests/data/bundles/)
over HTTP with the libdiode_client.so the wheel carries, to verify the shipped models
against the shipped release root key, and to refuse tampered bundles.

It compiles the client and runs auditwheel (a few minutes on 2 cores), so it runs only
with DIODE_TEST_WHEEL=1 (.ci/run sets it; docs/testing.md).
"""
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import zipfile

import pytest

from test_native_client import HW, REGISTRY, ROOT_PUB, _Hub, copy_with_tampered_weights

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    os.environ.get("DIODE_TEST_WHEEL") != "1",
    reason="builds the platform wheel (about 3 min on 2 cores): run with DIODE_TEST_WHEEL=1, as .ci/run does")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheelhouse")
    r = subprocess.run(["bash", str(ROOT / "python" / "build_wheel.sh"), str(out)], capture_output=True, text=True)
    assert r.returncode == 0, f"build_wheel.sh failed:\n{r.stderr[-6000:]}"
    path = pathlib.Path(r.stdout.strip().splitlines()[-1])
    assert path.is_file() and path.parent == out
    return path


TORCH = "torch==2.13.0"  # the CPU build (pip's find-links on CI machines)
RELEASE_ROOT_KEY = "80885e25d4fa0ee371b9130baa7ae22c8b5c7fce5ad1e237719e5d315db608a0"


def _pip(py, *args):
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"pip install {' '.join(args)} failed:\n{r.stderr[-4000:]}"


def _has(py, module):
    return subprocess.run([str(py), "-c", f"import {module}"], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel):
    """A fresh venv (no --system-site-packages) outside the checkout: torch as a user installs
    it, then the wheel, whose declared dependencies (numpy, msgpack) pip must resolve."""
    d = tmp_path_factory.mktemp("venv") / "v"
    assert not str(d).startswith(str(ROOT))
    subprocess.run([sys.executable, "-m", "venv", str(d)], check=True, capture_output=True)
    py = d / "bin" / "python"
    _pip(py, TORCH)
    assert not _has(py, "numpy"), "torch brought numpy: the test would not show that the wheel declares it"
    _pip(py, str(wheel))
    assert _has(py, "numpy") and _has(py, "msgpack"), "the wheel does not declare numpy / msgpack"
    return py


def _clean_env(**env):
    """No PYTHONPATH, no DIODE_CLIENT_LIB, no DIODE_* settings: only what the wheel installed counts."""
    clean = {k: v for k, v in os.environ.items()
             if k not in ("PYTHONPATH", "DIODE_CLIENT_LIB", "PYTHONHOME", "VIRTUAL_ENV")
             and not k.startswith(("DIODE_", "TORCH_DIODE_"))}
    clean.update(env)
    return clean


def _run_in_venv(py, cwd, code, **env):
    """Runs `code` with the venv's python from a directory outside the checkout."""
    r = subprocess.run([str(py), "-c", textwrap.dedent(code)], cwd=cwd, env=_clean_env(**env), capture_output=True,
                       text=True)
    assert r.returncode == 0, f"in the wheel's venv:\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def _diode(py, cwd, *args, **env):
    """The wheel's own `diode` console command (venv/bin/diode), run outside the checkout."""
    exe = py.parent / "diode"
    r = subprocess.run([str(exe), *args], cwd=cwd, env=_clean_env(XDG_CACHE_HOME=str(cwd / "xdg"), **env),
                       capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


def test_wheel_is_manylinux_and_bundles_the_client_and_its_libraries(wheel):
    # py3: one wheel for every CPython (the library is loaded by ctypes, not imported).
    assert wheel.name.startswith("torch_diode_fleet-0.1.0-py3-none-manylinux_")
    assert wheel.name.endswith("_x86_64.whl") or wheel.name.endswith("_aarch64.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "torch_diode/_lib/libdiode_client.so.1" in names
    assert "torch_diode/native.py" in names and "torch_diode/hook/api.py" in names
    libs = [n.split("/")[1] for n in names if n.startswith("torch_diode_fleet.libs/")]
    # What a plain manylinux system lacks, grafted by auditwheel under hashed names.
    for want in ("libcurl-", "libcrypto-", "libssl-", "libnghttp2-"):
        assert any(n.startswith(want) for n in libs), f"{want}* not bundled; bundled: {libs}"
    assert not any("__pycache__" in n for n in names)
    assert "torch_diode/cli.py" in names and "torch_diode/__main__.py" in names
    # Declared: the `diode` command and every runtime dependency but torch (the user's choice).
    whl = zipfile.ZipFile(wheel)
    info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    meta = whl.read(f"{info}/METADATA").decode()
    requires = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    assert any(r.startswith("numpy") for r in requires) and any(r.startswith("msgpack") for r in requires), requires
    assert not any(r.startswith("torch") for r in requires), requires
    assert "diode = torch_diode.cli:main" in whl.read(f"{info}/entry_points.txt").decode()
    # The shipped signed models and the release root key (issue 19) are package data.
    # So are the GEMV tables of predict mode's M = 1 reduction (issue 20).
    for shipped in (ROOT / "python" / "torch_diode" / "bundles", ROOT / "python" / "torch_diode" / "hook" / "gemv_tables"):
        files = [f for f in sorted(shipped.rglob("*")) if f.is_file()]
        assert files, shipped
        for f in files:
            assert "torch_diode/" + f.relative_to(ROOT / "python" / "torch_diode").as_posix() in names, f


def test_installed_wheel_verifies_its_shipped_models(venv, tmp_path):
    """pip install of the wheel alone: the shipped bundles verify against the shipped
    release root key through the wheel's own client (what the hook's `package` source does)."""
    got = _run_in_venv(venv, tmp_path, """
        import json, os
        from torch_diode import native
        from torch_diode.hook import sources
        out = {}
        for hw in sources.shipped_hardware_keys():
            c = sources.shipped_bundle(hw)
            native.verify(c.path, sources.package_root_key())
            out[hw] = [c.version, c.path]
        print(json.dumps(out))
    """)
    assert "nvidia-h100-80gb" in got, got
    version, path = got["nvidia-h100-80gb"]
    assert version >= 1 and "site-packages" in path, got


def test_installed_wheel_pulls_and_verifies_a_real_bundle(venv, tmp_path):
    hub = _Hub(REGISTRY)
    try:
        got = _run_in_venv(venv, tmp_path, f"""
            import json, pathlib, sys
            import torch_diode
            from torch_diode import native
            v = native.version()
            r = native.pull({hub.url!r}, {HW!r}, {str(ROOT_PUB)!r}, {str(tmp_path / "cache")!r})
            native.verify(r.path, {str(ROOT_PUB)!r})
            # Which libcurl/libcrypto the loader mapped for the client.
            maps = pathlib.Path("/proc/self/maps").read_text().split()
            libs = sorted({{m for m in maps if "/libcurl" in m or "/libcrypto" in m}})
            print(json.dumps({{"pkg": torch_diode.__file__, "lib": native.load_library()._name, "version": v,
                              "path": str(r.path), "offline": r.offline, "libs": libs,
                              "sys_path": sys.path}}))
        """)
    finally:
        hub.close()
    site = pathlib.Path(got["pkg"]).parent.parent
    assert site.name == "site-packages" and str(site).startswith(str(venv.parent.parent))
    assert not any(p.startswith(str(ROOT)) for p in got["sys_path"]), got["sys_path"]
    assert got["lib"] == str(site / "torch_diode" / "_lib" / "libdiode_client.so.1")
    assert got["version"].startswith("diode-client ") and got["version"].endswith("abi 1")
    # The client runs on the wheel's libcurl and libcrypto. (Python's own _hashlib/_ssl may
    # map the system libcrypto.so.3 too: auditwheel renamed the bundled one, so both coexist.)
    grafted = os.path.realpath(site / "torch_diode_fleet.libs") + "/"
    curl = [os.path.realpath(p) for p in got["libs"] if "/libcurl" in p]
    assert curl and all(p.startswith(grafted) for p in curl), got["libs"]
    assert any(os.path.realpath(p).startswith(grafted + "libcrypto-") for p in got["libs"]), got["libs"]
    # And the loader resolves the client's non-manylinux dependencies from the wheel, through
    # auditwheel's RPATH, with nothing missing (only glibc, libstdc++, libgcc_s, zlib come
    # from the system).
    ldd = subprocess.run(["ldd", got["lib"]], capture_output=True, text=True, check=True).stdout
    deps = {}
    for line in ldd.splitlines():
        if " => " in line:
            k, v = line.strip().split(" => ")
            deps[k] = os.path.realpath(v.split(" (")[0])  # RPATH $ORIGIN/../../torch_diode_fleet.libs
    for name in ("libcurl", "libcrypto", "libssl", "libnghttp2"):
        hits = [v for k, v in deps.items() if k.startswith(name + "-")]
        assert hits and all(v.startswith(grafted) for v in hits), f"{name}: {ldd}"
    assert "not found" not in ldd, ldd
    assert got["path"] == str(tmp_path / "cache" / HW / "1") and not got["offline"]
    pulled = pathlib.Path(got["path"])
    assert (pulled / "weights.msgpack").read_bytes() == (REGISTRY / HW / "1" / "weights.msgpack").read_bytes()


def test_installed_wheel_refuses_tampered_bundles(venv, tmp_path):
    bad = copy_with_tampered_weights(REGISTRY / HW / "1", tmp_path / "bad")
    hub = _Hub(REGISTRY)

    def flip(rel, body):  # the hub serves weights one bit off from what the signature covers
        if rel.endswith("weights.msgpack"):
            body = bytearray(body)
            body[-5] ^= 1
        return bytes(body)

    hub.mutate = flip
    try:
        got = _run_in_venv(venv, tmp_path, f"""
            import json, os
            from torch_diode import native
            out = {{}}
            try:
                native.verify({str(bad)!r}, {str(ROOT_PUB)!r})
                out["verify"] = None
            except native.DiodeClientError as e:
                out["verify"] = [e.kind, str(e)]
            try:
                native.pull({hub.url!r}, {HW!r}, {str(ROOT_PUB)!r}, {str(tmp_path / "cache")!r})
                out["pull"] = None
            except native.DiodeClientError as e:
                out["pull"] = [e.kind, str(e)]
            print(json.dumps(out))
        """)
    finally:
        hub.close()
    assert got["verify"] and got["verify"][0] == "verify" and "weights.msgpack: SHA-256" in got["verify"][1]
    assert got["pull"] and got["pull"][0] == "verify", got["pull"]
    assert not (tmp_path / "cache" / HW / "1").exists(), "a refused bundle must not reach the cache"


def test_installed_wheel_imports_with_the_hook_available(venv, tmp_path):
    """`import torch_diode` after `pip install torch <wheel>`: the hook loads (numpy came with
    the wheel), nothing is logged about a missing module even at DEBUG."""
    r = subprocess.run([str(venv), "-c", "import logging; logging.basicConfig(level=logging.DEBUG); "
                                         "import torch_diode; from torch_diode.hook import api; "
                                         "print(torch_diode.get_detected_hardware()['hardware_key'])"],
                       cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "hook not loaded" not in r.stderr and "No module named" not in r.stderr, r.stderr
    assert r.stdout.strip() == "None"  # a CPU machine


def test_installed_wheel_diode_command(venv, tmp_path):
    """The wheel's `diode` command: hardware, pull, verify, models list, and `python -m
    torch_diode`, with the shipped release root key as the default trust anchor."""
    code, out, err = _diode(venv, tmp_path, "--help")
    assert code == 0 and "exit status:" in out, err
    # No GPU here: exit 5 with one line; a named hardware key is reported as such.
    code, out, err = _diode(venv, tmp_path, "hardware")
    assert code == 5 and err.startswith("diode: error: no GPU") and len(err.splitlines()) == 1, (code, out, err)
    code, out, err = _diode(venv, tmp_path, "hardware", DIODE_HARDWARE_KEY=HW)
    assert code == 0 and out.splitlines()[0] == HW, (code, out, err)

    cache = tmp_path / "cache"
    hub = _Hub(REGISTRY)
    try:
        code, out, err = _diode(venv, tmp_path, "pull", "--hub", hub.url, "--hardware", HW, "--cache", str(cache),
                                "--root-key", str(ROOT_PUB))
    finally:
        hub.close()
    assert code == 0, err
    pulled = cache / HW / "1"
    assert out == f"{pulled}\n"
    assert (pulled / "weights.msgpack").read_bytes() == (REGISTRY / HW / "1" / "weights.msgpack").read_bytes()
    code, out, err = _diode(venv, tmp_path, "verify", str(pulled), "--root-key", str(ROOT_PUB))
    assert code == 0 and out.startswith(f"OK {HW} version 1 expires "), (code, out, err)
    # The same bundle against the default (shipped release) root key: refused, key by fingerprint.
    code, out, err = _diode(venv, tmp_path, "verify", str(pulled))
    assert code == 3 and f"pinned root key {RELEASE_ROOT_KEY[:16]}" in err and len(err.splitlines()) == 1, err

    code, out, err = _diode(venv, tmp_path, "models", "list", "--cache", str(cache), "--json")
    assert code == 0, err
    models = json.loads(out)["models"]
    assert {(m["hardware_key"], m["version"], m["source"]) for m in models if m["source"] == "cache"} == {(HW, 1, "cache")}
    shipped = [m for m in models if m["source"] == "package"]
    assert {m["hardware_key"] for m in shipped} >= {"nvidia-h100-80gb", "nvidia-h200-144gb"}, models
    # Every shipped bundle, inside site-packages, verifies against the default root key.
    for m in shipped:
        assert "site-packages" in m["path"], m
        code, out, err = _diode(venv, tmp_path, "verify", m["path"])
        assert code == 0, err
        family = "" if m["family"] == "gemm" else f" family {m['family']}"  # a scaled_mm bundle says so
        assert out.startswith(f"OK {m['hardware_key']}{family} version {m['version']} ") and \
            out.strip().endswith(f"root key {RELEASE_ROOT_KEY[:16]}"), out

    r = subprocess.run([str(venv), "-m", "torch_diode", "models", "list", "--cache", str(cache)], cwd=tmp_path,
                       env=_clean_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith(f"{HW}\tversion 1\tverified "), r.stdout + r.stderr
