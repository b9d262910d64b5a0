"""Predict mode's GEMV reduction candidate (torch_diode/hook/gemv.py): the table format,
the lookup, the shapes it takes, the decomposition wrapper and the fixed launch config.

The GPU half (that the reduction compiles with the fixed config and beats cuBLAS) is
bench/gemv_reduction.py (script removed; git history)'s, measured on the device (bench/RESULTS.md); here everything that
runs without a GPU, on fake CUDA tensors where shapes matter."""
from __future__ import annotations

import json
import logging

import pytest

torch = pytest.importorskip("torch")
sympy = pytest.importorskip("sympy")

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from torch_diode.hook import api, gemv  # noqa: E402
from torch_diode.hook.ranking import Options  # noqa: E402

CFG = {"XBLOCK": 2, "R0_BLOCK": 2048, "num_warps": 8, "num_stages": 1}
CFG_B = {"XBLOCK": 1, "R0_BLOCK": 512, "num_warps": 4, "num_stages": 1}


def table_doc(entries=None, hardware="test-gpu"):
    return {"format": gemv.TABLE_FORMAT, "hardware": hardware, "measured": {"date": "2026-11-28"},
            "entries": entries if entries is not None else [
                {"dtype": "float16", "layout": "inner", "n": 12288, "k": 3072, "config": CFG,
                 "reduction_us": 20.0, "cublas_us": 23.0},
                {"dtype": "float16", "layout": "inner", "n": 3072, "k": 3072, "config": CFG_B,
                 "reduction_us": 6.5, "cublas_us": 9.7},
                {"dtype": "bfloat16", "layout": "inner", "n": 6144, "k": 1536, "config": CFG,
                 "reduction_us": 8.2, "cublas_us": 8.1}]}


def parse(doc) -> gemv.GemvTable:
    return gemv.parse_table(json.dumps(doc).encode(), "test")


@pytest.fixture
def fresh_tables():
    gemv.PROCESS.gemv_tables.clear()
    gemv.PROCESS.planned.clear()
    yield
    gemv.PROCESS.gemv_tables.clear()
    gemv.PROCESS.planned.clear()


# ------------------------------------------------------------------ the shipped table

def test_shipped_h200_table_parses_and_every_entry_beats_cublas():
    path = gemv.TABLE_DIR / "nvidia-h200-144gb.json"
    t = gemv.parse_table(path.read_bytes(), str(path))
    assert t.hardware == "nvidia-h200-144gb"
    assert len(t.entries) == 50
    assert {(e.dtype, e.layout) for e in t.entries} == {("float16", "inner"), ("bfloat16", "inner")}
    # measured: the robust rule's config of each grid shape, faster than cuBLAS by the margin on every one
    assert all(e.reduction_us < e.cublas_us * (1 - gemv.DEFAULT_MARGIN) for e in t.entries)
    # issue 20's M = 1 workloads are not in the table (held out), but within one octave; so
    # is K = 28,672 (l70_down_m1) since the grid reaches K = 24,576
    for dtype, n, k in (("float16", 14336, 4096), ("bfloat16", 4096, 4096), ("float16", 8192, 28672)):
        assert all((e.n, e.k) != (n, k) for e in t.entries)
        assert t.predict(dtype, "inner", n, k) is not None


# ------------------------------------------------------------------ the format, strictly

@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(format="x"), "format"),
    (lambda d: d.update(extra=1), "unknown keys"),
    (lambda d: d.update(hardware=""), "hardware"),
    (lambda d: d.update(measured="yesterday"), "measured"),
    (lambda d: d.update(entries=[]), "entries"),
    (lambda d: d["entries"][0]["config"].update(XBLOCK=3), "powers of two"),
    (lambda d: d["entries"][0]["config"].update(num_stages=0), "num_stages"),
    (lambda d: d["entries"][0]["config"].update(RSPLIT=2), "exactly the keys"),
    (lambda d: d["entries"][0].update(n=0), "n must be"),
    (lambda d: d["entries"][0].update(k=True), "k must be"),
    (lambda d: d["entries"][0].update(reduction_us=float("nan")), "reduction_us"),
    (lambda d: d["entries"][0].update(cublas_us=-1), "cublas_us"),
    (lambda d: d["entries"][0].update(layout="diagonal"), "layout"),
    (lambda d: d["entries"][0].update(dtype="int8"), "dtype"),
    (lambda d: d["entries"][0].update(note="x"), "unknown keys"),
    (lambda d: d["entries"].append(dict(d["entries"][0])), "a second entry"),
])
def test_bad_tables_are_refused_with_the_reason(mutate, message):
    doc = json.loads(json.dumps(table_doc()))
    mutate(doc)
    with pytest.raises(gemv.GemvTableError, match=message):
        parse(doc)


