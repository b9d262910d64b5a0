#!/usr/bin/env bash
# A development tool: new datasets come through the fleet (bench/fleet_gpu.sh with a
# manifest; datasets/README.md). Grow a dataset on the GPU machine without it: the dataset mix (torch_diode.collect.sample --mix
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
#   DIODE_MODEL_TOP=0 bash datasets/collect.sh 2026112530 200 540 dataset2   # without the shipped model's top 10 (timing.model_top)
set -euo pipefail
seed=$1; n=$2; secs=$3; mix=${4:-dataset}
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TORCH_DIODE_AUTO_INSTALL=0
D=.carry/collect-$seed; mkdir -p "$D"
spec=$D/spec.json
# timing.model_top (collector 2.6.0): a newly drawn spec also times the N configs that the
# package's shipped model for this GPU predicts fastest as static kernels, so the model's
# likely picks get a record of the kernel Inductor compiles (docs/collector.md). On by
# default (N = 10) because on the H200 it took H200 version 3's test top-1 from
# 1.039 to 1.030 on the same 105 problems, at no collection cost that stood out of the mix's
# spread (datasets/README). DIODE_MODEL_TOP=N sets N, 0 turns it off. Where the package
# ships no model for the GPU the default draws the spec without it (and says so); an
# explicit N stops instead. A spec already on the machine is kept as it is.
top=${DIODE_MODEL_TOP-10}
model_args=()
if [ ! -f "$spec" ] && [ "$top" != 0 ]; then
  model=$(python -c 'from torch_diode.hook import sources
from torch_diode.hook.api import get_detected_hardware
key = get_detected_hardware().get("hardware_key")
c = sources.shipped_bundle(key) if key else None
print(key or "")
print(c.path if c else "")')
  model_key=$(sed -n 1p <<<"$model"); model_dir=$(sed -n 2p <<<"$model")
  if [ -z "$model_dir" ] && [ -n "${DIODE_MODEL_TOP+set}" ]; then
    echo "DIODE_MODEL_TOP=$DIODE_MODEL_TOP: the package ships no model for this GPU (hardware key '${model_key:-unknown}')" >&2
    exit 2
  elif [ -z "$model_dir" ]; then
    echo "seed $seed: the package ships no model for this GPU (hardware key '${model_key:-unknown}'): the spec is drawn without timing.model_top"
  else
    echo "seed $seed: timing.model_top $top with $model_dir"
    model_args=(--model-top "$top" --model "$model_dir")
  fi
fi
[ -f "$spec" ] || python -m torch_diode.collect.sample --n "$n" --seed "$seed" --mix "$mix" \
  --shard-id "dataset-mix${mix#dataset}/$seed" "${model_args[@]}" --out "$spec"
# Resume after the last problem collected: in this machine's parts (.carry survives while
# it stays warm) or in the files committed under datasets/ (named ...-SEED-pFIRST-LAST),
# so a fresh machine does not collect a committed problem again.
first=$(python -m torch_diode.collect.committed resume "$D" "$seed")
echo "seed $seed: problems $first.. of $n for $secs s on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
if [ "$first" -ge "$n" ]; then echo "all $n problems collected"; exit 0; fi
part=$D/part-$(printf %03d "$first").msgpack
dest="${OUT:?set OUT to the folder that comes back from the device}/$seed"
mkdir -p "$dest"
# DIODE_OUT_MINIMAL=1 (datasets/collect_gpus.sh with 3 or 4 seeds): only the part comes
# back, as the device returns at most 8 files; the spec is the seed's to redraw, and the
# part holds every problem's wall time.
minimal=${DIODE_OUT_MINIMAL:-0}
[ "$minimal" = 1 ] || cp "$spec" "$dest"/
# Mirror the part into $OUT while the collector runs. The collector rewrites the part
# (atomically) after every problem, but a device call killed at its time limit never
# reaches a copy made at the end, and its problems would be lost with the machine. Each
# file goes through a temporary name (a killed copy leaves no torn file under the real
# name). The collector writes the stats sidecar, then the part: a pair is copied only when
# the part is the newer and neither changed during the copy, and the part is put in place
# first, so the sidecar in $OUT never lists a problem that its part lacks.
mirror() {
  python - "$part" "$D/log-$first.txt" "$dest" "$minimal" <<'PY'
import os, shutil, sys
part, log, dest, minimal = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
side = part + ".stats.json"


def copy(src):  # copy2 keeps the mtime, by which current() knows an unchanged file
    tmp = os.path.join(dest, os.path.basename(src) + ".copying")
    shutil.copy2(src, tmp)
    return tmp


def current(src):  # already in $OUT as it is now: nothing to copy on this pass
    dst = os.path.join(dest, os.path.basename(src))
    if not os.path.exists(dst):
        return False
    a, b = os.stat(src), os.stat(dst)
    return (a.st_mtime_ns, a.st_size) == (b.st_mtime_ns, b.st_size)


def place(tmp):
    os.replace(tmp, tmp[:-len(".copying")])


def stamp():
    return [(os.stat(f).st_mtime_ns, os.stat(f).st_size) for f in (side, part)]


if os.path.exists(part):
    if minimal:
        if not current(part):
            place(copy(part))
    elif os.path.exists(side) and not (current(part) and current(side)):
        before = stamp()
        if before[1][0] >= before[0][0]:  # the part is the newer: the collector is not between the two
            tp, ts = copy(part), copy(side)
            if stamp() == before:
                place(tp)
                place(ts)
            else:  # rewritten while copying: the next pass takes it
                os.remove(tp)
                os.remove(ts)
if not minimal and os.path.exists(log) and not current(log):
    place(copy(log))
PY
}
# DIODE_COLLECTOR replaces the collector command (tests/python/test_collect_script.py);
# DIODE_COMPILE_WORKERS sets its compile processes (default: cores - 1), for several
# collectors on one machine (datasets/collect_gpus.sh).
workers=()
[ -n "${DIODE_COMPILE_WORKERS:-}" ] && workers=(--compile-workers "$DIODE_COMPILE_WORKERS")
( ${DIODE_COLLECTOR:-python -m torch_diode.collect} --spec "$spec" --first "$first" --deadline-s "$secs" --out "$part" ${workers[@]+"${workers[@]}"} 2>&1 \
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
