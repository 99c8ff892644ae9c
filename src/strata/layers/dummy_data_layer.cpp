#include "strata/layers/dummy_data_layer.hpp"

#include "strata/layer_factory.hpp"

namespace strata {

namespace {

// One value of a field given once for every top, or once per top.
int OnceOrPerTop(const google::protobuf::RepeatedField<uint32_t>& field, int top, const char* name, int num_top) {
  STRATA_REQUIRE(field.size() == 1 || field.size() == num_top)
      << "dummy_data_param." << name << " must be given once or once per top (" << num_top << "), got "
      << field.size();
  return static_cast<int>(field.Get(field.size() == 1 ? 0 : top));
}

}  // namespace

template <typename Dtype>
void DummyDataLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const DummyDataParameter& p = this->layer_param_.dummy_data_param();
  const int num_top = static_cast<int>(top.size());
  const int num_fillers = p.data_filler_size();
  STRATA_REQUIRE(num_fillers <= 1 || num_fillers == num_top)
      << "layer '" << this->layer_param_.name() << "': dummy_data_param needs 0, 1 or one data_filler per top ("
      << num_top << "), got " << num_fillers;
  const bool legacy = p.num_size() || p.channels_size() || p.height_size() || p.width_size();
  STRATA_REQUIRE(!legacy || p.shape_size() == 0)
      << "layer '" << this->layer_param_.name() << "': dummy_data_param gives both shape and num/channels/height/width";
  STRATA_REQUIRE(legacy || p.shape_size() == 1 || p.shape_size() == num_top)
      << "layer '" << this->layer_param_.name() << "': dummy_data_param needs one shape, or one per top (" << num_top
      << "), got " << p.shape_size();

  fillers_.clear();
  refill_.clear();
  for (int i = 0; i < std::max(num_fillers, 1); ++i) {
    FillerParameter fp;
    if (num_fillers == 0) {
      fp.set_type("constant");
      fp.set_value(0);
    } else {
      fp = p.data_filler(i);
    }
    fillers_.push_back(GetFiller<Dtype>(fp));
    refill_.push_back(fp.type() != "constant");
  }
  random_ = false;
  for (bool r : refill_) random_ = random_ || r;

  for (int i = 0; i < num_top; ++i) {
    if (legacy) {
      top[i]->Reshape({OnceOrPerTop(p.num(), i, "num", num_top), OnceOrPerTop(p.channels(), i, "channels", num_top),
                       OnceOrPerTop(p.height(), i, "height", num_top), OnceOrPerTop(p.width(), i, "width", num_top)});
    } else {
      top[i]->Reshape(p.shape(p.shape_size() == 1 ? 0 : i));
    }
    // Constant tops are filled now and never again. An empty top (a zero dimension) has no memory to fill: the
    // Net refuses it after setup with a message naming it.
    const int f = fillers_.size() > 1 ? i : 0;
    if (!refill_[f] && top[i]->count() > 0) fillers_[f]->Fill(top[i]);
  }
}

template <typename Dtype>
void DummyDataLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  for (size_t i = 0; i < top.size(); ++i) {
    const size_t f = fillers_.size() > 1 ? i : 0;
    if (refill_[f]) fillers_[f]->Fill(top[i]);
  }
}

STRATA_INSTANTIATE_CLASS(DummyDataLayer);
REGISTER_LAYER_CLASS(DummyData);

}  // namespace strata
