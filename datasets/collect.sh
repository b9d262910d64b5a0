#!/usr/bin/env bash
# Grow a dataset on the GPU machine: the dataset mix (torch_diode.collect.sample --mix
# $4, default dataset: nn.Linear layouts, decode M 1-16, attention bmm, a tenth fp32 with
# TF32; dataset2 adds the layer shapes of common models, more M = 1, batches up to 128) of
# seed $1, $2 problems, collected by engine v2 for at most $3 seconds, resuming after the
# parts already in .carry/collect-$1 (they survive between calls while the machine stays
# warm) or after the seed's files committed under datasets/. Keeps the new part, its .stats.json sidecar
# and its log mirrored in $OUT/SEED/ every 5 s while it runs, so a call killed at its limit
# still brings back every finished problem (one folder per seed, so one device call can chain seeds:
# `bash datasets/collect.sh 2026112512 200 40 dataset2; bash datasets/collect.sh 2026112519 200 95 dataset2`
# finishes one seed and starts the next). Seeds up to 2026112509 were drawn with --mix dataset: resume them
# with it (the default); new seeds use dataset2.
#   bash datasets/collect.sh 2026112504 200 540
#   bash datasets/collect.sh 2026112510 200 540 dataset2
set -euo pipefail
seed=$1; n=$2; secs=$3; mix=${4:-dataset}
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TORCH_DIODE_AUTO_INSTALL=0
D=.carry/collect-$seed; mkdir -p "$D"
spec=$D/spec.json
[ -f "$spec" ] || python -m torch_diode.collect.sample --n "$n" --seed "$seed" --mix "$mix" \
  --shard-id "dataset-mix${mix#dataset}/$seed" --out "$spec"
# Resume after the last problem collected: in this machine's parts (.carry survives while
# it stays warm) or in the files committed under datasets/ (named ...-SEED-pFIRST-LAST),
# so a fresh machine does not collect a committed problem again.
first=$(python - "$D" "$seed" <<'PY'
import glob, json, re, sys
done = 0
for f in sorted(glob.glob(sys.argv[1] + "/part-*.msgpack.stats.json")):
    idx = [p["index"] for p in json.load(open(f))["problems"]]
    done = max([done] + [i + 1 for i in idx])
for f in glob.glob("datasets/*/*-" + sys.argv[2] + "-p*.msgpack.gz"):
    m = re.search(r"-" + sys.argv[2] + r"-p(\d+)-(\d+)\.msgpack\.gz$", f)
    if m:
        done = max(done, int(m.group(2)) + 1)
print(done)
PY
)
echo "seed $seed: problems $first.. of $n for $secs s on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
if [ "$first" -ge "$n" ]; then echo "all $n problems collected"; exit 0; fi
part=$D/part-$(printf %03d "$first").msgpack
dest="${OUT:?set OUT to the folder that comes back from the device}/$seed"
mkdir -p "$dest"
cp "$spec" "$dest"/
# Mirror the part into $OUT while the collector runs. The collector rewrites the part
# (atomically) after every problem, but a device call killed at its time limit never
# reaches a copy made at the end, and its problems would be lost with the machine. The
# stats sidecar is copied before the part (each through a temporary name), so a killed
# run's $OUT never lists a problem its part lacks; name a rescued part from its own
# problem count (`diode dataset stats FILE`), which may be one more than the sidecar's.
mirror() {
  local f
  for f in "$part.stats.json" "$part" "$D/log-$first.txt"; do
    [ -f "$f" ] || continue
    cp "$f" "$dest/$(basename "$f").copying" && mv "$dest/$(basename "$f").copying" "$dest/$(basename "$f")"
  done
}
# DIODE_COLLECTOR replaces the collector command (tests/python/test_collect_script.py).
( ${DIODE_COLLECTOR:-python -m torch_diode.collect} --spec "$spec" --first "$first" --deadline-s "$secs" --out "$part" 2>&1 \
  | grep -v "UserWarning\|warn_once" > "$D/log-$first.txt" ) &
pid=$!
while kill -0 "$pid" 2>/dev/null; do sleep "${DIODE_MIRROR_S:-5}"; mirror; done
wait "$pid" || echo "collector exit $?"
mirror
tail -15 "$D/log-$first.txt"
# Where the seconds went (lowering, compile wait, timing, the static-shape re-time of 2.2.0).
python bench/collector_throughput.py --breakdown "$part.stats.json" || true
# What a fresh machine recompiles (the cold-cache cost, ~50 s per problem): the sizes of the
# collector's rendered kernels and of Triton's compiled cache, to judge carrying them over.
du -sh "${TORCH_DIODE_KERNEL_DIR:-$HOME/.cache/torch_diode/kernels}" "${TRITON_CACHE_DIR:-$HOME/.triton/cache}" 2>/dev/null \
  | sed 's/^/cache: /' || true
ls -la "$dest"
