"""Collector engine v2, the parts that need no GPU: template rendering with runtime
sizes, kernel-reuse classes, config order, the repeat rule and contenders."""
from __future__ import annotations

import ast
import pathlib
from dataclasses import dataclass

import pytest

from torch_diode import wire
from torch_diode.collect import plan, records, template

_ROOT = pathlib.Path(__file__).resolve().parents[2]


def prob(op="mm", m=336, n=4096, k=4096, batch=1, dtype="bfloat16", ta=False, tb=False, bias=None,
         alpha=1.0, beta=1.0):
    if bias is None:
        bias = "row" if op in ("addmm", "baddbmm") else "none"
    return wire.Problem(op, batch, m, n, k, dtype, dtype, dtype, ta, tb, bias, alpha, beta)


@pytest.mark.parametrize("stride,size,want", [(4096, 2, 8), (4104, 2, 8), (4100, 2, 4), (7, 2, 1),
                                             (1, 2, 1), (0, 2, 8), (24, 4, 4), (6, 4, 2)])
def test_stride_align_caps_at_one_vector(stride, size, want):
    assert template.stride_align(stride, size) == want


def test_problem_strides_follow_make_inputs_layouts():
    st = template.problem_strides(prob(m=16, n=32, k=64, tb=True))
    assert st["a"] == (64, 1)          # row-major (M, K)
    assert st["b"] == (1, 64)          # (K, N) view of an (N, K) weight: nn.Linear's layout
    assert st["c"] == (32, 1)
    st = template.problem_strides(prob("addmm", m=16, n=32, k=64, bias="row"))
    assert st["bias"] == (0, 1)        # (N,) broadcast over rows
    st = template.problem_strides(prob("addmm", m=16, n=32, k=64, bias="column"))
    assert st["bias"] == (1, 0)        # (M, 1) broadcast over columns
    st = template.problem_strides(prob("baddbmm", batch=4, m=16, n=32, k=64, bias="full"))
    assert st["a"] == (16 * 64, 64, 1) and st["bias"] == (16 * 32, 32, 1)
    st = template.problem_strides(prob("bmm", batch=4, m=16, n=32, k=64, ta=True))
    assert st["a"] == (16 * 64, 1, 16)


def test_problems_differing_only_in_sizes_share_a_kernel_class():
    a = template.kernel_class(prob(m=336, n=4096, k=4096), even_k=True)
    b = template.kernel_class(prob(m=8, n=1024, k=512), even_k=True)
    assert a == b and a.key() == b.key()
    assert template.kernel_class(prob(), even_k=False) != a                  # EVEN_K specialises
    assert template.kernel_class(prob(dtype="float16"), even_k=True) != a     # dtype does
    assert template.kernel_class(prob(tb=True), even_k=True) != a             # so does the unit stride
    assert template.kernel_class(prob(k=4100), even_k=True) != a              # and 16-byte alignment


def test_reuse_groups_keep_problem_order():
    keys = [template.kernel_class(p, True).key() for p in
            (prob(m=64), prob("bmm", batch=2), prob(m=128), prob("bmm", batch=8, m=8))]
    g = plan.reuse_groups(keys)
    assert sorted(g.values()) == [[0, 2], [1, 3]]


def _source(p, even_k):
    try:
        return template.render(template.kernel_class(p, even_k))
    except ImportError as e:  # jinja2 ships with torch
        pytest.skip(str(e))


@pytest.mark.parametrize("p", [prob(), prob("addmm", m=8, n=1024, k=512, tb=True),
                               prob("bmm", batch=8, m=128, n=128, k=64),
                               prob("baddbmm", batch=8, m=128, n=128, k=64, bias="full", alpha=0.5, beta=2.0)])
@pytest.mark.parametrize("even_k", [True, False])
def test_rendered_kernel_is_inductors_template_with_runtime_sizes(p, even_k):
    src = _source(p, even_k)
    assert "{{" not in src and "{%" not in src
    tree = ast.parse(src)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    args = [a.arg for a in fn.args.args]
    assert args[:3] == ["A", "B", "C"]
    assert {"M_q", "N_q", "K_q"} <= set(args)              # sizes are arguments...
    dec = ast.unparse(fn.decorator_list[0])
    for size in ("M_q", "N_q", "K_q"):                     # ...that Triton does not specialise
        assert repr(size) in dec
    for c in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "EVEN_K", "ALLOW_TF32", "SM", "SN", "SK"):
        assert c in args
    # The template's run-time contiguity branches became compile-time ones.
    assert "if A_HINT:" in src and "if B_HINT:" in src and "if ((stride_" not in src
    assert "tl.dot(" in src and "tl.store(C +" in src
    if p.op in ("addmm", "baddbmm"):
        assert "BIAS" in args and "acc = acc + bias" in src
        assert ("alpha" in args) == (p.alpha != 1.0)
    if p.op == "mm":  # triton_mm: EVEN_K is a Jinja switch, so the masks come and go
        assert ("a_mask" in src) == (not even_k)


def test_launch_args_match_the_signature():
    p = prob("addmm", m=8, n=1000, k=520, tb=True, alpha=2.0)
    kc = template.kernel_class(p, even_k=False)
    src = _source(p, False)
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef))
    names = [a.arg for a in fn.args.args]
    cfg = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_stages": 3, "num_warps": 4}
    grid, args, consts = template.launch_args(kc, p, {"a": "A", "b": "B", "c": "C", "bias": "BIAS"}, cfg, False)
    runtime = [n for n in names if n not in consts]
    assert len(args) == len(runtime)
    assert args[:4] == ["A", "B", "C", "BIAS"]
    assert [a * b for a, b in zip(args[4:7], (consts["SM"], consts["SN"], consts["SK"]))] == [8, 1000, 520]
    assert consts["A_HINT"] is False and consts["B_HINT"] is True   # M=8 < BLOCK_M=16; B is K-contiguous
    assert grid == (1 * 16, 1, 1)                      # ceil(8/16) * ceil(1000/64)
    assert consts["EVEN_K"] is False and consts["num_warps"] == 4
    # Every divided stride times its constexpr alignment gives the stride back.
    st = template.problem_strides(p)
    q = dict(zip(runtime, args))
    assert q["sa0_q"] * consts["SA0"] == st["a"][0] and q["sb1_q"] * consts["SB1"] == st["b"][1]


@dataclass
class E:
    is_triton: bool
    default: bool
    params: dict
    name: str


def test_hints_evaluate_the_template_condition():
    big = {"BLOCK_M": 64, "BLOCK_N": 64}
    assert template.hints(prob(m=128, n=128, k=64), big) == {"A_HINT": True, "B_HINT": True}
    assert template.hints(prob(m=32, n=128, k=64), big) == {"A_HINT": False, "B_HINT": True}
    assert template.hints(prob(m=128, n=128, k=1), big) == {"A_HINT": False, "B_HINT": False}
    assert template.hints(prob("bmm", batch=4, m=128, n=32, k=64, ta=True), big) == {"A_HINT": True,
                                                                                   "B_HINT": False}


