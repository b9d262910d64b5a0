"""Cross-language shard round trip used by the demo (`bash .ci/demo`).

  make OUT      write a sealed shard built in Python (wire.encode)
  check FILE    decode a shard written by C++ and print a one-line summary
"""
from __future__ import annotations

import sys
import time

from torch_diode import wire


def make_shard() -> wire.Shard:
    hw = wire.HardwareId("nvidia", "NVIDIA H100 80GB HBM3", "sm_90", "9.0", 132, 85520809984,
                         "580.159.04", "cuda 13.0", "2.11.0+cu130", "3.6.0")
    problems = [wire.Problem("mm", 1, 1024, 4096, 2048, "bfloat16", "bfloat16", "bfloat16"),
                wire.Problem("bmm", 8, 512, 512, 64, "float16", "float16", "float16")]
    records = [wire.ShardRecord(0, wire.KernelConfig("aten"), 26.5, 0.25, 50)]
    for i, (bm, bn, bk) in enumerate([(128, 128, 64), (64, 128, 32), (128, 256, 64)]):
        cfg = wire.KernelConfig("triton::mm", bm, bn, bk, 8, 3, 4, True, False, False, "float32")
        records.append(wire.ShardRecord(0, cfg, 27.0 + i, 0.3, 50))
    records.append(wire.ShardRecord(1, wire.KernelConfig("triton::bmm", 64, 64, 32, 8, 4, 4, True, False,
                                                         False, "float32"), 9.5, 0.1, 100))
    # Wire version 2 fields too, so the demo's C++ re-encoding covers them.
    return wire.seal(wire.Shard("demo/shard-0", "demo", hw, wire.Producer("demo/gpu0", "", "replay", "diode 0.1.0"),
                                int(time.time() * 1000), problems, records,
                                method=wire.CollectionMethod("synthetic", "torch_diode.tools.roundtrip"),
                                problem_wall_s=(1.25, 0.5)))


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "make":
        s = make_shard()
        with open(argv[1], "wb") as f:
            f.write(wire.encode(s))
        print(f"python wrote {argv[1]}: {len(s.records)} records, sha256 {s.sha256.hex()[:16]}...")
        return 0
    if len(argv) == 2 and argv[0] == "check":
        with open(argv[1], "rb") as f:
            s = wire.decode_shard(f.read())
        print(f"python read {argv[1]}: shard {s.id}, {len(s.problems)} problems, {len(s.records)} records, "
              f"sha256 {s.sha256.hex()[:16]}... verified")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
