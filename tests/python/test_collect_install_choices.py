"""Regression: the collector installs a fresh choices handler for every problem.

On the H100 (2026-11-22) a multi-problem collector run recorded nothing after its
first problem: Inductor caches the handler it builds from
`config.inductor_choices_class` in a thread-local slot, so the first problem's
handler (and its closures) kept serving. install_choices now clears that slot.
On CPU Inductor still calls the finalize hook for addmm under max-autotune, with
ATen choices only, which is enough to see which handler is called.
"""
import pytest

torch = pytest.importorskip("torch")

from torch_diode import inductor_compat as ic  # noqa: E402


def _compile_addmm(n: int) -> None:
    torch._dynamo.reset()
    fn = torch.compile(lambda b, x, y: torch.addmm(b, x, y), mode="max-autotune-no-cudagraphs",
                       dynamic=False, fullgraph=True)
    fn(torch.randn(n), torch.randn(n, n), torch.randn(n, n))


def test_each_install_gets_its_own_handler():
    from torch._inductor import config
    seen: list[str] = []

    def recorder(tag):
        def on_finalize(ktcs, kernel_inputs, op_name):
            seen.append(tag)
            return ktcs
        return on_finalize

    with config.patch(force_disable_caches=True, max_autotune_gemm_backends="ATEN"):
        before = ic.thread_handler()
        with ic.install_choices(ic.make_choices_class(recorder("first"))):
            _compile_addmm(8)
        with ic.install_choices(ic.make_choices_class(recorder("second"))):
            _compile_addmm(16)
        assert ic.thread_handler() is before
    torch._dynamo.reset()
    assert "first" in seen and "second" in seen, seen
    assert seen.index("second") > seen.index("first")
    assert seen[-1] == "second"
