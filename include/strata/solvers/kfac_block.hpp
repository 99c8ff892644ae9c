// One Kronecker block of K-FAC (docs/kfac.md): the weights and bias of an InnerProduct layer, or of one group of
// a Convolution. Its Fisher block is approximated as F = G (x) A, with
//   A = E[a a^T]                  a: the layer's input at one position (a patch, for a convolution) with a
//                                    trailing 1, the homogeneous coordinate that folds the bias into the weights
//   G = E_sample[sum_t g_t g_t^T]  g_t: the gradient of one sample's loss with respect to the layer's output at
//                                    position t (one position for an inner product; KFC's spatially
//                                    uncorrelated derivatives for a convolution)
// so that for the block's gradient as a matrix D (rows: outputs, columns: inputs and the bias), the natural
// gradient is (G (x) A)^-1 vec(D) = G^-1 D A^-1 (both factors are symmetric).
//
// The block computes this batch's factors from the layer's blobs (Collect*), keeps their running averages in
// double, inverts them (eigendecomposition or Cholesky, in double) and preconditions a gradient matrix with
// GEMMs in Dtype. Collecting, packing and preconditioning run on the solver's device (Strata::mode(): their
// pointers are host memory on the CPU, device memory on the GPU, through kfac_math.hpp); the running factors and
// the inversions stay on the host in double, so the GPU's inverses are the CPU's. Damping:
//   unsplit: (G (x) A + lambda I)^-1, exact through both eigenbases: divide by dG_i dA_j + lambda
//   split:   (G + lambda_G I)^-1 D (A + lambda_A I)^-1 with lambda_A = pi sqrt(lambda), lambda_G = sqrt(lambda)
//            / pi and pi = sqrt((tr A / dim A) / (tr G / dim G)) (Martens and Grosse's pi correction)
// A factor wider than max_dim is taken as the identity (its side is not preconditioned): the inverse of a
// 10,000-wide factor costs more than training gains from it.
#pragma once

#include <string>
#include <vector>

#include "strata/blob.hpp"
#include "strata/im2col.hpp"
#include "strata/proto/strata.pb.h"

namespace strata {

template <typename Dtype>
class KfacBlock {
 public:
  enum class Kind { kInnerProduct, kConvolution };
  struct Shape {
    Kind kind = Kind::kInnerProduct;
    int layer_id = -1;
    std::string name;       // "ip1" or "conv2 group 1"
    int group = 0;          // this block's group of a convolution
    int groups = 1;
    int outputs = 0;        // rows of the gradient matrix (this group's output channels)
    int inputs = 0;         // columns without the bias: K (inner product) or C/group * kh * kw
    bool bias = false;      // a homogeneous coordinate and a bias column
    bool transpose = false; // an inner product whose weights are K x N
    int weight_param = -1;  // learnable param ids
    int bias_param = -1;
  };

  KfacBlock(const Shape& shape, int max_dim);

  const Shape& shape() const { return shape_; }
  int a_dim() const { return shape_.inputs + (shape_.bias ? 1 : 0); }
  int g_dim() const { return shape_.outputs; }
  bool a_identity() const { return a_identity_; }
  bool g_identity() const { return g_identity_; }
  // Elements of the gradient matrix, and of the packed (upper-triangle) fresh factors.
  int matrix_size() const { return g_dim() * a_dim(); }
  int packed_factor_size() const;
  // The d^3 of inverting both factors (for balancing owners across ranks).
  double inverse_cost() const;
  // The bytes the block holds now: its fresh and running factors, inverses and scratch.
  double state_bytes() const;

  // This batch's factors from an inner product's input x (rows x K) or output gradient dy (rows x N): each row
  // is one sample; `sample_scale` turns dy's rows into per-sample gradients (the batch size, for a mean loss).
  void CollectInnerProductA(const Dtype* x, int rows);
  void CollectInnerProductG(const Dtype* dy, int rows, Dtype sample_scale);
  // The same for a convolution over `images` images of geometry `conv` (one image, all channels; this block reads
  // its group's channels) with `num_output` output channels in all.
  void CollectConvolutionA(const Dtype* x, int images, const ConvGeometry& conv);
  void CollectConvolutionG(const Dtype* dy, int images, const ConvGeometry& conv, int num_output, Dtype sample_scale);
  // Starts a new batch's factors (Collect* calls add up, so a convolution with several bottoms counts them all).
  void ResetFresh();
  bool has_fresh() const { return fresh_samples_a_ > 0 && fresh_samples_g_ > 0; }

