"""The collector's scaled_mm family (FP8 torch._scaled_mm), on CPU: problems and their
inputs, spec parsing, the rendered kernel, records, template provenance."""
import hashlib
import re

import pytest

from torch_diode import inductor_compat as ic
from torch_diode import wire
from torch_diode.collect import engine, records, template
from torch_diode.collect.problems import describe, make_fn, make_inputs, scale_shapes
from torch_diode.collect.spec import SpecError, parse_spec

torch = pytest.importorskip("torch")

FP8 = "float8_e4m3fn"


def scaled(m=64, n=32, k=128, scale="tensor"):
    return wire.Problem(op="scaled_mm", m=m, n=n, k=k, dtype_a=FP8, dtype_b=FP8, dtype_out="bfloat16",
                        trans_b=True, scale=scale)


# ------------------------------------------------------------------------------ problems

@pytest.mark.parametrize("scale,sa,sb", [("tensor", (), ()), ("row", (64, 1), (1, 32))])
def test_inputs_are_fp8_a_row_major_b_column_major_and_float32_scales(scale, sa, sb):
    p = scaled(scale=scale)
    a, b, scale_a, scale_b = make_inputs(p, device="cpu")
    assert a.dtype == b.dtype == torch.float8_e4m3fn
    assert a.shape == (64, 128) and a.stride() == (128, 1)          # [M, K] row-major
    assert b.shape == (128, 32) and b.stride() == (1, 128)          # [K, N] column-major (w.t())
    assert scale_a.dtype == scale_b.dtype == torch.float32
    assert tuple(scale_a.shape) == sa and tuple(scale_b.shape) == sb == scale_shapes(p)[1]
    # no overflow: every operand finite and inside e4m3's range; scales in [0.5, 1.5)
    for t in (a, b):
        f = t.float()
        assert torch.isfinite(f).all() and f.abs().max() < 448 and f.abs().max() > 0
    for s in (scale_a, scale_b):
        assert ((s >= 0.5) & (s < 1.5)).all()
    # deterministic per seed
    assert torch.equal(make_inputs(p, device="cpu")[0].float(), a.float())


@pytest.mark.parametrize("scale", ["tensor", "row"])
def test_make_fn_is_scaled_mm_with_bfloat16_out(scale):
    p = scaled(scale=scale)
    a, b, sa, sb = make_inputs(p, device="cpu")
    out = make_fn(p)(a, b, sa, sb)
    assert out.dtype == torch.bfloat16 and out.shape == (64, 32)
    ref = (a.float() @ b.float()) * sa * sb
    rel = ((out.float() - ref).norm() / ref.norm()).item()
    assert rel < 5e-3                           # only the bfloat16 rounding of the output


def test_scale_shapes_refuse_other_ops_and_kinds():
    with pytest.raises(ValueError, match="no scales"):
        scale_shapes(wire.Problem("mm", 1, 8, 8, 8))
    with pytest.raises(ValueError, match="scale 'none'"):
        scale_shapes(wire.Problem(op="scaled_mm", m=8, n=8, k=32, dtype_a=FP8, dtype_b=FP8,
                                  dtype_out="bfloat16", trans_b=True))


def test_describe_names_the_scale():
    assert describe(scaled(scale="row")) == "scaled_mm 64x32x128 float8_e4m3fn NT scale=row"
    assert describe(wire.Problem("mm", 1, 8, 8, 8)) == "mm 8x8x8 float16 NN"


@pytest.mark.parametrize("scale", ["tensor", "row"])
def test_aten_candidate_is_scaled_mm_into_the_output(scale):
    p = scaled(scale=scale)
    tensors = engine.operands(p, make_inputs(p, device="cpu"))
    assert set(tensors) == {"a", "b", "scale_a", "scale_b", "bias"} and tensors["bias"] is None
    out = torch.full((64, 32), float("nan"), dtype=torch.bfloat16)
    engine._aten_fn(p, tensors, out)()
    want = make_fn(p)(tensors["a"], tensors["b"], tensors["scale_a"], tensors["scale_b"])
    assert torch.equal(out, want)
    # the GEMM form is unchanged: (bias, a, b) or (a, b)
    g = wire.Problem("addmm", 1, 8, 8, 8, bias="row")
    assert engine.operands(g, ("bias", "a", "b")) == {"a": "a", "b": "b", "bias": "bias"}
    assert engine.operands(wire.Problem("mm", 1, 8, 8, 8), ("a", "b")) == {"a": "a", "b": "b", "bias": None}


