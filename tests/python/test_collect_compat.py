"""Version shims of torch_diode.inductor_compat, on the CPU torch (no GPU needed)."""
import pytest

torch = pytest.importorskip("torch")

from torch_diode import inductor_compat as ic  # noqa: E402


class FakeParams:
    def __init__(self, **kw):
        self.kw = kw

    def to_kwargs(self):
        return dict(self.kw)


class FakeTemplate:
    uid = "triton::mm"


class FakeKTC:
    def __init__(self, i):
        self.template = FakeTemplate()
        self.params = FakeParams(BLOCK_M=16 * i)
        self.extra_kwargs = {"ALLOW_TF32": False}


def test_supported_and_hook_name():
    assert ic.require_supported_torch() >= ic.MIN_TORCH
    assert ic.finalize_hook_name() in ("_finalize_template_configs", "_finalize_mm_configs")


def test_too_old_torch_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.5.1+cu124")
    with pytest.raises(ic.UnsupportedTorch, match="too old"):
        ic.require_supported_torch()


def test_choices_class_routes_the_new_hook():
    seen = {}

    def on_finalize(ktcs, kernel_inputs, op_name):
        seen.update(n=len(ktcs), op=op_name, inputs=kernel_inputs)
        return ktcs[:1]

    cls = ic.make_choices_class(on_finalize)
    from torch._inductor.choices import InductorChoices
    assert issubclass(cls, InductorChoices) and cls().uuid().startswith("torch_diode.")
    gens = {"triton::mm": (FakeKTC(i) for i in range(1, 4)), "aten::mm": iter([FakeKTC(9)])}
    out = getattr(cls(), ic.finalize_hook_name())(gens, "inputs", [], "addmm")
    assert seen == {"n": 4, "op": "addmm", "inputs": "inputs"} and len(out) == 1


def test_choices_class_routes_the_old_hook():
    class OldChoices:  # before Sept 2025: _finalize_mm_configs(..., layout, templates, op_name)
        def _finalize_mm_configs(self, template_choices, kernel_inputs, layout, templates, op_name):
            return [k for g in template_choices.values() for k in g]

    got = []
    cls = ic.make_choices_class(lambda k, ki, op: got.append(op) or k, base=OldChoices)
    assert ic.finalize_hook_name(OldChoices) == "_finalize_mm_configs"
    out = cls()._finalize_mm_configs({"a": iter([1, 2])}, None, "layout", [], "bmm")
    assert out == [1, 2] and got == ["bmm"]


def test_no_hook_is_unsupported():
    with pytest.raises(ic.UnsupportedTorch):
        ic.finalize_hook_name(object)


def test_install_choices_sets_and_restores():
    from torch._inductor import config
    cls = ic.make_choices_class(lambda k, ki, op: k)
    before = getattr(config, "inductor_choices_class", None)
    with ic.install_choices(cls):
        if hasattr(config, "inductor_choices_class"):
            assert config.inductor_choices_class is cls
    assert getattr(config, "inductor_choices_class", None) is before


def test_ktc_accessors_new_and_old():
    k = FakeKTC(2)
    assert ic.ktc_params(k) == {"BLOCK_M": 32} and ic.ktc_extra(k) == {"ALLOW_TF32": False}
    assert ic.ktc_template_uid(k) == "triton::mm"

    class Old:
        kwargs = {"BLOCK_M": 64}
    assert ic.ktc_params(Old()) == {"BLOCK_M": 64}
    with pytest.raises(ic.UnsupportedTorch):
        ic.ktc_params(object())


def test_choice_ktc():
    class C:
        annotations = {"ktc": "k"}
    assert ic.choice_ktc(C()) == "k" and ic.choice_ktc(object()) is None


def test_feedback_saver_adapts_and_removes_only_itself():
    from torch._inductor import select_algorithm as sa
    cache = ic._selector_cache()
    other = lambda *a: None  # noqa: E731
    sa.add_feedback_saver(other)
    got = []
    try:
        with ic.feedback_saver(lambda t, n, i, c: got.append((t, n))):
            mine = cache.feedback_saver_fns[-1]
            mine({"c": 1.0}, "mm", [], ["c"], lambda: None, {})  # 2.11 passes 6 arguments
            mine({"d": 2.0}, "bmm", [], ["d"])                     # older torch passes 4
        assert got == [({"c": 1.0}, "mm"), ({"d": 2.0}, "bmm")]
        assert mine not in cache.feedback_saver_fns and other in cache.feedback_saver_fns
    finally:
        cache.feedback_saver_fns.remove(other)


def test_precompile_error_tap():
    from torch._inductor import select_algorithm as sa
    if not hasattr(sa, "_log_autotune_exceptions"):
        pytest.skip("this torch does not report precompile exceptions")
    orig = sa._log_autotune_exceptions
    seen = []
    with ic.precompile_error_tap(lambda c, e: seen.append((c, str(e)))):
        sa._log_autotune_exceptions([("choice", RuntimeError("out of resource"))])
    assert seen == [("choice", "out of resource")] and sa._log_autotune_exceptions is orig


def test_benchmark_interceptor_patches_and_restores():
    from torch._inductor import select_algorithm as sa
    from torch._inductor.runtime import benchmarking
    cls = sa.AlgorithmSelectorCache
    orig = cls.__dict__["benchmark_choice"]
    bm = benchmarking.benchmarker
    timed = []

    def timer(choice, fn):
        fn()
        timed.append(choice)
        return 1.5

    with ic.benchmark_interceptor(timer):
        assert cls.__dict__["benchmark_choice"] is not orig
        # Outside a choice's benchmark, benchmark_gpu is Inductor's own (e.g. the final graph).
        assert "benchmark_gpu" in bm.__dict__
    assert cls.__dict__["benchmark_choice"] is orig and "benchmark_gpu" not in bm.__dict__


def test_set_tf32_round_trip():
    m = torch.backends.cuda.matmul
    before = m.allow_tf32
    restore = ic.set_tf32(True)
    assert m.allow_tf32 is True and torch.get_float32_matmul_precision() == "high"
    if hasattr(m, "fp32_precision"):  # 2.9+: the new API says the same
        assert m.fp32_precision == "tf32"
    ic.set_tf32(False)
    assert m.allow_tf32 is False and torch.get_float32_matmul_precision() == "highest"
    if hasattr(m, "fp32_precision"):
        assert m.fp32_precision == "ieee"
    restore()
    assert m.allow_tf32 == before
    torch.get_float32_matmul_precision()   # the legacy reader still works (no API mix)


def test_set_tf32_recovers_from_a_process_that_mixed_the_apis():
    m = torch.backends.cuda.matmul
    if not hasattr(m, "fp32_precision"):
        pytest.skip("torch before the new precision API")
    saved = m.allow_tf32
    try:
        m.fp32_precision = "tf32"          # the new API alone: legacy readers now raise
        restore = ic.set_tf32(False)
        assert m.allow_tf32 is False and torch.get_float32_matmul_precision() == "highest"
        restore()
        assert m.allow_tf32 is True and m.fp32_precision == "tf32"
    finally:
        m.allow_tf32 = saved


def test_heuristics_module_found():
    assert hasattr(ic.triton_heuristics_module(), "CUDAConfigHeuristic")
