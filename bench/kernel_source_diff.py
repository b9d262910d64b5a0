"""Our static-shape kernel beside Inductor's template kernel for one problem and config:
the two Triton sources and their unified diff, to explain a fidelity gap between them
(bench/RESULTS.md: baddbmm 32x448x3176x16 fp16 with a row bias, BLOCK 32x128x16, where our
static kernel ran 0.876x Inductor's template kernel and the other configs 0.98-1.02x).

  python bench/kernel_source_diff.py --data DATASET --problem "baddbmm 32x448x3176x16 float16 NN bias=row" \
      [--rank 0 | --config JSON] --out DIR

The problem is named as `torch_diode.collect.problems.describe` prints it (the fidelity
bench's "problem" field); the config is the `--rank`-th fastest ok Triton record of that
problem (0: the fastest) or a wire-format config given as JSON (the bench's "config" field).
Writes DIR/ours.py (torch_diode.collect.template rendered with the problem's sizes and
strides as literals, what the collector's static stage compiles) and, on a machine with a
GPU, DIR/inductor.py (every template kernel of `torch.compile(mode="max-autotune")` keeping
only that config, as collector_fidelity.compile_inductor compiles it) and DIR/source.diff.
Without CUDA only ours.py is written, and the script says so.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

# Inductor's output code declares each kernel as
#   name = async_compile.triton('name', '''<source>''', device_str='cuda')
_TRITON_DECL = re.compile(r"async_compile\.triton\(\s*'([A-Za-z0-9_]+)'\s*,\s*'''(.*?)'''", re.S)


def template_kernels(code: str) -> dict[str, str]:
    """name -> source of each GEMM template kernel (`triton_tem_*`) in Inductor's output code."""
    return {name: src for name, src in _TRITON_DECL.findall(code) if name.startswith("triton_tem_")}


def find_problem(paths: list[str], name: str):
    """(problem, its ok Triton records fastest first) of the first problem named `name`."""
    from torch_diode.collect.problems import describe
    from torch_diode.dataset import load_dataset
    for path in paths:
        for shard in load_dataset(path).shards:
            for i, p in enumerate(shard.problems):
                if describe(p) == name:
                    recs = [r for r in shard.records if r.problem_index == i and r.status == "ok"
                            and r.config.is_triton]
                    return p, sorted(recs, key=lambda r: r.median_us)
    raise SystemExit(f"no problem named {name!r} in {paths}")


def our_source(p, cfg) -> str:
    from torch_diode.collect import template
    return template.render(template.kernel_class(p, cfg.even_k, static=True))


def inductor_sources(p, cfg) -> dict[str, str]:
    """Template kernels of Inductor's compile of `p` keeping only `cfg` (needs CUDA)."""
    from torch._inductor.utils import run_and_get_code

    from collector_fidelity import compile_inductor
    from torch_diode import wire
    from torch_diode.collect.problems import make_inputs
    inputs = make_inputs(p)
    fn, codes = run_and_get_code(lambda: compile_inductor(p, wire.to_json(cfg), inputs))
    if fn is None:
        raise SystemExit("Inductor did not offer that config for this problem")
    out: dict[str, str] = {}
    for code in codes:
        out.update(template_kernels(code))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", nargs="+", required=True, help="dataset files or directories")
    ap.add_argument("--problem", required=True, help="as describe() prints it")
    ap.add_argument("--rank", type=int, default=0, help="the config: this fastest ok Triton record")
    ap.add_argument("--config", default="", help="the config as wire JSON (instead of --rank)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    from torch_diode import wire
    p, recs = find_problem(a.data, a.problem)
    if a.config:
        cfg = wire.config_from_json(json.loads(a.config))
    else:
        if not 0 <= a.rank < len(recs):
            raise SystemExit(f"--rank {a.rank}: the problem has {len(recs)} ok Triton records")
        cfg = recs[a.rank].config
    os.makedirs(a.out, exist_ok=True)
    ours = our_source(p, cfg)
    with open(os.path.join(a.out, "ours.py"), "w") as f:
        f.write(ours)
    print(f"config {json.dumps(wire.to_json(cfg), sort_keys=True)}")
    print(f"wrote {a.out}/ours.py ({len(ours.splitlines())} lines)")
    import torch
    if not torch.cuda.is_available():
        print("no CUDA device: Inductor's kernel is not compiled here (run this on the GPU machine)")
        return 0
    theirs = inductor_sources(p, cfg)
    if not theirs:
        raise SystemExit("Inductor's output code has no triton_tem_ kernel")
    with open(os.path.join(a.out, "inductor.py"), "w") as f:
        f.write("\n\n".join(f"# {name}\n{src}" for name, src in theirs.items()))
    name, src = next(iter(theirs.items()))
    diff = "".join(difflib.unified_diff(ours.splitlines(True), src.splitlines(True), "ours.py", name))
    with open(os.path.join(a.out, "source.diff"), "w") as f:
        f.write(diff)
    print(f"wrote {a.out}/inductor.py ({', '.join(theirs)}) and {a.out}/source.diff ({len(diff.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
