#!/usr/bin/env bash
# Train, validate, sign and ship the models that torch_diode carries in its package
# (python/torch_diode/bundles/, docs/hook.md "Shipped models"). One command:
#
#   python/release/release_bundles.sh --keys /path/to/release-keys
#
# For each hardware key (default: every datasets/<key>/ directory with shards):
#   1. mpirun -np NP --oversubscribe --allow-run-as-root --bind-to none diode-train --hardware KEY --data datasets/KEY --out WORK/KEY/model
#      --epochs EPOCHS --seed SEED [TRAIN_ARGS]
#   2. diode validate --model WORK/KEY/model --dataset datasets/KEY --json
#      > python/release/validate/KEY.json (committed: the numbers docs/hook.md quotes)
#      and, where the package ships a KEY model, the gate: diode validate --model
#      WORK/KEY/model --compare SHIPPED --dataset datasets/KEY --gate. A candidate that is
#      not better_or_equal (the hub's publish rule) on the test split is not published and
#      the shipped model stays ("kept" in the summary; --no-gate skips the gate). Either
#      way the gate's verdict and, for both models, the share of their top 10 picks that
#      the test records time as compiled (bench/static_pick_split.py) go to the log
#   2b. predict mode's ATen margin, chosen for this model on the validation split (never the
#      test split) and written into its model.json as `selection.aten_margin` before signing:
#      python/release/choose_aten_margin.py on `diode validate --list-split validation`
#      (docs/model-format.md). A model for which no margin of the grid keeps the worst
#      validation GEMM within 1.10x cuBLAS is not published ("aten margin" in the summary)
#   3. diode publish --model WORK/KEY/model --registry REGISTRY --keys KEYS --expires-days DAYS
#      (the next version of KEY in the release registry: versions only grow)
#   4. diode verify REGISTRY/KEY/N --root-key KEYS/root.pub
#   5. python/torch_diode/bundles/KEY/ is replaced by N/ alone (bundle.json, roots.json,
#      model.json, weights.msgpack), and KEYS/root.pub is copied to bundles/root.pub
# then `diode verify` runs again on every shipped bundle against the shipped root.pub.
#
# A decision family other than gemm (scaled_mm) ships its own bundle, one model per bundle,
# in python/torch_diode/bundles/KEY/families/FAMILY/N/ (docs/bundle-format.md, Decision
# families). --family-model FAMILY=DIR signs such a model, trained and validated already
# (its model.json names the family and the hardware key): `diode publish` puts it in
# REGISTRY/KEY/families/FAMILY/N, `diode verify --family FAMILY` checks it, and it replaces
# the package's bundles/KEY/families/FAMILY/. A GEMM release keeps the shipped families/.
# Its ATen margin: a model.json with `selection` keeps it; otherwise it is chosen here as
# step 2b does for GEMM, on the family's validation split of --datasets' KEY folder, in a
# copy of DIR (WORK/families/KEY/FAMILY/model; DIR is not written): a model for which no
# margin meets the bound is not published ("aten margin" in the summary). Where that folder
# holds no record of the family the model is published without one, with a warning (the
# hook then uses its default margin).
#
# A hardware whose training, validation or publication fails keeps what the package
# shipped before (untouched) and the script exits 1 after the summary: a partial release
# is never silent. Nothing is faked: a dataset too small for the trainer is reported.
#
# Options:
#   --keys DIR          release key directory (`diode keys init`; needs targets/ and root.pub;
#                       root/ may be offline). Required. Never inside the repository.
#   --registry DIR      release registry (default $DIODE_RELEASE_REGISTRY, else
#                       ~/.local/share/diode/release-registry); keep it: it is what the
#                       release hub serves, and its version numbers must keep growing
#   --build DIR         C++ build directory with models/diode-train and cli/diode
#                       (default $DIODE_BUILD_DIR, else ./build)
#   --work DIR          trained models and logs (default ${TMPDIR:-/tmp}/diode-release)
#   --shipped DIR       the package's bundle directory (default python/torch_diode/bundles)
#   --hardware KEY      only this key (repeatable)
#   --datasets DIR      the datasets root, one <hardware key>/ folder of shards each (default
#                       datasets/ of the repository)
#   --results DIR       where a published model's validate JSON and seeds.txt go (default
#                       python/release/validate, committed: the numbers docs/hook.md quotes)
#   --np N              MPI ranks (default 2)
#   --epochs N          (default 150)   --seed N (default 1)
#   --seeds S1,S2,...   train one model per seed and ship the one with the lowest top-1
#                       regret on the trainer's VALIDATION split (never the test split,
#                       which `diode validate` reports); the choice and every seed's
#                       validation line go to python/release/validate/KEY.seeds.txt
#   --ensemble K        with --seeds: ship every seed as one ensemble model (`diode ensemble`,
#                       docs/model-format.md, Members) instead of the chosen seed alone: the
#                       chosen seed is member 0 (it scores every config), the others follow
#                       in --seeds order and score its K best configs and ATen (the cascade).
#                       The ensemble's validation line goes to KEY.seeds.txt too
#   --prefilter H,B,K   with --ensemble: also train a small model (diode-train --hidden H
#                       --blocks B, the first seed, --train-args without their --hidden and
#                       --blocks) and join it as the ensemble's pre-filter, which scores every
#                       config and hands its K best and ATen to the members (`diode ensemble
#                       --prefilter DIR --keep K`, docs/model-format.md, Pre-filter), e.g. 16,1,64
#   --add-prefilter H,B,K
#                       train no members: join a pre-filter (diode-train --hidden H --blocks B with
#                       --seed and --train-args, which must be the shipped model's recipe, e.g. its
#                       --extra-data: the pre-filter must be trained on the same data) to each
#                       hardware's shipped ensemble as it is (`diode ensemble --member SHIPPED
#                       --prefilter DIR --keep K`); the joined model then goes through the gate,
#                       the ATen margin and the publish like a trained one. For the ranking's speed
#                       without retraining the members (docs/model-format.md, Pre-filter)
#   --train-args "..."  extra diode-train flags for a new recipe, e.g. "--loss listwise --hidden 128"
#                       (also $DIODE_TRAIN_ARGS)
#   --expires-days N    bundle lifetime (default 365). The root metadata's own expiry
#                       (`diode keys init/rotate --expires-days`) also bounds it.
#   --tested-torch V    torch version(s) the models were tested with (repeatable; default:
#                       the trainer's)
#   --no-gate           publish even when the candidate loses to the shipped model
#   --aten-rule RULE    predict mode's ATen rule the margin is chosen for (step 2b) and signed
#                       with: mean (the default) or every_member (choose_aten_margin.py --rule)
#   --resign            train nothing: publish each hardware's shipped model again, unchanged
#                       (model.json and weights.msgpack byte for byte), as the next version
#                       signed by --keys, and ship it with --keys' root.pub. For a new release
#                       key after the old key directory was lost (docs/operations.md, Release
#                       root key): every shipped bundle must chain to the one root.pub shipped.
#                       The committed validate results stay as they are (the model is the same)
#   --family-model FAMILY=DIR
#                       also sign and ship the model directory DIR of decision family FAMILY
#                       (repeatable; above). Its hardware key is the one in its model.json
#   --no-gemm           train and ship no GEMM model (with --family-model: ship only those)
#   --dry-run           print the commands, run nothing
#
# Versions keep growing across registries: a registry that holds no version of a hardware at
# least the shipped one's (a fresh registry after a lost machine) is first given a copy of the
# shipped version directory, so `diode publish` numbers the next version above it (a lower
# number would read as older than the one the package shipped before, docs/hook.md).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
keys="" registry="${DIODE_RELEASE_REGISTRY:-$HOME/.local/share/diode/release-registry}"
build="${DIODE_BUILD_DIR:-$repo/build}" work="${TMPDIR:-/tmp}/diode-release"
np=2 epochs=150 seed=1 seeds="" ensemble=0 prefilter="" add_prefilter="" days=365 train_args="${DIODE_TRAIN_ARGS:-}" dry=0 gate=1 resign=0 aten_rule=mean
hardware=() tested=() shipped="" family_models=() no_gemm=0 datasets="$repo/datasets" results="$repo/python/release/validate"
while (($#)); do
  case $1 in
    --keys) keys=$2; shift 2 ;;
    --registry) registry=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --shipped) shipped=$2; shift 2 ;;
    --hardware) hardware+=("$2"); shift 2 ;;
    --datasets) datasets=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --ensemble) ensemble=$2; shift 2 ;;
    --prefilter) prefilter=$2; shift 2 ;;
    --add-prefilter) add_prefilter=$2; shift 2 ;;
    --train-args) train_args=$2; shift 2 ;;
    --expires-days) days=$2; shift 2 ;;
    --tested-torch) tested+=(--tested-torch "$2"); shift 2 ;;
    --dry-run) dry=1; shift ;;
    --no-gate) gate=0; shift ;;
    --aten-rule) aten_rule=$2; shift 2 ;;
    --resign) resign=1; shift ;;
    --family-model) family_models+=("$2"); shift 2 ;;
    --no-gemm) no_gemm=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "release_bundles: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done

