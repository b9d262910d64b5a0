"""The hook's model forwards run on one intra-op thread (ranking._OneIntraOpThread): on a
busy machine (torch.compile's workers) a 16-thread OpenMP region waits at every op's barrier
(48 ms against 1.1 ms per ranking on a busy H200 host, bench/hook_rank_threads.py (script removed; git history)). The
count is restored afterwards, also when a forward raises and when rankings overlap."""
import threading

import pytest

torch = pytest.importorskip("torch")

from test_hook_model import write_model_dir  # noqa: E402
from torch_diode.hook import ranking  # noqa: E402
from torch_diode.hook.ranking import Options, Ranker  # noqa: E402
from torch_diode.model import load_model_dir  # noqa: E402
from torch_diode.wire import KernelConfig, Problem  # noqa: E402

CONFIGS = [KernelConfig(template="triton::mm", block_m=bm, block_n=bn, block_k=32, group_m=8, num_stages=3,
                        num_warps=4) for bm in (32, 64, 128) for bn in (32, 64)]


@pytest.fixture
def two_threads():
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return load_model_dir(write_model_dir(str(tmp_path_factory.mktemp("m")), hidden=16, blocks=2))


def test_forwards_run_on_one_thread_and_the_count_comes_back(model, two_threads):
    seen = []
    handle = model.module.register_forward_pre_hook(lambda mod, inp: seen.append(torch.get_num_threads()))
    try:
        Ranker(model).rank(Problem(op="mm", m=1024, n=2048, k=4096), CONFIGS, Options(mode="predict"))
    finally:
        handle.remove()
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == two_threads


def test_a_forward_that_raises_restores_the_count(model, two_threads):
    def boom(mod, inp):
        raise RuntimeError("forward failed")
    handle = model.module.register_forward_pre_hook(boom)
    try:
        with pytest.raises(RuntimeError, match="forward failed"):
            Ranker(model).rank(Problem(op="mm", m=64, n=64, k=64), CONFIGS, Options(mode="predict"))
    finally:
        handle.remove()
    assert torch.get_num_threads() == two_threads


def test_overlapping_scopes_restore_once_the_last_one_ends(two_threads):
    a, b = ranking._OneIntraOpThread(), ranking._OneIntraOpThread()
    a.__enter__()
    b.__enter__()
    assert torch.get_num_threads() == 1
    a.__exit__(None, None, None)        # b is still in flight: one thread stays
    assert torch.get_num_threads() == 1
    b.__exit__(None, None, None)
    assert torch.get_num_threads() == two_threads


def test_rankings_from_several_threads_leave_the_count_as_it_was(model, two_threads):
    errors = []

    def work(i):
        try:
            r = Ranker(model)
            for j in range(20):
                r.rank(Problem(op="mm", m=64 * (i + 1), n=128 + j, k=256), CONFIGS, Options(mode="predict"))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert torch.get_num_threads() == two_threads
