"""The Python `diode` command with a decision family other than gemm: `pull --family`,
`verify [--family]` and `models list`'s family column, against a registry signed with
throwaway keys (test_sources_family.FamilyRegistry) served over HTTP on 127.0.0.1."""
import json
import pathlib

import pytest

from test_cli_python import assert_one_line_error, run
from test_sources_family import FAM, HW, StaticHub, clean_env, lib, reg  # noqa: F401 (fixtures)
from torch_diode import cli


@pytest.fixture
def hub(reg):  # noqa: F811
    h = StaticHub(reg.registry)
    yield h
    h.close()


def test_pull_family_list_and_verify(lib, reg, hub, capsys, tmp_path):  # noqa: F811
    cache = tmp_path / "cache"
    code, out, err = run(capsys, "pull", "--hub", hub.url, "--hardware", HW, "--cache", str(cache),
                         "--root-key", str(reg.root_pub), "--family", FAM)
    assert code == 0, err
    fam_dir = cache / HW / "families" / FAM / "2"
    assert out == f"{fam_dir}\n" and err == ""
    assert (fam_dir / "weights.msgpack").read_bytes() == (reg.fam_bundle() / "weights.msgpack").read_bytes()
    assert hub.requests[0] == f"/v1/models/{HW}/families/{FAM}/index"
    # The default family is gemm, into its own place.
    code, out, err = run(capsys, "pull", "--hub", hub.url, "--hardware", HW, "--cache", str(cache),
                         "--root-key", str(reg.root_pub))
    assert code == 0 and out == f"{cache / HW / '1'}\n", err

    code, out, err = run(capsys, "models", "list", "--cache", str(cache), "--json")
    assert code == 0, err
    got = [(m["hardware_key"], m["family"], m["version"], m["path"]) for m in json.loads(out)["models"]]
    assert got == [(HW, "gemm", 1, str(cache / HW / "1")), (HW, FAM, 2, str(fam_dir))]
    code, out, err = run(capsys, "models", "list", "--cache", str(cache))
    lines = out.splitlines()
    assert lines[0].startswith(f"{HW}\tversion 1\tverified ")
    assert lines[1].startswith(f"{HW}\tfamily {FAM}\tversion 2\tverified ") and lines[1].endswith(str(fam_dir))

    code, out, err = run(capsys, "verify", str(fam_dir), "--root-key", str(reg.root_pub))
    assert code == 0 and out.startswith(f"OK {HW} family {FAM} version 2 expires "), (out, err)
    code, out, err = run(capsys, "verify", str(fam_dir), "--root-key", str(reg.root_pub), "--family", FAM)
    assert code == 0, err
    code, _, err = run(capsys, "verify", str(fam_dir), "--root-key", str(reg.root_pub), "--family", "gemm")
    assert_one_line_error(err, code, cli.EXIT_VERIFY, str(fam_dir), "is of decision family scaled_mm",
                          "not the requested gemm")
    code, out, err = run(capsys, "verify", str(cache / HW / "1"), "--root-key", str(reg.root_pub))
    assert code == 0 and out.startswith(f"OK {HW} version 1 expires "), (out, err)

    # Offline, from the family's cache place.
    code, out, err = run(capsys, "pull", "--offline", "--hardware", HW, "--cache", str(cache),
                         "--root-key", str(reg.root_pub), "--family", FAM)
    assert code == 0 and out == f"{fam_dir}\n" and err.startswith("warning: served from the cache: "), err


def test_pull_family_errors(lib, reg, hub, capsys, tmp_path):  # noqa: F811
    cache = str(tmp_path / "c")
    with pytest.raises(SystemExit) as e:
        cli.main(["pull", "--offline", "--hardware", HW, "--family", "conv2d"])
    assert e.value.code == cli.EXIT_USAGE
    assert "unknown decision family 'conv2d'" in capsys.readouterr().err
    # Nothing pulled for the family: nothing cached.
    code, _, err = run(capsys, "pull", "--offline", "--hardware", HW, "--cache", cache, "--root-key",
                       str(reg.root_pub), "--family", FAM)
    assert_one_line_error(err, code, cli.EXIT_UNAVAILABLE, f"cache {cache} {HW} {FAM}", "no cached bundle",
                          f"{HW} ({FAM})")
    # Nothing published for the family on another GPU: 404.
    code, _, err = run(capsys, "pull", "--hub", hub.url, "--hardware", "nvidia-h100-80gb", "--cache", cache,
                       "--root-key", str(reg.root_pub), "--family", FAM)
    assert_one_line_error(err, code, cli.EXIT_UNAVAILABLE, f"{hub.url} nvidia-h100-80gb {FAM}", "404")