@pytest.mark.parametrize("data", [b"\xff\xfe", b"{", b"[]", b"null", b"[" * 100000,
                                  b" " * (gemv.MAX_TABLE_BYTES + 1)])
def test_non_tables_are_refused(data):
    with pytest.raises(gemv.GemvTableError):
        gemv.parse_table(data, "junk")


# ------------------------------------------------------------------ the lookup

def test_predict_takes_the_nearest_entry_within_one_octave():
    t = parse(table_doc())
    assert t.predict("float16", "inner", 12288, 3072) == CFG           # the entry itself
    assert t.predict("float16", "inner", 14336, 4096) == CFG           # log2 distance 0.46
    assert t.predict("float16", "inner", 4096, 4096) == CFG_B          # nearer 3072x3072
    assert t.predict("float16", "inner", 65536, 3072) is None          # 2.4 octaves away
    assert t.predict("float16", "outer", 12288, 3072) is None          # no outer entries
    assert t.predict("float32", "inner", 12288, 3072) is None          # no fp32 entries
    assert t.predict("float16", "inner", 0, 3072) is None


def test_predict_keeps_cublas_where_the_reduction_did_not_win_by_the_margin():
    t = parse(table_doc())
    assert t.predict("bfloat16", "inner", 6144, 1536) is None          # 8.2 us against cuBLAS 8.1
    assert t.predict("float16", "inner", 12288, 3072, margin=0.2) is None   # 20 vs 23: 13% < 20%
    assert t.predict("float16", "inner", 12288, 3072, margin=0.1) == CFG


def test_load_table_env_shipped_missing_and_wrong_hardware(tmp_path, monkeypatch, fresh_tables, caplog):
    monkeypatch.delenv(gemv.ENV_TABLE, raising=False)
    assert gemv.load_table("nvidia-h200-144gb").hardware == "nvidia-h200-144gb"
    assert gemv.load_table("no-such-gpu") is None
    assert gemv.load_table(None) is None
    assert gemv.load_table("../../etc") is None
    # a shipped table made for another GPU is not used (a copy under the wrong name)
    monkeypatch.setattr(gemv, "TABLE_DIR", tmp_path)
    (tmp_path / "gpu-a.json").write_text(json.dumps(table_doc(hardware="gpu-b")))
    with caplog.at_level(logging.WARNING, logger="torch_diode"):
        assert gemv.load_table("gpu-a") is None
    assert "made for gpu-b" in caplog.text
    # $TORCH_DIODE_GEMV_TABLE wins, for any hardware
    p = tmp_path / "t.json"
    p.write_text(json.dumps(table_doc()))
    monkeypatch.setenv(gemv.ENV_TABLE, str(p))
    assert gemv.load_table("nvidia-h100-80gb").hardware == "test-gpu"
    # a broken one is logged and not used
    gemv.PROCESS.gemv_tables.clear()
    p.write_text("{")
    assert gemv.load_table("x") is None


# ------------------------------------------------------------------ shapes, on fake CUDA tensors

def fake_pair(a_shape, b_shape, dtype=torch.float16, b_transposed=True, a_transposed=False):
    mode = FakeTensorMode()
    with mode:
        a = torch.empty(a_shape[::-1] if a_transposed else a_shape, device="cuda", dtype=dtype)
        a = a.t() if a_transposed else a
        b = torch.empty(b_shape[::-1] if b_transposed else b_shape, device="cuda", dtype=dtype)
        b = b.t() if b_transposed else b
    return mode, a, b


def test_matvec_shape_reads_m1_and_n1_and_the_layout():
    _, a, b = fake_pair((1, 4096), (4096, 14336))                      # F.linear: W (N, K) transposed
    assert gemv.matvec_shape(a, b) == ("float16", "inner", 14336, 4096)
    _, a, b = fake_pair((1, 4096), (4096, 14336), b_transposed=False)   # x @ W with W (K, N)
    assert gemv.matvec_shape(a, b) == ("float16", "outer", 14336, 4096)
    _, a, b = fake_pair((8192, 4096), (4096, 1), dtype=torch.bfloat16, b_transposed=False)
    assert gemv.matvec_shape(a, b) == ("bfloat16", "inner", 8192, 4096)
    _, a, b = fake_pair((2, 4096), (4096, 14336))                       # not a matrix-vector product
    assert gemv.matvec_shape(a, b) is None
    _, a, b = fake_pair((1, 4096), (4096, 1))                           # a dot product: not ours
    assert gemv.matvec_shape(a, b) is None
    a, b = torch.empty(1, 64), torch.empty(64, 32)                      # CPU
    assert gemv.matvec_shape(a, b) is None


