"""Zero configuration (hook/zero_config.py): under plain torch.compile the hook turns GEMM
template lowering on for one GEMM lowering at a time and hands exactly one choice back;
whatever the model cannot decide gets ATen alone (plain compile's own choice), never a
benchmark; explicit user settings and the opt-out win."""
import pytest

torch = pytest.importorskip("torch")

from test_hook_predict import fake_model, predict_handler, predicted_order  # noqa: E402
from test_hook_ranking import M, K, N, FakeKTC, FakeMMInputs, finalize, make_choices, model, real_configs  # noqa: E402,F401
from torch._inductor import config as inductor_config  # noqa: E402
from torch_diode.hook import zero_config  # noqa: E402
from torch_diode.hook.choices import HookState  # noqa: E402
from torch_diode.hook.ranking import Options, Ranker  # noqa: E402
from torch_diode.hook.stats import Stats  # noqa: E402


class Node:
    """An IR node as the lowering wrapper sees it: only get_device()."""

    def __init__(self, device):
        self.device = torch.device(device)

    def get_device(self):
        return self.device


@pytest.fixture
def engaged():
    """Runs the block as an engaged zero-configuration lowering of mm."""
    return lambda: zero_config._engaged("mm")


def state_for(m, **opts):
    return HookState(Ranker(m), Options(mode=opts.pop("mode", "predict"), **opts), Stats())


# ---------------------------------------------------------------- when it engages

def test_engages_for_a_gpu_gemm_with_a_model_in_predict_mode(model):
    st = state_for(model)
    assert zero_config.should_engage(st, "mm", (Node("cuda"), Node("cuda")))
    assert zero_config.should_engage(st, "addmm", (Node("cuda"), Node("cuda"), Node("cuda")))


def test_does_not_engage_on_cpu_without_model_or_outside_predict(model):
    assert not zero_config.should_engage(state_for(model), "mm", (Node("cpu"), Node("cpu")))
    assert not zero_config.should_engage(HookState(None, Options(mode="predict"), Stats()), "mm",
                                         (Node("cuda"), Node("cuda")))
    assert not zero_config.should_engage(state_for(model, mode="topk"), "mm", (Node("cuda"), Node("cuda")))
    assert not zero_config.should_engage(None, "mm", (Node("cuda"), Node("cuda")))


def test_explicit_user_config_wins(model):
    st = state_for(model)
    cuda = (Node("cuda"), Node("cuda"))
    with inductor_config.patch(max_autotune=True):            # mode="max-autotune": the user's path
        assert not zero_config.should_engage(st, "mm", cuda)
    with inductor_config.patch(max_autotune_gemm=True):
        assert not zero_config.should_engage(st, "mm", cuda)
    assert zero_config.should_engage(st, "mm", cuda)          # back at the default


def test_opt_out_by_environment_and_option(model, monkeypatch):
    cuda = (Node("cuda"), Node("cuda"))
    assert not zero_config.should_engage(state_for(model, zero_config=False), "mm", cuda)
    monkeypatch.setenv(zero_config.ENV_ZERO_CONFIG, "0")
    assert Options().zero_config is False
    assert not zero_config.should_engage(state_for(model), "mm", cuda)
    monkeypatch.setenv(zero_config.ENV_ZERO_CONFIG, "1")
    assert Options().zero_config is True


def test_option_is_in_the_cache_key():
    assert Options(zero_config=True).key() != Options(zero_config=False).key()
    with pytest.raises(ValueError, match="zero_config"):
        Options(zero_config="yes")


def test_wrapper_patches_gemm_autotuning_for_that_lowering_only(model):
    st = state_for(model)
    seen = []

    def lowering(*args):
        seen.append((inductor_config.max_autotune_gemm, zero_config.active()))
        return "node"

    wrapped = zero_config._wrap("mm", lowering, lambda: st, inductor_config)
    assert wrapped(Node("cuda"), Node("cuda")) == "node"
    assert wrapped(Node("cpu"), Node("cpu")) == "node"
    assert seen == [(True, True), (False, False)]
    assert inductor_config.max_autotune_gemm is False and not zero_config.active()


def test_wrapper_never_breaks_a_compile_when_deciding_fails(model):
    def broken_state():
        raise RuntimeError("state unavailable")

    wrapped = zero_config._wrap("mm", lambda *a: "node", broken_state, inductor_config)
    assert wrapped(Node("cuda"), Node("cuda")) == "node"


def test_install_wraps_every_gemm_lowering_and_uninstall_restores():
    from torch._inductor.lowering import lowerings
    before = {k: v for k, v in lowerings.items()
              if getattr(k, "overloadpacket", k) in (torch.ops.aten.mm, torch.ops.aten.addmm,
                                                     torch.ops.aten.bmm, torch.ops.aten.baddbmm)}
    assert before
    was = zero_config.lowerings_installed()
    zero_config.uninstall_lowerings()
    try:
        assert zero_config.install_lowerings(lambda: None)
        originals = {k: getattr(fn, "__wrapped__", fn) if was else fn for k, fn in before.items()}
        for k, fn in originals.items():
            assert lowerings[k] is not fn and lowerings[k].__wrapped__ is fn
    finally:
        zero_config.uninstall_lowerings()
    assert all(lowerings[k] is fn for k, fn in originals.items())
    if was:
        zero_config.install_lowerings(lambda: None)


