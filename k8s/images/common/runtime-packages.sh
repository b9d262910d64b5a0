#!/usr/bin/env bash
# runtime-packages.sh BINARY...: print the Debian/Ubuntu packages that own the
# shared libraries the binaries load (ldd lists them transitively). The build
# stage of each image writes this list; the runtime stage installs exactly it,
# so the runtime image never lags behind the build's link line.
# Libraries no package owns (LibTorch from the torch wheel) are skipped: the
# trainer image copies those itself.
set -euo pipefail
for b in "$@"; do ldd "$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
while read -r lib; do
  real=$(realpath "$lib")
  # merged /usr: dpkg may record the /lib path or the /usr/lib one.
  for p in "$lib" "$real" "${real#/usr}"; do
    if owner=$(dpkg -S "$p" 2>/dev/null); then echo "${owner%%:*}"; break; fi
  done
done | sort -u
