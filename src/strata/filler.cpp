#include "strata/filler.hpp"

#include <cmath>

#include "strata/math_functions.hpp"

namespace strata {

template <typename Dtype>
Dtype Filler<Dtype>::scale_denominator(const Blob<Dtype>& blob) const {
  STRATA_REQUIRE(blob.num_axes() >= 1 && blob.count() > 0) << "cannot fill an empty blob with " << param_.type();
  const Dtype fan_in = Dtype(blob.count()) / blob.shape(0);
  const Dtype fan_out = blob.num_axes() > 1 ? Dtype(blob.count()) / blob.shape(1) : Dtype(blob.count());
  switch (param_.variance_norm()) {
    case FillerParameter::AVERAGE:
      return (fan_in + fan_out) / Dtype(2);
    case FillerParameter::FAN_OUT:
      return fan_out;
    default:
      return fan_in;
  }
}

namespace {

template <typename Dtype>
class ConstantFiller : public Filler<Dtype> {
 public:
  using Filler<Dtype>::Filler;
  void Fill(Blob<Dtype>* blob) override {
    cpu_set(blob->count(), Dtype(this->param_.value()), blob->mutable_cpu_data());
  }
};

template <typename Dtype>
class UniformFiller : public Filler<Dtype> {
 public:
  using Filler<Dtype>::Filler;
  void Fill(Blob<Dtype>* blob) override {
    STRATA_REQUIRE(this->param_.min() <= this->param_.max()) << "uniform filler needs min <= max";
    rng_uniform<Dtype>(blob->count(), this->param_.min(), this->param_.max(), blob->mutable_cpu_data());
  }
};

// Gaussian; with `sparse` = k, each output keeps on average k non-zero inputs.
template <typename Dtype>
class GaussianFiller : public Filler<Dtype> {
 public:
  using Filler<Dtype>::Filler;
  void Fill(Blob<Dtype>* blob) override {
    STRATA_REQUIRE(this->param_.std() > 0) << "gaussian filler needs std > 0";
    Dtype* data = blob->mutable_cpu_data();
    rng_gaussian<Dtype>(blob->count(), this->param_.mean(), this->param_.std(), data);
    const int sparse = this->param_.sparse();
    if (sparse >= 0) {
      STRATA_REQUIRE(blob->num_axes() >= 1) << "sparse gaussian filler needs a shaped blob";
      const int num_outputs = blob->shape(0);
      const Dtype non_zero_probability = std::min(Dtype(1), Dtype(sparse) / Dtype(num_outputs));
      std::vector<unsigned int> mask(blob->count());
      rng_bernoulli<Dtype>(blob->count(), non_zero_probability, mask.data());
      for (int i = 0; i < blob->count(); ++i) data[i] *= mask[i];
    }
  }
};

// Uniform in [0, 1], then each row (all but the first axis) normalised to sum to one.
template <typename Dtype>
class PositiveUnitballFiller : public Filler<Dtype> {
 public:
  using Filler<Dtype>::Filler;
  void Fill(Blob<Dtype>* blob) override {
    Dtype* data = blob->mutable_cpu_data();
    rng_uniform<Dtype>(blob->count(), 0, 1, data);
    const int num = blob->shape(0);
    const int dim = blob->count() / num;
    for (int i = 0; i < num; ++i) {
      Dtype sum = cpu_sum(dim, data + i * dim);
      for (int j = 0; j < dim; ++j) data[i * dim + j] /= sum;
    }
  }
};

// Glorot & Bengio: uniform in [-a, a] with a = sqrt(3 / n), n from variance_norm.
template <typename Dtype>
class XavierFiller : public Filler<Dtype> {
 public:
  using Filler<Dtype>::Filler;
  void Fill(Blob<Dtype>* blob) override {
    const Dtype scale = std::sqrt(Dtype(3) / this->scale_denominator(*blob));
    rng_uniform<Dtype>(blob->count(), -scale, scale, blob->mutable_cpu_data());
  }
};

// He et al.: gaussian with std = sqrt(2 / n), n from variance_norm.
template <typename Dtype>
class MSRAFiller : public Filler<Dtype> {
 public:
  using Filler<Dtype>::Filler;
  void Fill(Blob<Dtype>* blob) override {
    const Dtype std = std::sqrt(Dtype(2) / this->scale_denominator(*blob));
    rng_gaussian<Dtype>(blob->count(), 0, std, blob->mutable_cpu_data());
  }
};

// Bilinear up-sampling kernels for deconvolution: a 4-D blob whose last two axes are equal.
template <typename Dtype>
class BilinearFiller : public Filler<Dtype> {
 public:
  using Filler<Dtype>::Filler;
  void Fill(Blob<Dtype>* blob) override {
    STRATA_REQUIRE(blob->num_axes() == 4 && blob->width() == blob->height())
        << "bilinear filler needs a 4-D blob with square kernels";
    Dtype* data = blob->mutable_cpu_data();
    const int k = blob->width();
    const Dtype f = std::ceil(k / Dtype(2));
    const Dtype c = (k - 1) / (Dtype(2) * f);
    for (int i = 0; i < blob->count(); ++i) {
      const Dtype x = i % k;
      const Dtype y = (i / k) % k;
      data[i] = (1 - std::fabs(x / f - c)) * (1 - std::fabs(y / f - c));
    }
  }
};

}  // namespace

template <typename Dtype>
std::unique_ptr<Filler<Dtype>> GetFiller(const FillerParameter& param) {
  const std::string& type = param.type();
  if (type == "constant") return std::make_unique<ConstantFiller<Dtype>>(param);
  if (type == "uniform") return std::make_unique<UniformFiller<Dtype>>(param);
  if (type == "gaussian") return std::make_unique<GaussianFiller<Dtype>>(param);
  if (type == "positive_unitball") return std::make_unique<PositiveUnitballFiller<Dtype>>(param);
  if (type == "xavier") return std::make_unique<XavierFiller<Dtype>>(param);
  if (type == "msra") return std::make_unique<MSRAFiller<Dtype>>(param);
  if (type == "bilinear") return std::make_unique<BilinearFiller<Dtype>>(param);
  STRATA_FAIL() << "unknown filler type '" << type
                << "' (known: constant, uniform, gaussian, positive_unitball, xavier, msra, bilinear)";
  return nullptr;
}

template std::unique_ptr<Filler<float>> GetFiller<float>(const FillerParameter&);
template std::unique_ptr<Filler<double>> GetFiller<double>(const FillerParameter&);
template class Filler<float>;
template class Filler<double>;

}  // namespace strata
