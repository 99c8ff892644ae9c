# Sourced on the GPU machine (docs/gpu.md): unpacks .gpu/strata-gpu.tar.xz (made by scripts/gpu_bundle.sh) into
# /tmp/strata and points the loader at it, at the machine's own CUDA libraries and at the cuDNN, cuBLAS and NCCL
# that its PyTorch carries.
#   source scripts/gpu_unpack.sh [BUNDLE=.gpu/strata-gpu.tar.xz]
STRATA_GPU_ROOT=/tmp/strata
mkdir -p "$STRATA_GPU_ROOT"
tar -C "$STRATA_GPU_ROOT" -xJf "${1:-.gpu/strata-gpu.tar.xz}"
# The Python that holds PyTorch and its nvidia-* wheels: python3 on PATH, else the image's venv.
_strata_py=python3
for _p in python3 /opt/torch/.venv/bin/python3; do
  if env -u LD_LIBRARY_PATH "$_p" -c "import nvidia" 2>/dev/null; then
    _strata_py=$_p
    break
  fi
done
_strata_py_lib() {  # a folder inside a Python package (namespace packages have no __file__)
  env -u LD_LIBRARY_PATH "$_strata_py" -c "import importlib, os; m = importlib.import_module('$1'); \
d = os.path.dirname(m.__file__) if getattr(m, '__file__', None) else list(m.__path__)[0]; print(os.path.join(d, '$2'))" 2>/dev/null
}
# The wheels' layout (CUDA 13): nvidia-cudnn-cu13 in nvidia/cudnn/lib, nvidia-nccl-cu13 in nvidia/nccl/lib,
# nvidia-cublas and nvidia-cuda-runtime (cuBLAS, cudart) in nvidia/cu13/lib; cuSOLVER (K-FAC's inversions) needs
# cuSPARSE and nvJitLink beside it.
_strata_paths="$STRATA_GPU_ROOT/lib"
for d in "$(_strata_py_lib nvidia.cudnn lib)" "$(_strata_py_lib nvidia.cu13 lib)" "$(_strata_py_lib nvidia.cublas lib)" \
         "$(_strata_py_lib nvidia.nccl lib)" "$(_strata_py_lib nvidia.cusolver lib)" "$(_strata_py_lib nvidia.cusparse lib)" \
         /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -n "$d" ] && [ -d "$d" ] && _strata_paths="$_strata_paths:$d"
done
# Last resort for each CUDA library libstrata links that none of those folders has: wherever it is (one search).
_missing=()
for _lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcusolver.so.12 libcusparse.so.12 libnvJitLink.so.13 libcudnn.so.9 libnccl.so.2; do
  _have=
  for _d in ${_strata_paths//:/ }; do [ -e "$_d/$_lib" ] && _have=1; done
  [ -n "$_have" ] || _missing+=(-o -name "$_lib")
done
if [ ${#_missing[@]} -gt 0 ]; then
  for _found in $(find /usr /opt \( "${_missing[@]:1}" \) 2>/dev/null | xargs -r -n1 dirname | sort -u); do
    _strata_paths="$_strata_paths:$_found"
  done
fi
export LD_LIBRARY_PATH="$_strata_paths${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$STRATA_GPU_ROOT/bin:$STRATA_GPU_ROOT/ompi/bin:$PATH"
# Open MPI (Debian's 4.1), moved: its prefix, and the plugins of its PMIx (gpu_bundle.sh copies both).
export OPAL_PREFIX="$STRATA_GPU_ROOT/ompi"
export OPAL_SYSCONFDIR="$STRATA_GPU_ROOT/ompi/etc/openmpi"
export PMIX_INSTALL_PREFIX="$STRATA_GPU_ROOT/pmix2"
export PMIX_MCA_mca_base_component_path="$STRATA_GPU_ROOT/pmix2/lib/pmix"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One machine, which may have no ssh: Open MPI's default launcher then stops every mpirun, and every MPI_Init
# outside mpirun (`strata train` on one rank), at once ("plm_rsh_agent: ssh : rsh ... could not be found");
# the isolated launcher starts local processes only, which is all these runs need.
export OMPI_MCA_plm="${OMPI_MCA_plm:-isolated}"
# Shared memory without CMA: vader's single copy is process_vm_readv, which a sandbox (gVisor) may lack or refuse;
# the copy-in/copy-out path works anywhere (Strata's own shm allreduce does not use vader).
export OMPI_MCA_btl_vader_single_copy_mechanism="${OMPI_MCA_btl_vader_single_copy_mechanism:-none}"
unset _strata_paths _strata_py _p _lib _found _missing _have _d
unset -f _strata_py_lib
