#!/usr/bin/env bash
# Generate the key material an overlay's secretGenerator reads, into
# k8s/overlays/ENV/secrets/ (git-ignored, mode 0700). Nothing here is ever
# committed: every deployment makes its own keys.
#
#   bash k8s/gen-secrets.sh ENV [--signing-keys DIR] [--rotate-agent POOL]...
#
# ENV is an overlay (dev, production). Creates only what is missing, so it is
# safe to re-run; --rotate-agent POOL replaces that pool's key (and rewrites
# both allowlists). Needs diode-coordinator and diode (build/ or PATH).
#
# Writes:
#   coordinator.key, hub.key          CurveZMQ key pairs of the two servers
#                                     (each key pair FILE comes with FILE.pub,
#                                     its public key, written by keygen)
#   coordinator.pub, hub.pub          copies of their .pub files, for the agents
#   agent-POOL.key                    one CurveZMQ key pair per agent pool
#   hub-agents.allowlist              agent pool public keys (hub ingest)
#   coordinator-agents.allowlist      the same plus the operators' key
#   ops.key                           operators' key for `diode status` (not
#                                     put in any Secret: copy it to your laptop)
#   write-token                       bearer token for hub HTTP writes
#   signing-keys.tar.gz               targets (online) signing keys, roots/ and
#                                     root.pub from the bundle key directory
#                                     DIR; root/ (the offline root private
#                                     keys) and revoked/ are left out
# The bundle key directory (default ~/.config/diode/keys-ENV) is created with
# `diode keys init` if it has no root yet; keep its root/ offline afterwards.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"

usage() { sed -n '2,30p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
env_name=$1; shift
overlay="$here/overlays/$env_name"
[ -f "$overlay/kustomization.yaml" ] || { echo "gen-secrets: no overlay $overlay" >&2; exit 2; }
signing_dir="${XDG_CONFIG_HOME:-$HOME/.config}/diode/keys-$env_name"
rotate=()
while [ $# -gt 0 ]; do
  case "$1" in
    --signing-keys) signing_dir=$2; shift 2 ;;
    --rotate-agent) rotate+=("$2"); shift 2 ;;
    -h|--help) usage ;;
    *) echo "gen-secrets: unknown argument $1" >&2; usage ;;
  esac
done

find_bin() {  # name, build subdir
  local b
  for b in "${DIODE_BUILD_DIR:-$repo/build}/$2/$1" "$(command -v "$1" 2>/dev/null || true)"; do
    [ -n "$b" ] && [ -x "$b" ] && { echo "$b"; return; }
  done
  echo "gen-secrets: $1 not found (build the repo: bash .ci/setup, or put it on PATH)" >&2
  exit 1
}
coordinator_bin=$(find_bin diode-coordinator coordinator)
diode_bin=$(find_bin diode cli)

out="$overlay/secrets"
mkdir -p "$out"
chmod 700 "$out"
umask 077

# The agent pools this overlay deploys: its secretGenerator names them.
mapfile -t pools < <(sed -n 's/^ *- name: diode-agent-keys-\([a-z0-9-]*\) *$/\1/p' "$overlay/kustomization.yaml")
((${#pools[@]})) || { echo "gen-secrets: no diode-agent-keys-POOL in $overlay/kustomization.yaml" >&2; exit 1; }

keygen() {  # file: a new CurveZMQ key pair unless it exists; prints the public key
  # Every daemon's keygen writes FILE (the pair, JSON, mode 0600) and FILE.pub
  # (the public key alone, one line): the public key is read from FILE.pub.
  if [ ! -s "$1" ]; then
    "$coordinator_bin" keygen "$1" >/dev/null  # stderr: "wrote FILE (key pair, mode 0600) and FILE.pub ..."
  elif [ ! -s "$1.pub" ]; then
    # A key pair made before keygen wrote .pub files: write its .pub once.
    sed -n 's/.*"public": *"\([^"]*\)".*/\1/p' "$1" > "$1.pub"
  fi
  [ -s "$1.pub" ] || { echo "gen-secrets: $1.pub missing after keygen" >&2; exit 1; }
  head -n 1 "$1.pub"
}
public_file() {  # src keypair, dst: its public half only (agents need no server secret)
  keygen "$1" >/dev/null
  cp "$1.pub" "$2"
}

for p in "${rotate[@]}"; do
  t=$(date -u +%Y%m%dT%H%M%SZ)
  [ -f "$out/agent-$p.key" ] && mv "$out/agent-$p.key" "$out/agent-$p.key.old.$t"
  [ -f "$out/agent-$p.key.pub" ] && mv "$out/agent-$p.key.pub" "$out/agent-$p.key.pub.old.$t"
done

public_file "$out/coordinator.key" "$out/coordinator.pub"
public_file "$out/hub.key" "$out/hub.pub"
ops_pub=$(keygen "$out/ops.key")

agents=""
for p in "${pools[@]}"; do
  agents+="$(keygen "$out/agent-$p.key") agent-pool-$p"$'\n'
done
{ echo "# agent pools of overlay $env_name (k8s/gen-secrets.sh)"; printf '%s' "$agents"; } > "$out/hub-agents.allowlist"
{ echo "# agent pools and operators of overlay $env_name (k8s/gen-secrets.sh)"; printf '%s' "$agents"; echo "$ops_pub operators"; } \
  > "$out/coordinator-agents.allowlist"

if [ ! -s "$out/write-token" ]; then
  # 43 characters of base64url alphabet: printable, no spaces (hub/main.cpp).
  head -c 32 /dev/urandom | base64 | tr -d '+/=\n' > "$out/write-token"
  echo "gen-secrets: new write token $out/write-token" >&2
fi

if [ ! -f "$signing_dir/root.pub" ]; then
  mkdir -p "$(dirname "$signing_dir")"
  "$diode_bin" keys --keys "$signing_dir" init >&2
fi
for d in targets roots; do
  [ -d "$signing_dir/$d" ] || { echo "gen-secrets: $signing_dir/$d missing: not a diode key directory" >&2; exit 1; }
done
# Deterministic archive (sorted, fixed owner and time): re-running without a
# key change leaves the Secret, and so the pods, unchanged.
tar -C "$signing_dir" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
  -cf - targets roots root.pub | gzip -n -9 > "$out/signing-keys.tar.gz"

echo "gen-secrets: $out ready for kubectl apply -k $overlay" >&2
echo "gen-secrets: root public key to pin in clients (DIODE_ROOT_PUBKEY): $(cat "$signing_dir/root.pub")" >&2
echo "gen-secrets: move $signing_dir/root/ offline now if it is still there" >&2