die() { echo "release_bundles: $*" >&2; exit 2; }
[ -n "$keys" ] || die "--keys DIR is required (the release key directory)"
[[ $aten_rule == mean || $aten_rule == every_member ]] || die "--aten-rule takes mean or every_member, got '$aten_rule'"
[[ $ensemble =~ ^[0-9]+$ ]] || die "--ensemble K takes a whole number (the cascade), got '$ensemble'"
if ((ensemble)) && [[ ! $seeds =~ , ]]; then die "--ensemble needs --seeds with at least two seeds"; fi
pf_hidden="" pf_blocks="" pf_keep=""
if [ -n "$prefilter" ]; then
  [[ $prefilter =~ ^([0-9]+),([0-9]+),([0-9]+)$ ]] || die "--prefilter takes HIDDEN,BLOCKS,KEEP (e.g. 16,1,64), got '$prefilter'"
  pf_hidden=${BASH_REMATCH[1]} pf_blocks=${BASH_REMATCH[2]} pf_keep=${BASH_REMATCH[3]}
  ((ensemble)) || die "--prefilter needs --ensemble (a pre-filter feeds an ensemble's members)"
fi
if [ -n "$add_prefilter" ]; then
  [[ $add_prefilter =~ ^([0-9]+),([0-9]+),([0-9]+)$ ]] ||
    die "--add-prefilter takes HIDDEN,BLOCKS,KEEP (e.g. 16,1,64), got '$add_prefilter'"
  pf_hidden=${BASH_REMATCH[1]} pf_blocks=${BASH_REMATCH[2]} pf_keep=${BASH_REMATCH[3]}
  if [ -n "$seeds" ] || ((ensemble)) || [ -n "$prefilter" ] || ((resign)); then
    die "--add-prefilter trains no members: it takes no --seeds, --ensemble, --prefilter or --resign"
  fi
