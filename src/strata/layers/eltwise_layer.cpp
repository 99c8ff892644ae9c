#include "strata/layers/eltwise_layer.hpp"

#include "neuron_math.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

namespace {
// Below this many elements a loop runs on one thread: starting the team would cost more than it saves.
constexpr int kParallelMin = 1 << 15;
}  // namespace

template <typename Dtype>
void EltwiseLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const EltwiseParameter& p = this->layer_param_.eltwise_param();
  op_ = p.operation();
  STRATA_REQUIRE(!(op_ == EltwiseParameter::PROD && p.coeff_size() > 0))
      << "eltwise_param.coeff applies to SUM only, not PROD";
  STRATA_REQUIRE(p.coeff_size() == 0 || p.coeff_size() == static_cast<int>(bottom.size()))
      << "eltwise_param.coeff must be given once per bottom (" << bottom.size() << "), got " << p.coeff_size();
  coeffs_.assign(bottom.size(), Dtype(1));
  for (int i = 0; i < p.coeff_size(); ++i) coeffs_[i] = p.coeff(i);
  stable_prod_grad_ = p.stable_prod_grad();
  max_index_.set_memory_category(MemoryCategory::kActivation);
}

template <typename Dtype>
void EltwiseLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  for (size_t b = 1; b < bottom.size(); ++b) {
    STRATA_REQUIRE(bottom[b]->shape() == bottom[0]->shape())
        << "all bottoms must have the same shape: bottom " << b << " is " << bottom[b]->shape_string()
        << ", bottom 0 is " << bottom[0]->shape_string();
  }
  STRATA_REQUIRE(!(op_ == EltwiseParameter::PROD && top[0] == bottom[0]))
      << "PROD cannot run in place: its gradient needs every input";
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
  if (op_ == EltwiseParameter::MAX) max_index_.ReshapeLike(*bottom[0]);
}

template <typename Dtype>
bool EltwiseLayer<Dtype>::Absorb(Layer<Dtype>& next) {
  if (op_ != EltwiseParameter::SUM || relu_) return false;
  auto* relu = dynamic_cast<ReLULayer<Dtype>*>(&next);
  // With a negative slope the ReLU's gradient needs its input, which the sum overwrites.
  if (!relu || relu->negative_slope() < 0) return false;
  relu_ = relu;
  return true;
}

template <typename Dtype>
void EltwiseLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const int n = top[0]->count();
  const bool parallel = n >= kParallelMin;
  // A sum runs in any layout, all bottoms in the one ElementwiseLayout picks (AcceptsBlockedBottoms).
  const MemoryFormat layout =
      op_ == EltwiseParameter::SUM ? this->ElementwiseLayout(bottom, top) : MemoryFormat::kPlain;
  layout_ = layout;
  const Dtype* x0 = bottom[0]->cpu_data_in(layout);
  const Dtype* x1 = bottom[1]->cpu_data_in(layout);
  // May be x0 (in place): each element is read before it is written.
  Dtype* y = top[0]->mutable_cpu_data_in(layout, bottom[0] == top[0]);
  switch (op_) {
    case EltwiseParameter::SUM: {
      const Dtype c0 = coeffs_[0], c1 = coeffs_[1];
      // An absorbed ReLU (as its forward computes it) in the last loop over y.
      const auto sum_two = [&](const auto& post) {
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
        for (int i = 0; i < n; ++i) y[i] = post(c0 * x0[i] + c1 * x1[i]);
      };
      const bool relu_now = relu_ && bottom.size() == 2;
      const Dtype slope = relu_ ? relu_->negative_slope() : Dtype(0);
      if (!relu_now) {
        sum_two([](Dtype z) { return z; });
      } else if (slope == Dtype(0)) {
        sum_two([](Dtype z) { return neuron::relu(z); });
      } else {
        sum_two([slope](Dtype z) { return neuron::leaky_relu(z, slope); });
      }
      for (size_t b = 2; b < bottom.size(); ++b) {
        const Dtype c = coeffs_[b];
        const Dtype* x = bottom[b]->cpu_data_in(layout);
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
        for (int i = 0; i < n; ++i) y[i] += c * x[i];
      }
      if (relu_ && !relu_now) {
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
        for (int i = 0; i < n; ++i) y[i] = slope == Dtype(0) ? neuron::relu(y[i]) : neuron::leaky_relu(y[i], slope);
      }
      break;
    }
    case EltwiseParameter::PROD: {
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
      for (int i = 0; i < n; ++i) y[i] = x0[i] * x1[i];
      for (size_t b = 2; b < bottom.size(); ++b) {
        const Dtype* x = bottom[b]->cpu_data();
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
        for (int i = 0; i < n; ++i) y[i] *= x[i];
      }
      break;
    }
    case EltwiseParameter::MAX: {
      Dtype* index = max_index_.mutable_cpu_data();
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
      for (int i = 0; i < n; ++i) {
        const bool first = x0[i] > x1[i];  // a tie goes to bottom 1
        y[i] = first ? x0[i] : x1[i];
        index[i] = first ? Dtype(0) : Dtype(1);
      }
      for (size_t b = 2; b < bottom.size(); ++b) {
        const Dtype* x = bottom[b]->cpu_data();
        const Dtype id = static_cast<Dtype>(b);
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
        for (int i = 0; i < n; ++i) {
          const bool greater = x[i] > y[i];
          y[i] = greater ? x[i] : y[i];
          index[i] = greater ? id : index[i];
        }
      }
      break;
    }
    default:
      STRATA_FAIL() << "unknown eltwise operation " << op_;
  }
}

