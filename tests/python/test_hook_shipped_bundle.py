"""The models shipped in the package (torch_diode/bundles/, python/release/release_bundles.sh):
verified by the real native client against the shipped release root key, used by
`import torch_diode` with no configuration, refused when tampered with or when the user
pins a root key they do not chain to, and beaten by a newer hub bundle.

Needs the C++ build (the `diode` CLI and libdiode_client.so): $DIODE_BUILD_DIR, else
./build; the library may also be given as $DIODE_CLIENT_LIB.
"""
import functools
import http.server
import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest

torch = pytest.importorskip("torch")

import torch_diode  # noqa: E402
from test_hook_model import write_model_dir  # noqa: E402
from test_hook_native import _RegistryHandler  # noqa: E402
from torch._inductor import config as inductor_config  # noqa: E402
from torch_diode import native  # noqa: E402
from torch_diode.hook import api, compat, sources  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("DIODE_BUILD_DIR") or ROOT / "build")
DIODE = BUILD / "cli" / "diode"
LIB = pathlib.Path(os.environ.get("DIODE_CLIENT_LIB") or BUILD / "shared" / "bundle" / "libdiode_client.so")
SHIPPED = ROOT / "python" / "torch_diode" / "bundles"
H100 = "nvidia-h100-80gb"

pytestmark = pytest.mark.skipif(not (DIODE.is_file() and LIB.is_file()),
                                reason=f"C++ build (diode CLI, libdiode_client.so) not found in {BUILD} "
                                       "(set DIODE_BUILD_DIR)")


def shipped_versions():
    """{hardware key: [bundle dirs]} of what the package ships."""
    out = {}
    for hw in sorted(p for p in SHIPPED.iterdir() if p.is_dir()):
        out[hw.name] = sorted((d for d in hw.iterdir() if d.name.isdigit()), key=lambda d: int(d.name))
    return out


def test_package_ships_h100_and_h200_bundles_and_root_key():
    assert (SHIPPED / "root.pub").is_file()
    assert len((SHIPPED / "root.pub").read_text().strip()) == 64
    v = shipped_versions()
    for hw in (H100, "nvidia-h200-144gb"):
        assert hw in v and len(v[hw]) == 1, v  # only the newest version ships
    for hw, dirs in v.items():
        assert len(dirs) == 1, (hw, dirs)
        names = sorted(os.listdir(dirs[0]))
        assert names == ["bundle.json", "model.json", "roots.json", "weights.msgpack"], names


@pytest.mark.parametrize("hw", sorted(shipped_versions()) if SHIPPED.is_dir() else [])
def test_diode_verify_accepts_every_shipped_bundle(hw):
    """The release acceptance check: `diode verify` against the shipped root key."""
    (bundle,) = shipped_versions()[hw]
    r = subprocess.run([str(DIODE), "verify", str(bundle), "--root-key", str(SHIPPED / "root.pub")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    meta = json.loads((bundle / "bundle.json").read_text())["signed"]
    assert meta["hardware_key"] == hw and meta["version"] == int(bundle.name)


def _clean_env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DIODE_", "TORCH_DIODE_"))}
    env.update(PYTHONPATH=str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", ""),
               DIODE_CLIENT_LIB=str(LIB), DIODE_CACHE_DIR=str(tmp_path / "empty-cache"), HOME=str(tmp_path))
    env.update(extra)
    return env


_PROBE = ("import json, torch_diode; at_import = torch_diode.is_installed(); ok = torch_diode.install(); "
          "s = torch_diode.get_prediction_stats(); "
          "print('RESULT ' + json.dumps({'at_import': at_import, 'install': ok, 'source': s['model_source'], "
          "'version': s['model_version'], 'hardware_key': s['model_hardware_key'], 'model': s['model'], "
          "'reason': s['no_model_reason'], 'failures': s['load_failures']}))")


def _probe(env):
    r = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):]), r.stderr


@pytest.mark.parametrize("hw", sorted(shipped_versions()) if SHIPPED.is_dir() else [])
def test_import_with_only_the_hardware_key_uses_the_shipped_model(tmp_path, hw):
    """The acceptance criterion: DIODE_HARDWARE_KEY=nvidia-h100-80gb (or any shipped key,
    nvidia-h200-144gb since its version 1), nothing else."""
    (bundle,) = shipped_versions()[hw]
    res, err = _probe(_clean_env(tmp_path, DIODE_HARDWARE_KEY=hw))
    assert res["at_import"] is True and res["install"] is True, (res, err)
    assert res["source"] == "package" and res["hardware_key"] == hw and res["version"] == int(bundle.name)
    assert os.path.realpath(res["model"]) == os.path.realpath(bundle)
    assert res["failures"] == {}
    assert "WARNING" not in err and "torch_diode:" not in err, err  # no configuration, no complaint


