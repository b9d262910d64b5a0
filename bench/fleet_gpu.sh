#!/usr/bin/env bash
# The shell driver of bench/fleet_gpu.py, in two steps (bench/README.md):
#
#   bash bench/fleet_gpu.sh carry build .carry/fleet-bin
#     Here: pack the fleet binaries for a GPU machine that has none of the Debian packages:
#     stripped diode, diode-hub, diode-coordinator, diode-agent into DEST/bin and every shared
#     library they load (except the C/C++ runtime, which the target has in a newer version)
#     into DEST/lib.
#
#   bash bench/fleet_gpu.sh .carry/fleet-bin manifests/h100-mix-2026112505.yaml 520
#   bash bench/fleet_gpu.sh .carry/fleet-bin manifests/a.yaml,manifests/b.yaml 520
#     On the GPU machine: run bench/fleet_gpu.py with the binaries packed by `carry`, giving
#     them only the shared libraries this system lacks (on LD_LIBRARY_PATH). Several
#     manifests: comma-separated.
set -euo pipefail
if [[ ${1:-} == carry ]]; then
  build=$2; dest=$3
  rm -rf "$dest"; mkdir -p "$dest/bin" "$dest/lib"
  for b in cli/diode hub/diode-hub coordinator/diode-coordinator agent/diode-agent; do
    strip -o "$dest/bin/$(basename "$b")" "$build/$b"
  done
  skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libstdc\+\+|libgcc_s)'
  for b in "$dest"/bin/*; do ldd "$b"; done | awk '$3 ~ /^\// {print $1, $3}' | sort -u | while read -r name path; do
    if ! [[ $name =~ $skip ]]; then cp -L "$path" "$dest/lib/$name"; fi
  done
  du -sh "$dest"/bin "$dest"/lib
  exit 0
fi
pack=$1; manifest=$2; secs=$3
need=$(mktemp -d)
for f in "$pack"/lib/*; do
  n=$(basename "$f")
  ldconfig -p | grep -q "^\s*$n " || ln -s "$(readlink -f "$f")" "$need/$n"
done
echo "carried libraries used: $(ls "$need" | tr '\n' ' ')"
export LD_LIBRARY_PATH=$need${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for b in "$pack"/bin/*; do ldd "$b" | grep "not found" && { echo "missing libraries for $b"; exit 1; }; done
margs=(); IFS=, read -ra ms <<< "$manifest"; for m in "${ms[@]}"; do margs+=(--manifest "$m"); done
python bench/fleet_gpu.py --bin "$pack/bin" "${margs[@]}" --work .carry/fleet-work \
  --deadline-s "$secs" --out "$OUT"
