#!/bin/sh
# Regenerates the signed example registry under tests/data/bundles/ with fresh
# throw-away test keys. Only the root public key (test-root.pub / root.pub) is
# kept; the private keys are deleted, so nobody can sign with this root again.
#   usage: tests/data/bundles/regenerate.sh [path/to/diode]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
diode=${1:-"$here/../../../build-bundle/cli/diode"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$diode" keys --keys "$work/keys" init --expires-days 3650 >/dev/null
"$diode" models example --out "$work/model" --hardware nvidia-h100-80gb --hidden 8 --blocks 1 >/dev/null
rm -rf "$here/registry"
"$diode" publish --model "$work/model" --registry "$here/registry" --keys "$work/keys" \
  --expires-days 3650 --tested-torch 2.11.0
rm -f "$here/registry/nvidia-h100-80gb/.lock"
cp "$work/keys/root.pub" "$here/root.pub"
"$diode" verify "$here/registry/nvidia-h100-80gb/1" --root-key "$here/root.pub"
