"""The dataset mix of the problem sampler (issue 18): sample_dataset_mix / --mix dataset."""
import json
from collections import Counter

import pytest

from torch_diode import wire
from torch_diode.collect import sample
from torch_diode.collect.spec import load_spec, parse_spec

N = 2000


@pytest.fixture(scope="module", params=[11, 2026])
def mix(request):
    return sample.sample_dataset_mix(N, seed=request.param)


def _share(xs, pred):
    xs = list(xs)
    return sum(1 for x in xs if pred(x)) / len(xs)


def test_deterministic_and_seed_dependent():
    a = sample.sample_dataset_problems(200, seed=5)
    assert a == sample.sample_dataset_problems(200, seed=5)
    assert a != sample.sample_dataset_problems(200, seed=6)
    assert a == [p for _, p in sample.sample_dataset_mix(200, seed=5)]
    assert sample.sample_dataset_problems(0, seed=5) == []


def test_every_problem_is_valid_and_within_bounds(mix):
    b = sample.Bounds()
    for kind, p in mix:
        assert kind in sample.MIX_KINDS
        assert wire.validate_problem(p) == p
        parse_spec({"shard_id": "t/1", "problems": [wire.to_json(p)]})  # the collector's spec accepts it
        assert p.dtype_a == p.dtype_b == p.dtype_out
        assert not p.trans_a and p.alpha == 1.0 and p.beta == 1.0
        assert sample.gflop(p) <= b.max_gflop and sample.problem_bytes(p) <= b.max_bytes
        assert 1 <= p.batch <= b.max_batch and (p.batch > 1) == (p.op in sample.BATCH_OPS)
        for name in ("m", "n", "k"):
            d = getattr(p, name)
            if kind == "decode" and name == "m":
                continue
            assert b.min_dim <= d <= b.max_dim and d % 8 == 0, (kind, p)


def test_bias_layouts_are_what_the_collector_takes(mix):
    for kind, p in mix:
        if p.op in ("mm", "bmm"):
            assert p.bias == "none"
        elif p.op == "addmm":
            assert p.bias == "row"
        else:  # baddbmm: "full" only as an attention mask over Q @ K^T
            assert p.bias in ("row", "full")
            if p.bias == "full":
                assert kind == "attention_qk"
    qk_baddbmm = [p for k, p in mix if k == "attention_qk" and p.op == "baddbmm"]
    assert abs(_share(qk_baddbmm, lambda p: p.bias == "full") - sample.MASK_SHARE) < 0.15