# ------------------------------------------------------------------ the decomposition wrapper

@pytest.fixture
def predict_hook(tmp_path, monkeypatch, fresh_tables):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(table_doc()))
    monkeypatch.setenv(gemv.ENV_TABLE, str(p))
    prior = api.get_options()
    api.install(mode="predict", gemv_reduction=True, force=True)
    api.reset_prediction_stats()
    yield
    api.uninstall()
    api.set_options(mode=prior["mode"], gemv_reduction=prior["gemv_reduction"])


def mm_decomposition():
    from torch._inductor import decomposition as d
    return d.decompositions[torch.ops.aten.mm.default], d.select_decomp_table()[torch.ops.aten.mm.default]


def test_install_wraps_inductors_mm_decomposition_and_cpu_passes_through(predict_hook):
    table_fn, selected = mm_decomposition()
    assert table_fn.__name__ == "mm_as_reduction" and selected is table_fn
    # CPU: nothing planned, the compiled result is the GEMM's
    f = torch.compile(lambda x, w: torch.nn.functional.linear(x, w))
    x, w = torch.randn(1, 64), torch.randn(32, 64)
    torch.testing.assert_close(f(x, w), x @ w.t())
    assert gemv.PROCESS.planned == {}


def test_an_m1_mm_becomes_inductors_reduction_with_the_tables_config(predict_hook):
    wrapper, _ = mm_decomposition()
    mode, a, b = fake_pair((1, 4096), (4096, 14336))
    with autotuning_gemms(), mode:
        out = wrapper(a, b)
    # Inductor's own decomposition ran (a reduction, not NotImplemented), fp16 out
    assert isinstance(out, torch.Tensor) and out.shape == (1, 14336) and out.dtype == torch.float16
    assert gemv.planned_config(14336, 4096) == CFG
    assert api.get_prediction_stats()["gemv"] == {"reduction": 1}
    # where the table keeps cuBLAS (bf16 6144x1536), Inductor's decomposition declines as usual
    mode, a, b = fake_pair((1, 1536), (1536, 6144), dtype=torch.bfloat16)
    with autotuning_gemms(), mode:
        assert wrapper(a, b) is NotImplemented
    assert api.get_prediction_stats()["gemv"] == {"reduction": 1, "cublas_or_model": 1}


def autotuning_gemms():
    """The user's config autotunes GEMMs (max-autotune): where predict mode makes M = 1 a
    reduction; under plain compile (zero configuration) it keeps cuBLAS."""
    from torch._inductor import config
    return config.patch(max_autotune_gemm=True)


def test_under_plain_compile_an_m1_mm_keeps_cublas(predict_hook):
    wrapper, _ = mm_decomposition()
    mode, a, b = fake_pair((1, 4096), (4096, 14336))
    with mode:
        assert wrapper(a, b) is NotImplemented
    assert gemv.PROCESS.planned == {}
    assert api.get_prediction_stats()["gemv"] == {"plain_compile": 1}


def test_topk_mode_and_the_option_off_leave_the_gemm_alone(predict_hook):
    wrapper, _ = mm_decomposition()
    for opts in ({"mode": "topk"}, {"mode": "predict", "gemv_reduction": False}):
        api.set_options(**opts)
        mode, a, b = fake_pair((1, 4096), (4096, 14336))
        with mode:
            assert wrapper(a, b) is NotImplemented
    api.uninstall()
    mode, a, b = fake_pair((1, 4096), (4096, 14336))
    with mode:
        assert wrapper(a, b) is NotImplemented        # not installed: Inductor's behaviour
    assert gemv.PROCESS.planned == {}


def test_under_coordinate_descent_inductor_decomposes_and_tunes_on_its_own(predict_hook):
    from torch._inductor import config
    wrapper, _ = mm_decomposition()
    mode, a, b = fake_pair((1, 4096), (4096, 14336))
    with config.patch(coordinate_descent_tuning=True), mode:
        assert isinstance(wrapper(a, b), torch.Tensor)
    assert gemv.PROCESS.planned == {}                         # no fixed config: coordinate descent tunes it


def addmm_decomposition():
    from torch._inductor import decomposition as d
    op = torch.ops.aten.addmm.default
    return d.decompositions[op], d.select_decomp_table()[op]


def fake_bias(mode, shape, dtype=torch.float16):
    with mode:
        return torch.empty(shape, device="cuda", dtype=dtype)


