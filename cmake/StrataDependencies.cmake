# What libstrata links against, found the same way when Strata is built (CMakeLists.txt) and when a project uses
# an installed Strata (StrataConfig.cmake includes this file from lib/cmake/Strata). Debian 12 packages:
# scripts/install_deps.sh. Libraries without a CMake package of their own become imported targets Strata::NAME.
#
# Set before including it:
#   STRATA_HAVE_CUDA     the CUDA runtime and cuBLAS (and cuDNN and NCCL, as below)
#   STRATA_FIND_OPTIONAL ON while building: OpenCV, cuDNN and NCCL (when the option STRATA_USE_NCCL is on) are
#                        used when they are found, and STRATA_USE_OPENCV, STRATA_USE_CUDNN and STRATA_HAVE_NCCL say
#                        whether they were. OFF in StrataConfig.cmake: those three say what the installed build used,
#                        and each one it used must be found again.

# A library found by header and name, as the imported target Strata::${target}.
function(strata_import_library target header library)
  string(TOUPPER "${target}" var)
  find_path(STRATA_${var}_INCLUDE_DIR ${header} PATH_SUFFIXES ${ARGN} HINTS ${STRATA_LIBRARY_HINTS})
  find_library(STRATA_${var}_LIBRARY ${library} HINTS ${STRATA_LIBRARY_HINTS})
  if(NOT STRATA_${var}_INCLUDE_DIR OR NOT STRATA_${var}_LIBRARY)
    set(STRATA_${var}_FOUND FALSE PARENT_SCOPE)
    return()
  endif()
  if(NOT TARGET Strata::${target})
    add_library(Strata::${target} UNKNOWN IMPORTED)
    set_target_properties(Strata::${target} PROPERTIES IMPORTED_LOCATION "${STRATA_${var}_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${STRATA_${var}_INCLUDE_DIR}")
  endif()
  set(STRATA_${var}_FOUND TRUE PARENT_SCOPE)
endfunction()

# The same for a library Strata cannot do without.
function(strata_require_library target header library)
  strata_import_library(${target} ${header} ${library} ${ARGN})
  string(TOUPPER "${target}" var)
  if(NOT STRATA_${var}_FOUND)
    message(FATAL_ERROR "Strata needs ${library} (${header}): "
                        "install the Debian packages scripts/install_deps.sh lists")
  endif()
endfunction()

find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(MPI REQUIRED COMPONENTS C)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(PkgConfig REQUIRED)
pkg_check_modules(GLOG REQUIRED IMPORTED_TARGET libglog)
strata_require_library(gflags gflags/gflags.h gflags)
strata_require_library(openblas cblas.h openblas openblas)
strata_require_library(lapacke lapacke.h lapacke openblas)
strata_require_library(lmdb lmdb.h lmdb)

# OpenCV (encoded images). Debian ships OpenCV's CMake package only in libopencv-dev (every module); the three -dev
# packages install_deps.sh installs carry the headers and libraries, so look for those directly.
if(STRATA_FIND_OPTIONAL OR STRATA_USE_OPENCV)
  find_package(OpenCV QUIET COMPONENTS core imgproc imgcodecs)
  if(OpenCV_FOUND AND NOT TARGET Strata::opencv)
    add_library(Strata::opencv INTERFACE IMPORTED)
    set_target_properties(Strata::opencv PROPERTIES INTERFACE_LINK_LIBRARIES "${OpenCV_LIBS}"
                          INTERFACE_INCLUDE_DIRECTORIES "${OpenCV_INCLUDE_DIRS}")
  elseif(NOT OpenCV_FOUND)
    strata_import_library(opencv_core opencv2/core.hpp opencv_core opencv4)
    strata_import_library(opencv_imgproc opencv2/imgproc.hpp opencv_imgproc opencv4)
    strata_import_library(opencv_imgcodecs opencv2/imgcodecs.hpp opencv_imgcodecs opencv4)
    if(STRATA_OPENCV_CORE_FOUND AND STRATA_OPENCV_IMGPROC_FOUND AND STRATA_OPENCV_IMGCODECS_FOUND)
      set(OpenCV_FOUND TRUE)
      if(NOT TARGET Strata::opencv)
        add_library(Strata::opencv INTERFACE IMPORTED)
        set_target_properties(Strata::opencv PROPERTIES INTERFACE_LINK_LIBRARIES
                              "Strata::opencv_imgcodecs;Strata::opencv_imgproc;Strata::opencv_core")
      endif()
    endif()
  endif()
  if(NOT STRATA_FIND_OPTIONAL AND NOT OpenCV_FOUND)
    message(FATAL_ERROR "this Strata was built with OpenCV: install libopencv-imgcodecs-dev")
  endif()
  if(STRATA_FIND_OPTIONAL)
    set(STRATA_USE_OPENCV ${OpenCV_FOUND})
  endif()
endif()

# An optional library: while building, used when found (and `wanted`), which sets ${flag}; for an installed
# Strata, one the build used (${flag} true) must be found again.
function(strata_optional_library flag wanted target header library)
  if(STRATA_FIND_OPTIONAL AND wanted)
    strata_import_library(${target} ${header} ${library})
    string(TOUPPER "${target}" var)
    set(${flag} ${STRATA_${var}_FOUND} PARENT_SCOPE)
  elseif(NOT STRATA_FIND_OPTIONAL AND ${flag})
    strata_require_library(${target} ${header} ${library})
  endif()
endfunction()

if(STRATA_HAVE_CUDA)
  find_package(CUDAToolkit REQUIRED)
  # cuDNN and NCCL sit beside the toolkit here; on the GPU machines they come with PyTorch (docs/gpu.md).
  set(STRATA_LIBRARY_HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_INCLUDE_DIRS})
  strata_optional_library(STRATA_USE_CUDNN ON cudnn cudnn.h cudnn)
  strata_optional_library(STRATA_HAVE_NCCL "${STRATA_USE_NCCL}" nccl nccl.h nccl)
  unset(STRATA_LIBRARY_HINTS)
endif()
