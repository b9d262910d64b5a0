"""The rest of a manifest's sweep as a new manifest: its problems no dataset holds yet.

A sweep's progress lives in its coordinator's database. On a device machine that database
goes with the machine, and a fresh coordinator would lease the same shard ids again (and a
changed sweep must get a new name: manifests/README.md). So a sweep continued on another
machine is a new manifest of what is left:

    python -m torch_diode.tools.manifest_remainder manifests/h200-fp8-2026112904.yaml \\
        datasets/nvidia-h200-144gb --name h200-fp8-2026112904-r1 \\
        --problems-per-shard 24 --out manifests/h200-fp8-2026112904-r1.yaml

Only manifests with `shapes.distribution: problems` (an explicit list) have a remainder that
is a list; others are refused with the reason. A listed problem is *held* when a shard of the
dataset (a file or a directory of them) has a problem equal to it in every field the wire
format keeps (op, batch, M, N, K, dtypes, layouts, bias, scale). Then `diode manifest
validate` checks the written file like any other (the test does).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import wire
from ..dataset import load_dataset


class RemainderError(ValueError):
    """The manifest cannot be continued this way; the message says why."""


def _key(p: dict | wire.Problem) -> tuple:
    if isinstance(p, wire.Problem):
        return (p.op, p.batch, p.m, p.n, p.k, p.dtype_a, p.dtype_b, p.dtype_out, p.trans_a, p.trans_b, p.bias, p.scale)
    return (p["op"], p["batch"], p["m"], p["n"], p["k"], p["dtype"], p["dtype"], p["dtype_out"], p["trans_a"],
            p["trans_b"], p["bias"], p["scale"])


def _listed(entry: dict, sweep: dict) -> dict:
    """A manifest list entry with the defaults of manifests/README.md filled in."""
    scaled = entry.get("op") == "scaled_mm"
    return {"op": entry["op"], "batch": int(entry.get("batch", 1)), "m": int(entry["m"]), "n": int(entry["n"]),
            "k": int(entry["k"]), "dtype": entry["dtype"],
            "dtype_out": sweep.get("out_dtype", "bfloat16") if scaled else entry["dtype"],
            "trans_a": bool(entry.get("trans_a", False)), "trans_b": bool(entry.get("trans_b", scaled)),
            "bias": entry.get("bias", "none"), "scale": entry.get("scale", "tensor" if scaled else "none")}


def remainder(manifest: dict, held: set[tuple], name: str, problems_per_shard: int | None) -> tuple[dict, int]:
    """(the new manifest, how many listed problems were held already)."""
    sweep = manifest.get("sweep") or {}
    shapes = sweep.get("shapes") or {}
    if shapes.get("distribution") != "problems":
        raise RemainderError(f"sweep.shapes.distribution is {shapes.get('distribution')!r}: only a 'problems' "
                             "list has a remainder that is a list")
    listed = list(shapes.get("list") or [])[: int(sweep.get("problems", 0)) or None]
    left = [e for e in listed if _key(_listed(e, sweep)) not in held]
    if not left:
        raise RemainderError("every listed problem is held by the dataset: nothing is left to collect")
    out = {k: v for k, v in manifest.items() if k != "sweep_id"}
    out["name"] = name
    out["sweep"] = dict(sweep, problems=len(left), shapes=dict(shapes, list=left))
    if problems_per_shard:
        out["sweep"]["problems_per_shard"] = problems_per_shard
    return out, len(listed) - len(left)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("manifest")
    ap.add_argument("dataset", nargs="+", help="dataset files or directories of shards")
    ap.add_argument("--name", required=True, help="the new manifest's name (a changed sweep gets a new name)")
    ap.add_argument("--problems-per-shard", type=int, default=None)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    import yaml  # the `collect` extra (pyyaml)
    try:
        manifest = yaml.safe_load(Path(a.manifest).read_text())
        held = {_key(p) for d in a.dataset for s in load_dataset(d).shards for p in s.problems}
        new, n_held = remainder(manifest, held, a.name, a.problems_per_shard)
    except (OSError, yaml.YAMLError, RemainderError, KeyError, ValueError) as e:
        print(f"manifest_remainder: {a.manifest}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    header = (f"# The rest of {a.manifest} ('{manifest.get('name')}'): its listed problems that\n"
              f"# {', '.join(a.dataset)} did not hold ({n_held} held). Written by\n"
              f"# `python -m torch_diode.tools.manifest_remainder`; the original's comments describe the shapes.\n")
    Path(a.out).write_text(header + yaml.safe_dump(new, sort_keys=False, default_flow_style=None, width=120))
    print(f"{a.out}: {new['sweep']['problems']} problems left of {new['sweep']['problems'] + n_held} "
          f"({n_held} held), name {a.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
