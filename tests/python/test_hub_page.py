"""The hub's page at / (hub/src/page.cpp, hub/assets/index.html) in a real browser.

Starts a real diode-hub with the signed example model registry (tests/data/bundles)
and the measured H100 dataset (tests/data/datasets) uploaded through `diode contribute`,
loads / in Debian's headless Chromium (--dump-dom, console on stderr) and checks that
the page rendered what the hub holds, with no console error. A second test proves the
console check catches a script error (the same page with one injected). On a hub started
with --read-token-file, /v1/summary and `diode dataset export/stats --hub` need the read
token (401 without it), and the page passes the token given in its URL fragment.
"""
from __future__ import annotations

import contextlib
import html
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("DIODE_BUILD_DIR", ROOT / "build"))
HUB = BUILD / "hub" / "diode-hub"
DIODE = BUILD / "cli" / "diode"
REGISTRY = ROOT / "tests" / "data" / "bundles" / "registry"
DATASET = ROOT / "tests" / "data" / "datasets" / "nvidia-h100-80gb"
HW = "nvidia-h100-80gb"
ASSET = ROOT / "hub" / "assets" / "index.html"
REQUIRE_BUILD = os.environ.get("DIODE_REQUIRE_BUILD") == "1"


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    if REQUIRE_BUILD:
        pytest.fail("chromium not installed (bash .ci/setup installs it) and DIODE_REQUIRE_BUILD=1")
    pytest.skip("chromium not installed (bash .ci/setup installs Debian's chromium)")


def render(url: str, profile: pathlib.Path) -> tuple[str, list[str]]:
    """(DOM after the page's scripts ran, console lines) of `url` in headless Chromium.
    --virtual-time-budget lets the page's fetch and rendering finish before the dump."""
    p = subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=15000", "--dump-dom", url],
        capture_output=True, text=True, timeout=90)
    assert p.returncode == 0, p.stderr[-2000:]
    # Chromium logs every console message (console.error, uncaught exceptions, failed
    # loads) as "...:INFO:CONSOLE:<line>] "<message>", source: ...". The page logs nothing
    # when all is well, so any such line is an error.
    console = [l for l in p.stderr.splitlines() if ":CONSOLE" in l or "Uncaught" in l]
    return p.stdout, console


def http_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


WRITE_TOKEN = "page-test-token-0123456789"
READ_TOKEN = "page-read-token-abcdef0123456789"


@contextlib.contextmanager
def running_hub(tmp_path: pathlib.Path, read_token: str | None = None):
    """A real diode-hub holding the example model (v1) and the H100 dataset (uploaded with the
    write token); with `read_token`, started with --read-token-file. Yields its URL."""
    for b in (HUB, DIODE):
        if not b.exists():
            pytest.skip(f"{b} not built (set DIODE_BUILD_DIR)")
    data = tmp_path / "data"
    data.mkdir()
    shutil.copytree(REGISTRY, data / "models")
    subprocess.run([str(HUB), "keygen", str(tmp_path / "hub.key")], check=True, capture_output=True)
    (tmp_path / "allow.txt").write_text("")
    token = tmp_path / "token"
    token.write_text(WRITE_TOKEN + "\n")
    extra = []
    if read_token is not None:
        (tmp_path / "read-token").write_text(read_token + "\n")
        extra = ["--read-token-file", str(tmp_path / "read-token")]
    ready = tmp_path / "ready.json"
    log = open(tmp_path / "hub.log", "w")
    proc = subprocess.Popen([str(HUB), "--data", str(data), "--ingest", "tcp://127.0.0.1:0", "--http", "127.0.0.1:0",
                             "--server-key", str(tmp_path / "hub.key"), "--allowlist", str(tmp_path / "allow.txt"),
                             "--write-token-file", str(token), "--ready-file", str(ready), *extra],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not (ready.exists() and ready.stat().st_size) and time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "hub.log").read_text()
            time.sleep(0.05)
        url = f"http://127.0.0.1:{json.loads(ready.read_text())['http_port']}"
        subprocess.run([str(DIODE), "contributor-key", str(tmp_path / "contrib.pem")], check=True, capture_output=True)
        c = subprocess.run([str(DIODE), "contribute", str(DATASET), "--hub", url, "--key", str(tmp_path / "contrib.pem"),
                            "--token-file", str(token), "--name", "Page Tester <page@example.org>", "--quiet"],
                           capture_output=True, text=True)
        assert c.returncode == 0, c.stdout + c.stderr
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture
def hub(tmp_path):
    """A real diode-hub holding the example model (v1) and the H100 dataset; yields its URL."""
    with running_hub(tmp_path) as url:
        yield url