def test_fp8_tolerance_is_tighter_than_a_wrong_kernel_and_looser_than_rounding():
    assert engine.check_tolerance(scaled()) == engine.SCALED_CHECK_TOLERANCE == 2e-2
    assert engine.check_tolerance(wire.Problem("mm", 1, 8, 8, 8)) == engine.CHECK_TOLERANCE
    p = scaled(m=128, n=96, k=512, scale="row")
    a, b, sa, sb = make_inputs(p, device="cpu")
    ref = make_fn(p)(a, b, sa, sb)
    norm = ref.float().norm().item()
    exact = ((a.float() @ b.float()) * sa * sb).to(torch.bfloat16)      # another summation order
    assert (exact.float() - ref.float()).norm().item() / norm < engine.SCALED_CHECK_TOLERANCE
    no_scale_b = ((a.float() @ b.float()) * sa).to(torch.bfloat16)      # an epilogue missing scale_b
    assert (no_scale_b.float() - ref.float()).norm().item() / norm > engine.SCALED_CHECK_TOLERANCE


# ------------------------------------------------------------------------------ spec

def _spec(**prob):
    return parse_spec({"shard_id": "s/1", "problems": [prob]})


def test_spec_scaled_mm_defaults():
    p = _spec(op="scaled_mm", m=16, n=4096, k=14336, dtype_a=FP8, scale="tensor").problems[0]
    assert p == wire.Problem(op="scaled_mm", batch=1, m=16, n=4096, k=14336, dtype_a=FP8, dtype_b=FP8,
                             dtype_out="bfloat16", trans_a=False, trans_b=True, bias="none", scale="tensor")
    assert _spec(op="scaled_mm", m=8, n=8, k=64, dtype_a=FP8, scale="row").problems[0].scale == "row"


@pytest.mark.parametrize("extra,msg", [
    ({}, "missing field scale"),
    ({"scale": "none"}, "scale"),
    ({"scale": "column"}, "scale"),
    ({"scale": "tensor", "trans_b": False}, r"spec.problems\[0\].trans_b: scaled_mm is collected with"),
    ({"scale": "tensor", "trans_a": True}, "trans_a"),
    ({"scale": "tensor", "dtype_out": "float16"}, "dtype_out"),
    ({"scale": "tensor", "trans_b": 1}, "trans_b: expected boolean"),
    ({"scale": 1}, "scale: expected string"),
])
def test_spec_scaled_mm_errors_name_the_field(extra, msg):
    with pytest.raises(SpecError, match=msg):
        _spec(op="scaled_mm", m=8, n=8, k=64, dtype_a=FP8, **extra)


def test_spec_scaled_mm_needs_fp8_and_gemm_ops_take_no_scale():
    with pytest.raises(SpecError, match="float8_e4m3fn"):
        _spec(op="scaled_mm", m=8, n=8, k=64, dtype_a="bfloat16", scale="tensor")
    with pytest.raises(SpecError, match="scale"):
        _spec(op="mm", m=8, n=8, k=64, dtype_a="float16", scale="row")
    with pytest.raises(SpecError, match="dtype"):
        _spec(op="mm", m=8, n=8, k=64, dtype_a=FP8)


def test_smoke_spec_shape_parses():
    s = parse_spec({"shard_id": "fp8-smoke/h200/0000", "search_space": "DEFAULT", "tf32": [False],
                    "problems": [{"op": "scaled_mm", "m": m, "n": n, "k": k, "dtype_a": FP8, "scale": sc}
                                 for m, n, k, sc in ((1024, 4096, 4096, "tensor"), (16, 4096, 14336, "tensor"),
                                                     (2048, 14336, 4096, "row"), (128, 1024, 4096, "row"))]})
    assert [p.scale for p in s.problems] == ["tensor", "tensor", "row", "row"]
    assert s.search_space == "DEFAULT" and s.timing.static_top == 10


# ------------------------------------------------------------------------------ the kernel

