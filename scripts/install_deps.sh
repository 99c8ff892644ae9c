#!/usr/bin/env bash
# Installs exactly the Debian 12 packages Strata needs to build, test and run its examples.
# Idempotent: packages already present are skipped, so a second run does nothing but check.
# Run as root (CI does). Set STRATA_WITH_BENCH=1 to also install what the PyTorch comparisons need.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  clang libclang-rt-14-dev libomp-14-dev
  protobuf-compiler libprotobuf-dev
  libgoogle-glog-dev libgflags-dev
  libopenblas-dev liblapacke-dev
  libdnnl-dev   # oneDNN: the CPU engine of Convolution (docs/onednn.md)
  liblmdb-dev libleveldb-dev libhdf5-dev zlib1g-dev
  openmpi-bin libopenmpi-dev
  libgtest-dev
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev
  dataset-fashion-mnist
  python3 python3-matplotlib
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pil python3-pytest   # the Python interface (docs/python.md)
  python3-protobuf   # caffe_pb2 for Caffe's own scripts (docs/python.md)
  graphviz      # dot: strata draw
  iproute2 util-linux   # ip, tc, nsenter, unshare: the multi-host test bed (scripts/cluster.sh)
)
if [ "${STRATA_WITH_BENCH:-0}" = 1 ]; then
  packages+=(python3-torch)
fi

missing=()
for p in "${packages[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != *"install ok installed"* ]]; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install_deps: missing packages (${missing[*]}); run as root" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install_deps: installed ${missing[*]}"
