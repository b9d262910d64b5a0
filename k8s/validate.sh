#!/usr/bin/env bash
# Offline validation of k8s/ (docs in validate.py and k8s/README.md):
#   bash k8s/validate.sh
# 1. installs kubernetes-validate 1.37.0 (it bundles the Kubernetes OpenAPI
#    schemas) and jsonpatch into the project venv (.venv), once;
# 2. checks the shell scripts parse (bash -n);
# 3. checks every overlay's manifests with `diode manifest validate` when the
#    built CLI has that subcommand;
# 4. runs validate.py: every resource file and every overlay's JSON 6902
#    patched output against the Kubernetes schemas (strict), the MPIJob
#    templates against schemas/mpijob-v2beta1.json, and the project's rules;
#    plus a full `kubectl kustomize` render of each overlay where kubectl exists
#    (not a Debian/PyPI package: optional; DIODE_K8S_RENDER=0 turns it off).
# Exit status: 0 ok, 1 validation errors, 3 the validator could not be installed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
py="$repo/.venv/bin/python"
[ -x "$py" ] || { echo "validate.sh: $py missing: run bash .ci/setup first" >&2; exit 3; }

if ! "$py" - <<'PY' 2>/dev/null
import importlib.metadata as m
import jsonpatch, jsonschema, kubernetes_validate, yaml  # noqa: F401
assert m.version("kubernetes-validate") == "1.37.0"
PY
then
  echo "[k8s] installing kubernetes-validate 1.37.0 and jsonpatch into .venv"
  if ! "$py" -m pip install -q --disable-pip-version-check "kubernetes-validate==1.37.0" "jsonpatch>=1.33" "pyyaml>=6"; then
    echo "validate.sh: cannot install kubernetes-validate (is PyPI reachable?)" >&2
    exit 3
  fi
fi

for s in "$here"/*.sh "$here"/images/common/*.sh "$here"/images/trainer/diode-train-job "$here"/images/trainer/diode-create-mpijobs; do
  bash -n "$s" || { echo "validate.sh: $s does not parse" >&2; exit 1; }
done
echo "ok shell scripts parse"

diode="${DIODE_BUILD_DIR:-$repo/build}/cli/diode"
if [ -x "$diode" ] && "$diode" --help 2>/dev/null | grep -q '^ *manifest '; then
  "$diode" manifest validate "$here"/overlays/*/manifests/*.yaml
else
  echo "[k8s] $diode has no 'manifest validate' (not built yet): overlay manifests only compared with manifests/"
fi

render=()
if [ "${DIODE_K8S_RENDER:-1}" != 0 ] && command -v kubectl >/dev/null 2>&1 && kubectl kustomize --help >/dev/null 2>&1; then
  render=(--render "$(command -v kubectl)")
else
  echo "[k8s] no kubectl with kustomize: overlays checked as resources plus their JSON 6902 patches"
fi
exec "$py" "$here/validate.py" "${render[@]}"
