"""The collector's --serve loop (python -m torch_diode.collect --serve): its line protocol,
without a GPU. The per-spec collection (cli.collect) is monkeypatched where a test needs a
result; the subprocess tests go through the real one, which answers usage/environment codes
on a machine without a GPU."""
import io
import json
import subprocess
import sys

import pytest

from torch_diode.collect import cli

SPEC = {"shard_id": "serve/1", "problems": [{"op": "mm", "m": 128, "n": 128, "k": 128, "dtype_a": "float16"}]}


@pytest.fixture
def spec_file(tmp_path):
    p = tmp_path / "spec.json"
    p.write_text(json.dumps(SPEC))
    return p


@pytest.fixture
def calls(monkeypatch):
    """cli.collect replaced by a recorder: returns the code the spec file's name says."""
    seen = []

    def fake_collect(args, session):
        seen.append((args.spec, args.out, args.deadline_s, session))
        if "boom" in args.spec:
            raise RuntimeError("boom")
        return {"ok": cli.EXIT_OK, "partial": cli.EXIT_PARTIAL}.get(args.spec.rsplit("/", 1)[-1], cli.EXIT_USAGE)

    monkeypatch.setattr(cli, "collect", fake_collect)
    monkeypatch.setattr(cli, "reset_between_specs", lambda: seen.append("reset"))
    return seen


def run_serve(lines, argv=("--serve",)):
    base = cli.parse_args(list(argv))
    session = cli.Session(base)
    out = io.StringIO()
    code = cli.serve(base, session, io.StringIO("".join(lines)), out)
    return code, [json.loads(x) for x in out.getvalue().splitlines()]


def test_malformed_lines_get_an_error_and_the_loop_goes_on(calls):
    code, replies = run_serve([
        "not json\n",
        "[1, 2]\n",
        json.dumps({"spec": "/s/ok"}) + "\n",                                   # no out
        json.dumps({"spec": "/s/ok", "out": "/o/1", "deadline_s": "soon"}) + "\n",
        json.dumps({"spec": "/s/ok", "out": "/o/1", "extra": 1}) + "\n",
        "\n",                                                                   # blank: skipped
        json.dumps({"spec": "/s/ok", "out": "/o/1", "deadline_s": 30}) + "\n",
    ])
    assert code == 0
    assert [set(r) for r in replies[:5]] == [{"error"}] * 5
    assert "not JSON" in replies[0]["error"] and "'out'" in replies[2]["error"]
    assert replies[5] == {"out": "/o/1", "code": cli.EXIT_OK}
    assert [c for c in calls if c != "reset"] == [("/s/ok", "/o/1", 30.0, calls[-1][3])]


def test_requests_share_one_session_and_are_reset_between(calls):
    code, replies = run_serve([json.dumps({"spec": f"/s/{n}", "out": f"/o/{i}"}) + "\n"
                               for i, n in enumerate(("ok", "partial", "bad"))])
    assert code == 0
    assert replies == [{"out": "/o/0", "code": 0}, {"out": "/o/1", "code": 4}, {"out": "/o/2", "code": 2}]
    assert calls[0::2] == ["reset"] * 3        # torch state reset before every request
    sessions = {id(c[3]) for c in calls[1::2]}
    assert len(sessions) == 1                  # torch, CUDA, fingerprint, pools: kept


def test_internal_error_answers_1_and_ends_the_loop(calls):
    code, replies = run_serve([json.dumps({"spec": "/s/boom", "out": "/o/0"}) + "\n",
                               json.dumps({"spec": "/s/ok", "out": "/o/1"}) + "\n"])
    assert code == cli.EXIT_INTERNAL
    assert replies == [{"out": "/o/0", "code": cli.EXIT_INTERNAL}]


def test_one_shot_and_serve_call_the_same_per_spec_function(calls, tmp_path):
    assert cli.main(["--spec", "/s/partial", "--out", str(tmp_path / "o")]) == cli.EXIT_PARTIAL
    assert calls == [("/s/partial", str(tmp_path / "o"), 0.0, calls[0][3])]
    code, replies = run_serve([json.dumps({"spec": "/s/partial", "out": "/o/x"}) + "\n"])
    assert replies == [{"out": "/o/x", "code": cli.EXIT_PARTIAL}]
    assert calls[-1][:2] == ("/s/partial", "/o/x")


def test_serve_refuses_one_shot_arguments(spec_file):
    with pytest.raises(SystemExit) as e:
        cli.parse_args(["--serve", "--spec", str(spec_file)])
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        cli.parse_args([])          # neither --spec nor --serve


