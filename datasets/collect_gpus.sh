#!/usr/bin/env bash
# Grow datasets on every GPU of one machine at once: one datasets/collect.sh per seed, the
# i-th seed on GPU i (CUDA_VISIBLE_DEVICES), each with an equal share of the CPU cores for
# its compile processes. The collector is bound by Triton compiling (most of a problem's
# wall on a fresh machine), and a 2- or 4-GPU machine (nvidia-h100-x2/-x4, nvidia-h200-x2/-x4)
# has 16 cores per GPU like the one-GPU kinds, so N GPUs collect N seeds in the time of one.
#
#   bash datasets/collect_gpus.sh N SECONDS MIX SEED [SEED ...]
#   bash datasets/collect_gpus.sh 200 480 dataset2 2026112518 2026112520
#
# N problems per seed, SECONDS and MIX as in datasets/collect.sh (which resumes each seed
# where it stopped). One seed per GPU, at most as many as there are GPUs, never the same seed
# twice. What comes back in $OUT/SEED/ is collect.sh's, mirrored while it runs; with 3 or 4
# seeds each part alone (the device returns at most 8 files; the part holds every problem's
# wall time). Each seed's full log stays in .carry/collect_gpus-SEED.log and its sidecar in
# .carry/collect-SEED/; the log's tail is printed at the end.
#
# DIODE_SKIP_GPUS=K leaves the first K GPUs (and K shares of the cores) to other work of the
# same device call, e.g. a benchmark on GPU 0 (pinned to GPU 0's share of the cores; the
# collectors are pinned to the cores above it) while GPUs 1-3 collect:
#   CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 python bench/pick_retime.py ... &
#   DIODE_SKIP_GPUS=1 bash datasets/collect_gpus.sh 200 480 dataset2 S1 S2 S3; wait
# The files that other work writes to $OUT count against the device's 8 too
# (DIODE_OUT_MINIMAL=1: only the parts come back, whatever the number of seeds).
set -euo pipefail
if (($# < 4)); then
  echo "usage: bash datasets/collect_gpus.sh N SECONDS MIX SEED [SEED ...]" >&2
  exit 2
fi
n=$1; secs=$2; mix=$3; shift 3
seeds=("$@")
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -c .)
skip=${DIODE_SKIP_GPUS:-0}
if ! [[ $skip =~ ^[0-9]+$ ]] || ((skip >= gpus)); then
  echo "collect_gpus: DIODE_SKIP_GPUS=$skip must be a whole number below the $gpus GPUs" >&2
  exit 2
fi
if ((${#seeds[@]} > gpus - skip)); then
  echo "collect_gpus: ${#seeds[@]} seeds but $gpus GPUs ($skip left to other work): one seed per GPU" >&2
  exit 2
fi
if [ "$(printf '%s\n' "${seeds[@]}" | sort | uniq -d)" ]; then
  echo "collect_gpus: a seed is given twice (two collectors would write the same parts)" >&2
  exit 2
fi
if ((${#seeds[@]} > 4)); then
  echo "collect_gpus: at most 4 seeds (the device returns at most 8 files)" >&2
  exit 2
fi
# Each GPU's share of the cores (a skipped GPU's work counts as one more collector); a
# collector's compile workers leave one core of its share to the collector itself.
share=$(( $(nproc) / (${#seeds[@]} + skip) ))
workers=$((share - 1))
((workers >= 1)) || workers=1
# Only the parts come back with 3 or 4 seeds, or when DIODE_OUT_MINIMAL=1 asks (other work of
# the same call needs its share of the device's 8 files).
minimal=${DIODE_OUT_MINIMAL:-0}
((${#seeds[@]} <= 2)) || minimal=1
# With GPUs left to other work the collectors run on the cores above those GPUs' shares
# (from the (skip*share)-th core on), so a benchmark pinned to its own share (taskset -c 0-15
# for GPU 0 of a 64-core x4) times its compiles without the collectors' compile processes
# beside it.
# The cores are this process's own (its affinity, which need not start at core 0).
pin=()
if ((skip > 0)) && command -v taskset > /dev/null; then
  read -ra cores <<< "$(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))')"
  pin=(taskset -c "$(IFS=,; echo "${cores[*]:skip * share}")")
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p .carry
echo "collect_gpus: ${#seeds[@]} seeds on GPUs $skip-$((skip + ${#seeds[@]} - 1)) of $gpus, $workers compile workers each, $secs s, mix $mix${pin:+, ${pin[*]}}"
pids=()
for i in "${!seeds[@]}"; do
  CUDA_VISIBLE_DEVICES=$((skip + i)) DIODE_COMPILE_WORKERS=$workers DIODE_OUT_MINIMAL=$minimal \
    "${pin[@]}" bash "$here/collect.sh" "${seeds[$i]}" "$n" "$secs" "$mix" > ".carry/collect_gpus-${seeds[$i]}.log" 2>&1 &
  pids+=($!)
done
rc=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "collect_gpus: seed ${seeds[$i]} (GPU $((skip + i))): collect.sh failed" >&2
    rc=1
  fi
done
for i in "${!seeds[@]}"; do
  echo "== seed ${seeds[$i]} on GPU $((skip + i))"
  tail -12 ".carry/collect_gpus-${seeds[$i]}.log"
done
exit $rc
