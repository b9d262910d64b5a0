"""The platform wheel (python/build_wheel.sh): built from this checkout, installed into a
fresh venv that sees neither the checkout nor this environment's site-packages, and used
there to pull and verify a real signed bundle (tests/data/bundles/) over HTTP with the
libdiode_client.so the wheel carries, and to refuse tampered ones.

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


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel):
    """A fresh venv (no --system-site-packages) with the wheel and its one dependency, msgpack."""
    d = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(d)], check=True, capture_output=True)
    py = d / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"pip install of {wheel.name} failed:\n{r.stderr[-4000:]}"
    return py


def _run_in_venv(py, cwd, code, **env):
    """Runs `code` with the venv's python from a directory outside the checkout, with no
    PYTHONPATH and no DIODE_CLIENT_LIB, so only what the wheel installed can be found."""
    clean = {k: v for k, v in os.environ.items()
             if k not in ("PYTHONPATH", "DIODE_CLIENT_LIB", "PYTHONHOME", "VIRTUAL_ENV")
             and not k.startswith(("DIODE_", "TORCH_DIODE_"))}
    clean.update(env)
    r = subprocess.run([str(py), "-c", textwrap.dedent(code)], cwd=cwd, env=clean, capture_output=True, text=True)
    assert r.returncode == 0, f"in the wheel's venv:\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


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
