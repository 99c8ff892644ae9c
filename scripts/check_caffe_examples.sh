#!/usr/bin/env bash
# Runs one training iteration of every net prototxt of BVLC Caffe's examples/ and models/ on generated data.
#
#   scripts/check_caffe_examples.sh [--caffe DIR] [--build DIR] [--work DIR] [--timeout S] [--phases "TRAIN TEST"]
#
#   --caffe    a Caffe checkout (default: examples/ and models/ of HEAD of /work/.mirror/BVLC+caffe/repo, extracted
#              to a temporary folder)
#   --build    Strata's build folder, with bin/strata, bin/convert_imageset, bin/convert_mnist_data and
#              bin/compute_image_mean (default: build)
#   --work     the scratch folder laid out as Caffe's root (default: a temporary one, removed at the end)
#   --timeout  seconds per net (default 300)
#   --phases   the phases to run `strata time` in (default "TRAIN TEST"; TRAIN: forward, backward and one SGD step;
#              TEST: a forward and backward of the net's TEST phase, which reads the test sets)
#
# Every file under examples/ and models/ that defines layers at its top level is a net (the solvers, one with a net
# inside, lenet_consolidated_solver, are left out). The nets and Caffe's layout are copied to the work folder,
# scripts/caffe_example_data.py makes tiny sources at the paths the nets name (LMDBs, LevelDBs, mean files, image
# lists, HDF5 lists), and each net runs, from that folder, as
#   strata time --model=NET --iterations=1 --warmup=0 --phase=PHASE [--stage=S]
# The table gives each net's result: ran, refused (a type Strata leaves out on purpose: WindowData, Python;
# docs/caffe.md) with its error line, or failed with its error line. The exit status is non-zero if any net
# other than those expected refusals did not run.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
caffe="" build=build work="" timeout_s=300 phases="TRAIN TEST"
while [ $# -gt 0 ]; do
  case "$1" in
    --caffe) caffe=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --phases) phases=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# Nets Strata refuses on purpose, and the layer type their error must name (anything else is a failure).
declare -A expected_refusal=(
  [examples/finetune_pascal_detection/pascal_finetune_trainval_test.prototxt]=WindowData
  [examples/pycaffe/linreg.prototxt]=Python
)

build=$(cd "$build" && pwd)
for tool in strata convert_imageset convert_mnist_data compute_image_mean; do
  if [ ! -x "$build/bin/$tool" ]; then
    echo "$build/bin/$tool is missing: cmake --build $build --target $tool" >&2
    exit 2
  fi
done

cleanup=()
trap 'rm -rf "${cleanup[@]:-/nonexistent}"' EXIT
if [ -z "$caffe" ]; then
  caffe=$(mktemp -d -t caffe-src.XXXXXX)
  cleanup+=("$caffe")
  git -C /work/.mirror/BVLC+caffe/repo archive HEAD examples models | tar -x -C "$caffe"
fi
caffe=$(cd "$caffe" && pwd)
if [ -z "$work" ]; then
  work=$(mktemp -d -t caffe-examples.XXXXXX)
  cleanup+=("$work")
fi
mkdir -p "$work"
work=$(cd "$work" && pwd)

# The nets: files under examples/ and models/ with a top-level layer/layers block.
nets=()
while IFS= read -r f; do
  if grep -Eq '^(layer|layers)[[:space:]]*\{' "$caffe/$f"; then nets+=("$f"); fi
done < <(cd "$caffe" && find examples models -name '*.prototxt' | LC_ALL=C sort)
echo "${#nets[@]} nets under $caffe/{examples,models}; working in $work"

for f in "${nets[@]}"; do
  mkdir -p "$work/$(dirname "$f")"
  cp "$caffe/$f" "$work/$f"
done

start=$(date +%s)
/usr/bin/python3 "$here/caffe_example_data.py" "$work" "$build/bin"

# Every source and mean file the nets name should now exist; one that does not is reported (a new example).
missing=0
while IFS= read -r p; do
  case "$p" in *window_file*) continue ;; esac  # WindowData's files: the layer is refused before reading them
  [ -e "$work/$p" ] || { echo "no generated data for '$p' (add it to scripts/caffe_example_data.py)"; missing=1; }
done < <(cd "$work" && grep -hoE '^[^#]*(source|mean_file):[[:space:]]*"[^"]+"' "${nets[@]}" \
           | sed -E 's/.*"([^"]+)"/\1/' | LC_ALL=C sort -u)

# One line per net and phase: file, phase, result, seconds, detail.
results=() failures=0
for f in "${nets[@]}"; do
  # A net whose TEST layers are chosen by stage (mnist_autoencoder: test-on-train, test-on-test, as its solver's
  # test_state) runs its TEST phase once per stage; with no stage it has no TEST data layer, in Caffe too.
  stages=$( (grep -oE "^[^#]*stage:[[:space:]]*[\"'][^\"']+" "$work/$f" || true) | sed -E "s/.*[\"']//" | sort -u)
  runs=()
  for phase in $phases; do
    if [ "$phase" = TEST ] && [ -n "$stages" ]; then
      for stage in $stages; do runs+=("TEST:$stage"); done
    else
      runs+=("$phase")
    fi
  done
  for run in "${runs[@]}"; do
    phase=${run%%:*} stage_flag=()
    [ "$run" = "$phase" ] || stage_flag=(--stage="${run#*:}")
    log="$work/_logs/${f//\//_}.$run.log"
    mkdir -p "$work/_logs"
    t0=$(date +%s%N)
    set +e
    (cd "$work" && timeout "$timeout_s" "$build/bin/strata" time --model="$f" --iterations=1 --warmup=0 \
       --phase="$phase" "${stage_flag[@]}") >"$log" 2>&1
    rc=$?
    set -e
    secs=$(( ($(date +%s%N) - t0) / 10000000 ))  # hundredths
    # The error line, without the list of known types that follows an unknown type.
    err=$(grep -m1 -oE '(error|Error|F[0-9]{4} ).*' "$log" | sed -E 's/ \(known types:.*//' || true)
    if [ $rc -eq 0 ]; then
      result=ran err=""
    elif [ $rc -eq 124 ]; then
      result=failed err="timed out after ${timeout_s} s"
    elif [ -n "${expected_refusal[$f]:-}" ] && [[ "$err" == *"'${expected_refusal[$f]}'"* ]]; then
      result=refused
    else
      result=failed
      [ -n "$err" ] || err="exit status $rc, see $log"
    fi
    [ "$result" = failed ] && failures=$((failures + 1))
    results+=("$(printf '%-74s %-18s %-8s %4d.%02d  %s' "$f" "$run" "$result" $((secs / 100)) $((secs % 100)) \
                "$err")")
  done
done

echo
printf '%-74s %-18s %-8s %7s  %s\n' file phase result seconds error
printf '%s\n' "${results[@]}"
echo
echo "${#nets[@]} nets, phases: $phases; $failures failed; total $(( $(date +%s) - start )) s"
[ $failures -eq 0 ] && [ $missing -eq 0 ]
