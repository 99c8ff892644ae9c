// The layer registry: a map from type name ("Convolution") to a creator, one per Dtype. Layers register
// themselves with REGISTER_LAYER_CLASS at static-initialisation time, from inside libstrata, from a user's
// own .cpp file linked into their program, or from a user's shared library that the tools load (--plugin,
// strata/plugin.hpp):
//
//   template <typename Dtype> class MyLayer : public strata::Layer<Dtype> { ... };
//   REGISTER_LAYER_CLASS(My);   // type "My", class MyLayer
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/layer.hpp"

namespace strata {

template <typename Dtype>
class LayerRegistry {
 public:
  using Creator = std::function<std::shared_ptr<Layer<Dtype>>(const LayerParameter&)>;

  // Defined in libstrata (not inline), so that a plugin compiled against this header registers through the
  // library's rules: while LoadPlugin (strata/plugin.hpp) runs, a type already known is recorded for its error
  // instead of aborting the process.
  static void AddCreator(const std::string& type, Creator creator);
  // Takes a type out again (a plugin that failed to load).
  static void RemoveCreator(const std::string& type);

  // Creates a layer; an unknown type is a user error whose message lists the known types.
  static std::shared_ptr<Layer<Dtype>> CreateLayer(const LayerParameter& param) {
    auto& reg = registry();
    auto it = reg.find(param.type());
    if (it == reg.end()) {
      std::string known;
      for (const auto& t : LayerTypeList()) known += (known.empty() ? "" : ", ") + t;
      STRATA_FAIL() << "layer '" << param.name() << "' has unknown type '" << param.type()
                    << "' (known types: " << known << ")";
    }
    return it->second(param);
  }

  static bool Has(const std::string& type) { return registry().count(type) > 0; }

  static std::vector<std::string> LayerTypeList() {
    std::vector<std::string> types;
    for (const auto& kv : registry()) types.push_back(kv.first);
    return types;
  }

 private:
  // Defined once, in libstrata, so a user's own layers and the built-in ones land in the same map whatever
  // the static-initialisation order.
  static std::map<std::string, Creator>& registry();
};

extern template class LayerRegistry<float>;
extern template class LayerRegistry<double>;

template <typename Dtype>
struct LayerRegisterer {
  LayerRegisterer(const std::string& type, typename LayerRegistry<Dtype>::Creator creator) {
    LayerRegistry<Dtype>::AddCreator(type, std::move(creator));
  }
};

#define REGISTER_LAYER_CREATOR(type, creator)                                                        \
  static ::strata::LayerRegisterer<float> g_strata_creator_f_##type(#type, creator<float>);          \
  static ::strata::LayerRegisterer<double> g_strata_creator_d_##type(#type, creator<double>)

#define REGISTER_LAYER_CLASS(type)                                                                   \
  template <typename Dtype>                                                                          \
  std::shared_ptr<::strata::Layer<Dtype>> Creator_##type##Layer(const ::strata::LayerParameter& p) { \
    return std::make_shared<type##Layer<Dtype>>(p);                                                  \
  }                                                                                                  \
  REGISTER_LAYER_CREATOR(type, Creator_##type##Layer)

}  // namespace strata
