#!/usr/bin/env bash
# Installs a built Strata into a temporary prefix and uses it as a user's project would: examples/custom_layer is
# configured with find_package(Strata) against that prefix, built, and run (a layer of its own in a net, forward,
# backward and a gradient check); the installed `strata` tool must run from the prefix too, and train a net with
# the example's layer loaded as a plugin (--plugin).
#
#   tests/install_consumer.sh BUILD_DIR SOURCE_DIR      (ctest: install_consumer)
set -euo pipefail
build=$(cd "${1:?usage: install_consumer.sh BUILD_DIR SOURCE_DIR}" && pwd)
src=$(cd "${2:?usage: install_consumer.sh BUILD_DIR SOURCE_DIR}" && pwd)
tmp=$(mktemp -d /tmp/strata_install_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

step() { echo "install_consumer: $*"; }
fail() { echo "install_consumer: FAILED: $*" >&2; exit 1; }

step "cmake --install into $prefix"
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }
for f in lib/libstrata.so bin/strata include/strata/net.hpp include/strata/proto/strata.pb.h \
         lib/cmake/Strata/StrataConfig.cmake lib/cmake/Strata/StrataTargets.cmake; do
  [ -e "$prefix/$f" ] || fail "the prefix has no $f"
done

step "the installed strata tool runs"
"$prefix/bin/strata" time --model="$src/models/lenet/deploy.prototxt" --iterations=1 --step=false \
  > "$tmp/time.log" 2>&1 || { cat "$tmp/time.log"; fail "installed strata time"; }
grep -q "Average Forward pass" "$tmp/time.log" || { cat "$tmp/time.log"; fail "no timing from the installed strata"; }

# Image decoding is a module loaded at run time (src/strata/data/image_codecs.hpp): the installed tools must find
# it beside the installed library.
if [ -e "$build/libstrata_image_codecs.so" ]; then
  step "the installed convert_imageset decodes an image through the installed codec module"
  [ -e "$prefix/lib/libstrata_image_codecs.so" ] || fail "the prefix has no lib/libstrata_image_codecs.so"
  mkdir -p "$tmp/images"
  printf 'P5\n3 2\n255\n\001\002\003\004\005\006' > "$tmp/images/a.pgm"  # a 3 x 2 gray image
  echo "a.pgm 3" > "$tmp/images/list.txt"
  # LD_DEBUG=files names every library loaded: it must be the prefix's module, not the build tree's.
  LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld" "$prefix/bin/convert_imageset" --gray "$tmp/images/" \
    "$tmp/images/list.txt" "$tmp/images/db" > "$tmp/convert.log" 2>&1 ||
    { cat "$tmp/convert.log"; fail "the installed convert_imageset"; }
  cat "$tmp"/ld.* > "$tmp/ld.log"
  grep -qE "init: $prefix/(bin/\.\./)?lib/libstrata_image_codecs.so" "$tmp/ld.log" ||
    { grep -F image_codecs "$tmp/ld.log"; fail "convert_imageset did not load $prefix/lib/libstrata_image_codecs.so"; }
  grep -q "Wrote 1 images" "$tmp/convert.log" || { cat "$tmp/convert.log"; fail "no image written"; }
fi

