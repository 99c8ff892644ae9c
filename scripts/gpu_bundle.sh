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
[ -x "$build/bin/strata_mpi_tests" ] && progs+=(strata_mpi_tests)
[ -x "$build/bin/allreduce_bench" ] && progs+=(allreduce_bench)
for p in "${progs[@]}"; do
  cp "$build/bin/$p" "$stage/bin/"
done
cp "$build/libstrata.so" "$stage/lib/"

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
strip --strip-unneeded "$stage"/bin/* "$stage"/lib/*.so* 2>/dev/null || true

XZ_OPT=${XZ_OPT:--3 -T2} tar -C "$stage" -cJf "$out/strata-gpu.tar.xz" .
ls -l "$out/strata-gpu.tar.xz"