def test_install_wraps_inductors_addmm_decomposition(predict_hook):
    table_fn, selected = addmm_decomposition()
    assert table_fn.__name__ == "addmm_as_reduction" and selected is table_fn
    # CPU: a compiled linear with bias is the GEMM's, nothing planned
    f = torch.compile(lambda x, w, b: torch.nn.functional.linear(x, w, b))
    x, w, b = torch.randn(1, 64), torch.randn(32, 64), torch.randn(32)
    torch.testing.assert_close(f(x, w, b), torch.addmm(b, x, w.t()))
    assert gemv.PROCESS.planned == {}


def test_an_m1_linear_with_bias_becomes_the_reduction_with_the_bias_in_fp32(predict_hook):
    wrapper, _ = addmm_decomposition()
    mode, a, b = fake_pair((1, 4096), (4096, 14336))
    for bias_shape in ((14336,), (1, 14336)):
        bias = fake_bias(mode, bias_shape)
        with autotuning_gemms(), mode:
            out = wrapper(bias, a, b)
        assert isinstance(out, torch.Tensor) and out.shape == (1, 14336) and out.dtype == torch.float16
    with autotuning_gemms(), mode:      # keyword beta / alpha are addmm's too
        assert isinstance(wrapper(fake_bias(mode, (14336,)), a, b, beta=0.5, alpha=2.0), torch.Tensor)
    assert gemv.planned_config(14336, 4096) == CFG
    assert api.get_prediction_stats()["gemv"] == {"reduction": 3}
    # not ours, Inductor's addmm (NotImplemented for these): a bias of another dtype, a bias
    # that does not broadcast to the output, a positional extra (out_dtype / beta), a table miss
    for bias, extra in ((fake_bias(mode, (14336,), torch.bfloat16), ()),
                        (fake_bias(mode, (2, 14336)), ()),
                        (fake_bias(mode, (14336,)), (torch.float16,))):
        with autotuning_gemms(), mode:
            assert wrapper(bias, a, b, *extra) is NotImplemented
    mode, a, b = fake_pair((1, 1536), (1536, 6144), dtype=torch.bfloat16)
    with autotuning_gemms(), mode:
        assert wrapper(fake_bias(mode, (6144,), torch.bfloat16), a, b) is NotImplemented
    assert api.get_prediction_stats()["gemv"] == {"reduction": 3, "cublas_or_model": 1}


def test_addmm_epilogue_matches_addmm_with_one_rounding():
    torch.manual_seed(0)
    a, w = torch.randn(1, 256), torch.randn(256, 96)
    bias = torch.randn(96).to(torch.bfloat16)
    prod = a @ w                                                       # the fp32 product
    for beta, alpha in ((1, 1), (0.5, 2.0), (0, 1)):
        got = gemv.addmm_epilogue(prod, bias, beta, alpha, torch.bfloat16)
        want = torch.addmm(bias.float(), a, w, beta=beta, alpha=alpha).to(torch.bfloat16)
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    nan_bias = torch.full((96,), float("nan"), dtype=torch.bfloat16)
    assert not gemv.addmm_epilogue(prod, nan_bias, 0, 1, torch.bfloat16).isnan().any()


# ------------------------------------------------------------------ the fixed launch config

class Features:
    def __init__(self, numel, rnumel):
        self.numel, self.reduction_numel = numel, rnumel


def tiling(x, r):
    return [{"x": sympy.Integer(x), "r0_": sympy.Integer(r)}]


def test_fixed_config_goes_to_the_planned_reduction_only(fresh_tables):
    from torch._inductor.codegen.triton import FixedTritonConfig, TritonKernel
    gemv.PROCESS.planned[(14336, 4096)] = dict(CFG)
    kw = gemv.fixed_config_kwargs(Features(sympy.Integer(14336), sympy.Integer(4096)), tiling(14336, 4096),
                                  TritonKernel, {"features": None})
    assert isinstance(kw["fixed_config"], FixedTritonConfig) and kw["fixed_config"].config == CFG
    assert kw["override_persistent_reduction"] is False and kw["features"] is None
    # another size, a symbolic size, a 2-D tiling, a config already fixed: unchanged
    for feats, groups, given in (
            (Features(sympy.Integer(4096), sympy.Integer(4096)), tiling(4096, 4096), {}),
            (Features(sympy.Symbol("s0"), sympy.Integer(4096)), tiling(14336, 4096), {}),
            (Features(sympy.Integer(14336), sympy.Integer(4096)),
             [{"y": sympy.Integer(2), "x": sympy.Integer(14336), "r0_": sympy.Integer(4096)}], {}),
            (Features(sympy.Integer(14336), sympy.Integer(4096)), tiling(14336, 4096),
             {"fixed_config": FixedTritonConfig(dict(CFG_B))})):
        assert gemv.fixed_config_kwargs(feats, groups, TritonKernel, dict(given)) == given