def _serve_process(stdin: str):
    return subprocess.run([sys.executable, "-m", "torch_diode.collect", "--serve"], input=stdin,
                          capture_output=True, text=True, timeout=120)


def test_eof_exits_0():
    r = _serve_process("")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""


def test_serve_process_answers_each_request_on_stdout(spec_file, tmp_path):
    torch = pytest.importorskip("torch")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    lines = [json.dumps({"spec": str(bad), "out": str(tmp_path / "a.msgpack")}),
             "garbage",
             json.dumps({"spec": str(spec_file), "out": str(tmp_path / "no/such/b.msgpack")}),
             json.dumps({"spec": str(spec_file), "out": str(tmp_path / "c.msgpack")})]
    r = _serve_process("\n".join(lines) + "\n")
    assert r.returncode == 0, r.stderr
    replies = [json.loads(x) for x in r.stdout.splitlines()]   # stdout holds replies only
    assert replies[0] == {"out": str(tmp_path / "a.msgpack"), "code": cli.EXIT_USAGE}
    assert set(replies[1]) == {"error"}
    assert replies[2]["code"] == cli.EXIT_USAGE
    want = cli.EXIT_ENV if not torch.cuda.is_available() else None
    if want is not None:
        assert replies[3] == {"out": str(tmp_path / "c.msgpack"), "code": want}
        assert "no CUDA/ROCm GPU" in r.stderr
    assert len(replies) == 4


def test_reset_between_specs_runs_without_a_gpu():
    pytest.importorskip("torch")
    import torch
    from torch._dynamo.testing import CompileCounter
    cnt = CompileCounter()
    fn = torch.compile(lambda x: x * 2 + 1, backend=cnt)
    assert fn(torch.ones(2)).tolist() == [3.0, 3.0]
    assert fn(torch.ones(2)).tolist() == [3.0, 3.0]
    assert cnt.frame_count == 1                 # the second call hit Dynamo's cache
    cli.reset_between_specs()       # torch._dynamo.reset(), Inductor's in-process caches; no CUDA here
    assert fn(torch.ones(2)).tolist() == [3.0, 3.0]
    assert cnt.frame_count == 2                 # the cache was dropped: compiled again


def test_reset_between_specs_frees_reference_cycles():
    pytest.importorskip("torch")
    import gc
    import weakref
    import torch  # noqa: F401  (reset is a no-op until torch is imported)

    class Engine:   # a previous spec's object graph, holding itself in a cycle
        pass

    was = gc.isenabled()
    gc.disable()
    try:
        e = Engine()
        e.self_ref = e
        alive = weakref.ref(e)
        del e
        assert alive() is not None
        cli.reset_between_specs()
        assert alive() is None
    finally:
        if was:
            gc.enable()


SERVE_NOISY = r"""
import os, sys
from torch_diode.collect import cli
def collect(args, session):
    print("noise")                     # a stray print during a collection
    os.write(1, b"fd-noise\n")         # and a write to fd 1 itself (C code, a child process)
    return 0
cli.collect = collect
cli.reset_between_specs = lambda: None
sys.exit(cli.main(["--serve"]))
"""


def test_serve_stdout_carries_only_replies(tmp_path):
    import os
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root / "python"), TORCH_DIODE_AUTO_INSTALL="0")
    reqs = "".join(json.dumps({"spec": f"/s/{i}", "out": str(tmp_path / f"{i}.msgpack")}) + "\n" for i in range(2))
    r = subprocess.run([sys.executable, "-c", SERVE_NOISY], input=reqs, capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2, r.stdout
    for i, line in enumerate(lines):
        assert json.loads(line) == {"out": str(tmp_path / f"{i}.msgpack"), "code": 0}
    err = r.stderr.splitlines()
    assert err.count("noise") == 2 and err.count("fd-noise") == 2   # the noise went to stderr


def test_pools_replace_a_pool_that_takes_no_more_work():
    import concurrent.futures as cf
    from torch_diode.collect.engine import Pools
    alive = cf.ThreadPoolExecutor(1)
    dead = cf.ThreadPoolExecutor(1)
    dead.shutdown()
    assert not Pools._broken(alive) and Pools._broken(dead)

    class Broken:
        def submit(self, fn):
            raise cf.BrokenExecutor("a worker died")
    assert Pools._broken(Broken())
    alive.shutdown()