# ---------------------------------------------------------------- what an engaged lowering hands over

def test_engaged_predict_hands_one_triton_config(model, real_configs, engaged):
    m = fake_model(model, **{"template__aten": 100.0, "log2_block_m": 1.0, "log2_block_n": 0.5})
    aten, triton = make_choices(real_configs)
    h, state = predict_handler(m)
    with engaged():
        out = finalize(h, {"aten::mm": [aten], "triton::mm": triton, "decompose_k": [FakeKTC("decompose_k", {})]},
                       FakeMMInputs(M, N, K))
    assert out == [triton[predicted_order(m, triton)[0]]]


def test_engaged_outside_the_domain_gets_aten_alone(model, real_configs, engaged, monkeypatch):
    aten, triton = make_choices(real_configs)
    h, state = predict_handler(model)
    monkeypatch.setattr(type(model.info), "in_domain", lambda self, *a: False)
    with engaged():
        out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    assert out == [aten]


def test_engaged_error_gets_aten_alone_not_the_full_list(model, real_configs, engaged, monkeypatch):
    aten, triton = make_choices(real_configs)
    h, state = predict_handler(model)

    def boom(*a, **k):
        raise ValueError("feature table broke")
    monkeypatch.setattr(state.ranker, "rank_keys", boom)
    with engaged():
        out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    assert out == [aten]
    assert state.stats.snapshot()["fallbacks"] == {"feature_error": 1}


def test_not_engaged_error_keeps_inductors_list(model, real_configs, monkeypatch):
    aten, triton = make_choices(real_configs)
    h, state = predict_handler(model)
    monkeypatch.setattr(state.ranker, "rank_keys", lambda *a, **k: (_ for _ in ()).throw(ValueError("x")))
    out = finalize(h, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    assert out == [aten] + triton  # max-autotune's own path: Inductor benchmarks its list


def test_split_lowering_hands_one_choice_in_all(model, real_configs, engaged):
    """A lowering that calls the finalize hook twice (ATen templates, then Triton templates,
    as torch 2.13's addmm does) gets one choice in all: the first call's ATen, then nothing."""
    m = fake_model(model, **{"template__aten": 100.0, "log2_block_m": 1.0})
    aten, triton = make_choices(real_configs)
    h, state = predict_handler(m)
    with engaged():
        first = finalize(h, {"aten::mm": [aten]}, FakeMMInputs(M, N, K))
        sub = finalize(h, {"contiguous_mm": [FakeKTC("contiguous_mm", {})]}, FakeMMInputs(M, N, K))
        second = finalize(h, {"triton::mm": triton}, FakeMMInputs(M, N, K))
    assert first == [aten] and sub == [] and second == []


def test_unknown_op_under_an_engaged_lowering_gets_only_aten(model, engaged):
    h, state = predict_handler(model)
    aten = FakeKTC("aten::mm", {})
    with engaged():
        out = finalize(h, {"aten::mm": [aten], "cutlass": [FakeKTC("cutlass", {})]}, FakeMMInputs(M, N, K),
                       op="mm_plus_mm")
    assert out == [aten]


def test_cpu_compile_warns_once_that_the_hook_gave_nothing(model, caplog):
    import torch_diode
    from test_hook_model import write_model_dir
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        assert torch_diode.install(write_model_dir(d + "/m"), mode="predict")
        try:
            torch._dynamo.reset()
            with caplog.at_level("WARNING", logger="torch_diode"), inductor_config.patch(force_disable_caches=True):
                f = torch.compile(lambda x, w: x @ w)
                f(torch.randn(8, 16), torch.randn(16, 8))
                f2 = torch.compile(lambda x, w: (x @ w).relu())
                f2(torch.randn(8, 16), torch.randn(16, 8))
            msgs = [r.getMessage() for r in caplog.records if "gets nothing from the hook" in r.getMessage()]
            assert len(msgs) == 1 and "device_cpu" in msgs[0]
        finally:
            torch_diode.uninstall()


def test_engaged_lowering_does_not_enumerate_templates_it_would_drop(model, engaged, monkeypatch):
    from test_hook_ranking import FakeTemplate
    from torch_diode.hook import compat
    h, state = predict_handler(model)
    asked = []
    monkeypatch.setattr(compat.choices_base(), "get_ktc",
                        lambda self, inputs, template, op, overrides=None: asked.append(template.uid) or iter(["ktc"]))
    templates = [FakeTemplate(u) for u in ("aten::mm", "aten::bias_addmm", "triton::mm", "decompose_k",
                                            "contiguous_mm", "triton::mm_persistent_tma")]
    with engaged():
        got = {t.uid: list(h.get_ktc(None, t, "mm")) for t in templates}
    assert asked == ["aten::mm", "aten::bias_addmm", "triton::mm", "triton::mm_persistent_tma"]
    assert got["decompose_k"] == [] and got["contiguous_mm"] == [] and got["triton::mm"] == ["ktc"]
    asked.clear()
    assert list(h.get_ktc(None, templates[3], "mm")) == ["ktc"]   # not engaged: Inductor's own enumeration
    assert asked == ["decompose_k"]
