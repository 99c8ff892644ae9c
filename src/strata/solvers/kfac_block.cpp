#include "strata/solvers/kfac_block.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "kfac_math.hpp"
#include "strata/math_functions.hpp"

namespace strata {

namespace {

int packed(int n) { return n * (n + 1) / 2; }

// Images per GEMM when a convolution's factor reads several side by side: a few thousand columns at least.
int images_per_chunk(int images, int positions) { return std::max(1, std::min(images, 4096 / std::max(1, positions))); }

// `b` with room for n values (it grows, never shrinks), on the solver's device.
template <typename Dtype, typename M>
Dtype* room(M m, Blob<Dtype>* b, long n) {
  CHECK_LE(n, static_cast<long>(INT_MAX)) << "K-FAC: a buffer of " << n << " values";
  if (b->count() < n) b->Reshape({static_cast<int>(n)});
  return m.mutable_data(*b);
}

}  // namespace

template <typename Dtype>
KfacBlock<Dtype>::KfacBlock(const Shape& shape, int max_dim) : shape_(shape) {
  a_identity_ = a_dim() > max_dim;
  g_identity_ = g_dim() > max_dim;
  if (a_identity_ || g_identity_) {
    LOG(WARNING) << "K-FAC: " << shape_.name << ": " << (a_identity_ ? "A" : "") << (a_identity_ && g_identity_ ? " and " : "")
                 << (g_identity_ ? "G" : "") << " wider than max_factor_dim " << max_dim
                 << " taken as the identity (that side is not preconditioned)";
  }
}

template <typename Dtype>
int KfacBlock<Dtype>::packed_factor_size() const {
  return (a_identity_ ? 0 : packed(a_dim())) + (g_identity_ ? 0 : packed(g_dim()));
}

template <typename Dtype>
double KfacBlock<Dtype>::inverse_cost() const {
  const double a = a_identity_ ? 0 : a_dim(), g = g_identity_ ? 0 : g_dim();
  return a * a * a + g * g * g + static_cast<double>(g_dim()) * a_dim() * (a_dim() + g_dim());
}

template <typename Dtype>
double KfacBlock<Dtype>::state_bytes() const {
  double elements = 0;
  for (const Blob<Dtype>* b : {&fresh_a_, &fresh_a_sum_, &fresh_g_, &columns_, &ones_, &scratch_, &a_inv_.matrix,
                               &a_inv_.divisors, &g_inv_.matrix, &g_inv_.divisors}) {
    elements += static_cast<double>(b->count());
  }
  const double doubles = static_cast<double>(A_.size() + G_.size() + a_inv_.values.size() + g_inv_.values.size());
  return elements * sizeof(Dtype) + doubles * sizeof(double);
}

template <typename Dtype>
void KfacBlock<Dtype>::ResetFresh() {
  const int k = shape_.inputs, n = g_dim();
  OnSolverDevice<Dtype>([&](auto m) {
    if (!a_identity_) {
      fresh_a_.Reshape({k * k});
      fresh_a_sum_.Reshape({k});
      m.set(k * k, Dtype(0), m.mutable_data(fresh_a_));
      m.set(k, Dtype(0), m.mutable_data(fresh_a_sum_));
    }
    if (!g_identity_) {
      fresh_g_.Reshape({n * n});
      m.set(n * n, Dtype(0), m.mutable_data(fresh_g_));
    }
  });
  fresh_samples_a_ = fresh_samples_g_ = 0;
}

// The sum of a's rows (or columns) as a product with ones: one GEMV on either device.
template <typename Dtype>
template <typename M>
const Dtype* KfacBlock<Dtype>::Ones(M m, int n) {
  if (ones_.count() < n) {
    ones_.Reshape({n});
    m.set(n, Dtype(1), m.mutable_data(ones_));
  }
  return m.data(ones_);
}

template <typename Dtype>
void KfacBlock<Dtype>::CollectInnerProductA(const Dtype* x, int rows) {
  fresh_samples_a_ += rows;
  if (a_identity_) return;
  const int k = shape_.inputs;
  OnSolverDevice<Dtype>([&](auto m) {
    m.gemm(CblasTrans, CblasNoTrans, k, k, rows, Dtype(1), x, x, Dtype(1), m.mutable_data(fresh_a_));
    if (shape_.bias) {
      m.gemv(CblasTrans, rows, k, Dtype(1), x, Ones(m, rows), Dtype(1), m.mutable_data(fresh_a_sum_));
    }
  });
}

template <typename Dtype>
void KfacBlock<Dtype>::CollectInnerProductG(const Dtype* dy, int rows, Dtype sample_scale) {
  fresh_samples_g_ += rows;
  if (g_identity_) return;
  const int n = g_dim();
  // Per-sample gradients are sample_scale * dy: their outer products carry sample_scale^2.
  OnSolverDevice<Dtype>([&](auto m) {
    m.gemm(CblasTrans, CblasNoTrans, n, n, rows, sample_scale * sample_scale, dy, dy, Dtype(1),
           m.mutable_data(fresh_g_));
  });
}

template <typename Dtype>
void KfacBlock<Dtype>::CollectConvolutionA(const Dtype* x, int images, const ConvGeometry& conv) {
  const int positions = conv.out_count();
  fresh_samples_a_ += static_cast<double>(images) * positions;
  if (a_identity_) return;
  const int k = shape_.inputs;  // this group's rows of the column matrix
  const long image_size = static_cast<long>(conv.channels) * conv.height * conv.width;
  const int chunk = images_per_chunk(images, positions);
  OnSolverDevice<Dtype>([&](auto m) {
    Dtype* columns = room(m, &columns_, static_cast<long>(conv.col_rows()) * chunk * positions);
    for (int n0 = 0; n0 < images; n0 += chunk) {
      const int count = std::min(chunk, images - n0);
      const int width = count * positions;
      m.im2col(x + n0 * image_size, conv, count, columns);
      // Rows are `width` apart, so this group's rows are one k x width matrix.
      const Dtype* cols = columns + static_cast<long>(shape_.group) * k * width;
      m.gemm(CblasNoTrans, CblasTrans, k, k, width, Dtype(1), cols, cols, Dtype(1), m.mutable_data(fresh_a_));
      if (shape_.bias) {
        m.gemv(CblasNoTrans, k, width, Dtype(1), cols, Ones(m, width), Dtype(1), m.mutable_data(fresh_a_sum_));
      }
    }
  });
}

template <typename Dtype>
void KfacBlock<Dtype>::CollectConvolutionG(const Dtype* dy, int images, const ConvGeometry& conv, int num_output,
                                           Dtype sample_scale) {
  // One sample is one image: its positions' outer products add up (KFC), and the mean runs over images. The
  // images' n x positions gradients side by side make one GEMM of them.
  fresh_samples_g_ += images;
  if (g_identity_) return;
  const int n = g_dim(), positions = conv.out_count();
  const int chunk = images_per_chunk(images, positions);
  const long image_stride = static_cast<long>(num_output) * positions;
  OnSolverDevice<Dtype>([&](auto m) {
    Dtype* g = room(m, &columns_, static_cast<long>(n) * chunk * positions);
    for (int n0 = 0; n0 < images; n0 += chunk) {
      const int count = std::min(chunk, images - n0);
      m.gather_images(count, n, positions, dy + n0 * image_stride + static_cast<long>(shape_.group) * n * positions,
                      image_stride, g);
      m.gemm(CblasNoTrans, CblasTrans, n, n, count * positions, sample_scale * sample_scale, g, g, Dtype(1),
             m.mutable_data(fresh_g_));
    }
  });
}

template <typename Dtype>
void KfacBlock<Dtype>::PackFresh(Dtype* out) const {
  CHECK(has_fresh()) << shape_.name << ": no factors collected this iteration";
  OnSolverDevice<Dtype>([&](auto m) {
    if (!a_identity_) {
      m.pack_upper(shape_.inputs, m.data(fresh_a_), shape_.bias ? m.data(fresh_a_sum_) : nullptr,
                   static_cast<Dtype>(1.0 / fresh_samples_a_), out);
      out += packed(a_dim());
    }
    if (!g_identity_) m.pack_upper(g_dim(), m.data(fresh_g_), nullptr, static_cast<Dtype>(1.0 / fresh_samples_g_), out);
  });
}

template <typename Dtype>
void KfacBlock<Dtype>::FoldFactors(const Dtype* in, int ranks, double decay) {
  const double keep = has_factors_ ? decay : 0.0;
  auto fold = [&](std::vector<double>* f, int d) {
    f->resize(static_cast<size_t>(d) * d);
    for (int i = 0; i < d; ++i) {
      for (int j = i; j < d; ++j) {
        const double v = keep * (*f)[static_cast<size_t>(i) * d + j] + (1 - keep) * static_cast<double>(*in++) / ranks;
        (*f)[static_cast<size_t>(i) * d + j] = (*f)[static_cast<size_t>(j) * d + i] = v;
      }
    }
  };
  if (!a_identity_) fold(&A_, a_dim());
  if (!g_identity_) fold(&G_, g_dim());
  has_factors_ = true;
}

template <typename Dtype>
template <typename M>
bool KfacBlock<Dtype>::InvertSide(M, const std::vector<double>& f, int n, bool identity, double lambda, bool eigen,
                                  Inverse* side) const {
  if (identity) {
    side->identity_scale = split_ ? 1.0 / (1.0 + lambda) : 1.0;
    side->values.assign(1, 1.0);
    return true;
  }
  if (!CpuKfacMath<double>::all_finite(static_cast<int>(f.size()), f.data())) return false;  // on the host
  typename M::template As<double> d;  // in double, on the same device
  side->matrix.Reshape({n * n});
  double* m = d.overwritten_data(side->matrix);
  d.upload(n * n, f.data(), m);
  if (split_) d.add_diagonal(n, lambda, m);
  if (!eigen) return d.cholesky_inverse(n, m);
  side->eigenvalues.Reshape({n});
  if (!d.symmetric_eigen(n, m, d.overwritten_data(side->eigenvalues))) return false;
  std::vector<double> values(n);
  d.download(n, d.data(side->eigenvalues), values.data());
  if (!split_) {
    // A factor is positive semi-definite; rounding is not.
    side->values.resize(n);
    for (int i = 0; i < n; ++i) side->values[i] = std::max(values[i], 0.0);
    return true;
  }
  // The damped factor is positive definite in exact arithmetic; rounding can leave an eigenvalue at or below zero,
  // which is what "cannot be inverted" means here.
  if (values[0] <= 0) return false;
  // Explicit inverse V diag(1/values) V^T: one GEMM per side per iteration instead of two.
  Blob<double> scaled({n * n}), inverse({n * n});
  double* s = d.mutable_data(scaled);
  d.copy(n * n, m, s);
  d.divide_columns(n, d.data(side->eigenvalues), s);
  d.gemm(CblasNoTrans, CblasTrans, n, n, n, 1.0, s, m, 0.0, d.mutable_data(inverse));
  d.copy(n * n, d.data(inverse), m);
  return true;
}

template <typename Dtype>
void KfacBlock<Dtype>::Commit(const Inverse& inverse, int n, bool identity, Side* side) {
  side->identity_scale = inverse.identity_scale;
  side->values = inverse.values;
  if (!identity) {
    side->matrix.Reshape({n * n});
    OnSolverDevice<Dtype>([&](auto m) {
      typename decltype(m)::template As<double> d;
      m.convert(n * n, d.data(inverse.matrix), m.mutable_data(side->matrix));
    });
  }
  // The divisors of the unsplit form: an identity side's eigenvalues are all 1.
  side->divisors.Reshape({n});
  Dtype* d = side->divisors.mutable_cpu_data();
  for (int i = 0; i < n; ++i) d[i] = static_cast<Dtype>(identity || inverse.values.empty() ? 1.0 : inverse.values[i]);
}

template <typename Dtype>
void KfacBlock<Dtype>::ComputeInverses(double damping, bool split, KfacParameter::InverseMethod method) {
  CHECK(has_factors_) << shape_.name << ": inverses before any factors";
  split_ = split;
  const bool eigen = method == KfacParameter::EIGEN || !split;
  for (int attempt = 0; attempt <= 6; ++attempt, damping *= 10) {
    double la = damping, lg = damping;
    if (split) {
      // pi balances the damping between the factors by their average eigenvalue (trace / dimension).
      const auto mean_diag = [](const std::vector<double>& f, int d, bool identity) {
        if (identity) return 1.0;
        double t = 0;
        for (int i = 0; i < d; ++i) t += f[static_cast<size_t>(i) * d + i];
        return t / d;
      };
      const double ta = mean_diag(A_, a_dim(), a_identity_), tg = mean_diag(G_, g_dim(), g_identity_);
      double pi = std::sqrt(ta / tg);
      if (!std::isfinite(pi) || pi <= 0) pi = 1;
      la = pi * std::sqrt(damping);
      lg = std::sqrt(damping) / pi;
    }
    Inverse a, g;
    const bool inverted = OnSolverDevice<Dtype>([&](auto m) {
      return InvertSide(m, A_, a_dim(), a_identity_, la, eigen, &a) &&
             InvertSide(m, G_, g_dim(), g_identity_, lg, eigen, &g);
    });
    if (inverted) {
      Commit(a, a_dim(), a_identity_, &a_inv_);
      Commit(g, g_dim(), g_identity_, &g_inv_);
      damping_ = damping;
      lambda_a_ = split ? la : 0;
      lambda_g_ = split ? lg : 0;
      has_inverses_ = true;
      return;
    }
    LOG(WARNING) << "K-FAC: " << shape_.name << ": a factor could not be inverted with damping " << damping
                 << (attempt < 6 ? "; trying ten times more" : "; keeping the previous inverse");
  }
}

template <typename Dtype>
void KfacBlock<Dtype>::GatherGradient(const std::vector<Blob<Dtype>*>& params, Dtype* matrix) const {
  const int rows = g_dim();
  OnSolverDevice<Dtype>([&](auto m) {
    const Dtype* w = m.diff(*params[shape_.weight_param]) + static_cast<long>(shape_.group) * rows * shape_.inputs;
    const Dtype* b = shape_.bias ? m.diff(*params[shape_.bias_param]) + shape_.group * rows : nullptr;
    m.gather_matrix(rows, shape_.inputs, shape_.transpose, w, b, matrix);
  });
}

template <typename Dtype>
void KfacBlock<Dtype>::ScatterGradient(const Dtype* matrix, const std::vector<Blob<Dtype>*>& params) const {
  const int rows = g_dim();
  OnSolverDevice<Dtype>([&](auto m) {
    Dtype* w = m.mutable_diff(*params[shape_.weight_param]) + static_cast<long>(shape_.group) * rows * shape_.inputs;
    Dtype* b = shape_.bias ? m.mutable_diff(*params[shape_.bias_param]) + shape_.group * rows : nullptr;
    m.scatter_matrix(rows, shape_.inputs, shape_.transpose, matrix, w, b);
  });
}

template <typename Dtype>
void KfacBlock<Dtype>::Precondition(const Dtype* matrix, Dtype* out) {
  CHECK(has_inverses_) << shape_.name << ": preconditioning before any inverse";
  const int rows = g_dim(), cols = a_dim(), size = rows * cols;
  OnSolverDevice<Dtype>([&](auto m) {
    Dtype* t = room(m, &scratch_, size);
    // The G side applied from the left, the A side from the right; identity sides only scale.
    const auto apply = [&](const Side& s, bool identity, bool left, CBLAS_TRANSPOSE trans, const Dtype* x, Dtype* y) {
      if (identity) {
        if (x != y) m.copy(size, x, y);
        m.scal(size, static_cast<Dtype>(s.identity_scale), y);
      } else if (left) {
        m.gemm(trans, CblasNoTrans, rows, cols, rows, Dtype(1), m.data(s.matrix), x, Dtype(0), y);
      } else {
        m.gemm(CblasNoTrans, trans, rows, cols, cols, Dtype(1), x, m.data(s.matrix), Dtype(0), y);
      }
    };
    if (split_) {
      apply(g_inv_, g_identity_, true, CblasNoTrans, matrix, t);
      apply(a_inv_, a_identity_, false, CblasNoTrans, t, out);
      return;
    }
    // Unsplit: into both eigenbases, divide by dG_i dA_j + lambda, and back.
    apply(g_inv_, g_identity_, true, CblasTrans, matrix, t);
    apply(a_inv_, a_identity_, false, CblasNoTrans, t, out);
    m.divide_by_eigenvalues(rows, cols, m.data(g_inv_.divisors), m.data(a_inv_.divisors),
                            static_cast<Dtype>(damping_), out);
    apply(g_inv_, g_identity_, true, CblasNoTrans, out, t);
    apply(a_inv_, a_identity_, false, CblasTrans, t, out);
  });
}

template <typename Dtype>
bool KfacBlock<Dtype>::FactoredIsCheaper(int rows) const {
  const double g = g_dim(), a = a_dim();
  return rows * (g * g + a * a + g * a) < g * a * (g + a);
}

template <typename Dtype>
void KfacBlock<Dtype>::PreconditionFactored(const Dtype* x, const Dtype* dy, int rows, Dtype dy_scale, Dtype* out) {
  CHECK(has_inverses_ && split_) << shape_.name << ": the factored form needs split-damping inverses";
  const int g = g_dim(), a = a_dim(), k = shape_.inputs;
  OnSolverDevice<Dtype>([&](auto m) {
    Dtype* left = room(m, &scratch_, static_cast<long>(rows) * (g + 2 * a));  // G^-1 dy^T: g x rows
    Dtype* xh = left + static_cast<long>(g) * rows;                         // [x 1]: rows x a
    Dtype* right = xh + static_cast<long>(rows) * a;                        // [x 1] A^-1: rows x a
    if (g_identity_) {
      m.transpose(rows, g, static_cast<Dtype>(g_inv_.identity_scale), dy, left);
    } else {
      m.gemm(CblasNoTrans, CblasTrans, g, rows, g, Dtype(1), m.data(g_inv_.matrix), dy, Dtype(0), left);
    }
    m.gather_matrix(rows, k, false, x, shape_.bias ? Ones(m, rows) : nullptr, xh);
    if (a_identity_) {
      m.scale(rows * a, static_cast<Dtype>(a_inv_.identity_scale), xh, right);
    } else {
      m.gemm(CblasNoTrans, CblasNoTrans, rows, a, a, Dtype(1), xh, m.data(a_inv_.matrix), Dtype(0), right);
    }
    m.gemm(CblasNoTrans, CblasNoTrans, g, a, rows, dy_scale, left, right, Dtype(0), out);
  });
}

template <typename Dtype>
void KfacBlock<Dtype>::SaveState(KfacBlockState* state) const {
  state->set_name(shape_.name);
  state->mutable_a()->Add(A_.begin(), A_.end());
  state->mutable_g()->Add(G_.begin(), G_.end());
  if (has_inverses_) {
    const auto save = [](const Side& side, KfacInverse* out) {
      if (side.matrix.count() > 0) {  // none for an identity side
        const Dtype* m = side.matrix.cpu_data();
        out->mutable_matrix()->Add(m, m + side.matrix.count());
      }
      out->mutable_values()->Add(side.values.begin(), side.values.end());
      out->set_identity_scale(side.identity_scale);
    };
    save(a_inv_, state->mutable_a_inverse());
    save(g_inv_, state->mutable_g_inverse());
    state->set_split(split_);
    state->set_damping(damping_);
    state->set_lambda_a(lambda_a_);
    state->set_lambda_g(lambda_g_);
  }
}

template <typename Dtype>
void KfacBlock<Dtype>::RestoreState(const KfacBlockState& state, const std::string& origin) {
  const auto where = [&] { return origin + ": K-FAC block " + shape_.name + ": "; };
  STRATA_REQUIRE(state.name() == shape_.name) << where() << "the state is block " << state.name() << "'s";
  // A side is the identity (nothing kept) or a d x d factor.
  const auto factor_size = [](bool identity, int d) { return identity ? 0 : d * d; };
  STRATA_REQUIRE(state.a_size() == factor_size(a_identity_, a_dim()) &&
                 state.g_size() == factor_size(g_identity_, g_dim()))
      << where() << "factors of " << state.a_size() << " and " << state.g_size() << " values; this block needs "
      << factor_size(a_identity_, a_dim()) << " and " << factor_size(g_identity_, g_dim()) << " (a different net?)";
  A_.assign(state.a().begin(), state.a().end());
  G_.assign(state.g().begin(), state.g().end());
  has_factors_ = true;
  has_inverses_ = state.has_a_inverse() && state.has_g_inverse();
  if (!has_inverses_) return;
  // An inverse is the side's d x d matrix, with d eigenvalues in the unsplit form; an identity side keeps only its
  // scale (and the one value InvertSide gives it).
  const auto load = [&](const KfacInverse& in, bool identity, int d, Inverse* inverse) {
    const int n = identity ? 0 : d * d, values = identity ? 1 : (state.split() ? 0 : d);
    STRATA_REQUIRE(in.matrix_size() == n && in.values_size() == values)
        << where() << "an inverse of " << in.matrix_size() << " values and " << in.values_size()
        << " eigenvalues; this block needs " << n << " and " << values;
    if (n > 0) {
      inverse->matrix.Reshape({n});
      std::copy(in.matrix().begin(), in.matrix().end(), inverse->matrix.mutable_cpu_data());
    }
    inverse->values.assign(in.values().begin(), in.values().end());
    inverse->identity_scale = in.identity_scale();
  };
  Inverse a, g;
  load(state.a_inverse(), a_identity_, a_dim(), &a);
  load(state.g_inverse(), g_identity_, g_dim(), &g);
  Commit(a, a_dim(), a_identity_, &a_inv_);
  Commit(g, g_dim(), g_identity_, &g_inv_);
  split_ = state.split();
  damping_ = state.damping();
  lambda_a_ = state.lambda_a();
  lambda_g_ = state.lambda_g();
}

STRATA_INSTANTIATE_CLASS(KfacBlock);

}  // namespace strata