def test_the_handler_applies_it_through_inductors_hook(predict_hook):
    from torch._inductor.codegen.triton import TritonKernel
    handler = api.ChoicesFactory(api.current_state())()
    gemv.PROCESS.planned[(14336, 4096)] = dict(CFG)
    kw = handler.triton_kernel_kwargs(TritonKernel, Features(sympy.Integer(14336), sympy.Integer(4096)),
                                      tiling(14336, 4096), {})
    assert kw["fixed_config"].config == CFG
    assert api.get_prediction_stats()["gemv"] == {"fixed_config": 1}
    # an exception inside never reaches Inductor: its kwargs, and the reason counted

    class Broken:
        @property
        def numel(self):
            raise RuntimeError("boom")
    assert handler.triton_kernel_kwargs(TritonKernel, Broken(), tiling(14336, 4096), {}) == {}
    assert api.get_prediction_stats()["gemv"] == {"fixed_config": 1, "fixed_config_error": 1}


# ------------------------------------------------------------------ options, cache key

def test_option_validated_in_the_key_and_the_table_in_the_uuid(predict_hook):
    with pytest.raises(ValueError, match="gemv_reduction"):
        Options(gemv_reduction="yes")
    assert Options(gemv_reduction=True).key() != Options(gemv_reduction=False).key()
    uuid = api.current_state().uuid()
    assert uuid.endswith(":" + api.current_state().gemv_table.digest)
    api.set_options(gemv_reduction=False)
    assert api.current_state().uuid().endswith(":nogemv")


def test_options_and_stats_say_whether_the_reduction_is_on_and_which_table(predict_hook, tmp_path):
    assert api.get_options()["gemv_reduction"] is True
    t = api.get_prediction_stats()["gemv_table"]
    assert t == {"source": str(tmp_path / "t.json"), "hardware": "test-gpu",
                 "digest": api.current_state().gemv_table.digest, "entries": 3}
    assert api.set_options(gemv_reduction=False)["gemv_reduction"] is False
    assert api.get_options()["gemv_reduction"] is False
    assert api.get_prediction_stats()["options"]["gemv_reduction"] is False
    assert api.get_prediction_stats()["gemv_table"] is None           # not in use
    api.set_options(gemv_reduction=True, mode="topk")
    assert api.get_prediction_stats()["gemv_table"] is None           # predict mode's only


def test_a_pickled_factory_keeps_every_predict_option():
    from torch_diode.hook.choices import ChoicesFactory, HookState, _rebuild_factory
    o = Options(mode="predict", aten_margin=0.2, aten_shortcut=False, gemv_reduction=False)
    f = ChoicesFactory(HookState(None, o))
    fn, args = f.__reduce__()
    assert fn is _rebuild_factory
    assert Options(**args[1]) == o


def test_a_planning_error_takes_inductors_path_and_is_counted(predict_hook, monkeypatch):
    def boom(*args):
        raise RuntimeError("boom")
    monkeypatch.setattr(gemv, "_plan", boom)
    wrapper, _ = mm_decomposition()
    mode, a, b = fake_pair((1, 4096), (4096, 14336))
    with mode:
        assert wrapper(a, b) is NotImplemented
    assert api.get_prediction_stats()["gemv"] == {"planning_error": 1}



class Sym:
    """A symbolic size: reading it as an int would specialise it (a guard), so it must not be."""
    def __int__(self):
        raise AssertionError("int() of a symbolic size")

    __index__ = __int__

    def __eq__(self, other):
        raise AssertionError("a symbolic size compared")

    __hash__ = object.__hash__


class Stand:
    def __init__(self, shape, stride):
        self.shape, self._stride = shape, stride
        self.dtype, self.device = torch.float16, torch.device("cuda")

    def dim(self):
        return len(self.shape)

    def stride(self):
        return self._stride


def test_symbolic_sizes_and_strides_are_not_ours_and_never_read_as_ints():
    a = Stand((1, 4096), (4096, 1))
    assert gemv.matvec_shape(a, Stand((4096, Sym()), (1, 4096))) is None          # dynamic N
    assert gemv.matvec_shape(Stand((Sym(), 4096), (4096, 1)), Stand((4096, 14336), (1, 4096))) is None
    assert gemv.matvec_shape(a, Stand((4096, 14336), (1, Sym()))) is None         # symbolic stride
    assert gemv.matvec_shape(a, Stand((4096, 14336), (1, 4096))) == ("float16", "inner", 14336, 4096)
