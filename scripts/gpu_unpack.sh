# Sourced on the GPU machine (docs/gpu.md): unpacks .gpu/strata-gpu.tar.xz (made by scripts/gpu_bundle.sh) into
# /tmp/strata and points the loader at it, at the machine's own CUDA libraries and at the cuDNN, cuBLAS and NCCL
# that its PyTorch carries.
#   source scripts/gpu_unpack.sh [BUNDLE=.gpu/strata-gpu.tar.xz]
STRATA_GPU_ROOT=/tmp/strata
mkdir -p "$STRATA_GPU_ROOT"
tar -C "$STRATA_GPU_ROOT" -xJf "${1:-.gpu/strata-gpu.tar.xz}"
_strata_py_lib() {  # a folder inside a Python package (namespace packages have no __file__)
  env -u LD_LIBRARY_PATH python3 -c "import importlib, os; m = importlib.import_module('$1'); \
d = os.path.dirname(m.__file__) if getattr(m, '__file__', None) else list(m.__path__)[0]; print(os.path.join(d, '$2'))" 2>/dev/null
}
_strata_paths="$STRATA_GPU_ROOT/lib"
for d in "$(_strata_py_lib nvidia.cudnn lib)" "$(_strata_py_lib nvidia.cu13 lib)" "$(_strata_py_lib nvidia.cublas lib)" \
         "$(_strata_py_lib nvidia.nccl lib)" \
         /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -n "$d" ] && [ -d "$d" ] && _strata_paths="$_strata_paths:$d"
done
# Last resort for cuDNN and NCCL (libstrata links NCCL when the build found it): wherever the library is.
for _lib in libcudnn.so.9 libnccl.so.2; do
  if ! ls ${_strata_paths//:/ } 2>/dev/null | grep -q "$_lib"; then
    _found=$(find /usr /opt -name "$_lib" 2>/dev/null | head -1)
    [ -n "$_found" ] && _strata_paths="$_strata_paths:$(dirname "$_found")"
  fi
done
export LD_LIBRARY_PATH="$_strata_paths${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$STRATA_GPU_ROOT/bin:$STRATA_GPU_ROOT/ompi/bin:$PATH"
export OPAL_PREFIX="$STRATA_GPU_ROOT/ompi"
export OPAL_SYSCONFDIR="$STRATA_GPU_ROOT/ompi/etc/openmpi"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset _strata_paths _lib _found