def test_order_puts_aten_then_default_then_promise():
    big = {"BLOCK_M": 128, "BLOCK_N": 128}
    tiny = {"BLOCK_M": 16, "BLOCK_N": 16}
    es = [E(True, False, tiny, "tiny"), E(True, False, big, "big"), E(True, True, tiny, "dflt"),
          E(False, False, {}, "aten")]
    got = [e.name for e in plan.order(es, 4096, 4096, 1, 132)]
    assert got == ["aten", "dflt", "big", "tiny"]
    # For a decode-like M=8, a 128-row tile wastes 15/16 of its work: small tiles first.
    got = [e.name for e in plan.order(es, 8, 4096, 1, 132)]
    assert got.index("tiny") < got.index("big")


def test_repeat_rule():
    assert plan.repeats_for(0.5, 0.0, 3, 25, 20.0) == 25            # nothing timed yet: full
    assert plan.repeats_for(2.0, 0.5, 3, 25, 20.0) == 3             # 4x slower than best: minimum
    assert plan.repeats_for(0.6, 0.5, 3, 25, 20.0) == 25            # a contender
    assert plan.repeats_for(5.0, 4.0, 3, 25, 20.0) == 4             # budget-bound
    assert plan.repeats_for(50.0, 40.0, 3, 25, 20.0) == 3           # never below min


def test_contenders_within_factor_fastest_first():
    t = {"a": 1.0, "b": 1.05, "c": 1.2, "d": 1.09, "e": 3.0}
    assert plan.contenders(t) == ["a", "b", "d"]
    assert plan.contenders(t, limit=2) == ["a", "b"]
    assert plan.contenders({}) == []


def test_compact_walls_follow_compacted_problems():
    cfg = wire.KernelConfig("aten")
    recs = [wire.ShardRecord(3, cfg, 1.0, 0.0, 1, "ok", 0), wire.ShardRecord(1, cfg, 1.0, 0.0, 1, "ok", 0)]
    assert records.compact_walls(recs, {1: 2.5, 3: 4.0, 7: 9.0}) == [2.5, 4.0]


HW = wire.HardwareId("nvidia", "NVIDIA H100 80GB HBM3", "sm_90", "9.0", 132, 85 << 30)
RECS = [wire.ShardRecord(0, wire.KernelConfig("aten"), 5.0, 0.1, 3, "ok", 2),
        wire.ShardRecord(2, wire.KernelConfig("aten"), 7.0, 0.1, 3, "ok", 0)]


def _shard_bytes(**kw):
    probs = [prob(m=16), prob(m=32), prob(m=48)]
    return records.build_shard("s/1", "sw", HW, "host/gpu0", "", *records.compact(probs, RECS), **kw)


def test_v2_shards_carry_method_and_per_problem_seconds():
    from torch_diode.collect.cli import engine_method
    walls = {0: 3.5, 1: 99.0, 2: 1.25}
    data = _shard_bytes(problem_wall_s=records.compact_walls(RECS, walls), method=engine_method())
    s = wire.decode_shard(data)
    assert s.wire_version == 2
    assert s.method.timing == "cuda-events+gpu-spin+cold-l2" and s.method.collector.startswith("torch_diode.collect 2.")
    assert s.problem_wall_s == (3.5, 1.25)          # problem 1 had no records: dropped with it
    assert [r.flags for r in s.records] == [2, 0]   # the DEFAULT flag survives


def test_reseal_adds_method_and_walls_to_a_version1_shard():
    from torch_diode.collect.reseal import reseal
    old = wire.decode_shard(_shard_bytes())
    old.wire_version = 1
    v1 = wire.encode(wire.seal(old))
    out = wire.decode_shard(reseal(v1, {"problems": [{"wall_s": 2.0}, {"wall_s": 4.0}]}, "t", "c"))
    assert out.wire_version == 2 and out.method == wire.CollectionMethod("t", "c")
    assert out.problem_wall_s == (2.0, 4.0)
    assert out.records == old.records and out.problems == old.problems
    with pytest.raises(ValueError):
        reseal(v1, {"problems": [{"wall_s": 2.0}]}, "t", "c")


def test_m1_mm_is_lowered_as_a_gemm_without_coordinate_descent():
    """Why the collector compiles with COMPILE_OPTIONS and not mode="max-autotune": that
    mode's coordinate_descent_tuning makes Inductor's decomposition rewrite mm/bmm with
    M == 1 (or N == 1) as a reduction, so no GEMM template is offered for a decode step of
    one sequence. Shown on meta tensors (the rewrite is for non-CPU devices)."""
    import torch
    from torch._inductor import config, decomposition
    from torch_diode.collect.driver import COMPILE_OPTIONS

    a = torch.empty(1, 4096, device="meta", dtype=torch.float16)
    b = torch.empty(4096, 1024, device="meta", dtype=torch.float16)
    with config.patch(coordinate_descent_tuning=True):
        assert decomposition.mm(a, b) is not NotImplemented
    with config.patch(COMPILE_OPTIONS):
        assert decomposition.mm(a, b) is NotImplemented  # left to tuned_mm: a GEMM
    ba = torch.empty(8, 1, 128, device="meta", dtype=torch.bfloat16)
    bb = torch.empty(8, 128, 64, device="meta", dtype=torch.bfloat16)
    with config.patch(coordinate_descent_tuning=True):
        assert decomposition.bmm(ba, bb) is not NotImplemented
    with config.patch(COMPILE_OPTIONS):
        assert decomposition.bmm(ba, bb) is NotImplemented
    assert torch._inductor.list_mode_options("max-autotune-no-cudagraphs")["coordinate_descent_tuning"]


def _cfg(stages, bm=64, warps=4, **kw):
    return {"BLOCK_M": bm, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "EVEN_K": True,
            "num_stages": stages, "num_warps": warps, **kw}


def test_stage_group_ignores_only_num_stages():
    g = plan.stage_group("triton::bmm", _cfg(5, ACC_TYPE="tl.float32"))
    assert g == plan.stage_group("triton::bmm", _cfg(1))           # non-int params do not count
    assert g != plan.stage_group("triton::bmm", _cfg(5, warps=8))
    assert g != plan.stage_group("triton::mm", _cfg(5))
    assert plan.stage_group("aten::bmm", {}) is None                # ATen: no stage neighbours