  // Packs this batch's averaged factors (upper triangles, A then G) into `out` (packed_factor_size() values, on
  // the solver's device), and folds packed factors (host memory, summed over `ranks` ranks) into the running
  // averages: the first ones are taken as they are, later ones as decay * old + (1 - decay) * new.
  void PackFresh(Dtype* out) const;
  void FoldFactors(const Dtype* packed, int ranks, double decay);
  bool has_factors() const { return has_factors_; }

  // Inverts the running factors for `damping` (CHOLESKY needs split damping). A factor that is not positive
  // definite, or not finite, is retried with ten times the damping, up to six times, with a warning; if that
  // fails too the block keeps its previous inverse (or none: it passes the gradient through unchanged).
  void ComputeInverses(double damping, bool split, KfacParameter::InverseMethod method);
  bool has_inverses() const { return has_inverses_; }

  // The gradient matrix of the block from the params' diffs, and back.
  void GatherGradient(const std::vector<Blob<Dtype>*>& params, Dtype* matrix) const;
  void ScatterGradient(const Dtype* matrix, const std::vector<Blob<Dtype>*>& params) const;
  // out = the preconditioned `matrix` (both g_dim x a_dim); out == matrix is allowed.
  void Precondition(const Dtype* matrix, Dtype* out);
  // The same for an inner product's gradient given as its factors, D = dy^T [x 1] (x: rows x inputs, dy:
  // rows x outputs): G^-1 D A^-1 = (G^-1 dy^T) ([x 1] A^-1), which for a batch narrower than the layer costs a
  // fraction of the product with D. The result is multiplied by dy_scale. Split damping only (the unsplit form
  // divides between the rotations).
  void PreconditionFactored(const Dtype* x, const Dtype* dy, int rows, Dtype dy_scale, Dtype* out);
  // Whether PreconditionFactored would be cheaper than Precondition for `rows` rows.
  bool FactoredIsCheaper(int rows) const;
  bool split() const { return split_; }

  // The running factors and the last inverses, for a solverstate, and back: Restore checks that the state is
  // this block's (its name and sizes) and throws Error naming `origin` otherwise.
  void SaveState(KfacBlockState* state) const;
  void RestoreState(const KfacBlockState& state, const std::string& origin);
  // The running factors (full, row-major), for tests and tools.
  const std::vector<double>& A() const { return A_; }
  const std::vector<double>& G() const { return G_; }
  // The damping each side received at the last inversion (split form; 0 for unsplit).
  double lambda_a() const { return lambda_a_; }
  double lambda_g() const { return lambda_g_; }
  double damping() const { return damping_; }

 private:
  // One side's inverse as the solver's device reads it: the matrix (split: (F + lambda I)^-1; unsplit: F's
  // eigenvectors as columns; none for an identity side) and, unsplit, the eigenvalues (ones for an identity side).
  struct Side {
    Blob<Dtype> matrix;
    Blob<Dtype> divisors;
    std::vector<double> values;    // unsplit: the eigenvalues in double, for the solverstate
    double identity_scale = 1;     // an identity side: multiply by this
  };
  // An inverse as InvertSide computes it (in double, on the solver's device), before both sides succeeded.
  struct Inverse {
    Blob<double> matrix;
    Blob<double> eigenvalues;    // unsplit and EIGEN: the solver's output
    std::vector<double> values;  // unsplit: the eigenvalues, clamped at 0
    double identity_scale = 1;
  };
  // M: kfac_math.hpp's operations of the solver's device.
  template <typename M>
  bool InvertSide(M m, const std::vector<double>& f, int n, bool identity, double lambda, bool eigen,
                  Inverse* side) const;
  static void Commit(const Inverse& inverse, int n, bool identity, Side* side);
  // n ones on the solver's device (M: kfac_math.hpp), for row sums as GEMVs.
  template <typename M>
  const Dtype* Ones(M m, int n);

  Shape shape_;
  bool a_identity_ = false, g_identity_ = false;
  // This batch: sums of a a^T (K x K) and of a (K), of g g^T; divided out by the sample counts when packed.
  Blob<Dtype> fresh_a_, fresh_a_sum_, fresh_g_;
  double fresh_samples_a_ = 0, fresh_samples_g_ = 0;
  Blob<Dtype> columns_;  // im2col (or gathered output gradients) of a few images
  Blob<Dtype> ones_;     // a vector of ones: row sums as GEMVs
  std::vector<double> A_, G_;   // running averages
  bool has_factors_ = false;
  Side a_inv_, g_inv_;
  bool split_ = true;
  bool has_inverses_ = false;
  double damping_ = 0, lambda_a_ = 0, lambda_g_ = 0;
  Blob<Dtype> scratch_;
};

}  // namespace strata