# The Python interface (python/): the installed package imports from the prefix, and the installed tool runs a
# Python layer through the installed interpreter module, which puts the prefix's package first on sys.path.
if [ -e "$build/libstrata_python.so" ]; then
  step "the installed strata package imports, and the installed strata trains linreg's Python loss"
  site=$prefix/lib/python3/dist-packages
  [ -e "$prefix/lib/libstrata_python.so" ] || fail "the prefix has no lib/libstrata_python.so"
  python=$(grep -m1 '^STRATA_PYTHON_EXECUTABLE:' "$build/CMakeCache.txt" | cut -d= -f2-)
  PYTHONPATH=$site "${python:-python3}" -c "import strata, caffe; assert strata.__file__.startswith('$site'), strata.__file__; assert caffe.Net is strata.Net" \
    > "$tmp/python.log" 2>&1 || { cat "$tmp/python.log"; fail "import strata from the prefix"; }
  (cd "$src" && LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/pyld" PYTHONPATH="$src/examples/pycaffe/layers" \
    "$prefix/bin/strata" train --solver=examples/pycaffe/linreg_solver.prototxt) > "$tmp/linreg.log" 2>&1 ||
    { cat "$tmp/linreg.log"; fail "the installed strata train with a Python layer"; }
  grep -q "Iteration 20, loss" "$tmp/linreg.log" || { cat "$tmp/linreg.log"; fail "linreg did not train"; }
  cat "$tmp"/pyld.* > "$tmp/pyld.log"
  grep -qE "init: $prefix/(bin/\.\./)?lib/libstrata_python.so" "$tmp/pyld.log" ||
    { grep -F strata_python "$tmp/pyld.log"; fail "strata did not load $prefix/lib/libstrata_python.so"; }
  grep -qE "init: $prefix/(bin/\.\./)?lib/python3/dist-packages/strata/_strata" "$tmp/pyld.log" ||
    { grep -F _strata "$tmp/pyld.log"; fail "strata did not import the prefix's package"; }
fi

step "configure and build examples/custom_layer against the prefix"
cmake -S "$src/examples/custom_layer" -B "$tmp/example" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  > "$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "configure the example"; }
cmake --build "$tmp/example" -j 2 > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "build the example"; }

step "run it"
"$tmp/example/custom_layer" > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; fail "the example failed"; }
cat "$tmp/run.log"
grep -q "layer softsign has type Softsign" "$tmp/run.log" || fail "the custom layer was not used"
grep -q "custom layer example: OK" "$tmp/run.log" || fail "the example's checks"
# It linked the installed library, not the build tree's. ldd's list goes to a file first: under pipefail,
# `ldd | grep -q` fails whenever grep stops reading early and ldd dies of SIGPIPE (a long list, as with CUDA).
ldd "$tmp/example/custom_layer" > "$tmp/ldd.log" || { cat "$tmp/ldd.log"; fail "ldd on the example"; }
grep -qF "$prefix/lib/libstrata.so" "$tmp/ldd.log" ||
  { cat "$tmp/ldd.log"; fail "the example is not linked against $prefix/lib/libstrata.so"; }
step "the installed strata tool trains a net with the example's layer as a plugin"
[ -e "$tmp/example/libsoftsign_layer.so" ] || fail "the example built no libsoftsign_layer.so"
cat > "$tmp/softsign.prototxt" <<'NET'
name: "softsign_net"
layer { name: "data" type: "DummyData" top: "x" top: "t"
        dummy_data_param { shape { dim: 4 dim: 6 } shape { dim: 4 dim: 3 }
                           data_filler { type: "gaussian" std: 1 } data_filler { type: "gaussian" std: 0.5 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "h" inner_product_param { num_output: 3 } }
layer { name: "soft" type: "Softsign" bottom: "h" top: "s" }
layer { name: "loss" type: "EuclideanLoss" bottom: "s" bottom: "t" top: "loss" }
NET
printf 'net: "%s"\nbase_lr: 0.05\nmax_iter: 3\nsnapshot_after_train: false\n' "$tmp/softsign.prototxt" \
  > "$tmp/softsign_solver.prototxt"
"$prefix/bin/strata" train --plugin="$tmp/example/libsoftsign_layer.so" --solver="$tmp/softsign_solver.prototxt" \
  > "$tmp/plugin.log" 2>&1 || { cat "$tmp/plugin.log"; fail "strata train --plugin"; }
grep -q "layer types Softsign" "$tmp/plugin.log" || { cat "$tmp/plugin.log"; fail "the plugin's layer was not loaded"; }
step "OK"