def test_suspects_stage_neighbour_outlier():
    # The H100 bmm 16x16x280x16 case: num_stages 5 at 773 us, stages 1-4 at ~4.5 us.
    t = {f"s{s}": ("triton::bmm", _cfg(s), 4.5 + 0.01 * s, 0.05) for s in range(1, 5)}
    t["s5"] = ("triton::bmm", _cfg(5), 773.0, 2.0)
    t["other"] = ("triton::bmm", _cfg(5, bm=16), 40.0, 0.1)        # slow, but no faster neighbour
    t["w8s2"] = ("triton::bmm", _cfg(2, warps=8), 12.0, 0.1)        # 2.9x its neighbour: kept
    t["w8s3"] = ("triton::bmm", _cfg(3, warps=8), 4.2, 0.1)
    assert plan.suspects(t) == ["s5"]


def test_suspects_wide_spread_including_aten():
    # The addmm 11x32x16 ATen record: median 103.8 us, IQR 109.7 us over 5 repeats.
    t = {"aten": ("aten::addmm", {}, 103.8, 109.7), "ok": ("triton::mm", _cfg(3), 4.3, 0.1),
         "edge": ("triton::mm", _cfg(3, bm=32), 4.0, 1.0)}       # IQR exactly 0.25 x median: not
    assert plan.suspects(t) == ["aten"]


def test_suspects_worst_first_and_bounded():
    t = {"base": ("triton::mm", _cfg(1), 1.0, 0.0)}
    for s in range(2, 6):
        t[f"s{s}"] = ("triton::mm", _cfg(s), 1.0 + 3 * s, 0.0)    # 7x .. 16x: 2.3 .. 5.3x past 3x
    t["spread"] = ("triton::mm", _cfg(1, bm=128), 2.0, 2.0)       # IQR = median: 4x past 0.25
    assert plan.suspects(t) == ["s5", "s4", "spread", "s3", "s2"]
    assert plan.suspects(t, limit=2) == ["s5", "s4"]
    assert plan.suspects({}) == []


def test_keep_lower_batch():
    stalled, clean = [773.0, 770.0, 780.0, 775.0, 771.0], [4.6] * 10
    assert plan.keep_lower(stalled, clean) is clean
    assert plan.keep_lower(clean, stalled) is clean
    assert plan.keep_lower([1.0, 2.0, 3.0], [2.0, 2.0]) == [1.0, 2.0, 3.0]   # tie: the old one
    assert plan.keep_lower([], clean) is clean and plan.keep_lower(clean, []) is clean


def _entry(uid, params, samples, status="ok"):
    from torch_diode.collect.engine import Entry
    from torch_diode.collect.space import Offered
    return Entry(Offered(uid, params, wire.KernelConfig("triton" if "triton" in uid else "aten")),
                 is_triton="triton" in uid, status=status, samples=list(samples))


def test_engine_retimes_suspects_and_keeps_the_lower_batch():
    from torch_diode.collect.engine import Stats, retime_suspects
    assert Stats().retimed == 0                               # surfaces in <out>.stats.json
    fast = [_entry("triton::bmm", _cfg(s), [4.5] * 25) for s in range(1, 5)]
    stalled = _entry("triton::bmm", _cfg(5), [773.0] * 5)     # one bad batch of min_repeats
    noisy = _entry("aten::bmm", {}, [3.0, 3.1, 9.0, 9.5, 10.0])   # re-time comes back worse
    failed = _entry("triton::bmm", _cfg(5, bm=16), [], status="out_of_resources")
    entries = fast + [stalled, noisy, failed]
    fns = {id(e): e for e in entries}
    calls = []

    def repeat(fn, n):   # a fake BatchTimer.repeat: the stall is gone, ATen is noisier still
        calls.append((fn, n))
        return [4.6] * n if fn is stalled else [20.0] * n

    assert retime_suspects(entries, fns, repeat, 10, deadline=1.0, clock=lambda: 0.0) == 2
    assert calls == [(stalled, 10), (noisy, 10)]              # worst first, each once
    assert stalled.samples == [4.6] * 10                      # the new batch: its 10 repeats
    assert noisy.samples == [3.0, 3.1, 9.0, 9.5, 10.0]        # the old batch was lower: kept
    assert all(e.samples == [4.5] * 25 for e in fast)
    calls.clear()
    stalled.samples = [773.0] * 5
    assert retime_suspects(entries, fns, repeat, 10, deadline=1.0, clock=lambda: 2.0) == 0
    assert calls == [] and stalled.samples == [773.0] * 5     # past the deadline: nothing


@pytest.mark.parametrize("p", [prob("addmm", m=8, n=1000, k=520, tb=True, alpha=2.0),
                               prob("baddbmm", batch=4, m=128, n=96, k=72, bias="full")])
def test_static_class_renders_one_problems_sizes_and_strides_as_literals(p):
    kc = template.kernel_class(p, even_k=False, static=True)
    assert kc.static == (p.batch, p.m, p.n, p.k)
    assert kc != template.kernel_class(prob("addmm", m=16, n=1000, k=520, tb=True, alpha=2.0), False, static=True)
    assert template.kernel_class(p, False) != kc                       # the reuse class is another
    src = _source_of(kc)
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef))
    names = [a.arg for a in fn.args.args]
    assert not {"M_q", "N_q", "K_q", "BATCH_"} & set(names)          # no size arguments...
    assert not any(n.endswith("_q") for n in names)                    # ...and no stride arguments
    for name, v in (("M", p.m), ("N", p.n), ("K", p.k)):               # the template's size locals
        assert f"    {name} = {v}\n" in src
    cfg = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_stages": 3, "num_warps": 4}
    tensors = {"a": "A", "b": "B", "c": "C", "bias": "BIAS"}
    grid, args, consts = template.launch_args(kc, p, tensors, cfg, False)
    runtime = [n for n in names if n not in consts]
    assert len(args) == len(runtime) and args[:4] == ["A", "B", "C", "BIAS"]
    assert args[4:] == ([2.0] if p.alpha != 1.0 else [])
    assert grid == template.launch_args(template.kernel_class(p, False), p, tensors, cfg, False)[0]
    with pytest.raises(ValueError, match="static kernel class"):
        template.launch_args(kc, prob("addmm", m=9, n=1000, k=520, tb=True, alpha=2.0), tensors, cfg, False)


def _source_of(kc):
    try:
        return template.render(kc)
    except ImportError as e:
        pytest.skip(str(e))


def test_static_targets_are_the_fastest_plus_defaults_fastest():
    times = {"a": 5.0, "b": 4.0, "c": 6.0, "d": 9.0, "e": 8.0}
    assert plan.static_targets(times, set(), 3) == ["b", "a", "c"]
    assert plan.static_targets(times, {"e", "d"}, 3) == ["b", "a", "c", "e"]   # DEFAULT's fastest joins
    assert plan.static_targets(times, {"a"}, 3) == ["b", "a", "c"]             # already among them
    assert plan.static_targets(times, {"e"}, 10) == ["b", "a", "c", "e", "d"]
    assert plan.static_targets(times, {"e"}, 0) == [] and plan.static_targets({}, set(), 5) == []


