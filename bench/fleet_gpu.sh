#!/usr/bin/env bash
# On the GPU machine: run bench/fleet_gpu.py with the binaries packed by
# bench/fleet_carry.sh ($1), giving them only the shared libraries this system lacks.
#   bash bench/fleet_gpu.sh .carry/fleet-bin manifests/h100-mix-2026112505.yaml 520
set -euo pipefail
pack=$1; manifest=$2; secs=$3
need=$(mktemp -d)
for f in "$pack"/lib/*; do
  n=$(basename "$f")
  ldconfig -p | grep -q "^\s*$n " || ln -s "$(readlink -f "$f")" "$need/$n"
done
echo "carried libraries used: $(ls "$need" | tr '\n' ' ')"
export LD_LIBRARY_PATH=$need${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for b in "$pack"/bin/*; do ldd "$b" | grep "not found" && { echo "missing libraries for $b"; exit 1; }; done
python bench/fleet_gpu.py --bin "$pack/bin" --manifest "$manifest" --work .carry/fleet-work \
  --deadline-s "$secs" --out "$OUT"
