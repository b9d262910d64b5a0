"""The levers of the hook's ranking miss path (issue 19), each measured on its own, one CPU
core, thread CPU time, variants interleaved problem by problem (so a busy machine slows
them alike). Companion of bench/hook_rank_speed.py (same candidates, model and problems).

    PYTHONPATH=python taskset -c 0 python bench/hook_rank_levers.py [--problems 200]
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
sys.path.insert(0, HERE)

from hook_rank_speed import candidate_list, problems  # noqa: E402
from torch_diode.hook import extract  # noqa: E402
from torch_diode.hook.ranking import Options, Ranker, _ConfigTable, _standardisation  # noqa: E402
from torch_diode.model import load_model_dir  # noqa: E402


def forward_into(mod, x, bufs):
    """ResidualMLP.forward with every intermediate in buffers reused across calls (`out=`
    addmm, in-place SiLU): the same kernels in the same order, bit-identical to forward()."""
    n, hidden = x.shape[0], mod.input.out_features
    if not bufs or bufs[0].shape[0] < n:
        bufs[:] = [torch.empty(n, hidden), torch.empty(n, hidden), torch.empty(n, hidden), torch.empty(n, 1)]
    h, g, g2, o = (b[:n] for b in bufs)
    silu_ = torch.nn.functional.silu
    torch.addmm(mod.input.bias, x, mod.input.weight.t(), out=h)
    silu_(h, inplace=True)
    for b in mod.blocks:
        torch.addmm(b.fc1.bias, h, b.fc1.weight.t(), out=g)
        silu_(g, inplace=True)
        torch.addmm(b.fc2.bias, g, b.fc2.weight.t(), out=g2)
        h.add_(g2)
        silu_(h, inplace=True)
    torch.addmm(mod.head.bias, h, mod.head.weight.t(), out=o)
    return o.squeeze(-1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=int, default=200)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--blocks", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from test_hook_model import write_model_dir
    model = load_model_dir(write_model_dir(os.path.join(tempfile.mkdtemp(), "m"), hidden=args.hidden,
                                           blocks=args.blocks, activation="silu"))
    mod = model.module
    ktcs = candidate_list()
    probs = problems(args.problems, seed=1)
    spec = model.info.feature_spec
    mean, sd = (np.asarray(v, dtype=np.float64) for v in _standardisation(spec))

    # --- variants -------------------------------------------------------------------------
    def keys_loop(ktcs):  # views, but a key built per KTC (no key cache)
        kws = extract.compat.ktc_params_views(ktcs)
        return [extract._key_from_kwargs("triton::mm", kw, ktc.extra_kwargs) for kw, ktc in zip(kws, ktcs)]

    raw_table, std_table = _ConfigTable(spec), _ConfigTable(spec, (mean, sd))
    slow_keys, fast_keys = extract._config_keys_slow(ktcs), extract.config_keys_from_ktcs(ktcs)
    rows = raw_table.rows_for_keys(slow_keys)
    std_table.rows_for_keys(slow_keys)
    ranker = Ranker(model)
    bufs: list = []
    bufs_inf: list = []
    x0 = torch.from_numpy(std_table.raw_features(probs[0], rows))
    with torch.no_grad():
        assert torch.equal(mod(x0), forward_into(mod, x0, bufs))
    weights = [(mod.input.weight.t().numpy().copy(), mod.input.bias.numpy())] + \
              [(lin.weight.t().numpy().copy(), lin.bias.numpy()) for b in mod.blocks for lin in (b.fc1, b.fc2)] + \
              [(mod.head.weight.t().numpy().copy(), mod.head.bias.numpy())]

    def numpy_forward(x):  # the same network in numpy float32 (not bit-identical: other BLAS)
        (wi, bi), *blk, (wh, bh) = weights
        h = x @ wi + bi
        h = h / (1.0 + np.exp(-h))
        for (w1, b1), (w2, b2) in zip(blk[0::2], blk[1::2]):
            g = h @ w1 + b1
            g = g / (1.0 + np.exp(-g))
            h = h + (g @ w2 + b2)
            h = h / (1.0 + np.exp(-h))
        return (h @ wh + bh)[:, 0]

    # first-layer split: W x = W_static x_static (cached per config) + W_rest x_rest; the
    # cached product is gathered, the rest multiplied per miss (not bit-identical: another
    # summation order)
    w_in, b_in = mod.input.weight, mod.input.bias
    static_cols = list(range(12, 21)) + [28] + list(range(29, len(spec.names)))   # config / dtype only
    rest_cols = [c for c in range(len(spec.names)) if c not in static_cols]
    xs = x0[:, static_cols].contiguous()
    cached_static = xs @ w_in[:, static_cols].t()
    w_rest_t = w_in[:, rest_cols].t().contiguous()

    def split_first_layer(x):
        return torch.addmm(b_in, x[:, rest_cols], w_rest_t).add_(cached_static)

    variants = {
        "extract: to_kwargs() per KTC (before)": lambda p: extract._config_keys_slow(ktcs),
        "extract: params.kwargs view, key per KTC": lambda p: keys_loop(ktcs),
        "extract: view + key cache": lambda p: extract.config_keys_from_ktcs(ktcs),
        "extract + rows: keys, then table lookup": lambda p: ranker._table.rows_for_keys(
            extract.config_keys_from_ktcs(ktcs)),
        "extract + rows: values -> rows (rank_ktcs, kept)": lambda p: ranker._rows_of_runs(extract.value_runs(ktcs)),
        "keys: table lookup, fresh key tuples": lambda p: ranker._table.rows_for_keys(slow_keys),
        "keys: table lookup, cached key objects": lambda p: ranker._table.rows_for_keys(fast_keys),
        "features: raw table + standardise matrix (before)":
            lambda p: ((raw_table.raw_features(p, rows).astype(np.float64) - mean) / sd).astype(np.float32),
        "features: standardised table (kept)": lambda p: std_table.raw_features(p, rows),
        "forward: module, no_grad (kept)": ("fwd", lambda x: mod(x)),
        "forward: module, inference_mode": ("inf", lambda x: mod(x)),
        "forward: forward_into buffers, no_grad": ("fwd", lambda x: forward_into(mod, x, bufs)),
        "forward: forward_into buffers, inference_mode": ("inf", lambda x: forward_into(mod, x, bufs_inf)),
        "forward: numpy float32": ("np", numpy_forward),
        "first layer: addmm 1400 x n (in both)": ("fwd", lambda x: torch.addmm(b_in, x, w_in.t())),
        "first layer: split, cached config part": ("fwd", split_first_layer),
    }
    ranker.rank_ktcs(probs[0], ktcs, Options())
    times = {k: [] for k in variants}
    order = list(variants.items())
    rng = random.Random(0)
    for p in probs:
        x = std_table.raw_features(p, rows)
        xt = torch.from_numpy(x)
        rng.shuffle(order)   # no variant always runs right after another (warm or cold caches)
        for name, f in order:
            if isinstance(f, tuple):
                kind, g = f
                ctx = torch.inference_mode() if kind == "inf" else torch.no_grad()
                arg = x if kind == "np" else xt
                with ctx:
                    t0 = time.thread_time()
                    g(arg)
                    times[name].append(time.thread_time() - t0)
            else:
                t0 = time.thread_time()
                f(p)
                times[name].append(time.thread_time() - t0)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, {len(ktcs)} configs, {len(probs)} problems, "
          f"model hidden {args.hidden} x {args.blocks} blocks; thread CPU time, ms")
    print(f"{'lever':<56} {'median':>7} {'p90':>7}")
    for name, v in times.items():
        v = sorted(v)
        print(f"{name:<56} {statistics.median(v) * 1e3:7.3f} {v[int(0.9 * (len(v) - 1))] * 1e3:7.3f}")


if __name__ == "__main__":
    main()
