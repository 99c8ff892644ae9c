// The element-wise operations of the Reversible layer's coupling, for each device: the layer's passes are written
// once, as templates over one of these (private to src/strata/layers). CpuCoupling is defined here;
// GpuCoupling's kernels are in coupling_math.cu.
//
// They work on Rows: one state of every image. An image's states lie side by side in its blob, so one state of
// all images is `rows` rows of `width` values, row r at p + r * pitch.
#pragma once

#include <algorithm>

#include "strata/blob.hpp"

namespace strata {

template <typename P>
struct Rows {
  P p;
  long pitch;
  P row(long r) const { return p + r * pitch; }
};

// The same rows, read-only.
template <typename T>
Rows<const T*> ReadOnly(Rows<T*> r) {
  return {r.p, r.pitch};
}

template <typename Dtype>
struct CpuCoupling {
  static const Dtype* data(const Blob<Dtype>& b) { return b.cpu_data(); }
  static const Dtype* diff(const Blob<Dtype>& b) { return b.cpu_diff(); }
  static Dtype* mutable_data(Blob<Dtype>& b) { return b.mutable_cpu_data(); }
  static Dtype* mutable_diff(Blob<Dtype>& b) { return b.mutable_cpu_diff(); }

  // y = x.
  static void copy(int rows, long width, Rows<const Dtype*> x, Rows<Dtype*> y) {
    for (int r = 0; r < rows; ++r) std::copy_n(x.row(r), width, y.row(r));
  }
  // newer = f + gamma * older: a coupling step.
  static void couple(int rows, long width, Dtype gamma, Rows<const Dtype*> f, Rows<const Dtype*> older,
                     Rows<Dtype*> newer) {
    for (int r = 0; r < rows; ++r) {
      const Dtype *fr = f.row(r), *o = older.row(r);
      Dtype* n = newer.row(r);
      for (long e = 0; e < width; ++e) n[e] = fr[e] + gamma * o[e];
    }
  }
  // older = (newer - f) / gamma: its inverse.
  static void uncouple(int rows, long width, Dtype gamma, Rows<const Dtype*> newer, Rows<const Dtype*> f,
                       Rows<Dtype*> older) {
    for (int r = 0; r < rows; ++r) {
      const Dtype *n = newer.row(r), *fr = f.row(r);
      Dtype* o = older.row(r);
      for (long e = 0; e < width; ++e) o[e] = (n[e] - fr[e]) / gamma;
    }
  }
  // y = gamma * x.
  static void scale(int rows, long width, Dtype gamma, Rows<const Dtype*> x, Rows<Dtype*> y) {
    for (int r = 0; r < rows; ++r) {
      const Dtype* xr = x.row(r);
      Dtype* yr = y.row(r);
      for (long e = 0; e < width; ++e) yr[e] = gamma * xr[e];
    }
  }
  // y += x.
  static void add(int rows, long width, Rows<const Dtype*> x, Rows<Dtype*> y) {
    for (int r = 0; r < rows; ++r) {
      const Dtype* xr = x.row(r);
      Dtype* yr = y.row(r);
      for (long e = 0; e < width; ++e) yr[e] += xr[e];
    }
  }
};

#ifdef STRATA_USE_CUDA
// The same operations on the device (coupling_math.cu): one launch each, a grid of rows by columns.
template <typename Dtype>
struct GpuCoupling {
  static const Dtype* data(const Blob<Dtype>& b) { return b.gpu_data(); }
  static const Dtype* diff(const Blob<Dtype>& b) { return b.gpu_diff(); }
  static Dtype* mutable_data(Blob<Dtype>& b) { return b.mutable_gpu_data(); }
  static Dtype* mutable_diff(Blob<Dtype>& b) { return b.mutable_gpu_diff(); }

  static void copy(int rows, long width, Rows<const Dtype*> x, Rows<Dtype*> y);
  static void couple(int rows, long width, Dtype gamma, Rows<const Dtype*> f, Rows<const Dtype*> older,
                     Rows<Dtype*> newer);
  static void uncouple(int rows, long width, Dtype gamma, Rows<const Dtype*> newer, Rows<const Dtype*> f,
                       Rows<Dtype*> older);
  static void scale(int rows, long width, Dtype gamma, Rows<const Dtype*> x, Rows<Dtype*> y);
  static void add(int rows, long width, Rows<const Dtype*> x, Rows<Dtype*> y);
};
#endif

}  // namespace strata