def test_release_script_signs_and_ships_a_family_model(lib, reg, capsys, tmp_path):  # noqa: F811
    """release_bundles.sh --no-gemm --family-model scaled_mm=DIR: publishes the model in the
    registry's families/ place, verifies it, and ships it alone in the package's
    <hw>/families/scaled_mm/<N>/; a second release from a fresh registry numbers above the
    shipped version. A GEMM model is neither trained nor touched."""
    import subprocess

    from model_tools import BUILD
    script = pathlib.Path(__file__).resolve().parents[2] / "python" / "release" / "release_bundles.sh"
    shipped = tmp_path / "shipped"
    (shipped / HW / "1").mkdir(parents=True)
    for f in ("bundle.json", "roots.json", "model.json", "weights.msgpack"):  # a shipped GEMM bundle stays
        (shipped / HW / "1" / f).write_bytes((reg.registry / HW / "1" / f).read_bytes())

    nodata = tmp_path / "nodata"
    nodata.mkdir()

    def release(registry, datasets=nodata, model=reg.fam_model):
        return subprocess.run(["bash", str(script), "--keys", str(reg.keys), "--registry", str(registry),
                               "--build", str(BUILD), "--work", str(tmp_path / "work"), "--shipped", str(shipped),
                               "--datasets", str(datasets), "--no-gemm", "--family-model", f"{FAM}={model}"],
                              capture_output=True, text=True, timeout=300)

    r = release(tmp_path / "reg1")
    assert r.returncode == 0, r.stderr
    # no data of the family to choose its ATen margin on: published without one, said so
    assert "has no selection (ATen margin)" in r.stderr and "published without" in r.stderr, r.stderr
    fam = shipped / HW / "families" / FAM
    assert sorted(p.name for p in fam.iterdir()) == ["1"]
    assert (fam / "1" / "weights.msgpack").read_bytes() == (reg.fam_model / "weights.msgpack").read_bytes()
    assert "mpirun" not in r.stderr and f"shipped: {HW} {FAM} 1" in r.stderr, r.stderr
    code, out, err = run(capsys, "verify", str(fam / "1"), "--root-key", str(reg.root_pub), "--family", FAM)
    assert code == 0, err
    assert sorted(p.name for p in (shipped / HW).iterdir()) == ["1", "families"]  # the GEMM bundle is untouched
    # A fresh registry: seeded with the shipped version, so the next one is 2.
    r = release(tmp_path / "reg2")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in fam.iterdir()) == ["2"]
    assert (tmp_path / "reg2" / HW / "families" / FAM / "1" / "bundle.json").is_file()

    # With the family's measured data: the margin is chosen on its validation split in a copy of
    # the model. The example model ranks at random, so no margin keeps the worst validation FP8
    # GEMM within 1.10x cuBLASLt: not published, the shipped version stays, the model untouched.
    fp8 = tmp_path / "fp8data" / HW
    fp8.mkdir(parents=True)
    for f in (pathlib.Path(__file__).resolve().parents[2] / "datasets" / HW).glob("*fp8*.msgpack.gz"):
        (fp8 / f.name).symlink_to(f)
    before = (reg.fam_model / "model.json").read_bytes()
    r = release(tmp_path / "reg2", datasets=fp8.parent)
    assert r.returncode == 1 and f"FAILED: {FAM} {reg.fam_model} (aten margin)" in r.stderr, r.stderr
    assert "no margin of" in r.stderr
    assert sorted(p.name for p in fam.iterdir()) == ["2"]
    assert (reg.fam_model / "model.json").read_bytes() == before
    # The shipped FP8 model without its selection: chosen again (margin 0 on 37 problems), signed.
    import json
    import shutil
    shipped_fp8 = pathlib.Path(__file__).resolve().parents[2] / "python" / "torch_diode" / "bundles" / HW / "families" / FAM
    src = max(shipped_fp8.iterdir(), key=lambda d: int(d.name))
    mine = tmp_path / "fp8-model"
    mine.mkdir()
    shutil.copy(src / "weights.msgpack", mine / "weights.msgpack")
    mj = json.loads((src / "model.json").read_text())
    want = mj.pop("selection")
    (mine / "model.json").write_text(json.dumps(mj))
    r = release(tmp_path / "reg2", datasets=fp8.parent, model=mine)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in fam.iterdir()) == ["3"]
    got = json.loads((fam / "3" / "model.json").read_text())["selection"]
    assert got["aten_margin"] == want["aten_margin"] and got["problems"] == want["problems"], (got, want)
    assert "selection" not in json.loads((mine / "model.json").read_text())   # the given directory is not written

    bad = subprocess.run(["bash", str(script), "--keys", str(reg.keys), "--no-gemm"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--no-gemm ships nothing without --family-model" in bad.stderr
    bad = subprocess.run(["bash", str(script), "--keys", str(reg.keys), "--family-model", "scaled_mm"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--family-model takes FAMILY=DIR" in bad.stderr