def test_unknown_hardware_key_gets_no_model_with_a_clear_reason(tmp_path):
    res, err = _probe(_clean_env(tmp_path, DIODE_HARDWARE_KEY="nvidia-a100-sxm4-40gb"))
    assert res["install"] is False and res["source"] is None and res["reason"] == "no_model"
    assert err.count("(no_model)") == 1, err
    assert "nvidia-a100-sxm4-40gb" in err and f"the package ships models for {H100}" in err, err


def test_package_models_off(tmp_path):
    res, err = _probe(_clean_env(tmp_path, DIODE_HARDWARE_KEY=H100, DIODE_PACKAGE_MODELS="0"))
    assert res["install"] is False and res["reason"] == "no_model"
    assert "DIODE_PACKAGE_MODELS=0" in err


# ---------------------------------------------------------------- in process

@pytest.fixture
def hook(monkeypatch, tmp_path):
    api.uninstall()
    cfg, tl = compat.get_choices_config(), compat.thread_handler()
    compat.set_thread_handler(compat.MISSING)
    inductor_config.inductor_choices_class = None
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setenv("DIODE_CLIENT_LIB", str(LIB))
    monkeypatch.delenv(sources.ENV_PACKAGE)  # conftest turns the shipped models off
    for k in (sources.ENV_MODEL, sources.ENV_HUB, sources.ENV_ROOT_KEY):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv(sources.ENV_CACHE, str(tmp_path / "cache"))
    monkeypatch.setitem(api.PROCESS.hardware, "hw", {"hardware_key": H100})
    monkeypatch.setattr(api.PROCESS, "registered", [])
    monkeypatch.setattr(api.PROCESS, "warned", set())
    torch_diode.reset_prediction_stats()
    yield tmp_path
    api.uninstall()
    inductor_config.inductor_choices_class = cfg
    compat.set_thread_handler(tl)


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "torch_diode" and r.levelno >= logging.WARNING]


def _package_copy(tmp, monkeypatch):
    pkg = tmp / "bundles"
    shutil.copytree(SHIPPED, pkg)
    monkeypatch.setattr(sources, "PACKAGE_DIR", str(pkg))
    return pkg


def test_shipped_model_in_process(hook, caplog):
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        assert torch_diode.install() is True
    s = torch_diode.get_prediction_stats()
    assert s["model_source"] == "package" and s["model_hardware_key"] == H100
    assert warnings_of(caplog) == [] and s["load_failures"] == {}
    assert any(m["source"] == "package" for m in torch_diode.list_available_models())


def test_tampered_shipped_bundle_is_refused(hook, monkeypatch, caplog):
    pkg = _package_copy(hook, monkeypatch)
    (bundle,) = [d for d in (pkg / H100).iterdir() if d.name.isdigit()]
    w = bundle / "weights.msgpack"
    data = bytearray(w.read_bytes())
    data[-1] ^= 1
    w.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        assert torch_diode.install() is False
        assert torch_diode.install() is False
    s = torch_diode.get_prediction_stats()
    assert s["load_failures"] == {"package_verification_failed": 2}
    assert s["no_model_reason"] == "package_verification_failed"
    (msg,) = warnings_of(caplog)  # one warning per cause
    assert "weights.msgpack" in msg and "reinstall the package" in msg


def test_tampered_shipped_root_key_is_refused(hook, monkeypatch):
    pkg = _package_copy(hook, monkeypatch)
    keys = hook / "other-keys"
    subprocess.run([str(DIODE), "keys", "--keys", str(keys), "init"], check=True, capture_output=True)
    shutil.copy(keys / "root.pub", pkg / "root.pub")
    assert torch_diode.install() is False
    assert torch_diode.get_prediction_stats()["load_failures"] == {"package_verification_failed": 1}


def test_user_pinned_root_key_refuses_shipped_bundle(hook, monkeypatch, caplog):
    keys = hook / "my-keys"
    subprocess.run([str(DIODE), "keys", "--keys", str(keys), "init"], check=True, capture_output=True)
    monkeypatch.setenv(sources.ENV_ROOT_KEY, str(keys / "root.pub"))
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        assert torch_diode.install() is False
    assert torch_diode.get_prediction_stats()["load_failures"] == {"package_untrusted": 1}
    (msg,) = warnings_of(caplog)
    assert "(package_untrusted)" in msg and "unset it" in msg


def test_user_pinning_the_release_root_key_uses_shipped_bundle(hook, monkeypatch):
    monkeypatch.setenv(sources.ENV_ROOT_KEY, (SHIPPED / "root.pub").read_text().strip())
    assert torch_diode.install() is True
    assert torch_diode.get_prediction_stats()["model_source"] == "package"


# ---------------------------------------------------------------- hub versus package