@pytest.fixture
def hub_with_read_token(tmp_path):
    """The same hub started with --read-token-file (READ_TOKEN); yields its URL."""
    with running_hub(tmp_path, READ_TOKEN) as url:
        yield url


def http_status(url: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    """(status, headers, body) of a GET, 4xx/5xx included."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def expected_problems() -> int:
    """Distinct problems of the uploaded dataset, counted here from the shard files."""
    from torch_diode.dataset import load_dataset

    seen = set()
    for s in load_dataset(DATASET).shards:
        for pr in s.problems:
            seen.add(json.dumps(pr if isinstance(pr, dict) else vars(pr), sort_keys=True, default=str))
    return len(seen)


def test_page_renders_the_hubs_models_and_datasets(hub, tmp_path):
    page = http_get(hub + "/").decode()
    assert "<script src=" not in page and "<link" not in page and "http://" not in page.replace(
        "http://www.w3.org/2000/svg", ""), "the page must load nothing from elsewhere"
    summary = json.loads(http_get(hub + "/v1/summary"))
    problems = expected_problems()
    assert problems > 0
    # The upload is community data: the page counts it (the stats endpoint on request).
    stats = json.loads(http_get(f"{hub}/v1/datasets/{HW}/stats?community=include"))
    assert stats["problems"] == problems
    # No key material: contributors are named by a fingerprint of their key only.
    raw = json.dumps(summary)
    keys = [c["contributor_key"] for c in stats["contributions"]] + [
        c["public_key"] for c in stats["contributors"] if c.get("public_key")]
    assert keys and "public_key" not in raw and "contributor_key" not in raw
    for k in keys:
        assert k not in raw

    dom, console = render(hub + "/", tmp_path / "profile")
    assert not console, "console errors:\n" + "\n".join(console)
    # The page's own error box (a failed fetch or a script error caught by the page).
    assert 'data-state="ready"' in dom and '<div id="errors" hidden="">' in dom, dom[:3000]
    # The hardware key's section, its model version (current), the dataset's problem count.
    sec = re.search(r'<section class="hw" data-hw="([^"]+)"', dom)
    assert sec and sec.group(1) == HW, dom[:3000]
    assert re.search(r'<tr class="model-row current" data-version="1"><td>v1 \(current\)</td>'
                     r'<td>2026-11-22T03:32:40Z</td>', dom), dom
    m = re.search(r'<b class="dataset-problems">([0-9,]+)</b>', dom)
    assert m and int(m.group(1).replace(",", "")) == problems, dom
    # The shards' producer, the upload and its contributor, and the sweep the shards came from, as rows.
    producers = {c["name"] for c in stats["contributors"]}
    for name in producers:
        assert f'<tr class="contributor-row"><td>{html.escape(name, quote=False)}</td>' in dom, dom
    assert re.search(r'<tr class="upload-row"><td>' + re.escape(html.escape("Page Tester <page@example.org>",
                                                                            quote=False)) + rf'</td><td class="num">{len(list(DATASET.glob("*.msgpack.gz")))}</td>',
                     dom), dom
    sweeps = summary["hardware"][0]["dataset"]["sweeps"]
    assert sweeps and f'data-sweep="{sweeps[0]["sweep_id"]}"' in dom
    # Charts are drawn in the page itself (inline SVG): op bars and M/N/K coverage.
    assert dom.count("<svg") >= 5 and "Problems per op" in dom and "Coverage of M" in dom


def test_console_check_catches_a_broken_page(tmp_path):
    """The page with a script error injected: the checks above must see it."""
    broken = ASSET.read_text().replace('fetch("v1/summary"', 'undefinedFunction(); fetch("v1/summary"')
    assert broken != ASSET.read_text()
    f = tmp_path / "broken.html"
    f.write_text(broken)
    dom, console = render(f.as_uri(), tmp_path / "profile")
    assert any("undefinedFunction" in l for l in console), console
    assert 'data-state="ready"' not in dom


# ---------------------------------------------------------------- a hub with a read token

def test_summary_needs_the_read_token_and_the_page_shell_does_not(hub_with_read_token):
    url = hub_with_read_token
    # The page is a data-free shell a browser must load; it is never cached.
    status, headers, body = http_status(url + "/")
    assert status == 200 and b"<html" in body
    assert headers["Cache-Control"] == "no-store" and headers["Referrer-Policy"] == "no-referrer"
    # Its data: the read check of the dataset exports.
    for auth in ({}, {"Authorization": "Bearer not-the-read-token-000"}, {"Authorization": READ_TOKEN}):
        status, headers, body = http_status(url + "/v1/summary", auth)
        assert status == 401, (auth, status)
        assert headers["WWW-Authenticate"] == "Bearer"
        assert json.loads(body)["error"] == "unauthorized"
        assert b'"hardware"' not in body
    for token in (READ_TOKEN, WRITE_TOKEN):  # the write token reads too, as for exports
        status, _, body = http_status(url + "/v1/summary", {"Authorization": "Bearer " + token})
        assert status == 200
        assert json.loads(body)["hardware"][0]["key"] == HW


def test_summary_stays_open_without_a_read_token(hub):
    status, _, body = http_status(hub + "/v1/summary")
    assert status == 200 and json.loads(body)["hardware"][0]["key"] == HW


def test_page_passes_the_read_token_from_its_url_fragment(hub_with_read_token, tmp_path):
    dom, console = render(hub_with_read_token + "/#token=" + READ_TOKEN, tmp_path / "profile")
    assert not console, "console errors:\n" + "\n".join(console)
    assert 'data-state="ready"' in dom and '<div id="errors" hidden="">' in dom, dom[:3000]
    assert re.search(r'<section class="hw" data-hw="([^"]+)"', dom).group(1) == HW
    assert READ_TOKEN not in dom  # never written into the page


def _dataset_cmd(*args, env_token: str | None = None):
    env = {k: v for k, v in os.environ.items() if k != "DIODE_HUB_READ_TOKEN"}
    if env_token is not None:
        env["DIODE_HUB_READ_TOKEN"] = env_token
    return subprocess.run([str(DIODE), "dataset", *args], capture_output=True, text=True, env=env, timeout=120)


def test_dataset_export_and_stats_send_the_read_token(hub_with_read_token, tmp_path):
    url = hub_with_read_token
    tok = tmp_path / "my-read-token"
    tok.write_text(READ_TOKEN + "\n")
    out = tmp_path / "export.msgpack.gz"
    # Without the token: the hub's 401, and what to do.
    r = _dataset_cmd("stats", "--hub", url, "--hardware", HW, "--json")
    assert r.returncode != 0 and "HTTP 401" in r.stderr and "--read-token-file" in r.stderr, r.stderr
    r = _dataset_cmd("export", "--hub", url, "--hardware", HW, "--include-community", str(out))
    assert r.returncode != 0 and "HTTP 401" in r.stderr and not out.exists(), r.stderr
    # A wrong token: 401, said so.
    r = _dataset_cmd("stats", "--hub", url, "--hardware", HW, "--json", env_token="wrong-read-token-00000")
    assert r.returncode != 0 and "HTTP 401" in r.stderr and "refused this read token" in r.stderr, r.stderr
    # With it, from the file or the environment: 200 and the data.
    r = _dataset_cmd("stats", "--hub", url, "--hardware", HW, "--json", "--include-community",
                     "--read-token-file", str(tok))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["problems"] == expected_problems()
    r = _dataset_cmd("stats", "--hub", url, "--hardware", HW, "--json", "--include-community", env_token=READ_TOKEN)
    assert r.returncode == 0, r.stderr
    r = _dataset_cmd("export", "--hub", url, "--hardware", HW, "--include-community", "--read-token-file", str(tok),
                     str(out))
    assert r.returncode == 0, r.stderr
    assert out.exists() and "shards" in r.stdout
    r = _dataset_cmd("export", "--hub", url, "--hardware", HW, "--include-community", str(out), env_token=READ_TOKEN)
    assert r.returncode == 0, r.stderr
    # A token file that is empty or holds a space is refused before any request, naming the file.
    bad = tmp_path / "bad-token"
    bad.write_text("two words\n")
    r = _dataset_cmd("stats", "--hub", url, "--hardware", HW, "--read-token-file", str(bad))
    assert r.returncode != 0 and str(bad) in r.stderr and "printable" in r.stderr, r.stderr
