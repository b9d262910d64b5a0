#!/usr/bin/env bash
# Trainer scaling benchmark (issue 6): the same training run at np=1 and np=2,
# side by side: median epoch time (first epoch excluded as warm-up), samples/s,
# scaling efficiency = T(np=1) / (2 * T(np=2)); then the time to rank one
# problem's full EXHAUSTIVE config list with the C++ model on one core.
#
#   bench/train_scaling.sh [BUILD_DIR] [DATA]     (defaults: build-models, synthetic)
# DATA may be a real dataset directory; its hardware key is read from the run.
set -euo pipefail
build=${1:-build-models}
data=${2:-}
epochs=${EPOCHS:-8}
hidden=${HIDDEN:-64}
blocks=${BLOCKS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One rank per core. (mpi_yield_when_idle was tried: it only helps when other
# work shares the cores, and costs ~4 ms per allreduce wake-up otherwise.)
mpirun=(mpirun --oversubscribe --allow-run-as-root --bind-to core)
hw=nvidia-h100-80gb
if [[ -z "$data" ]]; then
  data="$work/data"
  "$build/models/diode-synth-data" --out "$data/train.msgpack.gz" --problems ${PROBLEMS:-400} \
    --config-stride ${STRIDE:-3} --seed 7 >/dev/null
else
  hw=${HARDWARE:?set HARDWARE=<hardware key> for a real dataset}
fi
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "run: diode-train --epochs $epochs --hidden $hidden --blocks $blocks --loss listwise (synthetic unless DATA given)"
# Median over epochs 2.. (robust to other jobs on a shared machine) of: epoch
# seconds, samples/s, allreduce seconds.
summary() {
  awk '/^epoch / { if (n++ == 0) next
    for (i = 1; i <= NF; ++i) { if ($i == "samples/s") r[n] = $(i+1); if ($i == "allreduce") c[n] = $(i+1)
                                if ($i == "s,") s[n] = substr($(i-1), 2) } }
  function med(a,   k, m, v, t, i, j) { m = 0; for (k in a) v[++m] = a[k] + 0
    for (i = 2; i <= m; ++i) for (j = i; j > 1 && v[j-1] > v[j]; --j) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
    return m % 2 ? v[(m+1)/2] : (v[m/2] + v[m/2+1]) / 2 }
  END { printf "%.3f %.0f %.4f", med(s), med(r), med(c) }' "$1"
}
for np in 1 2; do
  # CPU seconds of all ranks too: on a busy machine wall time says little about scaling.
  /usr/bin/time -f "%U %S" -o "$work/cpu$np" "${mpirun[@]}" -np $np "$build/models/diode-train" --hardware "$hw" \
    --data "$data" --out "$work/model$np" --epochs "$epochs" --hidden "$hidden" --blocks "$blocks" --seed 1 \
    > "$work/np$np.log"
  grep -E "^(diode-train|epoch)" "$work/np$np.log" | sed "s/^/  np=$np  /"
done
read -r t1 r1 c1 <<<"$(summary "$work/np1.log")"
read -r t2 r2 c2 <<<"$(summary "$work/np2.log")"
printf "\n%-6s %14s %12s %16s\n" ranks "epoch_s(median)" samples/s "allreduce_s/epoch"
printf "%-6s %14s %12s %16s\n" 1 "$t1" "$r1" "$c1" 2 "$t2" "$r2" "$c2"
awk -v a="$t1" -v b="$t2" 'BEGIN { printf "scaling efficiency np=2 (wall): %.1f%%  (speed-up %.2fx)\n", 100*a/(2*b), a/b }'
read -r u1 s1 < "$work/cpu1"; read -r u2 s2 < "$work/cpu2"
awk -v a="$u1" -v b="$s1" -v c="$u2" -v d="$s2" 'BEGIN { printf "CPU seconds, whole run: np=1 %.2f, np=2 %.2f (all ranks); work efficiency %.1f%%\n", a+b, c+d, 100*(a+b)/(c+d) }'

# Ranking latency: full EXHAUSTIVE lists (stride 1), one core, C++ forward.
"$build/models/diode-synth-data" --out "$work/full.msgpack.gz" --problems 40 --config-stride 1 --seed 99 >/dev/null
if [[ "$hw" == nvidia-h100-80gb ]]; then
  taskset -c 0 "$build/cli/diode" validate --model "$work/model1" --dataset "$work/full.msgpack.gz" --split all \
    | sed -n 's/.*records \([0-9]*\).*rank \([0-9.]*\) ms.*/rank one problem (full EXHAUSTIVE list, 40 problems, \1 records): \2 ms, 1 core/p'
fi
