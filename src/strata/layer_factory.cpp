#include "strata/layer_factory.hpp"

#include "strata/plugin.hpp"

namespace strata {

template <typename Dtype>
std::map<std::string, typename LayerRegistry<Dtype>::Creator>& LayerRegistry<Dtype>::registry() {
  static std::map<std::string, Creator> reg;
  return reg;
}

template <typename Dtype>
void LayerRegistry<Dtype>::AddCreator(const std::string& type, Creator creator) {
  auto& reg = registry();
  PluginRegistrations* loading = internal::PluginBeingLoaded();
  if (reg.count(type)) {
    // Two layers of one program under one name is the program's bug; a plugin's is its user's input.
    CHECK(loading) << "layer type " << type << " registered twice";
    loading->duplicates.insert(type);
    return;
  }
  reg[type] = std::move(creator);
  if (loading) loading->added.insert(type);
}

template <typename Dtype>
void LayerRegistry<Dtype>::RemoveCreator(const std::string& type) {
  registry().erase(type);
}

template class LayerRegistry<float>;
template class LayerRegistry<double>;

}  // namespace strata
