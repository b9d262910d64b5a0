import json
import subprocess
import sys

import pytest

from torch_diode.collect import cli

SPEC = {"shard_id": "cli/1", "problems": [{"op": "mm", "m": 128, "n": 128, "k": 128, "dtype_a": "float16"},
                                          {"op": "bmm", "batch": 2, "m": 16, "n": 16, "k": 16,
                                           "dtype_a": "bfloat16"}]}


@pytest.fixture
def spec_file(tmp_path):
    p = tmp_path / "spec.json"
    p.write_text(json.dumps(SPEC))
    return p


def test_invalid_spec_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"shard_id": "x", "problems": [{"op": "conv"}]}))
    assert cli.main(["--spec", str(bad), "--out", str(tmp_path / "o.msgpack")]) == cli.EXIT_USAGE
    assert "collect: error: spec.problems[0]" in capsys.readouterr().err


def test_missing_out_and_missing_folder_exit_2(spec_file, tmp_path, capsys):
    assert cli.main(["--spec", str(spec_file)]) == cli.EXIT_USAGE
    assert cli.main(["--spec", str(spec_file), "--out", str(tmp_path / "no/such/o.msgpack")]) == cli.EXIT_USAGE
    assert "does not exist" in capsys.readouterr().err


def test_dry_run_lists_inductor_config_counts(spec_file, capsys):
    pytest.importorskip("torch")
    assert cli.main(["--spec", str(spec_file), "--dry-run"]) == cli.EXIT_OK
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("0\tmm 128x128x128 float16 NN\t")
    assert lines[1].startswith("1\tbmm 2x16x16x16 bfloat16 NN\t")
    counts = [int(line.split("\t")[-1]) for line in lines]
    assert counts[-1] == counts[0] + counts[1] and counts[0] > counts[1] > 0


def test_no_gpu_exits_3(spec_file, tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert cli.main(["--spec", str(spec_file), "--out", str(tmp_path / "o.msgpack")]) == cli.EXIT_ENV
    assert "no CUDA/ROCm GPU" in capsys.readouterr().err
    assert not (tmp_path / "o.msgpack").exists()


def test_module_entry_point(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    r = subprocess.run([sys.executable, "-m", "torch_diode.collect", "--spec", str(bad), "--out", "x"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not valid JSON" in r.stderr


def test_write_atomic_gzip(tmp_path):
    import gzip
    p = tmp_path / "s.msgpack.gz"
    cli.write_atomic(str(p), b"abc")
    assert gzip.decompress(p.read_bytes()) == b"abc"
    cli.write_atomic(str(tmp_path / "s.msgpack"), b"abc")
    assert (tmp_path / "s.msgpack").read_bytes() == b"abc"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["s.msgpack", "s.msgpack.gz"]