@pytest.fixture
def own_release(hook, monkeypatch):
    """A throw-away release: keys, a registry with versions 1 and 2 of a tiny H100 model,
    and a package directory shipping version `shipped` of it with that root key."""
    keys, reg = hook / "keys", hook / "registry"
    subprocess.run([str(DIODE), "keys", "--keys", str(keys), "init"], check=True, capture_output=True)

    def publish(seed):
        m = write_model_dir(str(hook / f"model{seed}"), seed=seed, hardware_key=H100)
        subprocess.run([str(DIODE), "publish", "--model", m, "--registry", str(reg), "--keys", str(keys)],
                       check=True, capture_output=True)

    def ship(version):
        pkg = hook / f"pkg{version}"
        shutil.copytree(reg / H100 / str(version), pkg / H100 / str(version))
        shutil.copy(keys / "root.pub", pkg / "root.pub")
        monkeypatch.setattr(sources, "PACKAGE_DIR", str(pkg))

    return publish, ship, reg


def _serve(reg):
    handler = functools.partial(_RegistryHandler, directory=str(reg))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_newer_hub_bundle_wins_and_shipped_root_key_verifies_it(own_release, monkeypatch):
    publish, ship, reg = own_release
    publish(1)
    ship(1)
    publish(2)
    server = _serve(reg)
    try:  # no DIODE_ROOT_PUBKEY: the hub's bundle verifies against the shipped root key
        monkeypatch.setenv(sources.ENV_HUB, f"http://127.0.0.1:{server.server_address[1]}")
        assert torch_diode.install() is True
    finally:
        server.shutdown()
    s = torch_diode.get_prediction_stats()
    assert (s["model_source"], s["model_version"]) == ("hub", 2) and s["load_failures"] == {}


def test_newer_shipped_bundle_wins_over_older_cache(own_release, monkeypatch):
    publish, ship, reg = own_release
    publish(1)
    server = _serve(reg)
    try:
        monkeypatch.setenv(sources.ENV_HUB, f"http://127.0.0.1:{server.server_address[1]}")
        ship(1)
        assert torch_diode.install() is True  # pulls version 1 into the cache
        assert torch_diode.get_prediction_stats()["model_source"] == "hub"
    finally:
        server.shutdown()
    monkeypatch.delenv(sources.ENV_HUB)
    publish(2)
    ship(2)  # a package upgrade ships version 2; the cache still has 1
    assert torch_diode.install() is True
    s = torch_diode.get_prediction_stats()
    assert (s["model_source"], s["model_version"]) == ("package", 2)


def test_unreachable_hub_falls_back_to_shipped_bundle_with_one_warning(hook, monkeypatch, caplog):
    monkeypatch.setenv(sources.ENV_HUB, "http://127.0.0.1:9")  # discard port: connection refused
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        assert torch_diode.install() is True
    s = torch_diode.get_prediction_stats()
    assert s["model_source"] == "package" and s["load_failures"] == {"hub_unreachable": 1}
    (msg,) = warnings_of(caplog)
    assert "(hub_unreachable)" in msg and "using the model shipped with the package" in msg
    assert "Inductor's default" not in msg


# ------------------------------------------------------------ the release script ----

RELEASE = ROOT / "python" / "release" / "release_bundles.sh"


def _release_keys(tmp_path) -> pathlib.Path:
    """A fresh release key directory (`diode keys init`), outside the checkout."""
    keys = tmp_path / "keys"
    subprocess.run([str(DIODE), "keys", "--keys", str(keys), "init", "--expires-days", "30"],
                   check=True, capture_output=True, text=True)
    return keys


