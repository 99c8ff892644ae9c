#!/usr/bin/env bash
# Packs a CUDA build of Strata for a GPU machine that has CUDA, cuBLAS and cuDNN but none of our Debian packages
# (docs/gpu.md): the stripped programs and libstrata, the Debian libraries they load (as ldd lists them, minus
# the CUDA ones, which the GPU machine has itself), and Open MPI's plugins, helpers and help files, in one
# xz-compressed tar that scripts/gpu_unpack.sh opens on the other side.
#
#   bash scripts/gpu_bundle.sh [BUILD_DIR=build] [OUT_DIR=.gpu]
set -euo pipefail
build=${1:-build}
out=${2:-.gpu}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$out"

progs=(strata strata_tests convert_mnist_data)
if [ -x "$build/bin/strata_mpi_tests" ]; then
  progs+=(strata_mpi_tests)
else
  echo "warning: no $build/bin/strata_mpi_tests: gpu_checks.sh mpigpu will fail (build that target too)" >&2
fi
[ -x "$build/bin/allreduce_bench" ] && progs+=(allreduce_bench)
for p in "${progs[@]}"; do
  cp "$build/bin/$p" "$stage/bin/"
done
cp "$build/libstrata.so" "$stage/lib/"
# The plugins tests/test_plugin.cpp loads from the build folder's lib/ (built with strata_tests).
cp "$build"/lib/libstrata_*_plugin.so "$stage/lib/" 2>/dev/null || echo "warning: no plugins in $build/lib" >&2

# Libraries the programs need, except the CUDA ones (the GPU machine's own runtime, cuBLAS, cuDNN and NCCL must
# match its driver; NCCL is also 200 MB), glibc's, which every Linux has, and the C++ runtime: the GPU machine's is newer (its nvcc
# and PyTorch need that) and backward compatible, while ours, first on LD_LIBRARY_PATH, would break its PyTorch.
skip='^(libcuda|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libnvrtc|libnvJitLink|linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libstdc\+\+\.so|libgcc_s\.so)'
for f in "$stage"/bin/* "$stage/lib/libstrata.so"; do
  LD_LIBRARY_PATH="$build" ldd "$f" | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ $name =~ $skip ]] || [ "$name" = libstrata.so ]; then continue; fi
  cp -L "$path" "$stage/lib/$name"
done

# Open MPI looks for its plugins and helpers relative to OPAL_PREFIX (Debian's layout under /usr): MPI_Init in
# a single process starts no daemon, but mpirun needs orted and the plugins, and both print help files.
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi/lib
if [ -d "$ompi_lib/openmpi3" ]; then
  mkdir -p "$stage/ompi/lib/x86_64-linux-gnu/openmpi/lib" "$stage/ompi/bin" "$stage/ompi/share" "$stage/ompi/etc"
  cp -r "$ompi_lib/openmpi3" "$stage/ompi/lib/x86_64-linux-gnu/openmpi/lib/"
  for f in "$stage"/ompi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so; do
    ldd "$f" | awk '/=> \//{print $1, $3}'
  done | sort -u | while read -r name path; do
    if [[ $name =~ $skip ]] || [ -e "$stage/lib/$name" ]; then continue; fi
    cp -L "$path" "$stage/lib/$name"
  done
  for b in mpirun orterun orted; do cp -L "/usr/bin/$b" "$stage/ompi/bin/" 2>/dev/null || true; done
  cp -r /usr/share/openmpi "$stage/ompi/share/"
  cp -r /etc/openmpi "$stage/ompi/etc/"
fi
# Debian's Open MPI uses the separate PMIx 4, whose few plugins (compression, resource managers) and help files
# sit in its own prefix; gpu_unpack.sh points PMIx at this copy of its plugins (without them every mpirun
# prints "Sorry! You were supposed to get help about: unavailable ... help-pcompress.txt").
pmix=/usr/lib/x86_64-linux-gnu/pmix2
if [ -d "$pmix/lib/pmix" ]; then
  mkdir -p "$stage/pmix2/lib"
  cp -r "$pmix/lib/pmix" "$stage/pmix2/lib/"
  [ -d "$pmix/share" ] && cp -r "$pmix/share" "$stage/pmix2/"
  for f in "$stage"/pmix2/lib/pmix/*.so; do
    ldd "$f" | awk '/=> \//{print $1, $3}'
  done | sort -u | while read -r name path; do
    if [[ $name =~ $skip ]] || [ -e "$stage/lib/$name" ]; then continue; fi
    cp -L "$path" "$stage/lib/$name"
  done
fi
# The tests find the sources and the tools at the absolute paths CMake had here (STRATA_SOURCE_DIR and
# STRATA_BINARY_DIR are compiled in): gpu_checks.sh links them to the checkout and to the unpacked bundle.
if [ -f "$build/CMakeCache.txt" ]; then
  sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" >"$stage/source_dir"
  sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$build/CMakeCache.txt" >"$stage/build_dir"
fi
strip --strip-unneeded "$stage"/bin/* "$stage"/lib/*.so* 2>/dev/null || true

XZ_OPT=${XZ_OPT:--9e -T2} tar -C "$stage" -cJf "$out/strata-gpu.tar.xz" .
ls -l "$out/strata-gpu.tar.xz"
# The device tool carries 64 MiB in all (checkout, bundle and .gpudata's 30 MB): a build with OpenCV does not fit.
if [ "$(stat -c %s "$out/strata-gpu.tar.xz")" -gt $((30 << 20)) ]; then
  echo "warning: the bundle is over 30 MiB; with .gpudata it will not fit the device tool's 64 MiB" \
       "(a build with OpenCV? docs/gpu.md builds build-gpu without it)" >&2
fi
