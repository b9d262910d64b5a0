#!/usr/bin/env bash
# synthetic dataset -> 2-rank training -> `diode validate` with a report; then
# the error paths users hit first (wrong hardware, empty data, bad flags).
set -euo pipefail
synth=$1 train=$2 diode=$3 mpirun=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi=("$mpirun" -np 2 --oversubscribe --allow-run-as-root --bind-to none)

"$synth" --out "$work/data/a.msgpack.gz" --problems 120 --config-stride 8 --seed 3
"${mpi[@]}" "$train" --hardware nvidia-h100-80gb --data "$work/data" --out "$work/model" \
  --epochs 3 --hidden 32 --blocks 1 --seed 2 | tee "$work/train.log"
grep -q "^epoch 3/3 " "$work/train.log"
grep -q "identical on all 2 ranks" "$work/train.log"
test -s "$work/model/model.json" && test -s "$work/model/weights.msgpack"
grep -q '"regret"' "$work/model/model.json"
# provenance: the shards' torch and Triton versions (synthetic: 2.13.0, 3.6.0; docs/model-format.md)
python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["provenance"]; assert p=={"torch_versions":["2.13.0"],"triton_versions":["3.6.0"]}, p' "$work/model/model.json"

"$diode" validate --model "$work/model" --dataset "$work/data" --report "$work/report" | tee "$work/validate.log"
grep -q "Inductor DEFAULT" "$work/validate.log"
# One top-1 figure, labelled (the Triton-only view's "model top-1" row is diode-train's, not validate's).
test "$(grep -c '^top-1 regret (geomean over [0-9]* problems): [0-9.]*' "$work/validate.log")" = 1
! grep -q "model top-1 " "$work/validate.log"
for f in index.html summary.json regret_cdf.svg; do
  test -s "$work/report/$f" || { echo "missing $f"; exit 1; }
done
grep -q '<svg class="plot"' "$work/report/index.html"
! grep -q "<img" "$work/report/index.html"

# Same seed and rank count -> same weights.
"${mpi[@]}" "$train" --hardware nvidia-h100-80gb --data "$work/data" --out "$work/model2" \
  --epochs 3 --hidden 32 --blocks 1 --seed 2 --quiet
cmp "$work/model/weights.msgpack" "$work/model2/weights.msgpack"

# Another hardware's data of the same SM count (--extra-data): trained on, never judged.
"$synth" --out "$work/h200/a.msgpack.gz" --problems 80 --config-stride 8 --seed 4 \
  --device-name "NVIDIA H200" --memory-mib 143771 | tee "$work/synth2.log"
grep -q "hardware nvidia-h200-" "$work/synth2.log"
"${mpi[@]}" "$train" --hardware nvidia-h100-80gb --data "$work/data" --out "$work/model3" \
  --epochs 3 --hidden 32 --blocks 1 --seed 2 --extra-data "$work/h200" | tee "$work/train3.log"
# The start line counts the own problems and records, then the extra ones, the same way.
test "$(grep -o '^diode-train: [0-9]* problems, [0-9]* records' "$work/train3.log")" = \
     "$(grep -o '^diode-train: [0-9]* problems, [0-9]* records' "$work/train.log")"
extra_records=$(sed -n 's/.*: 80 problems, \([0-9]*\) records.*/\1/p' "$work/synth2.log")
test -n "$extra_records"
grep -q "; + 80 problems, $extra_records records of 1 --extra-data set" "$work/train3.log"
grep -q '"extra"' "$work/model3/model.json"
grep -q 'nvidia-h200-144gb' "$work/model3/model.json"
# The validation problems are --data's alone: the same count as without it.
test "$(grep -o '^validation ([0-9]* problems' "$work/train3.log")" = \
     "$(grep -o '^validation ([0-9]* problems' "$work/train.log")"

# Errors are clear and non-zero.
expect_fail() { if "$@" >"$work/err.log" 2>&1; then echo "expected failure: $*"; exit 1; fi; cat "$work/err.log"; }

# An ensemble, and a pre-filter joined to it later (as to a shipped ensemble) or at once: the same model.
"${mpi[@]}" "$train" --hardware nvidia-h100-80gb --data "$work/data" --out "$work/pf" \
  --epochs 2 --hidden 8 --blocks 0 --seed 5 --quiet
"$diode" ensemble --member "$work/model" --member "$work/model2" --cascade 8 --out "$work/ens"
"$diode" ensemble --member "$work/ens" --prefilter "$work/pf" --keep 16 --out "$work/ens_pf" | tee "$work/ens.log"
grep -q "ensemble of 2 members (cascade 8, pre-filter" "$work/ens.log"
"$diode" ensemble --member "$work/model" --member "$work/model2" --cascade 8 --prefilter "$work/pf" --keep 16 \
  --out "$work/ens_pf2"
cmp "$work/ens_pf/weights.msgpack" "$work/ens_pf2/weights.msgpack"
grep -q '"prefilter"' "$work/ens_pf/model.json"
expect_fail "$diode" ensemble --member "$work/ens" --out "$work/x"
grep -q "already an ensemble: give --prefilter" "$work/err.log"
expect_fail "$diode" ensemble --member "$work/ens" --cascade 4 --prefilter "$work/pf" --keep 16 --out "$work/x"
grep -q "kept as it is" "$work/err.log"
expect_fail "$diode" ensemble --member "$work/ens_pf" --prefilter "$work/pf" --keep 16 --out "$work/x"
grep -q "already has a pre-filter" "$work/err.log"
expect_fail "$diode" ensemble --member "$work/model" --prefilter "$work/pf" --keep 16 --out "$work/x"
grep -q "2 to" "$work/err.log"
expect_fail "$train" --hardware nvidia-a100-sxm4-80gb --data "$work/data" --out "$work/x"
grep -q "dataset is for hardware 'nvidia-h100-80gb'" "$work/err.log"
mkdir -p "$work/empty"
expect_fail "$train" --hardware nvidia-h100-80gb --data "$work/empty" --out "$work/x"
grep -q "empty: dataset has no shards" "$work/err.log"
expect_fail "$train" --hardware nvidia-h100-80gb --data "$work/data" --out "$work/x" --extra-data "$work/empty"
grep -q "empty: dataset has no shards" "$work/err.log"
expect_fail "$train" --hardware nvidia-h100-80gb --data "$work/data" --out "$work/x" --loss hinge
expect_fail "$diode" validate --model "$work/nothing" --dataset "$work/data"
expect_fail "$train" --hardware nvidia-h100-80gb --data "$work/data" --out "$work/x" --extra-data "$work/data"
grep -q "own data" "$work/err.log"
"$synth" --out "$work/sm100/a.msgpack.gz" --problems 20 --config-stride 8 --device-name "NVIDIA H200" \
  --memory-mib 143771 --sm-count 100
expect_fail "$train" --hardware nvidia-h100-80gb --data "$work/data" --out "$work/x" --extra-data "$work/sm100"
grep -q "100 SMs" "$work/err.log"
echo "end to end OK"