def _signature(src: str) -> tuple[list[str], list[str]]:
    sig = re.search(r"def kernel\((.*?)\):", src).group(1)
    params = [x.strip() for x in sig.split(",")]
    return ([x for x in params if "constexpr" not in x], [x.split(":")[0] for x in params if "constexpr" in x])


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("scale", ["tensor", "row"])
@pytest.mark.parametrize("even_k,fast", [(True, False), (False, True)])
def test_rendered_scaled_mm_kernel(scale, static, even_k, fast):
    p = scaled(m=1024, n=4096, k=4096 if even_k else 4000, scale=scale)
    kc = template.kernel_class(p, even_k, "scaled_mm", static=static, fast_accum=fast)
    assert kc.scale == scale and kc.fast_accum == fast and kc.dtype == FP8 and kc.out_dtype == "bfloat16"
    src = template.render(kc)
    compile(src, "<scaled_mm kernel>", "exec")
    assert "ACC_TYPE: tl.constexpr = tl.float32" in src
    # the scale epilogue, as Inductor's scale_mm_epilogue and its epilogue loads
    if scale == "tensor":
        assert "scale_a = tl.broadcast_to(tl.load(SCALE_A + (0)), [BLOCK_M, BLOCK_N])" in src
        assert "scale_b = tl.broadcast_to(tl.load(SCALE_B + (0)), [BLOCK_M, BLOCK_N])" in src
    else:
        assert ("scale_a = tl.load(SCALE_A + (tl.broadcast_to(idx_m, [BLOCK_M, BLOCK_N])), mask, "
                "eviction_policy='evict_last')") in src
        assert ("scale_b = tl.load(SCALE_B + (tl.broadcast_to(idx_n, [BLOCK_M, BLOCK_N])), mask, "
                "eviction_policy='evict_last')") in src
    epi = src.index("acc = acc * (scale_a * scale_b)")
    assert src.index("scale_b = ") < epi < src.index("tl.store(C + (")
    # USE_FAST_ACCUM is the template's switch
    assert ("acc = tl.dot(a, b, acc," in src) == fast and ("acc += tl.dot(a, b," in src) == (not fast)
    # pointer arguments in signature order, then the runtime sizes / strides; launch_args agrees
    ptrs, consts = _signature(src)
    assert ptrs[:5] == ["A", "B", "C", "SCALE_A", "SCALE_B"]
    assert [n for n, _ in template.pointer_args(kc)] == ptrs[:5]
    assert dict(template.pointer_args(kc)) == {"A": FP8, "B": FP8, "C": "bfloat16", "SCALE_A": "float32",
                                               "SCALE_B": "float32"}
    a, b, sa, sb = make_inputs(p, device="cpu")
    c = torch.empty((p.m, p.n), dtype=torch.bfloat16)
    cfg = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_stages": 4, "num_warps": 4}
    grid, args, kw = template.launch_args(kc, p, {"a": a, "b": b, "c": c, "scale_a": sa, "scale_b": sb}, cfg,
                                          False)
    assert len(args) == len(ptrs) and args[3] is sa and args[4] is sb and args[2] is c
    assert set(kw) - {"num_warps", "num_stages"} <= set(consts)
    assert grid == (16 * 32, 1, 1)
    if static:
        assert "M = 1024" in src and "N = 4096" in src


def test_scaled_kernel_classes_differ_by_scale_and_fast_accum_and_gemm_classes_render_as_before():
    t, r = scaled(scale="tensor"), scaled(scale="row")
    kt, kr = template.kernel_class(t, True, "scaled_mm"), template.kernel_class(r, True, "scaled_mm")
    kf = template.kernel_class(t, True, "scaled_mm", fast_accum=True)
    assert len({kt, kr, kf}) == 3 and len({kt.key(), kr.key(), kf.key()}) == 3
    assert "scale='tensor'" in repr(kt) and "fast_accum=True" in repr(kf) and "fast_accum" not in repr(kt)
    # a GEMM class: repr without the scaled_mm fields, no scale pointers in the source
    g = template.kernel_class(wire.Problem("mm", 1, 64, 64, 64), True)
    assert repr(g).startswith("KernelClass(batched=False, dtype='float16'")
    assert repr(g).endswith("sizes=(8, 8, 8), static=())") and "scale" not in repr(g)
    src = template.render(g)
    assert "SCALE_A" not in src and "scale_a" not in src and _signature(src)[0][:3] == ["A", "B", "C"]
    assert template.pointer_args(g) == [("A", "float16"), ("B", "float16"), ("C", "float16")]
    with pytest.raises(ValueError, match="USE_FAST_ACCUM"):
        template.kernel_class(wire.Problem("mm", 1, 64, 64, 64), True, fast_accum=True)


