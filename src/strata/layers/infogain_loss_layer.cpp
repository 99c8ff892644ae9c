#include "strata/layers/infogain_loss_layer.hpp"

#include <climits>

#include "label_error.hpp"
#include "loss_terms.hpp"
#include "strata/layer_factory.hpp"
#include "strata/util/io.hpp"

namespace strata {

template <typename Dtype>
void InfogainLossLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  LossLayer<Dtype>::LayerSetUp(bottom, top);
  const InfogainLossParameter& ip = this->layer_param_.infogain_loss_param();
  // The softmax over the infogain axis, into the second top or an internal blob.
  LayerParameter softmax_param(this->layer_param_);
  softmax_param.set_type("Softmax");
  softmax_param.clear_loss_weight();
  softmax_param.mutable_softmax_param()->set_axis(ip.axis());
  softmax_.reset(new SoftmaxLayer<Dtype>(softmax_param));
  prob_.set_memory_category(MemoryCategory::kActivation);
  probs_ = top.size() > 1 ? top[1] : &prob_;
  softmax_->SetUp({bottom[0]}, {probs_});

  const LossParameter& lp = this->layer_param_.loss_param();
  STRATA_REQUIRE(!lp.has_normalize()) << this->describe()
                                      << ": loss_param.normalize is deprecated and InfogainLoss does not take it; "
                                         "use loss_param.normalization";
  normalization_ = lp.normalization();
  has_ignore_label_ = lp.has_ignore_label();
  ignore_label_ = lp.ignore_label();

  if (bottom.size() < 3) {
    STRATA_REQUIRE(ip.has_source()) << this->describe()
                                    << " needs the infogain matrix H: give infogain_loss_param.source (a binary "
                                       "BlobProto file) or H as a third bottom";
    try {
      BlobProto proto;
      ReadProtoFromBinaryFile(ip.source(), &proto);
      infogain_.FromProto(proto);
    } catch (const Error& e) {
      STRATA_FAIL() << this->describe() << ": cannot read the infogain matrix H from infogain_loss_param.source: "
                    << e.what();
    }
  }
}

template <typename Dtype>
void InfogainLossLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  LossLayer<Dtype>::Reshape(bottom, top);
  probs_ = top.size() > 1 ? top[1] : &prob_;
  softmax_->Reshape({bottom[0]}, {probs_});
  const int axis = bottom[0]->CanonicalAxisIndex(this->layer_param_.infogain_loss_param().axis());
  outer_ = bottom[0]->count(0, axis);
  channels_ = bottom[0]->shape(axis);
  inner_ = bottom[0]->count(axis + 1);
  STRATA_REQUIRE(static_cast<long long>(outer_) * inner_ == bottom[1]->count())
      << this->describe() << ": the labels must give one class per prediction: scores of shape "
      << bottom[0]->shape_string() << " with the classes along axis " << axis << " need "
      << static_cast<long long>(outer_) * inner_ << " labels, got " << bottom[1]->count() << " (shape "
      << bottom[1]->shape_string() << ")";
  const Blob<Dtype>& H = Infogain(bottom);
  STRATA_REQUIRE(H.count() == static_cast<long long>(channels_) * channels_)
      << this->describe() << ": the infogain matrix H must hold K x K values for the K = " << channels_
      << " classes along axis " << axis << ", got shape " << H.shape_string() << " from "
      << (bottom.size() > 2 ? std::string("bottom 2") : "'" + this->layer_param_.infogain_loss_param().source() + "'");
  row_sums_.Reshape({channels_});
}

template <typename Dtype>
void InfogainLossLayer<Dtype>::SetLoss(double sum, long long valid, long long first_bad, const BlobVec& bottom,
                                       const BlobVec& top) {
  STRATA_REQUIRE(first_bad == LLONG_MAX) << BadLabelMessage(this->describe(), bottom[1]->cpu_data()[first_bad],
                                                            first_bad, inner_, channels_, has_ignore_label_,
                                                            ignore_label_);
  const double normaliser = LossNormaliser(normalization_, outer_, inner_, valid);
  normaliser_ = static_cast<Dtype>(normaliser);
  top[0]->mutable_cpu_data()[0] = static_cast<Dtype>(sum / normaliser);
}

template <typename Dtype>
void InfogainLossLayer<Dtype>::RefuseGradients(const std::vector<bool>& propagate_down) const {
  this->RefuseGradient(propagate_down, 1, "labels");
  this->RefuseGradient(propagate_down, 2, "infogain matrix H");
}

template <typename Dtype>
void InfogainLossLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  softmax_->Forward({bottom[0]}, {probs_});
  const Dtype* p = probs_->cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  const Dtype* H = Infogain(bottom).cpu_data();
  const int C = channels_, inner = inner_;
  const bool has_ignore = has_ignore_label_;
  const int ignore = ignore_label_;
  const long long positions = static_cast<long long>(outer_) * inner;
  const loss::Totals t = loss::sum_terms(positions, positions * C, [=](long long k) {
    return loss::infogain_term(k, p, labels, H, C, inner, has_ignore, ignore);
  });
  SetLoss(t.value, t.counted, t.first_bad, bottom, top);
}

template <typename Dtype>
void InfogainLossLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  RefuseGradients(propagate_down);
  if (!propagate_down[0]) return;
  const Dtype* H = Infogain(bottom).cpu_data();
  const int C = channels_;
  Dtype* row_sums = row_sums_.mutable_cpu_data();
  for (int r = 0; r < C; ++r) {
    double s = 0;
    for (int c = 0; c < C; ++c) s += H[static_cast<long long>(r) * C + c];
    row_sums[r] = static_cast<Dtype>(s);
  }
  const Dtype* p = probs_->cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  const Dtype scale = top[0]->cpu_diff()[0] / normaliser_;
  const int inner = inner_;
  const bool has_ignore = has_ignore_label_;
  const int ignore = ignore_label_;
  const long long n = bottom[0]->count();
  loss::for_each(n, n, [=](long long j) {
    dx[j] = loss::infogain_grad(j, p, labels, H, row_sums, C, inner, has_ignore, ignore) * scale;
  });
}

STRATA_INSTANTIATE_CLASS(InfogainLossLayer);
REGISTER_LAYER_CLASS(InfogainLoss);

}  // namespace strata
