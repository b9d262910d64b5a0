"""The installed handler inside a real torch.compile(mode="max-autotune") on CPU.

On CPU Inductor calls the finalize hook for addmm and bmm with ATen templates only
(no Triton GEMM templates exist without a GPU): the handler must be called, must
return exactly the KTCs Inductor generated, and the compiled graph must be correct.
"""
import pytest

torch = pytest.importorskip("torch")

import torch_diode  # noqa: E402
from test_hook_model import write_model_dir  # noqa: E402
from torch._inductor import config as inductor_config  # noqa: E402
from torch_diode.hook import api, compat  # noqa: E402
from torch_diode.hook.choices import DiodeChoicesMixin  # noqa: E402


def test_handler_passes_aten_choices_through_in_real_compile(tmp_path, monkeypatch):
    api.uninstall()
    cfg, tl = compat.get_choices_config(), compat.thread_handler()
    inductor_config.inductor_choices_class = None
    compat.set_thread_handler(compat.MISSING)
    assert torch_diode.install(write_model_dir(str(tmp_path / "m")))
    torch_diode.reset_prediction_stats()

    calls = []
    original = DiodeChoicesMixin._diode_finalize

    def spy(self, args, kwargs):
        # materialise what Inductor generated, then let the handler run on the same objects
        bound = compat.bind_finalize_args(self._diode_base_finalize, args, kwargs)
        generated = {uid: list(g) for uid, g in bound["template_choices"].items()}
        bound["template_choices"] = {uid: iter(v) for uid, v in generated.items()}
        bound.pop("self", None)
        out = original(self, (), bound)
        calls.append((bound["op_name"], generated, out))
        return out

    monkeypatch.setattr(DiodeChoicesMixin, "_diode_finalize", spy)

    def f(x, w, b, a, c):
        return torch.nn.functional.linear(x, w, b), torch.bmm(a, c)

    args = (torch.randn(16, 64), torch.randn(32, 64), torch.randn(32), torch.randn(2, 8, 16),
            torch.randn(2, 16, 4))
    torch._dynamo.reset()
    try:
        # caches off so lowering (and the hook) really runs; ATen-only backends so the
        # test does not spend seconds benchmarking the CPP GEMM template
        with inductor_config.patch(force_disable_caches=True, max_autotune_gemm_backends="ATEN"), \
                torch_diode.profile_predictions() as records:
            got = torch.compile(f, mode="max-autotune")(*args)
    finally:
        torch._dynamo.reset()
        api.uninstall()
        inductor_config.inductor_choices_class = cfg
        compat.set_thread_handler(tl)

    want = f(*args)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])

    ops = {op for op, _, _ in calls}
    assert {"addmm", "bmm"} <= ops, ops
    for op, generated, out in calls:
        flat = [k for v in generated.values() for k in v]
        assert [id(k) for k in out] == [id(k) for k in flat]  # same objects, same order
        assert all(not compat.ktc_uid(k).startswith("triton::") for k in flat)
    uids = {u for _, generated, _ in calls for u, v in generated.items() if v}
    assert {"aten::addmm", "aten::bmm"} <= uids, uids  # F.linear lowers to addmm
    assert len(records) == len(calls)
    assert {r.outcome for r in records} == {"passthrough:no_triton_configs"}
    s = torch_diode.get_prediction_stats()
    assert s["calls"] == len(calls) and s["fallbacks"] == {} and s["model_selections"] == 0


def test_fx_graph_cache_key_follows_the_model(tmp_path, monkeypatch):
    """A graph compiled under one model is not reused under another: the handler's
    uuid() is part of Inductor's FX graph cache key."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    api.uninstall()
    cfg, tl = compat.get_choices_config(), compat.thread_handler()
    inductor_config.inductor_choices_class = None
    compat.set_thread_handler(compat.MISSING)
    a = write_model_dir(str(tmp_path / "a"), seed=1)
    b = write_model_dir(str(tmp_path / "b"), seed=2)

    def f(x, w, b_):
        return torch.addmm(b_, x, w)

    args = (torch.randn(8, 32), torch.randn(32, 16), torch.randn(16))

    def hook_calls():
        torch._dynamo.reset()
        torch_diode.reset_prediction_stats()
        with inductor_config.patch(fx_graph_cache=True, force_disable_caches=False,
                                   max_autotune_gemm_backends="ATEN"):
            torch.compile(f, mode="max-autotune")(*args)
        return torch_diode.get_prediction_stats()["calls"]

    try:
        torch_diode.install(a)
        assert hook_calls() > 0   # cold: lowered, hook called
        assert hook_calls() == 0  # same model: FX graph cache hit, no lowering
        torch_diode.install(b)
        assert hook_calls() > 0   # other model: other key, lowered again
        torch_diode.set_options(top_k=2)
        assert hook_calls() > 0   # other options: other key
    finally:
        torch._dynamo.reset()
        api.uninstall()
        torch_diode.set_options(top_k=5)
        inductor_config.inductor_choices_class = cfg
        compat.set_thread_handler(tl)
