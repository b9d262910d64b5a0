#!/usr/bin/env bash
# Grow datasets on every GPU of one machine at once: one datasets/collect.sh per seed, the
# i-th seed on GPU i (CUDA_VISIBLE_DEVICES), each with an equal share of the CPU cores for
# its compile processes. The collector is bound by Triton compiling (most of a problem's
# wall on a fresh machine), and a 2- or 4-GPU machine (nvidia-h100-x2/-x4, nvidia-h200-x2/-x4)
# has 16 cores per GPU like the one-GPU kinds, so N GPUs collect N seeds in the time of one.
#
#   bash datasets/collect_gpus.sh N SECONDS MIX SLOT [SLOT ...]
#   bash datasets/collect_gpus.sh 200 480 dataset2 2026112518 2026112520
#   bash datasets/collect_gpus.sh 200 470 dataset2 2026112611+2026112530 2026112612+2026112531
#
# A SLOT is one seed, or seeds joined by '+' that run one after another on the slot's GPU
# within the same SECONDS: the next starts with the time the previous left (when at least
# 60 s), so a GPU that finishes a short re-collection goes on with a new seed instead of
# idling for the rest of the call.
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
#   CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 python bench/pick_retime.py (script removed; git history) ... &
#   DIODE_SKIP_GPUS=1 bash datasets/collect_gpus.sh 200 480 dataset2 S1 S2 S3; wait
# The files that other work writes to $OUT count against the device's 8 too
# (DIODE_OUT_MINIMAL=1: only the parts come back, whatever the number of seeds).
set -euo pipefail
if (($# < 4)); then
  echo "usage: bash datasets/collect_gpus.sh N SECONDS MIX SLOT [SLOT ...]  (SLOT: SEED or SEED+SEED...)" >&2
  exit 2
fi
n=$1; secs=$2; mix=$3; shift 3
slots=("$@")   # one per GPU
seeds=()       # every seed of every slot
for slot in "${slots[@]}"; do
  if ! [[ $slot =~ ^[0-9]+(\+[0-9]+)*$ ]]; then
    echo "collect_gpus: '$slot' is not a seed or seeds joined by '+'" >&2
    exit 2
  fi
  IFS=+ read -ra chain <<< "$slot"
  seeds+=("${chain[@]}")
done
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -c .)
skip=${DIODE_SKIP_GPUS:-0}
if ! [[ $skip =~ ^[0-9]+$ ]] || ((skip >= gpus)); then
  echo "collect_gpus: DIODE_SKIP_GPUS=$skip must be a whole number below the $gpus GPUs" >&2
  exit 2
fi
if ((${#slots[@]} > gpus - skip)); then
  echo "collect_gpus: ${#slots[@]} seeds but $gpus GPUs ($skip left to other work): one seed (or '+' chain) per GPU" >&2
  exit 2
fi
if [ "$(printf '%s\n' "${seeds[@]}" | sort | uniq -d)" ]; then
  echo "collect_gpus: a seed is given twice (two collectors would write the same parts)" >&2
  exit 2
fi
if ((${#slots[@]} > 4)); then
  echo "collect_gpus: at most 4 seeds, one per GPU (the device returns at most 8 files)" >&2
  exit 2
fi
if ((${#seeds[@]} > 8)); then
  echo "collect_gpus: ${#seeds[@]} seeds in all, at most 8 (one part each comes back; the device returns at most 8 files)" >&2
  exit 2
fi
# Each GPU's share of the cores (a skipped GPU's work counts as one more collector); a
# collector's compile workers leave one core of its share to the collector itself.
share=$(( $(nproc) / (${#slots[@]} + skip) ))
workers=$((share - 1))
((workers >= 1)) || workers=1
# Only the parts come back with 3 or more seeds (chained ones included), or when
# DIODE_OUT_MINIMAL=1 asks (other work of the same call needs its share of the device's 8 files).
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
echo "collect_gpus: ${#seeds[@]} seeds on GPUs $skip-$((skip + ${#slots[@]} - 1)) of $gpus, $workers compile workers each, $secs s, mix $mix${pin:+, ${pin[*]}}"
# One slot: its seeds one after another, each with the seconds the ones before it left.
run_slot() {
  local gpu=$1 slot=$2 start=$SECONDS left seed chain rc=0
  IFS=+ read -ra chain <<< "$slot"
  for seed in "${chain[@]}"; do
    left=$((secs - (SECONDS - start)))
    if ((seed != chain[0] && left < 60)); then
      echo "collect_gpus: seed $seed (GPU $gpu) not started: $left s left of $secs" | tee ".carry/collect_gpus-$seed.log" >&2
      continue
    fi
    CUDA_VISIBLE_DEVICES=$gpu DIODE_COMPILE_WORKERS=$workers DIODE_OUT_MINIMAL=$minimal \
      ${pin[@]+"${pin[@]}"} bash "$here/collect.sh" "$seed" "$n" "$left" "$mix" > ".carry/collect_gpus-$seed.log" 2>&1 || {
      echo "collect_gpus: seed $seed (GPU $gpu): collect.sh failed" >&2
      rc=1
    }
  done
  return $rc
}
pids=()
for i in "${!slots[@]}"; do
  run_slot $((skip + i)) "${slots[$i]}" &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do
  wait "$pid" || rc=1
done
for i in "${!slots[@]}"; do
  IFS=+ read -ra chain <<< "${slots[$i]}"
  for seed in "${chain[@]}"; do
    echo "== seed $seed on GPU $((skip + i))"
    tail -12 ".carry/collect_gpus-$seed.log"
  done
done
exit $rc
