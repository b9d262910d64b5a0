#!/usr/bin/env bash
# Continue the 50-problem log-normal throughput shard (seed $1) on the GPU machine for
# $2 seconds, resuming after every part already collected in .carry/run (parts survive
# between calls while the machine stays warm). Copies every part to $OUT.
set -euo pipefail
seed=$1; secs=$2; start=${3:-0}
D=.carry/run; mkdir -p "$D"
first=$(python - "$D" "$start" <<'PY'
import glob, json, sys
done = int(sys.argv[2])
for f in sorted(glob.glob(sys.argv[1] + "/part-*.msgpack.stats.json")):
    done = max(done, max(p["index"] for p in json.load(open(f))["problems"]) + 1)
print(done)
PY
)
echo "resuming seed $seed at problem $first for $secs s"
if [ "$first" -lt 50 ]; then
  PYTHONUNBUFFERED=1 python bench/collector_throughput.py --n 50 --seed "$seed" --first "$first" \
    --out "$D/part-$(printf %02d "$first").msgpack" --deadline-s "$secs" --inductor-timeout 0 2>&1 \
    | grep -v "UserWarning\|warn_once" | tee "$D/log-$first.txt" | grep -v "^  WARNING" | tail -25
fi
cp "$D/part-$(printf %02d "$first")".* "$D/log-$first.txt" "$OUT"/ 2>/dev/null || true
