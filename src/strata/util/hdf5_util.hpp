// What the HDF5 layers and the HDF5 snapshot files share (private to libstrata): HDF5 handles closed on scope exit,
// HDF5's automatic error printing turned off while Strata calls the library, and the HDF5 memory type of a Dtype.
#pragma once

#include <hdf5.h>

#include <string>
#include <type_traits>

namespace strata {
namespace hdf5 {

// Turns off HDF5's automatic error-stack printing for one scope (failures become strata::Errors instead) and
// restores whatever handler was set before.
class QuietErrors {
 public:
  QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// An HDF5 identifier (file, dataset, dataspace, datatype, property list) closed by `Close` when it goes out of
// scope; negative (a failed call) closes nothing.
template <herr_t (*Close)(hid_t)>
class Handle {
 public:
  explicit Handle(hid_t id = -1) : id_(id) {}
  ~Handle() {
    if (id_ >= 0) Close(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
};
using File = Handle<H5Fclose>;
using Dataset = Handle<H5Dclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using PropertyList = Handle<H5Pclose>;

// H5T_NATIVE_FLOAT or H5T_NATIVE_DOUBLE: the memory type H5Dread/H5Dwrite convert to and from.
template <typename Dtype>
hid_t MemoryType() {
  static_assert(std::is_same<Dtype, float>::value || std::is_same<Dtype, double>::value, "float or double");
  return std::is_same<Dtype, float>::value ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
}

// Whether `file` has a link `name` at its root (false, not an HDF5 error, when it has none).
inline bool HasLink(hid_t file, const std::string& name) {
  return !name.empty() && H5Lexists(file, name.c_str(), H5P_DEFAULT) > 0;
}

}  // namespace hdf5
}  // namespace strata