template <typename Dtype>
void EltwiseLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  const int n = top[0]->count();
  const bool parallel = n >= kParallelMin;
  // In the forward's layout (a sum's may be blocked: AcceptsBlockedBottoms).
  const MemoryFormat layout = layout_;
  const Dtype* dy = top[0]->cpu_diff_in(layout);
  // An absorbed ReLU's gradient factor, from the sign of its output as its own backward reads it.
  const Dtype* y = relu_ ? top[0]->cpu_data_in(layout) : nullptr;
  const Dtype slope = relu_ ? relu_->negative_slope() : Dtype(0);
  // Bottom 0 last: in place, its diff is the top's.
  for (int b = static_cast<int>(bottom.size()) - 1; b >= 0; --b) {
    if (!propagate_down[b]) continue;
    Dtype* dx = bottom[b]->mutable_cpu_diff_in(layout, bottom[b] == top[0]);
    switch (op_) {
      case EltwiseParameter::SUM: {
        const Dtype c = coeffs_[b];
        if (relu_) {
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
          for (int i = 0; i < n; ++i) dx[i] = c * (dy[i] * neuron::relu_gradient_factor(y[i], slope));
        } else if (c == Dtype(1)) {
          cpu_copy(n, dy, dx);
        } else {
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
          for (int i = 0; i < n; ++i) dx[i] = c * dy[i];
        }
        break;
      }
      case EltwiseParameter::PROD: {
        if (stable_prod_grad_) {
          // dx_b = dy * (product of the other inputs).
          bool first = true;
          for (int j = 0; j < static_cast<int>(bottom.size()); ++j) {
            if (j == b) continue;
            const Dtype* x = bottom[j]->cpu_data();
            if (first) {
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
              for (int i = 0; i < n; ++i) dx[i] = dy[i] * x[i];
              first = false;
            } else {
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
              for (int i = 0; i < n; ++i) dx[i] *= x[i];
            }
          }
        } else {
          // dx_b = dy * top / x_b (not defined where x_b is 0).
          const Dtype* y = top[0]->cpu_data();
          const Dtype* x = bottom[b]->cpu_data();
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
          for (int i = 0; i < n; ++i) dx[i] = dy[i] * y[i] / x[i];
        }
        break;
      }
      case EltwiseParameter::MAX: {
        const Dtype* index = max_index_.cpu_data();
        const Dtype id = static_cast<Dtype>(b);
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
        for (int i = 0; i < n; ++i) dx[i] = index[i] == id ? dy[i] : Dtype(0);
        break;
      }
      default:
        STRATA_FAIL() << "unknown eltwise operation " << op_;
    }
  }
}

STRATA_INSTANTIATE_CLASS(EltwiseLayer);
REGISTER_LAYER_CLASS(Eltwise);

}  // namespace strata
