#!/usr/bin/env bash
# Runs docs/operations.md's "Run it by hand" as written: the fenced blocks whose info
# string is `sh by-hand`, in order, in one bash with `set -euo pipefail`, from the
# repository root, with the build's binaries on PATH. The commands live only in the
# doc (no copy here), so the doc cannot drift from what works. The blocks end with their
# own checks (`... | grep`, `test`); this script fails if any command fails, if a block
# is left unterminated, or if a process they started is still running at the end, and
# it kills every process they started on exit, also on failure or interruption.
#
#   bash .ci/by_hand.sh                 # build dir: $DIODE_BUILD_DIR or build/
#   DIODE_BY_HAND_KEEP=1 bash .ci/by_hand.sh   # keep the work directory on failure
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
doc=docs/operations.md
build="${DIODE_BUILD_DIR:-$root/build}"
for b in cli/diode hub/diode-hub coordinator/diode-coordinator agent/diode-agent models/diode-train \
         shared/bundle/libdiode_client.so; do
  [ -e "$build/$b" ] || { echo "by_hand: $build/$b is not built (bash .ci/setup)" >&2; exit 2; }
done
command -v mpirun >/dev/null || { echo "by_hand: mpirun not found" >&2; exit 2; }

tmp=$(mktemp -d /tmp/diode-by-hand-run.XXXXXX)
script=$tmp/by-hand.sh
pgid=""
status=1
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$pgid" ]; then
    # Everything the blocks started runs in the process group of their bash ($pgid).
    if kill -0 -- -"$pgid" 2>/dev/null; then
      kill -TERM -- -"$pgid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 -- -"$pgid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL -- -"$pgid" 2>/dev/null || true
    fi
  fi
  if [ "$status" != 0 ]; then
    # The daemons' logs, for the failure's cause (the work directory is under $tmp).
    for f in "$tmp"/work/*/*.log; do
      [ -f "$f" ] || continue
      echo "----- ${f#"$tmp"/work/} (last 40 lines)"
      tail -n 40 "$f"
    done
  fi
  if [ "$status" != 0 ] && [ "${DIODE_BY_HAND_KEEP:-0}" = 1 ]; then
    echo "by_hand: kept $tmp"
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Extract the blocks: a line "```sh by-hand" opens one, the next "```" closes it.
{
  echo "set -euo pipefail"
  awk -v doc="$doc" '
    /^```sh by-hand[[:space:]]*$/ { if (inblock) { print "by_hand: nested block at " doc ":" NR > "/dev/stderr"; exit 3 }
                                  inblock = 1; n++; start = NR
                                  printf "echo \"=== [$SECONDS s] by-hand block %d (%s:%d)\"\n", n, doc, NR
                                  next }
    /^```[[:space:]]*$/ && inblock { inblock = 0; next }
    inblock { print }
    END { if (inblock) { print "by_hand: block at " doc ":" start " is not closed" > "/dev/stderr"; exit 3 }
          if (n == 0) { print "by_hand: no ```sh by-hand block in " doc > "/dev/stderr"; exit 3 }
          print "echo \"=== [$SECONDS s] by-hand: " n " blocks passed\"" }
  ' "$doc"
} > "$script"
echo "by_hand: $(grep -c '^echo "=== \[$SECONDS s\] by-hand block' "$script") blocks from $doc"

# A clean environment for the doc's commands: no DIODE_* setting of the caller (a
# DIODE_HUB_URL or DIODE_AGENT_* would change what the daemons and clients do), the
# build's binaries first on PATH, temporary files (the doc's mktemp -d) under $tmp/work.
mkdir -p "$tmp/work"
env_args=()
while IFS='=' read -r name _; do
  case "$name" in DIODE_*) env_args+=(-u "$name") ;; esac
done < <(env)
export_path="$build/cli:$build/hub:$build/coordinator:$build/agent:$build/models:$PATH"

start=$SECONDS
# setsid: the blocks' bash leads its own process group, which holds every daemon,
# mpirun rank and client it starts; cleanup() kills that group.
setsid env "${env_args[@]}" DIODE_BUILD_DIR="$build" TMPDIR="$tmp/work" \
  PATH="$export_path" bash "$script" &
pgid=$!
rc=0
wait "$pgid" || rc=$?
if [ "$rc" != 0 ]; then
  echo "by_hand: FAILED (exit $rc) after $((SECONDS - start)) s"
  exit "$rc"
fi
left=$(pgrep -g "$pgid" -a || true)
if [ -n "$left" ]; then
  echo "by_hand: FAILED: processes still running after the last block:"
  echo "$left"
  exit 1
fi
pgid=""
status=0
echo "by_hand: passed in $((SECONDS - start)) s"