fi
if ((resign)) && { [ -n "$seeds" ] || ((ensemble)) || [ -n "$train_args" ] || [ -n "$prefilter" ]; }; then
  die "--resign trains nothing: it takes no --seeds, --ensemble, --prefilter or --train-args"
fi
datasets=$(cd "$datasets" && pwd) || die "no datasets directory $datasets"
keys=$(cd "$keys" && pwd) || die "no key directory $keys"
[ -f "$keys/root.pub" ] && [ -d "$keys/targets" ] || die "$keys has no root.pub / targets/ (diode keys init)"
case "$keys/" in "$repo"/*) die "the key directory $keys is inside the repository: keep private keys out of it" ;; esac
train="$build/models/diode-train" diode="$build/cli/diode"
[ -x "$diode" ] || die "$diode not built (--build DIR)"
# --resign trains nothing: it needs neither the trainer nor MPI.
if ((!resign)); then
  [ -x "$train" ] || die "$train not built (--build DIR)"
  command -v mpirun >/dev/null || die "mpirun not found"
fi
# Python for bench/static_pick_split.py, which imports torch: $PYTHON, else the project's venv
# (.ci/setup), else python3 (a bare one may have no torch; the gate-kept branch then says so).
py=${PYTHON:-python3}
if [ -z "${PYTHON:-}" ] && [ -x "$repo/.venv/bin/python" ]; then py="$repo/.venv/bin/python"; fi
for fm in "${family_models[@]}"; do
  [[ $fm =~ ^([a-z_]+)=(.+)$ ]] || die "--family-model takes FAMILY=DIR (e.g. scaled_mm=/tmp/fp8-model), got '$fm'"
  [ "${BASH_REMATCH[1]}" != gemm ] || die "--family-model gemm: the GEMM model is trained here (drop --no-gemm)"
  [ -f "${BASH_REMATCH[2]}/model.json" ] || die "--family-model $fm: no ${BASH_REMATCH[2]}/model.json"
done
if ((no_gemm)); then
  ((${#family_models[@]})) || die "--no-gemm ships nothing without --family-model"
  hardware=()
elif ((${#hardware[@]} == 0)); then
  for d in "$datasets"/*/; do
    ls "$d"*.msgpack.gz >/dev/null 2>&1 && hardware+=("$(basename "$d")")
  done