def test_retime_static_replaces_samples_interleaved_and_marks_records():
    from torch_diode.collect.engine import FLAG_STATIC, STATIC_ROUNDS, Stats, retime_static
    assert FLAG_STATIC == 8 and Stats().static == 0 and STATIC_ROUNDS >= 2
    a = _entry("triton::mm", _cfg(1), [5.0] * 20)
    b = _entry("triton::mm", _cfg(2), [5.5] * 20)
    broken = _entry("triton::mm", _cfg(3), [6.0] * 20)           # its static kernel failed: no fn
    fns = {id(a): "fa", id(b): "fb"}
    calls = []

    def repeat(fn, n):
        calls.append(fn)
        return [4.8 if fn == "fa" else 5.6] * n

    aten = _entry("aten::mm", {}, [5.2] * 20)                      # timed in the same rounds, not static
    fns[id(aten)] = "fb"
    assert retime_static([a, b, broken, aten], fns, repeat, 10, 3, deadline=1.0, clock=lambda: 0.0,
                         warmup_s=0) == 2
    assert calls == ["fa", "fb", "fb"] * 3                         # round-robin, not one after the other
    assert a.samples == [4.8] * 30 and a.static and b.samples == [5.6] * 30 and b.static
    assert aten.samples == [5.6] * 30 and not aten.static
    assert broken.samples == [6.0] * 20 and not broken.static
    c = _entry("triton::mm", _cfg(4), [7.0] * 20)
    assert retime_static([c], {id(c): "fc"}, repeat, 10, 3, deadline=1.0, clock=lambda: 2.0, warmup_s=0) == 0
    assert c.samples == [7.0] * 20 and not c.static                # past the deadline: untouched
    ticks = iter([0.0, 0.0, 2.0])                                  # the deadline falls after round 2
    d, e = _entry("triton::mm", _cfg(5), [7.0]), _entry("triton::mm", _cfg(6), [7.0])
    assert retime_static([d, e], {id(d): "fa", id(e): "fb"}, repeat, 5, 3, 1.0, clock=lambda: next(ticks),
                         warmup_s=0) == 2
    assert len(d.samples) == len(e.samples) == 10                  # whole rounds only


def test_drop_disturbed_rounds_keeps_the_rounds_near_the_lowest():
    # Round 2 ran after the GPU spin drained (CPU launch latency in every sample).
    rounds = [[4.9, 5.0, 5.1], [40.0, 52.0, 61.0], [4.8, 4.9, 5.0], []]
    assert plan.drop_disturbed_rounds(rounds) == [[4.9, 5.0, 5.1], [4.8, 4.9, 5.0]]
    assert plan.drop_disturbed_rounds([[7.0], [7.4]]) == [[7.0], [7.4]]         # drift, not disturbance
    assert plan.drop_disturbed_rounds([[7.0], [10.6]], factor=1.5) == [[7.0]]  # 10.6 > 1.5 x 7.0
    assert plan.drop_disturbed_rounds([]) == [] and plan.drop_disturbed_rounds([[]]) == []


def test_static_targets_take_near_ties_beyond_the_top():
    times = {f"k{i}": 5.0 + 0.01 * i for i in range(30)}           # 30 configs within 6%
    got = plan.static_targets(times, set(), 10)
    assert got[:10] == [f"k{i}" for i in range(10)]
    assert got[10:] == [f"k{i}" for i in range(10, 20)]             # within 4% of 5.0, capped at 2 x 10
    assert len(plan.static_targets(times, set(), 10, near=1.0)) == 10
    times = {"a": 5.0, "b": 5.1, "c": 5.15, "d": 5.3}
    assert plan.static_targets(times, set(), 1) == ["a", "b"]          # cap 2 x 1; c also near, left out


def test_retime_static_warms_the_gpu_up_untimed_first():
    from torch_diode.collect.engine import STATIC_WARMUP_ROUNDS, retime_static
    a = _entry("triton::mm", _cfg(1), [5.0] * 20)
    calls = []
    ticks = iter([0.0] + [0.0, 0.0, 0.01, 0.01, 0.06] + [0.06] * 10)  # start; then per warm-up check

    def repeat(fn, n):
        calls.append(fn)
        return [6.0 if len(calls) <= 2 else 4.8] * n              # what a cold GPU would read: dropped

    assert retime_static([a], {id(a): "fa"}, repeat, 10, 3, 1.0, clock=lambda: next(ticks), warmup_s=0.05) == 1
    assert len(calls) == 2 + 3 and a.samples == [4.8] * 30         # 2 untimed rounds, then 3 timed ones
    calls.clear()
    b = _entry("triton::mm", _cfg(2), [5.0] * 20)
    retime_static([b], {id(b): "fb"}, repeat, 10, 3, 1.0, clock=lambda: 0.0, warmup_s=0.05)
    assert len(calls) == STATIC_WARMUP_ROUNDS + 3                   # a stuck clock: bounded warm-up


def test_warm_up_runs_untimed_rounds_for_a_while_and_is_bounded():
    # the collector's static stage and bench/collector_fidelity.py (script removed; git history) both warm up through it
    from torch_diode.collect.engine import warm_up
    calls = []

    def repeat(fn, n):
        calls.append((fn, n))
        return [1.0] * n

    assert warm_up(repeat, ["a", "b"], 10, 0.0) == 0 and calls == []
    assert warm_up(repeat, ["a", "b"], 10, 3600.0, max_rounds=3) == 3
    assert calls == [("a", 10), ("b", 10)] * 3


def test_static_beaten_says_when_a_runtime_record_stays_the_best():
    from torch_diode.collect.engine import static_beaten
    s1, s2 = _entry("triton::mm", _cfg(1), [5.0] * 10), _entry("triton::mm", _cfg(2), [5.2] * 10)
    s1.static = s2.static = True
    runtime = _entry("triton::mm", _cfg(3), [4.9] * 3)
    aten = _entry("aten::mm", {}, [4.0] * 10)                      # ATen is not a Triton record
    assert static_beaten([s1, s2, runtime, aten]) == 1
    runtime.samples = [5.1] * 3
    assert static_beaten([s1, s2, runtime, aten]) == 0
    s1.static = s2.static = False
    assert static_beaten([s1, s2, runtime]) == 0                    # no static stage ran: nothing to say