def test_ops_cycle_and_half_dtypes_alternate(mix):
    ops = Counter(p.op for _, p in mix)
    assert ops == {op: N // 4 for op in sample.GEMM_OPS}
    dtypes = Counter(p.dtype_a for _, p in mix)
    assert set(dtypes) == {"float16", "bfloat16", "float32"}
    assert abs(dtypes["float16"] - dtypes["bfloat16"]) < 0.05 * N
    for op in sample.GEMM_OPS:  # every op in every dtype
        assert {p.dtype_a for _, p in mix if p.op == op} == {"float16", "bfloat16", "float32"}


def test_fp32_share(mix):
    assert abs(_share((p for _, p in mix), lambda p: p.dtype_a == "float32") - sample.FP32_SHARE) < 0.025
    assert sample.FP32_SHARE == pytest.approx(0.1)
    none = sample.sample_dataset_problems(300, seed=1, fp32_share=0.0)
    assert all(p.dtype_a != "float32" for p in none)
    every = sample.sample_dataset_problems(50, seed=1, fp32_share=1.0)
    assert all(p.dtype_a == "float32" for p in every)


def test_decode_band(mix):
    mm = [(k, p) for k, p in mix if p.op in ("mm", "addmm")]
    decode = [p for k, p in mm if k == "decode"]
    assert abs(len(decode) / len(mm) - sample.DECODE_SHARE) < 0.05
    ms = Counter(p.m for p in decode)
    assert set(ms) == set(range(1, 17))  # exact values 1..16, every one of them drawn
    assert any(m % 8 for m in ms)
    assert all(k == "decode" for k, p in mix if p.m < 16)  # nothing else goes below min_dim
    assert all(p.op in ("mm", "addmm") for k, p in mix if k == "decode")


def test_linear_layout_share(mix):
    mm = [p for _, p in mix if p.op in ("mm", "addmm")]
    assert abs(_share(mm, lambda p: p.trans_b) - sample.LINEAR_SHARE) < 0.05
    for op in ("mm", "addmm"):  # both ops, in both layouts, decode band included
        ps = [(k, p) for k, p in mix if p.op == op]
        assert {p.trans_b for _, p in ps} == {True, False}
        assert {p.trans_b for k, p in ps if k == "decode"} == {True, False}


def test_attention_shapes(mix):
    bmm = [(k, p) for k, p in mix if p.op in sample.BATCH_OPS]
    att = [(k, p) for k, p in bmm if k.startswith("attention")]
    assert abs(len(att) / len(bmm) - sample.ATTENTION_SHARE) < 0.05
    qk = [p for k, p in att if k == "attention_qk"]
    pv = [p for k, p in att if k == "attention_pv"]
    assert abs(len(qk) / len(att) - sample.ATTENTION_QK_SHARE) < 0.07
    for p in qk:  # Q @ K^T: (B, S, d) x (B, S, d)^T, K stored (B, S, d)
        assert p.m == p.n and p.k in sample.HEAD_DIMS and p.trans_b
    for p in pv:  # P @ V: (B, S, S) x (B, S, d)
        assert p.m == p.k and p.n in sample.HEAD_DIMS and not p.trans_b
    for _, p in att:
        assert p.batch in sample.ATTENTION_BATCHES and 8 <= p.batch <= 64
    assert {p.k for p in qk} == {p.n for p in pv} == set(sample.HEAD_DIMS)
    for ps in (qk, pv):
        assert len({p.m for p in ps}) > 30  # a spread of sequence lengths
        assert {p.op for p in ps} == set(sample.BATCH_OPS)
    # the rest of bmm/baddbmm are the log-normal shapes, NN, batch a power of two
    for k, p in bmm:
        if k == "lognormal":
            assert not p.trans_b and p.batch & (p.batch - 1) == 0
    # the mix still carries the log-normal shapes of every op
    assert {p.op for k, p in mix if k == "lognormal"} == set(sample.GEMM_OPS)


def test_respects_tighter_bounds():
    b = sample.Bounds(max_dim=2048, max_batch=16, max_gflop=2.0, max_bytes=64 << 20)
    mix = sample.sample_dataset_mix(400, seed=3, bounds=b)
    for kind, p in mix:
        assert sample.gflop(p) <= b.max_gflop and sample.problem_bytes(p) <= b.max_bytes
        assert p.batch <= b.max_batch and max(p.m, p.n, p.k) <= b.max_dim
    assert {k for k, _ in mix} == set(sample.MIX_KINDS) - {"layer"}  # "layer" is version 2's


def test_version_1_draws_what_it_drew_before_version_2_existed():
    # The seeds collected with --mix dataset resume to the same problems: this digest is of
    # the sample as the code before version 2 wrote it (commit 5efc260).
    import hashlib
    ps = sample.sample_dataset_problems(500, seed=2026112509)
    digest = hashlib.sha256(json.dumps([wire.to_json(p) for p in ps], sort_keys=True).encode()).hexdigest()
    assert digest == "e73ec559077bdd8b903785b02f25285e8e0c2d32798dddf1423bc9be8bd79a8e"


@pytest.fixture(scope="module", params=[11, 2026])
def mix2(request):
    return sample.sample_dataset_mix(N, seed=request.param, version=2)


def test_version_2_adds_model_layer_shapes_decode_m1_and_big_attention_batches(mix2):
    kinds = Counter(k for k, _ in mix2)
    assert set(kinds) == set(sample.MIX_KINDS)
    mm_like = [(k, p) for k, p in mix2 if p.op in ("mm", "addmm")]
    layers = [p for k, p in mm_like if k == "layer"]
    assert abs(len(layers) / len(mm_like) - sample.LAYER_SHARE) < 0.05
    assert all(p.trans_b and (p.n, p.k) in sample.LAYER_SHAPES for p in layers)
    assert any(max(p.n, p.k) > sample.Bounds().max_dim for p in layers)   # beyond version 1's 8,192
    decode = [p for p in layers if p.m <= sample.DECODE_M[1]]
    assert abs(len(decode) / len(layers) - sample.LAYER_DECODE_SHARE) < 0.1
    m1 = [p for k, p in mm_like if p.m == 1]
    assert len(m1) / len(mm_like) > 0.05          # version 1: about 1 in 64 of mm/addmm
    assert max(p.batch for _, p in mix2) > 64     # 96 or 128: ViT, Llama at batch 4
    b = sample.Bounds(max_batch=sample.MIX2_MAX_BATCH)
    for kind, p in mix2:
        assert wire.validate_problem(p) == p
        assert sample.gflop(p) <= b.max_gflop and sample.problem_bytes(p) <= b.max_bytes
        assert 1 <= p.batch <= b.max_batch


def test_version_2_cli_writes_a_spec(tmp_path):
    out = tmp_path / "spec.json"
    assert sample.main(["--n", "40", "--seed", "7", "--mix", "dataset2", "--shard-id", "t/2", "--out", str(out)]) == 0
    spec = json.loads(out.read_text())
    assert spec["tf32"] == [True] and len(spec["problems"]) == 40
    assert [wire.from_json(p) if hasattr(wire, "from_json") else p for p in spec["problems"]]
    assert spec["problems"] == [wire.to_json(p) for p in sample.sample_dataset_problems(40, 7, version=2)]
    with pytest.raises(ValueError):
        sample.sample_dataset_mix(3, 0, version=3)


def test_rejects_bad_arguments():
    with pytest.raises(ValueError):
        sample.sample_dataset_problems(3, 0, ops=("conv",))
    with pytest.raises(ValueError):
        sample.sample_dataset_problems(3, 0, dtypes=("float16", "float32"))  # fp32 comes from the share
    with pytest.raises(ValueError):
        sample.sample_dataset_problems(3, 0, fp32_share=1.5)
    with pytest.raises(ValueError):
        sample.sample_dataset_problems(-1, 0)
    with pytest.raises(ValueError):  # attention needs batches of 8 and more
        sample.sample_dataset_problems(3, 0, bounds=sample.Bounds(max_batch=4))
    assert len(sample.sample_dataset_problems(3, 0, ops=("mm",), bounds=sample.Bounds(max_batch=4))) == 3


def test_cli_mix_dataset_writes_tf32_true_only(tmp_path):
    out = tmp_path / "spec.json"
    assert sample.main(["--n", "60", "--seed", "4", "--shard-id", "t/2", "--mix", "dataset",
                        "--out", str(out)]) == 0
    s = load_spec(str(out))
    assert list(s.problems) == sample.sample_dataset_problems(60, 4)
    assert s.tf32 == (True,)
    assert json.loads(out.read_text())["tf32"] == [True]
    assert any(p.dtype_a == "float32" for p in s.problems)


def test_cli_default_mix_is_unchanged(tmp_path):
    out = tmp_path / "spec.json"
    assert sample.main(["--n", "10", "--seed", "3", "--shard-id", "t/1", "--mix", "lognormal",
                        "--out", str(out)]) == 0
    raw = json.loads(out.read_text())
    assert "tf32" not in raw  # the spec's default (both modes) as before
    assert list(load_spec(str(out)).problems) == sample.sample_problems(10, 3)


def test_cli_fp32_share_and_errors(tmp_path):
    out = tmp_path / "spec.json"
    assert sample.main(["--n", "20", "--seed", "4", "--shard-id", "t/3", "--mix", "dataset",
                        "--fp32-share", "0", "--out", str(out)]) == 0
    assert all(p.dtype_a != "float32" for p in load_spec(str(out)).problems)
    with pytest.raises(SystemExit) as e:
        sample.main(["--n", "5", "--seed", "4", "--shard-id", "t/3", "--mix", "dataset",
                     "--dtypes", "float32", "--out", str(out)])
    assert e.value.code == 2


def _diode_cli():
    import os
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[2]
    for cand in (os.environ.get("DIODE_BUILD_DIR"), root / "build"):
        if cand and (pathlib.Path(cand) / "cli" / "diode").exists():
            return pathlib.Path(cand) / "cli" / "diode"
    pytest.skip("C++ build not found (cli/diode; set DIODE_BUILD_DIR)")


def test_manifest_of_the_mix_expands_to_the_same_problems(tmp_path):
    """--manifest-from writes a `distribution: problems` manifest: the coordinator (C++)
    must accept it and lease exactly the sampled problems, in order (one definition of the
    mix, the sampler's, reaching the fleet)."""
    import pathlib
    import subprocess
    root = pathlib.Path(__file__).resolve().parents[2]
    out = tmp_path / "mix.yaml"
    assert sample.main(["--n", "23", "--seed", "77", "--shard-id", "unused", "--mix", "dataset",
                        "--manifest-from", str(root / "manifests" / "h200.yaml"), "--name", "h200-mix-77",
                        "--problems-per-shard", "5", "--out", str(out)]) == 0
    diode = _diode_cli()
    ok = subprocess.run([str(diode), "manifest", "validate", str(out)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "23 problems in 5 shards of 5" in ok.stdout
    assert "nvidia-h200-144gb" in ok.stdout, ok.stdout  # h200.yaml's hardware.key is copied
    # The coordinator's shard specs carry the problems: compare them to the sampler's.
    want = sample.sample_dataset_problems(23, seed=77)
    r = subprocess.run([str(diode), "manifest", "shards", str(out), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    specs = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert [len(s["problems"]) for s in specs] == [5, 5, 5, 5, 3]
    assert all(s["tf32"] == [True] for s in specs)
    got = [wire.validate_problem(wire.problem_from_json(p)) for s in specs for p in s["problems"]]
    assert got == want


def test_coordinator_shard_specs_parse_as_collector_specs_with_the_manifests_timing(tmp_path):
    """C++ (the coordinator's shard_spec) and Python (the collector's parse_spec) agree on
    the spec: its defaults are the collector's, and sweep.timing's problem_timeout_s and
    static_top arrive as the manifest set them."""
    import pathlib
    import subprocess
    from torch_diode.collect.spec import Timing
    root = pathlib.Path(__file__).resolve().parents[2]
    diode = _diode_cli()
    base = (root / "manifests" / "h100.yaml").read_text()
    plain = tmp_path / "plain.yaml"
    plain.write_text(base.replace("name: h100-mm-v1", "name: spec-plain").replace("problems: 20000", "problems: 3"))
    tuned = tmp_path / "tuned.yaml"
    tuned.write_text(plain.read_text().replace("name: spec-plain", "name: spec-tuned").replace(
        "    budget_ms_per_config: 60.0\n",
        "    budget_ms_per_config: 60.0\n    problem_timeout_s: 120\n    static_top: 4\n"))
    got = {}
    for path in (plain, tuned):
        r = subprocess.run([str(diode), "manifest", "shards", str(path), "--json"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        got[path.stem] = [parse_spec(json.loads(line)) for line in r.stdout.splitlines() if line.strip()]
    t = got["plain"][0].timing
    assert (t.problem_timeout_s, t.static_top) == (Timing.problem_timeout_s, Timing.static_top)
    t = got["tuned"][0].timing
    assert (t.problem_timeout_s, t.static_top) == (120.0, 4)
    assert (t.warmup, t.repeats, t.min_repeats) == (5, 20, 5)                  # the rest as h100.yaml sets it
