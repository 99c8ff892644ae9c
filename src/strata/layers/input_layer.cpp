#include "strata/layers/input_layer.hpp"

#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void InputLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const InputParameter& p = this->layer_param_.input_param();
  const int num_shapes = p.shape_size();
  STRATA_REQUIRE(num_shapes == 1 || num_shapes == static_cast<int>(top.size()))
      << "input_param must give one shape, or one per top (" << top.size() << "), got " << num_shapes;
  for (size_t i = 0; i < top.size(); ++i) {
    top[i]->Reshape(p.shape(num_shapes == 1 ? 0 : static_cast<int>(i)));
  }
}

STRATA_INSTANTIATE_CLASS(InputLayer);
REGISTER_LAYER_CLASS(Input);

}  // namespace strata