def test_retime_static_drops_a_disturbed_round():
    from torch_diode.collect.engine import retime_static
    a = _entry("triton::mm", _cfg(1), [5.0] * 20)
    rounds = iter([[4.8] * 10, [60.0] * 10, [4.9] * 10])          # the second round was disturbed
    assert retime_static([a], {id(a): "fa"}, lambda fn, n: next(rounds), 10, 3, 1.0, clock=lambda: 0.0,
                         warmup_s=0) == 1
    assert a.samples == [4.8] * 10 + [4.9] * 10 and a.static      # the record's repeats: 20


def test_compile_workers_run_below_the_timers_priority():
    """The compile pools' workers lower their own priority (engine.COMPILE_NICE), so the
    timing process keeps a core while they compile; checked in a child process, since a
    nice value cannot be raised back."""
    import subprocess
    import sys
    from torch_diode.collect import engine
    assert engine.COMPILE_NICE > engine.STATIC_COMPILE_NICE > 0
    code = ("import os, sys; sys.path.insert(0, %r); from torch_diode.collect.engine import lower_priority; "
            "before = os.nice(0); print(lower_priority(3) - before)") % str(_ROOT / "python")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(r.stdout.strip()) in (3, 0)   # 0 only where the OS caps nice (already at 19)


def test_spec_static_top_defaults_validates_and_round_trips():
    from torch_diode.collect.spec import SpecError, parse_spec, spec_to_json
    base = {"shard_id": "s/1", "sweep_id": "s", "problems": [wire.to_json(prob())]}
    assert parse_spec(base).timing.static_top == 10
    assert parse_spec({**base, "timing": {"static_top": 0}}).timing.static_top == 0
    for bad in (-1, 101, True, 2.5):
        with pytest.raises(SpecError, match="static_top"):
            parse_spec({**base, "timing": {"static_top": bad}})
    s = parse_spec({**base, "timing": {"static_top": 4}})
    assert parse_spec(spec_to_json(s)) == s


def test_static_stage_end_to_end_with_a_fake_gpu(monkeypatch):
    """Engine._static_stage as it runs on the GPU, with the GPU faked: compiles go through a
    (thread) pool, kernels are checked against ATen's output, failures keep their records,
    ATen joins the interleaved rounds and the records carry FLAG_STATIC."""
    import concurrent.futures as cf
    import time

    import torch

    from torch_diode.collect import engine as eng
    from torch_diode.collect.engine import FLAG_STATIC, Engine, Entry, Planned, Stats
    from torch_diode.collect.space import Offered
    from torch_diode.collect.spec import Spec, Timing

    p = prob("mm", m=96, n=64, k=48, dtype="float32")
    a, b = torch.randn(96, 48), torch.randn(48, 64)
    c, ref = torch.empty(96, 64), a @ b
    tensors = {"a": a, "b": b, "c": c, "bias": None}
    kc = template.kernel_class(p, True)

    def entry(bm, t, default=False, status="ok"):
        params = _cfg(3, bm=bm)
        return Entry(Offered("triton::mm", params, wire.KernelConfig("triton::mm", block_m=bm), default),
                     is_triton=True, kc=kc, status=status, samples=[t] * 5)

    fast = [entry(16, 1.0), entry(32, 1.1), entry(64, 1.2)]      # the top 3
    wrong = entry(128, 1.3)                                         # its static kernel computes garbage
    broken = entry(256, 1.4)                                        # its static compile fails
    dflt = entry(8, 3.0, default=True)                              # DEFAULT's fastest: joins the targets
    slow = entry(4, 9.0)                                            # not a target
    aten = Entry(Offered("aten::mm", {}, wire.KernelConfig("aten")), is_triton=False, status="ok", samples=[1.5] * 5)
    entries = fast + [wrong, broken, dflt, slow, aten]

    compiled = []

    def fake_compile(kc_, dtype, out_dtype, params, allow):
        compiled.append((kc_.static, params["BLOCK_M"]))
        return "CompilationError: boom" if params["BLOCK_M"] == 256 else ""

    class FakeKernel:
        def __getitem__(self, grid):
            def launch(*args, **consts):
                out = args[2]
                out.copy_(args[0] @ args[1] if consts["BLOCK_M"] != 128 else torch.zeros_like(out))
            return launch

    monkeypatch.setattr(eng, "_compile_job", fake_compile)
    monkeypatch.setattr(template, "load", lambda kc_: FakeKernel())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(eng, "STATIC_WARMUP_S", 0.0)                  # warm-up: its own test
    timed = []

    class FakeTimer:
        def repeat(self, fn, n):
            timed.append(fn)
            return [0.5] * n

    e = Engine.__new__(Engine)
    e.spec = Spec("s/1", "s", (p,), timing=Timing(static_top=4))
    e.timer, e.log, logs = FakeTimer(), None, []
    e.log = logs.append
    e.static_pool = cf.ThreadPoolExecutor(2)
    st = Stats()
    aten_fn = object()
    pl = Planned(0, p, False, "mm", entries, 0.0)
    deadline = time.perf_counter() + 60
    e._static_stage(pl, tensors, ref, float(ref.norm()), deadline=deadline, st=st, runtime_fns={id(aten): aten_fn})
    e.static_pool.shutdown()

    assert sorted(bm for _, bm in compiled) == [8, 16, 32, 64, 128]     # top 4 + DEFAULT's fastest; not 256
    assert all(s == (1, 96, 64, 48) for s, _ in compiled)              # as static classes of this problem
    assert st.static == 4 and st.static_failed == 1                     # 128 mismatched; 256 was not a target
    assert any("differs from ATen" in line for line in logs)
    assert all(x.static and x.samples == [0.5] * 30 for x in fast + [dflt])
    assert not wrong.static and wrong.samples == [1.3] * 5             # keeps its runtime-size record
    assert not slow.static and not broken.static
    assert aten.samples == [0.5] * 30 and not aten.static               # re-timed in the same rounds
    assert timed.count(aten_fn) == 3 and len(timed) == 3 * 5            # 3 rounds x (4 static + ATen)
    assert st.static_beaten == 0                                        # the best record is a static one
    assert FLAG_STATIC == 8


def test_chase_targets_are_first_pass_records_below_the_best_static():
    times = {"s1": 5.0, "s2": 5.2, "r1": 4.8, "r2": 4.6, "r3": 4.9, "r4": 5.1}
    static = {"s1", "s2"}
    assert plan.chase_targets(times, static, 10) == ["r2", "r1", "r3"]   # fastest first; r4 is slower than s1
    assert plan.chase_targets(times, static, 2) == ["r2", "r1"]          # capped at the limit
    assert plan.chase_targets(times, static, 0) == ["r2"]                # at least one
    assert plan.chase_targets({"s1": 4.0, "r1": 4.5}, {"s1"}, 10) == []  # the best is static
    assert plan.chase_targets(times, set(), 10) == []                    # no static stage ran
    assert plan.chase_targets({}, set(), 10) == []
    assert plan.chase_targets({"s1": 5.0, "r1": 5.0}, {"s1"}, 10) == []  # a tie is not faster