fi
((${#hardware[@]} || no_gemm)) || die "no $datasets/<hardware>/ with shards"

shipped="${shipped:-$repo/python/torch_diode/bundles}"
run() { echo "+ $*" >&2; ((dry)) || "$@"; }
mkdir -p "$work" "$registry" "$shipped" "$results"
failed=() done_=() kept=()
# The highest numbered version directory's name under $1, or nothing where there is none:
# find's failure on a missing directory must not end the script under `set -e -o pipefail`
# (it did, silently, on the first H200 release).
newest_version() {
  { find "$1" -mindepth 1 -maxdepth 1 -type d -regex '.*/[0-9]+' -printf '%f\n' 2>/dev/null || true; } | sort -n | tail -1
}
# The shipped model of hardware $1 (its newest version directory), or nothing for a hardware
# the package does not ship yet.
shipped_version() {
  local v
  v=$(newest_version "$shipped/$1")
  if [ -n "$v" ]; then echo "$shipped/$1/$v"; fi
}
# Give the registry the shipped version directory $2 of hardware $1 when it holds no version
# at least as high, so the next publish numbers above what the package shipped.
seed_registry() {
  local hw=$1 prev=$2 v top
  [ -n "$prev" ] || return 0
  v=$(basename "$prev")
  top=$(newest_version "$registry/$hw")
  if [ -z "$top" ] || ((top < v)); then
    echo "+ cp -r $prev $registry/$hw/$v   (the registry had ${top:-no version}; versions keep growing)" >&2
    ((dry)) || { mkdir -p "$registry/$hw" && cp -r "$prev" "$registry/$hw/$v"; }
  fi
}
# Publish $w/model of hardware $hw as the next version, verify it, and make it the package's
# only version of that hardware. Sets `version`; returns 1 (the caller records the failure).
publish_and_ship() {
  local out f
  out=$(run "$diode" publish --model "$w/model" --registry "$registry" --keys "$keys" --expires-days "$days" \
        "${tested[@]}") || return 1
  echo "$out" >&2
  version=$(sed -n 's/^published [a-z0-9-]* version \([0-9]*\) at .*/\1/p' <<<"$out")
  [ -n "$version" ] || { echo "release_bundles: cannot parse: $out" >&2; return 1; }
  run "$diode" verify "$registry/$hw/$version" --root-key "$keys/root.pub" --family gemm >&2
  rm -rf "$shipped/$hw.new"
  mkdir -p "$shipped/$hw.new/$version"
  for f in bundle.json roots.json model.json weights.msgpack; do
    cp "$registry/$hw/$version/$f" "$shipped/$hw.new/$version/$f"
  done
  # The other decision families' shipped bundles stay (they are released on their own).
  if [ -d "$shipped/$hw/families" ]; then mv "$shipped/$hw/families" "$shipped/$hw.new/families"; fi
  rm -rf "$shipped/$hw"
  mv "$shipped/$hw.new" "$shipped/$hw"
}
# Publish the model directory $2 of decision family $1 as the next version of its hardware
# and family, verify it, and make it the package's only version of that family there.
publish_family_and_ship() {
  local family=$1 dir=$2 out fhw fdir prev v top f
  fhw=$("$py" -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["hardware_key"])
if m.get("family", "gemm") != sys.argv[2]: sys.exit("model.json is of family %s, not %s" % (m.get("family", "gemm"), sys.argv[2]))' \
        "$dir/model.json" "$family") || return 1
  fdir="$shipped/$fhw/families/$family"
  if ! "$py" -c 'import json, sys; sys.exit("selection" not in json.load(open(sys.argv[1])))' "$dir/model.json"; then
    local fw="$work/families/$fhw/$family"
    mkdir -p "$fw"
    # The mean rule (choose_aten_margin.py's default): --aten-rule is GEMM's (step 2b).
    aten_margin "$family" "$dir" "$datasets/$fhw" "$fw" mean warn all ||
      { echo "release_bundles: $family: no ATen margin meets the bound" >&2; return 2; }
    dir=$margin_model
  fi
  # Versions keep growing: a registry below the shipped version gets a copy of it first.
  prev=$(newest_version "$fdir")
  top=$(newest_version "$registry/$fhw/families/$family")
  if [ -n "$prev" ] && { [ -z "$top" ] || ((top < prev)); }; then
    echo "+ cp -r $fdir/$prev $registry/$fhw/families/$family/$prev   (versions keep growing)" >&2
    ((dry)) || { mkdir -p "$registry/$fhw/families/$family" && cp -r "$fdir/$prev" "$registry/$fhw/families/$family/$prev"; }
  fi
  out=$(run "$diode" publish --model "$dir" --registry "$registry" --keys "$keys" --expires-days "$days" \
        "${tested[@]}") || return 1
  echo "$out" >&2
  ((dry)) && return 0
  v=$(sed -n "s/^published [a-z0-9-]* family $family version \([0-9]*\) at .*/\1/p" <<<"$out")
  [ -n "$v" ] || { echo "release_bundles: cannot parse: $out" >&2; return 1; }
  run "$diode" verify "$registry/$fhw/families/$family/$v" --root-key "$keys/root.pub" --family "$family" >&2 || return 1
  rm -rf "$fdir.new"
  mkdir -p "$fdir.new/$v"
  for f in bundle.json roots.json model.json weights.msgpack; do
    cp "$registry/$fhw/families/$family/$v/$f" "$fdir.new/$v/$f"
  done
  rm -rf "$fdir"
  mv "$fdir.new" "$fdir"
  done_+=("$fhw $family $v")
}
# Predict mode's ATen margin (step 2b, for GEMM and for a --family-model): chosen for the model
# directory MODEL of decision family FAMILY under ATen rule RULE on DATA's validation split of
# that family (never the test split) by choose_aten_margin.py, which writes it into model.json:
#   aten_margin FAMILY MODEL DATA WORK RULE NO_DATA LOG
# WORK (a directory that exists) keeps validation-split.json and margin.err (and, with LOG
# "last", margin.txt). A MODEL other than WORK/model is not written: the margin goes into a copy,
# WORK/model, made once the split is listed. Sets margin_model to the directory to publish.
# NO_DATA: where `diode validate --list-split validation` fails (DATA holds no record of the
# family), "fail" returns 1 like a margin that misses the bound, and "warn" warns and returns 0
# with MODEL as it is (the hook then uses its default margin).
# LOG: "last": the chooser's output is kept in WORK and only its last line (the margin chosen)
# goes to stderr; "all": its command (`run`: under --dry-run it is only printed) and whole output.
# Returns 1 when no margin was chosen (what was said is on stderr): the model is not to be
# published. Called where `set -e` does not apply (if !, ||): every failure is checked here.
aten_margin() {
  local family=$1 model=$2 data=$3 out=$4 rule=$5 no_data=$6 log=$7
  local chooser="$repo/python/release/choose_aten_margin.py" fam=()
  [ "$family" = gemm ] || fam=(--family "$family")
  margin_model=$model
  if ! "$diode" validate --dataset "$data" "${fam[@]}" --list-split validation --json \
       > "$out/validation-split.json" 2> "$out/margin.err"; then
    if [ "$no_data" = warn ]; then
      echo "release_bundles: warning: $model/model.json has no selection (ATen margin) and $data has" \
           "no $family validation split to choose one on ($(head -c 300 "$out/margin.err")): published without" >&2
      return 0
    fi
    cat "$out/margin.err" >&2
    return 1
  fi
  if [ "$model" != "$out/model" ]; then
    if ! { rm -rf "$out/model" && cp -r "$model" "$out/model"; }; then
      echo "release_bundles: cannot copy $model to $out/model" >&2; return 1
    fi
    margin_model="$out/model"
  fi
  local args=(--model "$margin_model" --dataset "$data" --split-list "$out/validation-split.json" --rule "$rule")
  if [ "$log" = all ]; then
    run "$py" "$chooser" "${args[@]}" >&2 || return 1
  elif "$py" "$chooser" "${args[@]}" > "$out/margin.txt" 2>> "$out/margin.err"; then
    tail -1 "$out/margin.txt" >&2
  else
    cat "$out/margin.txt" "$out/margin.err" >&2
    return 1
  fi
}
# The validation split's top-1 geomean of model directory $1 on dataset $2, to 4 decimals (the
# number a joined ensemble's line in KEY.seeds.txt quotes); fails where diode validate does.
validation_top1() {
  "$diode" validate --model "$1" --dataset "$2" --split validation --json |
    "$py" -c 'import json, sys; print("%.4f" % json.load(sys.stdin)["model"]["top1"]["geomean"])'
}
for hw in "${hardware[@]}"; do
  data="$datasets/$hw" w="$work/$hw"
  echo "== $hw" >&2
  ((dry)) || rm -rf "$w"
  mkdir -p "$w"
  if ((resign)); then
    prev=$(shipped_version "$hw")
    if [ -z "$prev" ]; then
      echo "release_bundles: $hw: --resign, but the package ships no $hw model" >&2
      failed+=("$hw (resign)"); continue
    fi
    echo "+ cp $prev/model.json $prev/weights.msgpack $w/model/   (re-signed unchanged)" >&2
    seed_registry "$hw" "$prev"
    ((dry)) && continue
    mkdir -p "$w/model" && cp "$prev/model.json" "$prev/weights.msgpack" "$w/model/"
    if publish_and_ship; then done_+=("$hw $version (version $(basename "$prev")'s model re-signed)")
    else failed+=("$hw (publish)"); fi
    continue
  fi
  # Seed noise is larger than most recipe differences (docs/training.md, The release recipe),
  # so with --seeds the model is chosen by the validation split's top-1 regret.
  ok=1 best="" best_t1=""
  : > "$w/seeds.txt"
  for s in ${seeds//,/ }; do
    cmd=(mpirun -np "$np" --oversubscribe --allow-run-as-root --bind-to none "$train" --hardware "$hw" --data "$data"
         --out "$w/seed-$s" --epochs "$epochs" --seed "$s")
    # shellcheck disable=SC2206  # train_args are words on purpose
    cmd+=($train_args)
    echo "+ ${cmd[*]} > $w/seed-$s.log" >&2
    ((dry)) && continue
    if ! "${cmd[@]}" > "$w/seed-$s.log" 2>&1; then
      tail -5 "$w/seed-$s.log" >&2; ok=0; break
    fi
    line=$(grep -m1 '^validation (' "$w/seed-$s.log" || true)
    t1=$(sed -n 's/.*overall top-1 \([0-9.]*\).*/\1/p' <<<"$line")
    [ -n "$t1" ] || { echo "release_bundles: $hw seed $s: no validation line in $w/seed-$s.log" >&2; ok=0; break; }
    echo "seed $s: $line" >> "$w/seeds.txt"
    if [ -z "$best" ] || awk -v a="$t1" -v b="$best_t1" 'BEGIN { exit !(a < b) }'; then best=$s best_t1=$t1; fi
  done
  if [ -z "$seeds" ] && [ -z "$add_prefilter" ] && ((ok)); then
    # shellcheck disable=SC2086
    run mpirun -np "$np" --oversubscribe --allow-run-as-root --bind-to none "$train" --hardware "$hw" --data "$data" \
      --out "$w/model" --epochs "$epochs" --seed "$seed" $train_args --quiet || ok=0
  fi
  # --add-prefilter: the shipped ensemble is the members; only the pre-filter is trained below.
  if [ -n "$add_prefilter" ]; then
    prev=$(shipped_version "$hw")
    if [ -z "$prev" ] || ! "$py" -c 'import json, sys
sys.exit(0 if json.load(open(sys.argv[1]))["architecture"].get("members", 1) > 1 else 1)' "$prev/model.json"; then
      echo "release_bundles: $hw: --add-prefilter, but the package ships no $hw ensemble${prev:+ ($prev)}" >&2
      failed+=("$hw (add-prefilter)"); continue
    fi
  fi
  # The pre-filter: the recipe's flags without its width and depth, then the pre-filter's.
  pf_args=()
  if ((ok)) && { [ -n "$prefilter" ] || [ -n "$add_prefilter" ]; }; then
    pf_train=() skip=0
    # shellcheck disable=SC2206  # train_args are words on purpose
    for a in $train_args; do
      if ((skip)); then skip=0; elif [ "$a" = --hidden ] || [ "$a" = --blocks ]; then skip=1
      elif [[ $a == --hidden=* || $a == --blocks=* ]]; then :; else pf_train+=("$a"); fi
    done
    pf_seed=$seed   # --prefilter: the first of --seeds; --add-prefilter: --seed
    if [ -n "$seeds" ]; then pf_seed=${seeds%%,*}; fi
    cmd=(mpirun -np "$np" --oversubscribe --allow-run-as-root --bind-to none "$train" --hardware "$hw" --data "$data"
         --out "$w/prefilter" --epochs "$epochs" --seed "$pf_seed" "${pf_train[@]}" --hidden "$pf_hidden" --blocks "$pf_blocks")
    echo "+ ${cmd[*]} > $w/prefilter.log" >&2
    if ! ((dry)) && ! "${cmd[@]}" > "$w/prefilter.log" 2>&1; then tail -5 "$w/prefilter.log" >&2; ok=0; fi
    pf_args=(--prefilter "$w/prefilter" --keep "$pf_keep")
  fi
  if [ -n "$add_prefilter" ] && ((ok)); then
    echo "+ $diode ensemble --member $prev ${pf_args[*]} --out $w/model --dataset $data" >&2
    if ((dry)); then :
    elif "$diode" ensemble --member "$prev" "${pf_args[@]}" --out "$w/model" --dataset "$data" >&2 &&
         t1=$(validation_top1 "$w/model" "$data"); then
      { cat "$results/$hw.seeds.txt" 2> /dev/null || true
        echo "pre-filter $add_prefilter (hidden, blocks, keep; seed $seed) joined to shipped version $(basename "$prev"): validation top-1 $t1"
      } > "$w/seeds.txt"
      cat "$w/seeds.txt" >&2
    else
      ok=0
    fi
  elif [ -n "$seeds" ] && ((ok)) && ! ((dry)) && ((ensemble)); then
    members=(--member "$w/seed-$best")
    for s in ${seeds//,/ }; do [ "$s" = "$best" ] || members+=(--member "$w/seed-$s"); done
    echo "+ $diode ensemble ${members[*]} --cascade $ensemble ${pf_args[*]} --out $w/model --dataset $data" >&2
    if "$diode" ensemble "${members[@]}" --cascade "$ensemble" "${pf_args[@]}" --out "$w/model" --dataset "$data" >&2 &&
       t1=$(validation_top1 "$w/model" "$data"); then
      echo "ensemble: every seed, seed $best first (lowest validation top-1 regret, $best_t1), cascade $ensemble${prefilter:+, pre-filter $prefilter (hidden, blocks, keep)}: validation top-1 $t1" >> "$w/seeds.txt"
      cat "$w/seeds.txt" >&2
    else
      ok=0
    fi
  elif [ -n "$seeds" ] && ((ok)) && ! ((dry)); then
    mv "$w/seed-$best" "$w/model"
    echo "chosen: seed $best (lowest validation top-1 regret, $best_t1)" >> "$w/seeds.txt"
    cat "$w/seeds.txt" >&2
  fi
  if ! ((ok)); then
    echo "release_bundles: $hw: diode-train or diode ensemble failed (see above); the shipped $hw bundle is left as it was" >&2
    failed+=("$hw (train)"); continue
  fi
  # The shipped model of this hardware, if any: the gate's reference (none for a hardware
  # the package does not ship yet: its first release has no gate).
  prev=$(shipped_version "$hw")
  if ((dry)); then
    run "$diode" validate --model "$w/model" --dataset "$data" --json
    if ((gate)) && [ -n "$prev" ]; then run "$diode" validate --model "$w/model" --compare "$prev" --dataset "$data" --gate; fi
    run "$py" "$repo/python/release/choose_aten_margin.py" --model "$w/model" --dataset "$data" --split-list "$w/validation-split.json" --rule "$aten_rule"
    continue
  fi
  if ! "$diode" validate --model "$w/model" --dataset "$data" --json > "$w/validate.json" 2> "$w/validate.err"; then
    cat "$w/validate.err" >&2
    echo "release_bundles: $hw: diode validate failed; not published" >&2
    failed+=("$hw (validate)"); continue
  fi
  if ((gate)) && [ -n "$prev" ]; then
    rc=0
    "$diode" validate --model "$w/model" --compare "$prev" --dataset "$data" --gate > "$w/gate.txt" 2>&1 || rc=$?
    if ((rc != 0 && rc != 3)); then  # neither passed (0) nor kept (3): the gate itself failed
      cat "$w/gate.txt" >&2
      failed+=("$hw (gate)"); continue
    fi
    # The decision, passed or kept, goes to the log.
    grep '^gate:' "$w/gate.txt" >&2 || true
    # Whether the records favour one model (docs/collector.md, timing.model_top): how many
    # of each model's top 10 picks the test records time as compiled. A model with a lower
    # share is read slower on top-5/10 than it would run: a kept candidate may deserve a
    # re-collection with both models' picks (respec --also-model) and another gate, and a
    # pass against such records is a fair win.
    if "$diode" validate --dataset "$data" --list-split test --json > "$w/test-split.json" 2> /dev/null; then
      for m in "$w/model" "$prev"; do
        if share=$("$py" "$repo/bench/static_pick_split.py" --model "$m" --top 10 \
              --split-list "$w/test-split.json" "$data" 2> "$w/static-pick-split.err"); then
          echo "$m: $(tail -1 <<< "$share")"
        else
          echo "$m: bench/static_pick_split.py failed with $py ($w/static-pick-split.err): $(tail -1 "$w/static-pick-split.err")"
        fi
      done | tee -a "$w/gate.txt" >&2 || true
    fi
    if ((rc == 3)); then
      echo "release_bundles: $hw: the candidate is not better_or_equal than shipped version $(basename "$prev") on the test split; not published ($w/gate.txt)" >&2
      kept+=("$hw (version $(basename "$prev"))"); continue
    fi
  fi
  # Predict mode's ATen margin, chosen on the validation split and signed with the model (2b).
  if ! aten_margin gemm "$w/model" "$data" "$w" "$aten_rule" fail last; then
    echo "release_bundles: $hw: no ATen margin for predict mode (above); not published" >&2
    failed+=("$hw (aten margin)"); continue
  fi
  seed_registry "$hw" "$prev"
  publish_and_ship || { failed+=("$hw (publish)"); continue; }
  cp "$w/validate.json" "$results/$hw.json"
  if [ -n "$seeds" ] || [ -n "$add_prefilter" ]; then cp "$w/seeds.txt" "$results/$hw.seeds.txt"
  else rm -f "$results/$hw.seeds.txt"; fi
  done_+=("$hw $version")
done
for fm in "${family_models[@]}"; do
  family=${fm%%=*} dir=${fm#*=}
  echo "== $family ($dir)" >&2
  rc=0; publish_family_and_ship "$family" "$dir" || rc=$?
  case $rc in 0) ;; 2) failed+=("$family $dir (aten margin)") ;; *) failed+=("$family $dir (publish)") ;; esac
done
((dry)) && exit 0
cp "$keys/root.pub" "$shipped/root.pub"

# The acceptance check: every shipped bundle verifies against the shipped root key.
status=0
for b in "$shipped"/*/[0-9]*/ "$shipped"/*/families/*/[0-9]*/; do
  [ -d "$b" ] || continue
  if "$diode" verify "$b" --root-key "$shipped/root.pub" >/dev/null; then
    echo "verified $(realpath --relative-to="$repo" "$b")" >&2
  else
    echo "release_bundles: $b does NOT verify against the shipped root.pub" >&2; status=1
  fi
done
((${#kept[@]})) && echo "kept (the candidate lost to it on the test split): ${kept[*]}" >&2
echo "shipped: ${done_[*]:-nothing new}; $(find "$shipped" -type f -printf '%s\n' | awk '{s += $1} END {print s}') bytes in $(realpath --relative-to="$repo" "$shipped")" >&2
if ((${#failed[@]})); then
  echo "release_bundles: FAILED: ${failed[*]}" >&2
  status=1
fi
exit $status