def test_release_script_plans_one_training_per_seed_and_keeps_keys_out_of_the_repo(tmp_path):
    """--dry-run prints what a release runs (one mpirun training per --seeds entry, then the
    validation of the chosen model) and changes nothing; a key directory inside the
    checkout is refused, so private keys cannot be committed by accident."""
    if not DIODE.exists() or not (BUILD / "models" / "diode-train").exists():
        pytest.skip("needs the C++ build with the trainer (diode, diode-train)")
    keys = _release_keys(tmp_path)
    shipped = sorted(p.relative_to(ROOT).as_posix()
                     for p in (ROOT / "python" / "torch_diode" / "bundles").rglob("*") if p.is_file())
    r = subprocess.run(["bash", str(RELEASE), "--keys", str(keys), "--registry", str(tmp_path / "reg"),
                        "--build", str(BUILD), "--work", str(tmp_path / "work"), "--hardware", "nvidia-h100-80gb",
                        "--seeds", "3,7", "--dry-run"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    trains = [l for l in r.stderr.splitlines() if l.startswith("+ mpirun")]
    assert [t.split("--seed ")[1].split()[0] for t in trains] == ["3", "7"], r.stderr
    assert "diode validate --model" in r.stderr
    # The shipped H100 model is the gate's reference: a candidate that loses to it is not published.
    gate = [l for l in r.stderr.splitlines() if "--gate" in l]
    assert len(gate) == 1 and "--compare " + str(ROOT / "python" / "torch_diode" / "bundles" / "nvidia-h100-80gb") in gate[0]
    # then predict mode's ATen margin is chosen for the candidate on the validation split (2b)
    margin = [l for l in r.stderr.splitlines() if "choose_aten_margin.py" in l]
    assert len(margin) == 1 and "--split-list " + str(tmp_path / "work") in margin[0], r.stderr
    assert margin[0].endswith("--rule mean"), margin[0]          # the default ATen rule
    assert not (tmp_path / "reg" / "nvidia-h100-80gb").exists()  # nothing published
    # --aten-rule every_member: the margin is chosen for (and signed with) that rule
    r = subprocess.run(["bash", str(RELEASE), "--keys", str(keys), "--registry", str(tmp_path / "reg"),
                        "--build", str(BUILD), "--work", str(tmp_path / "work"), "--hardware", "nvidia-h100-80gb",
                        "--seeds", "3,7", "--aten-rule", "every_member", "--dry-run"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    margin = [l for l in r.stderr.splitlines() if "choose_aten_margin.py" in l]
    assert len(margin) == 1 and margin[0].endswith("--rule every_member"), r.stderr
    # --prefilter H,B,K: one more training, the small model (the first seed; the recipe's own
    # --hidden/--blocks replaced by the pre-filter's, which diode-train takes only once)
    r = subprocess.run(["bash", str(RELEASE), "--keys", str(keys), "--registry", str(tmp_path / "reg"),
                        "--build", str(BUILD), "--work", str(tmp_path / "work"), "--hardware", "nvidia-h100-80gb",
                        "--seeds", "3,7", "--ensemble", "8", "--prefilter", "16,1,64",
                        "--train-args", "--hidden 128 --lr 0.002", "--dry-run"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    trains = [l for l in r.stderr.splitlines() if l.startswith("+ mpirun")]
    assert len(trains) == 3 and "--out " + str(tmp_path / "work" / "nvidia-h100-80gb" / "prefilter") in trains[2], r.stderr
    assert trains[2].split("--seed ")[1].split()[0] == "3" and "--lr 0.002" in trains[2]
    assert trains[2].endswith("--hidden 16 --blocks 1 > " + str(tmp_path / "work" / "nvidia-h100-80gb" / "prefilter.log"))
    assert "--hidden 128" not in trains[2] and "--hidden 128" in trains[0]
    for bad, why in ((["--prefilter", "16,1"], "HIDDEN,BLOCKS,KEEP"), (["--prefilter", "16,1,64"], "needs --ensemble"),
                     (["--aten-rule", "all"], "mean or every_member")):
        r = subprocess.run(["bash", str(RELEASE), "--keys", str(keys), "--build", str(BUILD), "--seeds", "3,7",
                            *bad, "--dry-run"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and why in r.stderr, r.stderr
    assert shipped == sorted(p.relative_to(ROOT).as_posix()
                             for p in (ROOT / "python" / "torch_diode" / "bundles").rglob("*") if p.is_file())
    inside = ROOT / "build" / "release-keys-test"  # build/ is ignored, but still inside the checkout
    try:
        shutil.copytree(keys, inside)
        r = subprocess.run(["bash", str(RELEASE), "--keys", str(inside), "--build", str(BUILD), "--dry-run"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "inside the repository" in r.stderr, r.stderr
    finally:
        shutil.rmtree(inside, ignore_errors=True)


def test_release_script_first_release_of_a_hardware_has_no_gate(tmp_path):
    """A hardware the package does not ship yet (its first model) is validated and published
    without a gate; the missing bundle directory must not end the script (it did, silently,
    under `set -e -o pipefail` on the first H200 release)."""
    if not DIODE.exists() or not (BUILD / "models" / "diode-train").exists():
        pytest.skip("needs the C++ build with the trainer (diode, diode-train)")
    keys = _release_keys(tmp_path)
    r = subprocess.run(["bash", str(RELEASE), "--keys", str(keys), "--registry", str(tmp_path / "reg"),
                        "--build", str(BUILD), "--work", str(tmp_path / "work"), "--hardware", H100,
                        "--shipped", str(tmp_path / "none-shipped"), "--seeds", "1,2", "--dry-run"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "diode validate --model" in r.stderr and "--gate" not in r.stderr, r.stderr
    assert not (tmp_path / "reg" / H100).exists()


def _single_model(shipped_model: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """`shipped_model` as a single model directory: as is when it is one, member 0 when it
    is an ensemble (docs/model-format.md, Members; `diode ensemble` joins single models only)."""
    import msgpack
    j = json.loads((shipped_model / "model.json").read_text())
    out.mkdir(parents=True)
    arch = j["architecture"]
    if arch.get("members", 1) == 1:
        shutil.copy(shipped_model / "model.json", out / "model.json")
        shutil.copy(shipped_model / "weights.msgpack", out / "weights.msgpack")
        return out
    magic, version, tensors = msgpack.unpackb((shipped_model / "weights.msgpack").read_bytes())
    first = [[t[0][len("members.0."):], *t[1:]] for t in tensors if t[0].startswith("members.0.")]
    (out / "weights.msgpack").write_bytes(msgpack.packb([magic, version, first], use_bin_type=True))
    del arch["members"], arch["cascade"]
    arch.pop("prefilter", None)   # an ensemble's pre-filter goes with it (its tensors are not member 0's)
    j["training"] = j["training"]["ensemble"][0]
    (out / "model.json").write_text(json.dumps(j))
    return out


def _release_stubs(tmp_path, gate_passes: bool = False, single: bool = False) -> pathlib.Path:
    """A build directory whose diode-train copies the shipped H100 model (with `single`, its
    single-model form: _single_model) as its candidate (with the validation line the script chooses seeds by) and whose diode answers the gate
    "worse" (exit 3) or, with `gate_passes`, "better_or_equal" (exit 0), lists every problem
    for `--list-split test`, publishes with the real `diode publish`, and passes the rest of
    validate/verify: the script's gate branches, in seconds, without training. `--list-split
    validation` lists every problem too (the ATen margin's choice, step 2b)."""
    build = tmp_path / "build"
    (build / "models").mkdir(parents=True)
    (build / "cli").mkdir()
    shipped = ROOT / "python" / "torch_diode" / "bundles" / H100
    model = sorted(shipped.iterdir())[-1]
    if single:  # what diode-train writes: one model (the shipped one may be an ensemble)
        model = _single_model(model, tmp_path / "single-model")
    train = build / "models" / "diode-train"
    train.write_text(f"""#!/usr/bin/env bash
while (($#)); do [ "$1" = --out ] && out=$2; shift; done
mkdir -p "$out" && cp {model}/model.json {model}/weights.msgpack "$out"/
echo "validation (2 problems): overall top-1 1.0300 p90 1.0500  top-5 1.0100"
""")
    diode = build / "cli" / "diode"
    diode.write_text(f"""#!/usr/bin/env bash
case " $* " in
  *" --gate "*) {"echo 'gate: candidate is better than or equal to shipped (better_or_equal, stub)'; exit 0" if gate_passes
                  else 'echo "gate: candidate is WORSE than shipped (stub)"; exit 3'} ;;
  *" publish "*) exec {DIODE} "$@" ;;
  *" ensemble "*) args=(); skip=0; for a in "$@"; do  # the real join, without the test-split metrics
                    if ((skip)); then skip=0; elif [ "$a" = --dataset ]; then skip=1; else args+=("$a"); fi; done
                  exec {DIODE} "${{args[@]}}" ;;
  *" --split validation "*) echo '{{"model": {{"top1": {{"geomean": 1.0250}}}}}}' ;;
  *" --list-split test "*|*" --list-split validation "*)
                           args=(); for a in "$@"; do [ "$a" = test ] || [ "$a" = validation ] && a=all; args+=("$a"); done
                           exec {DIODE} "${{args[@]}}" ;;
  *" validate "*) echo '{{}}' ;;
  *" verify "*) ;;
  *) exit 9 ;;
esac
""")
    train.chmod(0o755)
    diode.chmod(0o755)
    return build


def _release_inputs(tmp_path) -> pathlib.Path:
    """tmp_path/datasets/H100 with the smallest committed H100 shard, and a copy of the shipped
    H100 bundle directory (returned: the script's --shipped), so a run changes nothing of the
    checkout's."""
    data = tmp_path / "datasets" / H100
    data.mkdir(parents=True)
    small = min((ROOT / "datasets" / H100).glob("*.msgpack.gz"), key=lambda f: f.stat().st_size)
    shutil.copy(small, data / small.name)
    shipped = tmp_path / "bundles"
    shutil.copytree(ROOT / "python" / "torch_diode" / "bundles" / H100, shipped / H100)
    return shipped


SHARE_LINE = "top 10 picks timed as compiled (static or ATen):"  # bench/static_pick_split.py's last line


def _run_release(tmp_path, keys, build, shipped, env=None, args=("--seeds", "1")) -> subprocess.CompletedProcess:
    """The release script on _release_inputs' datasets and bundles, one seed unless `args`
    say otherwise, every output (registry, work, validate results) under tmp_path: nothing
    of the checkout changes, whatever the gate decides."""
    return subprocess.run(["bash", str(RELEASE), "--keys", str(keys), "--registry", str(tmp_path / "reg"),
                           "--build", str(build), "--work", str(tmp_path / "work"), "--hardware", H100,
                           "--datasets", str(tmp_path / "datasets"), "--shipped", str(shipped),
                           "--results", str(tmp_path / "results"), *args],
                          capture_output=True, text=True, timeout=240, env=env)


def test_release_script_gate_kept_prints_both_models_share_of_compiled_picks(tmp_path):
    """When the gate keeps the shipped model, the script prints, for the candidate and the
    shipped model, how many of their top 10 picks the test records time as compiled
    (bench/static_pick_split.py), since a re-collection with one model's picks favours it.
    One release (2026-11-27) printed empty lines there: the script ran a python3 without torch
    and silenced the error. A failing script is now named, with its error file."""
    if not DIODE.exists() or shutil.which("mpirun") is None:
        pytest.skip("needs the C++ build (diode) and mpirun")
    keys = _release_keys(tmp_path)
    build = _release_stubs(tmp_path)
    shipped = _release_inputs(tmp_path)

    def release(python: str | None):
        env = dict(os.environ)
        env.pop("PYTHON", None)
        if python:
            env["PYTHON"] = python
        return _run_release(tmp_path, keys, build, shipped, env)

    # PYTHON unset: the script takes the project's venv (.ci/setup), whose python has torch.
    r = release(None if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable)
    assert r.returncode == 0, r.stderr
    assert f"kept (the candidate lost to it on the test split): {H100}" in r.stderr, r.stderr
    shares = [l for l in r.stderr.splitlines() if SHARE_LINE in l]
    assert len(shares) == 2, r.stderr
    assert shares[0].startswith(str(tmp_path / "work" / H100 / "model") + ":")
    assert shares[1].startswith(str(shipped / H100))
    assert shares[0].split(": ", 1)[1] == shares[1].split(": ", 1)[1]  # the same model twice: the same share
    assert not (tmp_path / "reg" / H100).exists()  # nothing published

    r = release("/bin/false")
    assert r.returncode == 0, r.stderr
    failed = [l for l in r.stderr.splitlines() if "bench/static_pick_split.py failed with /bin/false" in l]
    assert len(failed) == 2, r.stderr


def _shipped_version(shipped: pathlib.Path) -> int:
    return max(int(p.name) for p in (shipped / H100).iterdir() if p.name.isdigit())


def test_release_script_resign_ships_the_same_model_under_new_keys(tmp_path):
    """--resign (a new release key after the old key directory was lost): the shipped model,
    byte for byte, is published as the next version signed by the new keys and shipped with
    their root.pub, so it verifies against that key alone; nothing is trained or gated, and
    the committed validate results are not touched."""
    if not DIODE.exists() or shutil.which("mpirun") is None:
        pytest.skip("needs the C++ build (diode) and mpirun")
    keys = _release_keys(tmp_path)
    build = _release_stubs(tmp_path)   # a gate that would keep the shipped model: never asked
    shipped = _release_inputs(tmp_path)
    before = _shipped_version(shipped)
    old = {f: (shipped / H100 / str(before) / f).read_bytes() for f in ("model.json", "weights.msgpack")}
    r = _run_release(tmp_path, keys, build, shipped, args=("--resign",))
    assert r.returncode == 0, r.stderr
    assert "mpirun" not in r.stderr and "--gate" not in r.stderr, r.stderr
    nxt = shipped / H100 / str(before + 1)
    assert [p.name for p in (shipped / H100).iterdir()] == [nxt.name], r.stderr
    assert {f: (nxt / f).read_bytes() for f in old} == old
    assert (shipped / "root.pub").read_text() == (keys / "root.pub").read_text()
    v = subprocess.run([str(DIODE), "verify", str(nxt), "--root-key", str(keys / "root.pub")],
                       capture_output=True, text=True)
    assert v.returncode == 0, v.stdout + v.stderr
    assert not (tmp_path / "results" / f"{H100}.json").exists()
    # it trains nothing, so a recipe or seeds with it are a mistake, refused before anything runs
    r = _run_release(tmp_path, keys, build, shipped, args=("--resign", "--seeds", "1,2"))
    assert r.returncode == 2 and "--resign trains nothing" in r.stderr, r.stderr


def test_release_script_logs_a_passed_gate_and_publishes(tmp_path):
    """A candidate that passes the gate is published as the next version and shipped, and the
    decision is logged like a kept one's, with both models' share of compiled picks (session
    20's H200 release passed silently)."""
    if not DIODE.exists() or shutil.which("mpirun") is None:
        pytest.skip("needs the C++ build (diode) and mpirun")
    keys = _release_keys(tmp_path)
    build = _release_stubs(tmp_path, gate_passes=True)
    shipped = _release_inputs(tmp_path)
    before = _shipped_version(shipped)
    r = _run_release(tmp_path, keys, build, shipped)
    assert r.returncode == 0, r.stderr
    assert "gate: candidate is better than or equal to shipped (better_or_equal, stub)" in r.stderr, r.stderr
    shares = [l for l in r.stderr.splitlines() if SHARE_LINE in l]
    assert len(shares) == 2, r.stderr  # a pass is read with the records' fairness too
    # The registry was empty: it got the shipped version first, so the new one numbers above
    # it (a "1" would read as older than the version the package shipped before).
    nxt = str(before + 1)
    assert (tmp_path / "reg" / H100 / nxt / "bundle.json").is_file(), r.stderr
    assert (tmp_path / "reg" / H100 / str(before) / "bundle.json").is_file(), r.stderr
    assert [p.name for p in (shipped / H100).iterdir()] == [nxt], r.stderr
    assert (tmp_path / "results" / f"{H100}.seeds.txt").is_file(), r.stderr
    # predict mode's ATen margin was chosen on the (stub's) validation list and signed with it
    assert "aten_margin " in r.stderr and "worst validation GEMM" in r.stderr, r.stderr
    sel = json.loads((shipped / H100 / nxt / "model.json").read_text())["selection"]
    assert sel["split"] == "validation" and sel["vs_cublas_max"] <= sel["bound"] == 1.1
    assert sel["aten_margin"] == torch_diode.model.load_model_dir(shipped / H100 / nxt).info.aten_margin


def test_release_script_without_validation_data_publishes_no_gemm_model(tmp_path):
    """Step 2b on GEMM: where `diode validate --list-split validation` fails (no validation data
    to choose predict mode's ATen margin on), the candidate is not published: its error is
    shown, the hardware fails ("aten margin"), the shipped bundle and the committed results
    stay, and the script exits 1 after the summary. (A --family-model is published without a
    margin instead, with a warning: test_cli_family.py.)"""
    if not DIODE.exists() or shutil.which("mpirun") is None:
        pytest.skip("needs the C++ build (diode) and mpirun")
    keys = _release_keys(tmp_path)
    build = _release_stubs(tmp_path, gate_passes=True)
    diode = build / "cli" / "diode"
    stub = diode.read_text()
    no_split = "  *\" --list-split validation \"*) echo 'no validation split (stub)' >&2; exit 4 ;;\n"
    diode.write_text(stub.replace('case " $* " in\n', 'case " $* " in\n' + no_split, 1))
    assert no_split in diode.read_text()
    shipped = _release_inputs(tmp_path)
    before = sorted(p.name for p in (shipped / H100).iterdir())
    r = _run_release(tmp_path, keys, build, shipped)
    assert r.returncode == 1, r.stderr
    assert "no validation split (stub)" in r.stderr, r.stderr
    assert f"release_bundles: {H100}: no ATen margin for predict mode (above); not published" in r.stderr, r.stderr
    assert f"release_bundles: FAILED: {H100} (aten margin)" in r.stderr, r.stderr
    assert "published without" not in r.stderr and "choose_aten_margin" not in r.stderr, r.stderr
    assert sorted(p.name for p in (shipped / H100).iterdir()) == before
    assert not (tmp_path / "results" / f"{H100}.json").exists()
    assert not (tmp_path / "reg" / H100).exists()  # nothing published (nor the registry seeded)


def test_release_script_ships_every_seed_as_one_ensemble(tmp_path):
    """--ensemble K: the seeds are joined by `diode ensemble` (the chosen seed first) instead
    of shipping the chosen one alone; the shipped bundle holds the ensemble, which the
    package loads, and seeds.txt records the join and its validation top-1."""
    if not DIODE.exists() or shutil.which("mpirun") is None:
        pytest.skip("needs the C++ build (diode) and mpirun")
    keys = _release_keys(tmp_path)
    build = _release_stubs(tmp_path, gate_passes=True, single=True)
    shipped = _release_inputs(tmp_path)
    nxt = str(_shipped_version(shipped) + 1)
    r = _run_release(tmp_path, keys, build, shipped, args=("--seeds", "1,2,3", "--ensemble", "24"))
    assert r.returncode == 0, r.stderr
    seeds = (tmp_path / "results" / f"{H100}.seeds.txt").read_text()
    assert "ensemble: every seed, seed 1 first (lowest validation top-1 regret, 1.0300), cascade 24: " \
           "validation top-1 1.0250" in seeds, seeds
    arch = json.loads((shipped / H100 / nxt / "model.json").read_text())["architecture"]
    assert (arch["members"], arch["cascade"]) == (3, 24)
    from torch_diode.model import load_model_dir
    assert load_model_dir(shipped / H100 / nxt).info.architecture.members == 3
    # --ensemble without several seeds is refused before anything runs
    r = _run_release(tmp_path, keys, build, shipped, args=("--seeds", "1", "--ensemble", "24"))
    assert r.returncode == 2 and "--ensemble needs --seeds with at least two seeds" in r.stderr



def _without_prefilter(model: pathlib.Path) -> None:
    """The ensemble in `model` (model.json + weights.msgpack) without its pre-filter, in place:
    what the package shipped before its ensembles had one."""
    import msgpack
    j = json.loads((model / "model.json").read_text())
    j["architecture"].pop("prefilter", None)
    j["training"].pop("prefilter", None)
    (model / "model.json").write_text(json.dumps(j))
    magic, version, tensors = msgpack.unpackb((model / "weights.msgpack").read_bytes())
    kept = [t for t in tensors if not t[0].startswith("prefilter.")]
    (model / "weights.msgpack").write_bytes(msgpack.packb([magic, version, kept], use_bin_type=True))


def test_release_script_add_prefilter_joins_one_to_the_shipped_ensemble(tmp_path):
    """--add-prefilter H,B,K: one training (the pre-filter, with --seed and the recipe's
    --train-args but its own width and depth), joined to the shipped ensemble as it is
    (`diode ensemble --member SHIPPED`: the same members and cascade), then gated, given its
    ATen margin and published like a trained model; seeds.txt gains the join's line."""
    if not DIODE.exists() or shutil.which("mpirun") is None:
        pytest.skip("needs the C++ build (diode) and mpirun")
    import msgpack
    keys = _release_keys(tmp_path)
    build = _release_stubs(tmp_path, gate_passes=True, single=True)  # the stub trains a single model
    shipped = _release_inputs(tmp_path)
    before = _shipped_version(shipped)
    old = shipped / H100 / str(before)
    _without_prefilter(old)
    old_arch = json.loads((old / "model.json").read_text())["architecture"]
    _, _, before_t = msgpack.unpackb((old / "weights.msgpack").read_bytes())  # the release replaces `old`
    assert old_arch["members"] > 1 and "prefilter" not in old_arch  # the shipped ensemble
    r = _run_release(tmp_path, keys, build, shipped,
                     args=("--add-prefilter", "16,1,64", "--seed", "4", "--train-args", "--hidden 128 --lr 0.002"))
    assert r.returncode == 0, r.stderr
    trains = [l for l in r.stderr.splitlines() if l.startswith("+ mpirun")]
    assert len(trains) == 1 and "--out " + str(tmp_path / "work" / H100 / "prefilter") in trains[0], r.stderr
    assert trains[0].split("--seed ")[1].split()[0] == "4" and "--lr 0.002" in trains[0]
    assert "--hidden 128" not in trains[0] and "--hidden 16 --blocks 1 >" in trains[0]
    assert "ensemble --member " + str(old) + " --prefilter" in r.stderr, r.stderr
    nxt = shipped / H100 / str(before + 1)
    assert [p.name for p in (shipped / H100).iterdir()] == [nxt.name], r.stderr
    j = json.loads((nxt / "model.json").read_text())
    arch = j["architecture"]
    assert (arch["members"], arch["cascade"], arch["prefilter"]["keep"]) == \
        (old_arch["members"], old_arch["cascade"], 64)
    assert "aten_margin" in j["selection"]
    # the members' tensors are the shipped ones, byte for byte, the pre-filter's after them
    _, _, after_t = msgpack.unpackb((nxt / "weights.msgpack").read_bytes())
    assert after_t[:len(before_t)] == before_t
    assert after_t[len(before_t):] and all(t[0].startswith("prefilter.") for t in after_t[len(before_t):])
    seeds = (tmp_path / "results" / f"{H100}.seeds.txt").read_text()
    assert f"pre-filter 16,1,64 (hidden, blocks, keep; seed 4) joined to shipped version {before}: " \
           "validation top-1 1.0250" in seeds, seeds
    # refused before anything runs: members to train too, or a malformed H,B,K
    for bad, why in ((("--add-prefilter", "16,1,64", "--seeds", "1,2"), "trains no members"),
                     (("--add-prefilter", "16,1"), "HIDDEN,BLOCKS,KEEP")):
        r = _run_release(tmp_path, keys, build, shipped, args=bad)
        assert r.returncode == 2 and why in r.stderr, r.stderr
    # an ensemble that has a pre-filter already (what was just shipped) gets no second one
    r = _run_release(tmp_path, keys, build, shipped, args=("--add-prefilter", "16,1,64"))
    assert r.returncode == 1 and "already has a pre-filter" in r.stderr, r.stderr
    assert [p.name for p in (shipped / H100).iterdir()] == [nxt.name], r.stderr
    # a shipped single model has no members to keep: that hardware fails, its bundle stays
    single = tmp_path / "single-shipped"
    _single_model(nxt, single / H100 / str(before + 1))
    r = _run_release(tmp_path, keys, build, single, args=("--add-prefilter", "16,1,64"))
    assert r.returncode == 1 and "ships no nvidia-h100-80gb ensemble" in r.stderr, r.stderr
    assert [p.name for p in (single / H100).iterdir()] == [str(before + 1)]