def _fake_static_engine(monkeypatch, p, static_top, compile_error=(), mismatch=()):
    """An Engine whose static pool is a thread pool and whose GPU is faked: compiles fail for
    BLOCK_M in `compile_error`, kernels compute garbage for BLOCK_M in `mismatch`, every
    launch returns the fn's own `.us` samples (set by the test through `us`)."""
    import concurrent.futures as cf

    import torch

    from torch_diode.collect import engine as eng
    from torch_diode.collect.engine import Engine
    from torch_diode.collect.spec import Spec, Timing

    compiled, timed = [], []

    def fake_compile(kc_, dtype, out_dtype, params, allow):
        compiled.append(params["BLOCK_M"])
        return "CompilationError: boom" if params["BLOCK_M"] in compile_error else ""

    class FakeKernel:
        def __getitem__(self, grid):
            def launch(*args, **consts):
                out = args[2]
                out.copy_(args[0] @ args[1] if consts["BLOCK_M"] not in mismatch else torch.zeros_like(out))
            return launch

    def fake_launcher(kernel, grid, args, consts):
        def fn():
            kernel[grid](*args, **consts)
        fn.block_m = consts["BLOCK_M"]
        return fn

    monkeypatch.setattr(eng, "_compile_job", fake_compile)
    monkeypatch.setattr(eng, "_launcher", fake_launcher)
    monkeypatch.setattr(template, "load", lambda kc_: FakeKernel())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(eng, "STATIC_WARMUP_S", 0.0)

    e = Engine.__new__(Engine)
    e.spec = Spec("s/1", "s", (p,), timing=Timing(static_top=static_top))
    e.log, e.logs = None, []
    e.log = e.logs.append
    e.static_pool = cf.ThreadPoolExecutor(2)
    return e, compiled, timed


def _timer_by_block_m(timed: list, us: dict, aten_fn, aten_us: float):
    """A fake BatchTimer: a static launch reads us[its BLOCK_M], ATen's launch aten_us; each
    call appends the launch's BLOCK_M ("aten" for ATen) to `timed`."""
    def repeat(fn, n):
        timed.append(getattr(fn, "block_m", "aten"))
        return [us[fn.block_m] if fn is not aten_fn else aten_us] * n
    return type("T", (), {"repeat": staticmethod(repeat)})()


def _chase_problem():
    """A small fp32 mm, its inputs, output buffer and runtime kernel class (CPU tensors)."""
    import torch
    p = prob("mm", m=96, n=64, k=48, dtype="float32")
    a, b = torch.randn(96, 48), torch.randn(48, 64)
    return p, a, b, {"a": a, "b": b, "c": torch.empty(96, 64), "bias": None}, template.kernel_class(p, True)


def _chase_entry(kc, bm, t, n=5):
    """An ok first-pass Triton entry of kernel class kc with BLOCK_M bm and n samples of t."""
    from torch_diode.collect.engine import Entry
    from torch_diode.collect.space import Offered
    return Entry(Offered("triton::mm", _cfg(3, bm=bm), wire.KernelConfig("triton::mm", block_m=bm)),
                 is_triton=True, kc=kc, status="ok", samples=[t] * n)


def test_static_chase_times_a_first_pass_winner_as_a_static_kernel(monkeypatch):
    """After the static rounds first-pass records (3 samples, winner's curse) still read
    faster than every static one: the chase compiles them as static kernels and re-times
    them with the best static record and ATen, static_top per wave, wave after wave; their
    honest static times are slower, so the problem's best Triton record is a static one
    again (static_beaten 0)."""
    import time

    import torch

    from torch_diode.collect.engine import Entry, Planned, Stats
    from torch_diode.collect.space import Offered

    p = prob("mm", m=96, n=64, k=48, dtype="float32")
    a, b = torch.randn(96, 48), torch.randn(48, 64)
    c, ref = torch.empty(96, 64), a @ b
    tensors = {"a": a, "b": b, "c": c, "bias": None}
    kc = template.kernel_class(p, True)

    def entry(bm, t, n=5):
        return _chase_entry(kc, bm, t, n)

    top = [entry(16, 1.0), entry(32, 1.01)]                           # the static targets (static_top 2)
    lucky = entry(64, 1.05, n=3)                                       # first pass: 3 low samples
    lucky2 = entry(128, 1.06, n=3)                                     # also below the static best
    lucky3 = entry(8, 1.07, n=3)                                       # third below it: past a wave's cap of 2
    slow = entry(4, 3.0)
    aten = Entry(Offered("aten::mm", {}, wire.KernelConfig("aten")), is_triton=False, status="ok", samples=[1.5] * 5)
    # Static kernels read: 16 -> 1.10, 32 -> 1.12 (slower than the first pass: the GPU's clocks),
    # 64 -> 1.20, 128 -> 1.25, 8 -> 1.30 (their honest static times); ATen 1.3.
    us = {16: 1.10, 32: 1.12, 64: 1.20, 128: 1.25, 8: 1.30}
    eng_, compiled, timed = _fake_static_engine(monkeypatch, p, static_top=2)
    aten_fn = object()
    eng_.timer = _timer_by_block_m(timed, us, aten_fn, 1.3)
    st = Stats()
    pl = Planned(0, p, False, "mm", top + [lucky, lucky2, lucky3, slow, aten], 0.0)
    eng_._static_stage(pl, tensors, ref, float(ref.norm()), deadline=time.perf_counter() + 60, st=st,
                       runtime_fns={id(aten): aten_fn})
    eng_.static_pool.shutdown()

    # the chase: wave 1 takes 2 of 3 (fastest first), wave 2 the third
    assert compiled[:2] == [16, 32] and sorted(compiled[2:4]) == [64, 128] and compiled[4:] == [8]
    assert st.static_chased == 3 and st.static_failed == 0
    assert lucky.static and lucky.samples == [1.20] * 30 and lucky2.static
    assert lucky3.static and lucky3.samples == [1.30] * 30
    assert top[0].static and top[0].samples == [1.10] * 30              # the best static, re-timed again
    assert top[1].static and top[1].samples == [1.12] * 30              # not in the chase: wave 1's rounds
    assert aten.samples == [1.3] * 30 and not aten.static
    # static rounds: 3 x (16, 32, ATen); chase wave 1: 3 x (64, 128, the best static 16, ATen);
    # wave 2: 3 x (8, 16, ATen); then nothing first-pass is below 1.10: no third wave
    assert timed == [16, 32, "aten"] * 3 + [64, 128, 16, "aten"] * 3 + [8, 16, "aten"] * 3
    assert st.static == 5
    assert st.static_beaten == 0


