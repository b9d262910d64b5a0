#!/usr/bin/env python3
"""torch-diode 0.1.1 as a baseline: run its shipped H100 model on our test problems.

    python python/release/torch_diode_011_eval.py --dataset datasets/nvidia-h100-80gb \
        [--anchors ../shared/anchors/torch-diode-0.1.1] [--diode build/cli/diode] \
        [--split test] [--features encode|integration] [--out rankings.json]
    diode validate --model M --dataset datasets/nvidia-h100-80gb --baseline-rankings rankings.json

Nothing of 0.1.1 is copied into this repository: the wheel and `v1_model.pt` are
read from the anchors directory at run time. The wheel is unzipped into a
temporary directory and its model code (`torch_diode/model/matmul_model_v1.py`:
`MatmulModelV1`, `ModelWrapper`, the standardisation constants) is imported
from there under the alias `td011`, without running its package `__init__`
(which registers itself into torch.compile).

The problems and their configs come from `diode validate --list-split SPLIT
--json`, i.e. from the C++ grouping and split (the same problems, configs,
config order and measured times `diode validate` judges), never from a copy
of the split logic.

What 0.1.1 ranks (read from its source, wheel 0.1.1):
  * only op "mm": integration/inductor_integration.py:210-216 (`if op_name !=
    "mm"`: fall back to Inductor's own configs). Other ops are left unranked
    here, so `diode validate` uses its "inductor_default" fallback for them.
  * only the "triton::mm" template: inductor_integration.py:232-244
    (`base_template_names = {"triton::mm"}`); persistent TMA, decompose_k and
    ATen are passed through unranked.
  * it keeps its 5 best-predicted configs: integration/matmul_integration.py:149
    (`install_diode_choices(..., top_k_configs=5)`) and
    kernel_conversions.py:603-650 (`select_best_configs`: sort by prediction).

Features, two variants (`--features`):
  * encode (default): matmul_model_v1.py `ModelWrapper.encode` (l. 379-447) and
    `get_nn_x` (l. 178-212): the 12 columns dtype_size (bits: 16 for float16
    and bfloat16, 32 for float32), m, n, k, total_gb, total_gflop,
    flops_per_byte, block_k, block_m, block_n, num_stages, num_warps; total_gb
    and total_gflop as float32 (l. 215-244 and encode's `.astype(np.float32)`), natural
    log of every column, minus `mean_for_standardization`, divided by
    `std_for_standardization` (the constants of `ModelWrapper.__init__`, l. 284-320, read
    from the imported module, not copied). This is the transform the model
    was trained with (`get_nn_x` is the training input path) and the one
    `MatmulFeatureProcessor.standardize_features` (matmul_inference.py:347-400)
    repeats. Reimplemented with numpy because `encode` needs pandas and moves
    tensors to "cuda" (get_nn_x l. 201); the arithmetic is the same.
    ATen is kept beside its 5 configs (with_aten true): the pick is compared
    like Inductor DEFAULT + ATen.
  * integration: what `DiodeInductorChoices` actually feeds the model when it
    runs inside Inductor: kernel_conversions.py:36-133
    `create_legacy_problem_features` / `create_legacy_config_features`, raw
    values (no log, no standardisation) and dtype_size 16 only for float16
    (bfloat16 gets 32, l. 60), through model/model_wrapper.py
    `ModelWrapper.inference` (no transform either). Its
    `_finalize_template_configs` then truncates the list (model's 5 configs
    first, the passed-through templates after them, ATen among them) to
    top_k_configs = 5 (inductor_integration.py:279-323), which drops ATen:
    with_aten false.

Writes a rankings file (`--out`, default torch_diode_0_1_1.rankings.json):
see models/src/metrics.h `Rankings`.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import types
import zipfile

import numpy as np
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]
OPS = ["mm"]
TEMPLATES = {"triton::mm"}
TOP_K = 5


def list_split(diode: str, dataset: str, split: str, max_spread: float = 0.0) -> list[dict]:
    """The split's problems with their configs and times, from `diode validate --list-split
    --json` (also bench/ensemble_rankings.py (script removed; git history)'s). --max-spread leaves disturbed records out of
    the listing exactly as out of the scoring, so a rankings file made with it is scored by
    `diode validate --max-spread` with the same value; 0: the data as measured."""
    out = subprocess.run([diode, "validate", "--dataset", dataset, "--list-split", split, "--json",
                          "--max-spread", str(max_spread)], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def load_011(anchors: pathlib.Path, tmp: pathlib.Path):
    """Unzips the wheel into tmp and imports its matmul_model_v1 as td011.model.matmul_model_v1."""
    wheel = next(anchors.glob("torch_diode-0.1.1-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp)
    root = tmp / "torch_diode"
    # Packages without their __init__ (the top-level one installs itself into torch.compile).
    for name, path in (("td011", root), ("td011.model", root / "model"), ("td011.types", root / "types"),
                       ("td011.utils", root / "utils")):
        mod = types.ModuleType(name)
        mod.__path__ = [str(path)]
        sys.modules[name] = mod
    stubbed = False
    try:
        import pandas  # noqa: F401
    except ImportError:
        # matmul_model_v1 / matmul_inference import pandas at the top and use it
        # only in functions this script does not call (encode, get_nn_x, and
        # annotations): a placeholder module lets the model classes import.
        pd = types.ModuleType("pandas")
        pd.DataFrame = type("DataFrame", (), {})
        pd.Series = type("Series", (), {})
        sys.modules["pandas"] = pd
        stubbed = True
    try:
        v1 = importlib.import_module("td011.model.matmul_model_v1")
    finally:
        if stubbed:
            del sys.modules["pandas"]
    return v1


def encode_features(v1_wrapper, p: dict, cfgs: list[dict]) -> torch.Tensor:
    """matmul_model_v1.ModelWrapper.encode + get_nn_x, in numpy (see the module docstring)."""
    dt = p["dtype_a"]
    if dt in ("bfloat16", "float16"):
        dsize = 16
    elif dt == "float32":
        dsize = 32
    else:
        raise ValueError(f"Unsupported dtype: {dt}")
    m, n, k = float(p["m"]), float(p["n"]), float(p["k"])
    total_gb = np.float32(((m * k + k * n + m * n) * (dsize / 8)) / 1e9)
    total_gflop = np.float32((2 * m * n * k) / 1e9)
    flops_per_byte = np.float32(total_gflop / total_gb)
    rows = []
    for c in cfgs:
        # log of the int64 columns in float64, of the float32 columns in float32 (pandas/numpy).
        rows.append([np.log(float(dsize)), np.log(m), np.log(n), np.log(k),
                     float(np.log(total_gb)), float(np.log(total_gflop)), float(np.log(flops_per_byte)),
                     np.log(float(c["block_k"])), np.log(float(c["block_m"])), np.log(float(c["block_n"])),
                     np.log(float(c["num_stages"])), np.log(float(c["num_warps"]))])
    x = torch.tensor(rows, dtype=torch.float64)
    x -= v1_wrapper.mean_for_standardization
    x /= v1_wrapper.std_for_standardization
    return x.to(torch.float32)


def integration_features(p: dict, cfgs: list[dict]) -> torch.Tensor:
    """kernel_conversions.create_legacy_problem_features / create_legacy_config_features."""
    dtype_size = 16 if p["dtype_a"] == "float16" else 32
    m, n, k = float(p["m"]), float(p["n"]), float(p["k"])
    dtype_bytes = dtype_size / 8
    total_gb = (m * k + k * n + m * n) * dtype_bytes / 1e9
    total_gflop = (2 * m * n * k) / 1e9
    flops_per_byte = total_gflop / total_gb if total_gb > 0 else 0.0
    prob = [dtype_size, m, n, k, total_gb, total_gflop, flops_per_byte]
    rows = [prob + [float(c["block_k"]), float(c["block_m"]), float(c["block_n"]), float(c["num_stages"]),
                    float(c["num_warps"])] for c in cfgs]
    return torch.tensor(rows, dtype=torch.float32)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--anchors", default=str(REPO.parent / "shared/anchors/torch-diode-0.1.1"))
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--diode", default=os.environ.get("DIODE_BIN") or str(
        pathlib.Path(os.environ.get("DIODE_BUILD_DIR", REPO / "build")) / "cli/diode"))
    ap.add_argument("--split", default="test", choices=["train", "validation", "test", "all"])
    ap.add_argument("--features", default="encode", choices=["encode", "integration"])
    ap.add_argument("--aten", choices=["yes", "no"],
                    help="count the ATen record beside its top 5 (default: yes with encode, no with integration, "
                         "see above); 'no' with encode compares its top 5 alone with the model's top 5")
    ap.add_argument("--name", help="baseline name (default torch_diode_0_1_1, with --features integration "
                                   "torch_diode_0_1_1_integration)")
    ap.add_argument("--out", help="rankings file (default <name>.rankings.json)")
    a = ap.parse_args()
    with_aten = (a.aten or ("yes" if a.features == "encode" else "no")) == "yes"
    name = a.name or ("torch_diode_0_1_1" if a.features == "encode" else "torch_diode_0_1_1_integration")
    if a.name is None and with_aten != (a.features == "encode"):
        name += "_with_aten" if with_aten else "_no_aten"
    out = pathlib.Path(a.out or f"{name}.rankings.json")
    anchors = pathlib.Path(a.anchors)
    problems = list_split(a.diode, a.dataset, a.split)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="td011-") as tmp:
        v1 = load_011(anchors, pathlib.Path(tmp))
        # ModelWrapper(model_path) -> MatmulModelV1.load (torch.load, map_location "cpu"): its own loader.
        wrapper = v1.ModelWrapper(model_path=str(anchors / "v1_model.pt"))
        wrapper.model.eval()
        ranked, configs_scored, t0 = {}, 0, time.perf_counter()
        per_op = {}
        for p in problems:
            per_op.setdefault(p["op"], [0, 0])[1] += 1
            if p["op"] not in OPS:
                continue
            idx = [i for i, c in enumerate(p["configs"]) if c["template"] in TEMPLATES]
            if not idx:
                continue
            cfgs = [p["configs"][i] for i in idx]
            x = encode_features(wrapper, p, cfgs) if a.features == "encode" else integration_features(p, cfgs)
            with torch.no_grad():
                pred = wrapper.inference(x).reshape(-1).tolist()  # predicted log time, lower = faster
            scores = [None] * len(p["configs"])
            for i, s in zip(idx, pred):
                scores[i] = float(s)
            ranked[p["problem"]] = {"configs": len(p["configs"]), "scores": scores}
            configs_scored += len(idx)
            per_op[p["op"]][0] += 1
    doc = {"format": "diode-baseline-rankings", "version": 1, "name": name, "k": TOP_K,
           "with_aten": with_aten, "fallback": "inductor_default", "ops": OPS,
           "templates": sorted(TEMPLATES), "features": a.features, "split": a.split,
           "source": "torch-diode 0.1.1 wheel + v1_model.pt from " + str(anchors), "problems": ranked}
    out.write_text(json.dumps(doc) + "\n")
    cover = ", ".join(f"{op} {r}/{t}" for op, (r, t) in sorted(per_op.items()))
    print(f"{name}: ranked {len(ranked)} of {len(problems)} {a.split} problems ({configs_scored} configs, "
          f"{time.perf_counter() - t0:.2f} s); ranked per op: {cover}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
