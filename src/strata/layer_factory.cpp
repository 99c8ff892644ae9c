#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
std::map<std::string, typename LayerRegistry<Dtype>::Creator>& LayerRegistry<Dtype>::registry() {
  static std::map<std::string, Creator> reg;
  return reg;
}

template class LayerRegistry<float>;
template class LayerRegistry<double>;

}  // namespace strata
