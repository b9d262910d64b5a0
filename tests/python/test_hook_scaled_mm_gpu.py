"""Plain torch.compile of an FP8 `torch._scaled_mm` with a scaled_mm model installed
(DIODE_MODEL_SCALED_MM): Inductor's aten._scaled_mm lowering is engaged, the hook hands over
the model's one choice and nothing is autotuned; without the model Inductor's own path.
Needs a CUDA GPU with FP8 (compute capability 8.9 or newer)."""
import os

import pytest

torch = pytest.importorskip("torch")

from test_hook_scaled_mm import write_scaled_model_dir  # noqa: E402

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9),
    reason="FP8 torch._scaled_mm needs a CUDA GPU of compute capability 8.9 or newer")


def fp8_operands(m, n, k, scale):
    g = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(m, k, generator=g).to("cuda", torch.float8_e4m3fn)
    b = torch.randn(n, k, generator=g).to("cuda", torch.float8_e4m3fn).t()   # column-major
    if scale == "tensor":
        sa, sb = torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")
    else:
        sa, sb = torch.rand(m, 1, device="cuda") + 0.5, torch.rand(1, n, device="cuda") + 0.5
    return a, b, sa, sb


def f(a, b, sa, sb):
    return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


def compile_and_record(args):
    """(eager output, compiled output, the hook's scaled_mm records, all its records) of one
    fresh plain torch.compile of f, with Inductor's counters cleared before it."""
    import torch_diode
    from torch._dynamo.utils import counters
    ref = f(*args).float()
    torch._dynamo.reset()
    counters.clear()
    with torch_diode.profile_predictions() as recs:
        out = torch.compile(f)(*args).float()
    return ref, out, [r for r in recs if r.op == "scaled_mm"], recs


@pytest.mark.parametrize("scale", ["tensor", "row"])
def test_plain_compile_takes_the_scaled_mm_models_one_choice(tmp_path, monkeypatch, scale):
    import torch_diode
    from torch._dynamo.utils import counters
    from torch._inductor import config
    d = write_scaled_model_dir(str(tmp_path / "scaled_mm"))
    monkeypatch.setenv("DIODE_MODEL_SCALED_MM", d)
    monkeypatch.setattr(config, "force_disable_caches", True)
    torch_diode.uninstall()
    try:
        torch_diode.install(mode="predict", zero_config=True)
        st = torch_diode.get_prediction_stats()
        assert st["family_models"]["scaled_mm"]["path"] == os.path.abspath(d)
        ref, out, scaled, recs = compile_and_record(fp8_operands(256, 512, 1024, scale))
        assert scaled, [(r.op, r.outcome) for r in recs]
        assert all(r.outcome == "model" and r.predicted in ("aten", "triton") for r in scaled), \
            [(r.outcome, r.predicted, r.error) for r in scaled]
        assert scaled[0].problem["m"] == 256 and scaled[0].configs_in > 1
        assert counters["inductor"]["select_algorithm_autotune"] == 0   # one choice: nothing benchmarked
        assert float((out - ref).norm() / ref.norm()) < 1e-2
    finally:
        torch_diode.uninstall()


def test_plain_compile_uses_the_shipped_signed_scaled_mm_bundle(monkeypatch):
    """Zero configuration on an H200: `import torch_diode` finds the package's signed
    scaled_mm bundle for nvidia-h200-144gb, verifies it with the native client against the
    shipped root key, and plain torch.compile takes its one choice for each FP8 GEMM."""
    import pathlib

    import torch_diode
    from torch._dynamo.utils import counters
    from torch._inductor import config
    from torch_diode import native
    try:
        native.load_library()
    except native.NativeClientUnavailable as e:
        pytest.skip(f"the shipped bundle is verified by libdiode_client.so: {e}")
    for var in ("DIODE_MODEL", "DIODE_MODEL_SCALED_MM", "DIODE_HUB_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(config, "force_disable_caches", True)
    torch_diode.uninstall()
    try:
        torch_diode.install(mode="predict", zero_config=True)
        st = torch_diode.get_prediction_stats()
        fam = (st.get("family_models") or {}).get("scaled_mm")
        if fam is None or fam.get("hardware_key") != "nvidia-h200-144gb":
            pytest.skip(f"no shipped scaled_mm bundle for this GPU ({torch.cuda.get_device_name()}): {fam}")
        shipped = pathlib.Path(torch_diode.__file__).parent / "bundles" / "nvidia-h200-144gb" / "families" / "scaled_mm"
        assert pathlib.Path(fam["path"]).resolve().parent == shipped.resolve(), fam
        for scale in ("tensor", "row"):
            ref, out, scaled, _ = compile_and_record(fp8_operands(64, 4096, 4096, scale))
            assert scaled and all(r.outcome == "model" for r in scaled), \
                [(r.outcome, r.predicted, r.error) for r in scaled]
            assert counters["inductor"]["select_algorithm_autotune"] == 0
            assert float((out - ref).norm() / ref.norm()) < 1e-2
            print(f"shipped scaled_mm bundle {fam['path']}: {scale} scales -> {scaled[0].predicted}")
    finally:
        torch_diode.uninstall()
