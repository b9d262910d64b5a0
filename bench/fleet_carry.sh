#!/usr/bin/env bash
# Pack the fleet binaries for a GPU machine that has none of the Debian packages:
# stripped diode, diode-hub, diode-coordinator, diode-agent into $2/bin and every shared
# library they load (except the C/C++ runtime, which the target has in a newer version)
# into $2/lib. On the target, bench/fleet_gpu.sh puts only the libraries the system
# lacks on LD_LIBRARY_PATH.
#   bash bench/fleet_carry.sh build .carry/fleet-bin
set -euo pipefail
build=$1; dest=$2
rm -rf "$dest"; mkdir -p "$dest/bin" "$dest/lib"
for b in cli/diode hub/diode-hub coordinator/diode-coordinator agent/diode-agent; do
  strip -o "$dest/bin/$(basename "$b")" "$build/$b"
done
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libstdc\+\+|libgcc_s)'
for b in "$dest"/bin/*; do ldd "$b"; done | awk '$3 ~ /^\// {print $1, $3}' | sort -u | while read -r name path; do
  if ! [[ $name =~ $skip ]]; then cp -L "$path" "$dest/lib/$name"; fi
done
du -sh "$dest"/bin "$dest"/lib