def test_static_chase_stops_after_its_waves(monkeypatch):
    """At most `waves` waves (CHASE_WAVES by default): with one, what the first wave's cap
    leaves stays a first-pass record and static_beaten counts it."""
    import time

    from torch_diode.collect.engine import CHASE_WAVES, Planned, Stats

    p, a, b, tensors, kc = _chase_problem()
    best, lucky, lucky2 = _chase_entry(kc, 16, 1.0), _chase_entry(kc, 64, 0.9, n=3), _chase_entry(kc, 8, 0.95, n=3)
    best.static = True
    us = {16: 1.0, 64: 1.2, 8: 1.3}
    eng_, compiled, timed = _fake_static_engine(monkeypatch, p, static_top=1)
    eng_.timer = type("T", (), {"repeat": staticmethod(lambda fn, n: (timed.append(fn.block_m),
                                                                      [us[fn.block_m]] * n)[1])})()
    def launch16():   # best's static launch from the first wave
        pass
    launch16.block_m = 16
    st = Stats()
    pl = Planned(0, p, False, "mm", [best, lucky, lucky2], 0.0)
    assert eng_._static_chase(pl, [best], {id(best): launch16}, {}, tensors, a @ b, 1.0,
                              deadline=time.perf_counter() + 60, st=st, waves=1) == 1
    assert compiled == [64] and lucky.static and not lucky2.static
    from torch_diode.collect.engine import static_beaten
    assert static_beaten(pl.entries) == 1                                # lucky2's 0.95 is below 1.0
    assert eng_._static_chase(pl, [best, lucky], {id(best): launch16}, {}, tensors, a @ b, 1.0,
                              deadline=time.perf_counter() + 60, st=st) == 1
    assert compiled == [64, 8] and lucky2.static and static_beaten(pl.entries) == 0
    assert CHASE_WAVES == 3
    eng_.static_pool.shutdown()


def test_static_chase_makes_static_beaten_0_when_the_chased_record_is_honest(monkeypatch):
    import time

    from torch_diode.collect.engine import Planned, Stats

    p, a, b, tensors, kc = _chase_problem()

    def entry(bm, t, n=5):
        return _chase_entry(kc, bm, t, n)

    best, lucky = entry(16, 1.0), entry(64, 1.05, n=3)
    us = {16: 1.10, 64: 1.20}
    eng_, compiled, timed = _fake_static_engine(monkeypatch, p, static_top=1)
    eng_.timer = type("T", (), {"repeat": staticmethod(lambda fn, n: (timed.append(fn.block_m),
                                                                      [us[fn.block_m]] * n)[1])})()
    st = Stats()
    pl = Planned(0, p, False, "mm", [best, lucky], 0.0)
    eng_._static_stage(pl, tensors, a @ b, float((a @ b).norm()), deadline=time.perf_counter() + 60, st=st,
                       runtime_fns={})
    eng_.static_pool.shutdown()
    assert compiled == [16, 64] and st.static_chased == 1
    assert lucky.static and lucky.samples == [1.20] * 30                # formerly faster, now static
    assert st.static_beaten == 0 and st.static == 2
    assert timed == [16] * 3 + [64, 16] * 3


def test_static_chase_skips_failed_targets_and_counts_failures(monkeypatch):
    """A first-wave target whose static kernel failed is not chased again; a chased entry
    whose static kernel fails is counted in static_failed, keeps its record, and no chase
    rounds run when nothing of the chase compiled. Past the deadline there is no chase."""
    import time

    from torch_diode.collect.engine import Planned, Stats

    p, a, b, tensors, kc = _chase_problem()

    def entry(bm, t, n=5):
        return _chase_entry(kc, bm, t, n)

    broken, good, lucky = entry(8, 0.9), entry(16, 1.0), entry(64, 1.05, n=3)
    eng_, compiled, timed = _fake_static_engine(monkeypatch, p, static_top=2, compile_error={8}, mismatch={64})
    eng_.timer = type("T", (), {"repeat": staticmethod(lambda fn, n: (timed.append(fn.block_m), [1.1] * n)[1])})()
    st = Stats()
    pl = Planned(0, p, False, "mm", [broken, good, lucky], 0.0)
    eng_._static_stage(pl, tensors, a @ b, float((a @ b).norm()), deadline=time.perf_counter() + 60, st=st,
                       runtime_fns={})
    assert compiled == [8, 16, 64]                                      # 8 once only
    assert st.static_chased == 1 and st.static_failed == 2 and st.static == 1
    assert any("differs from ATen" in line for line in eng_.logs)
    assert not lucky.static and lucky.samples == [1.05] * 3
    assert timed == [16] * 3                                            # no chase rounds: nothing compiled
    assert st.static_beaten == 1

    compiled.clear()
    fresh = [entry(16, 1.0), entry(64, 1.05, n=3)]
    st = Stats()
    eng_._static_chase(Planned(0, p, False, "mm", fresh, 0.0), [], {}, {}, tensors, a @ b, 1.0,
                       deadline=time.perf_counter() - 1, st=st)
    assert compiled == [] and st.static_chased == 0                     # past the deadline
    eng_.static_pool.shutdown()


def test_log_line_shows_static_chased_only_when_nonzero():
    from torch_diode.collect.cli import static_counts
    from torch_diode.collect.engine import Stats
    assert static_counts(Stats(static=4)) == "static=4"
    assert static_counts(Stats(static=5, static_failed=1, static_beaten=1, static_chased=2)) == \
        "static=5 static_failed=1 static_beaten=1 static_chased=2"
    assert static_counts(Stats(static=3, static_chased=1)) == "static=3 static_chased=1"


def test_engine_version_has_the_static_chase():
    from torch_diode.collect.engine import ENGINE_VERSION, Stats
    assert ENGINE_VERSION == "2.7.0" and Stats().static_chased == 0 and Stats().static_model == 0


def test_static_targets_add_a_models_picks_after_the_rest():
    times = {"a": 2.0, "b": 1.0, "c": 3.0, "d": 9.0, "e": 8.0}
    base = plan.static_targets(times, {"e"}, 2)
    assert base == ["b", "a", "e"]
    # picks not yet targets join at the end in the model's order; a pick already there, twice,
    # or not an ok entry (not in times) adds nothing
    assert plan.pick_targets(base, ["d", "b", "d", "zz", "c"], times) == ["d", "c"]
    assert plan.pick_targets(plan.static_targets(times, {"e"}, 0), ["d"], times) == []   # no static stage, no picks


class _FakeRanking:
    def __init__(self, kept):
        self.kept = kept