def test_fp8_alignment_is_16_elements():
    kc = template.kernel_class(scaled(m=1024, n=4096, k=4096), True, "scaled_mm")
    assert kc.a == (-16, 1) and kc.b == (1, -16) and kc.sizes == (16, 16, 16)
    assert template.hints(scaled(m=1024, n=4096, k=4096), {"BLOCK_M": 64, "BLOCK_N": 64}) == \
        {"A_HINT": True, "B_HINT": True}


# ------------------------------------------------------------------------------ records, space

def test_to_config_of_the_scaled_mm_uids():
    c = records.to_config("aten::_scaled_mm", {"out_dtype": torch.bfloat16, "use_fast_accum": False})
    assert c == wire.KernelConfig(template="aten")
    c = records.to_config("aten::_scaled_mm", {"out_dtype": torch.bfloat16, "use_fast_accum": True})
    assert c.template == "aten" and c.use_fast_accum and c.extra == ()
    kw = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 8, "num_stages": 4, "num_warps": 4,
          "EVEN_K": True, "ALLOW_TF32": False, "USE_FAST_ACCUM": True, "ACC_TYPE": "tl.float32",
          "suffix_args": 2, "epilogue_fn": object(), "epilogue_fn_hash": "scale_mm_epilogue"}
    c = records.to_config("triton::mm", kw)
    assert c == wire.KernelConfig("triton::mm", 128, 64, 128, 8, 4, 4, True, False, True, "float32", ())
    # any other template (e.g. a persistent TMA scaled_mm one) keeps its uid: not the collector's
    c = records.to_config("triton::scaled_mm_device_tma_epilogue_scaling", kw)
    assert c.template == "triton::scaled_mm_device_tma_epilogue_scaling"


def test_space_records_scaled_mm_finalize_calls():
    from torch_diode.collect import driver, space
    assert "scaled_mm" in space.AUTOTUNED_OPS and "scaled_mm" in driver.AUTOTUNED_OPS
    assert space.TRITON_GEMM == ("triton::mm", "triton::bmm")   # the only uids the engine renders


def test_default_space_of_scaled_mm_is_inductors_scaled_mm_list():
    from torch_diode.collect.enumerate import mm_configs
    cfgs = mm_configs(1024, 4096, 4096, 1, "DEFAULT", op="scaled_mm")
    assert len(cfgs) == 105                     # the H200's DEFAULT triton::mm count for this problem
    assert all(c["BLOCK_K"] >= 32 for c in cfgs)
    assert len(mm_configs(1024, 4096, 4096, 2, "DEFAULT")) != len(cfgs)


# ------------------------------------------------------------------------------ provenance

def test_template_hashes_are_the_sources_sha256():
    got = ic.template_hashes()
    assert [n for n, _ in got] == ["triton_bmm", "triton_mm"]
    for name, digest in got:
        src = ic.gemm_template_source(name.removeprefix("triton_"))
        assert digest == hashlib.sha256(src.encode()).hexdigest() and re.fullmatch("[0-9a-f]{64}", digest)
    assert ic.template_hashes(["triton_mm"]) == (got[1],)
    assert ic.template_hashes({"triton_mm", "triton_bmm"}) == got
    with pytest.raises(ValueError, match="unknown template name"):
        ic.template_hashes(["triton_conv"])


def test_shard_carries_the_templates_rendered():
    from torch_diode.collect.cli import rendered_template, shard_templates
    assert rendered_template("scaled_mm") == rendered_template("addmm") == "triton_mm"
    assert rendered_template("baddbmm") == "triton_bmm"
    assert shard_templates(set()) == ()
    hw = wire.HardwareId("nvidia", "NVIDIA H200", "sm_90", "9.0", 132, 1, "d", "cuda 13.0", "2.11.0", "3.6.0")
    p = scaled(scale="row")
    cfg = records.to_config("aten::_scaled_mm", {"use_fast_accum": False})
    rec = records.make_record(0, cfg, "ok", 0.01, 0.0, 5)
    tpl = shard_templates({"triton_mm"})
    data = records.build_shard("s/1", "sw", hw, "h", "", [p], [rec], created_ms=1, templates=tpl)
    shard = wire.decode_shard(data)
    assert shard.templates == tpl and shard.wire_version == 3 and shard.problems == [p]