class _FakeRanker:
    def __init__(self, order=None, error=None):
        self.order, self.error, self.seen = order, error, None

    def rank_keys(self, problem, keys, opts):
        if self.error:
            raise self.error
        self.seen = (keys, opts.top_k)
        return _FakeRanking(self.order[:opts.top_k])


def _engine_with(picker, model_top=2):
    from torch_diode.collect.engine import Engine
    from torch_diode.collect.spec import parse_spec
    eng = object.__new__(Engine)   # no GPU: only what _model_picks reads
    eng.spec = parse_spec({"shard_id": "s", "problems": [{"op": "mm", "m": 8, "n": 8, "k": 8, "dtype_a": "float16"}],
                           "timing": {"model_top": model_top, "model": "m"}})
    eng.picker, eng.log, logged = picker, None, []
    eng.log = logged.append
    return eng, logged


def test_model_picks_are_the_models_top_entries_and_never_fail_a_problem():
    from torch_diode.collect.space import Offered
    from torch_diode.hook.ranking import config_key

    @dataclass
    class E:
        offered: Offered

    cfgs = [wire.KernelConfig(block_m=bm, block_n=64, block_k=32, num_stages=3, num_warps=4) for bm in (16, 32, 64)]
    ok = {100 + i: E(Offered("triton::mm", {}, c)) for i, c in enumerate(cfgs)}
    p = wire.Problem(op="mm", m=8, n=8, k=8)
    ranker = _FakeRanker(order=[2, 0, 1])
    eng, logged = _engine_with(ranker)
    assert eng._model_picks(p, ok) == [102, 100]
    assert ranker.seen == ([config_key(c) for c in cfgs], 2)   # every ok entry ranked, top model_top kept
    eng, logged = _engine_with(_FakeRanker(error=KeyError("no table row")))
    assert eng._model_picks(p, ok) == [] and "model_top skipped" in logged[0]
    eng, _ = _engine_with(None)
    assert eng._model_picks(p, ok) == []
    # timing.extra_models: each further model's picks join, the first model's first, no repeats;
    # one that fails adds nothing and the others still count
    eng, logged = _engine_with(_FakeRanker(order=[2, 0, 1]))
    eng.extra_pickers = (_FakeRanker(order=[0, 1, 2]), _FakeRanker(error=KeyError("x")))
    assert eng._model_picks(p, ok) == [102, 100, 101] and "model_top skipped" in logged[0]


def test_static_stage_times_the_models_picks_as_static_kernels(monkeypatch):
    """timing.model_top (2.6.0): the model's top picks that the runtime pass did not make
    targets (slow first-pass records: a runtime-size kernel can read far slower than its
    static one) are compiled and re-timed as static kernels in the same rounds as the
    targets and ATen, and counted in static_model."""
    import time

    from torch_diode.collect.engine import Entry, Planned, Stats
    from torch_diode.collect.space import Offered
    from torch_diode.collect.spec import Spec, Timing

    p, a, b, tensors, kc = _chase_problem()
    ref = a @ b
    top = [_chase_entry(kc, 16, 1.0), _chase_entry(kc, 32, 1.01)]       # static_top 2
    pick = _chase_entry(kc, 64, 1.40)                                     # slow at runtime size
    other = _chase_entry(kc, 128, 1.50)
    aten = Entry(Offered("aten::mm", {}, wire.KernelConfig("aten")), is_triton=False, status="ok", samples=[1.5] * 5)
    eng_, compiled, timed = _fake_static_engine(monkeypatch, p, static_top=2)
    eng_.spec = Spec("s/1", "s", (p,), timing=Timing(static_top=2, model_top=2, model="m"))
    entries = top + [pick, other, aten]
    # the model ranks the ok Triton entries in the order the test gives: 64 first, then 16
    order = {64: 0, 16: 1, 32: 2, 128: 3}
    eng_.picker = type("R", (), {"rank_keys": staticmethod(lambda prob_, keys, opts: type("K", (), {
        "kept": sorted(range(len(keys)), key=lambda i: order[keys[i][1]])[:opts.top_k]})())})()
    monkeypatch.setattr("torch_diode.hook.ranking.config_key", lambda c: (c.template, c.block_m))
    us = {16: 1.10, 32: 1.12, 64: 1.05}                                   # the pick's static kernel is the fastest
    aten_fn = object()
    eng_.timer = _timer_by_block_m(timed, us, aten_fn, 1.3)
    st = Stats()
    eng_._static_stage(Planned(0, p, False, "mm", entries, 0.0), tensors, ref, float(ref.norm()),
                       deadline=time.perf_counter() + 60, st=st, runtime_fns={id(aten): aten_fn})
    eng_.static_pool.shutdown()
    assert sorted(compiled) == [16, 32, 64]                              # 128: neither fast nor picked
    assert pick.static and pick.samples == [1.05] * 30 and not other.static
    assert st.static_model == 1 and st.static == 3 and st.static_beaten == 0
    assert timed[:4] == [16, 32, 64, "aten"]                              # one round: targets, the pick, ATen


def test_model_picks_with_the_shipped_model_on_real_records():
    """The path a GPU run of timing.model_top takes, on CPU: the shipped H100 bundle loaded as
    the engine loads it (Ranker(load_model_dir)), ranking the Triton configs an H100 collector
    measured for one committed problem. Its picks are model_top distinct ok entries, and they
    are informative: their measured times sit well below the problem's median config."""
    import glob
    import statistics
    from torch_diode.collect.space import Offered
    from torch_diode.dataset import load_dataset
    from torch_diode.hook.ranking import Ranker
    from torch_diode.model import load_model_dir

    bundles = sorted(glob.glob(str(_ROOT / "python/torch_diode/bundles/nvidia-h100-80gb/*/model.json")))
    shards = sorted(glob.glob(str(_ROOT / "datasets/nvidia-h100-80gb/*recollect*.msgpack.gz")))
    if not bundles or not shards:
        pytest.skip("needs the shipped H100 bundle and a committed H100 re-collection")

    @dataclass
    class E:
        offered: Offered
        median_us: float

    problem, recs = next(iter(load_dataset(shards[0]).shards[0].records_by_problem()))
    ok = {i: E(Offered(r.config.template, {}, r.config), r.median_us)
          for i, r in enumerate(recs) if r.config.is_triton and r.status == "ok" and r.median_us > 0}
    assert len(ok) > 100
    eng, logged = _engine_with(Ranker(load_model_dir(str(pathlib.Path(bundles[-1]).parent))), model_top=10)
    picks = eng._model_picks(problem, ok)
    assert not logged, logged
    assert len(picks) == 10 and len(set(picks)) == 10 and set(picks) <= set(ok)
    median = statistics.median(e.median_us for e in ok.values())
    picked = statistics.geometric_mean(ok[k].median_us for k in picks)
    assert picked < 0.8 * median, (picked, median)
