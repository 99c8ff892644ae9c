// What a net must hold before it runs (strata/setting_checks.hpp; docs/reliability.md).
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "strata/common.hpp"
#include "strata/net.hpp"
#include "strata/setting_checks.hpp"

namespace strata {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

void RequireFiniteFieldsUnder(const Message& message, const std::string& path, const std::string& where) {
  const auto* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);  // the fields that are set: defaults are finite
  for (const FieldDescriptor* f : fields) {
    const std::string name = path + f->name();
    const int n = f->is_repeated() ? reflection->FieldSize(message, f) : 1;
    for (int i = 0; i < n; ++i) {
      const std::string at = f->is_repeated() ? name + "[" + std::to_string(i) + "]" : name;
      double value = 0;
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_FLOAT:
          value = f->is_repeated() ? reflection->GetRepeatedFloat(message, f, i) : reflection->GetFloat(message, f);
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          value = f->is_repeated() ? reflection->GetRepeatedDouble(message, f, i) : reflection->GetDouble(message, f);
          break;
        case FieldDescriptor::CPPTYPE_MESSAGE: {
          // Blob values are data (a caffemodel's weights), and a nested net is checked when it is built.
          if (f->message_type() == BlobProto::descriptor() || f->message_type() == NetParameter::descriptor()) break;
          const Message& inner =
              f->is_repeated() ? reflection->GetRepeatedMessage(message, f, i) : reflection->GetMessage(message, f);
          RequireFiniteFieldsUnder(inner, at + ".", where);
          break;
        }
        default:
          break;
      }
      STRATA_REQUIRE(std::isfinite(value)) << where << ": " << at << " is " << value << "; it must be a finite number";
    }
  }
}

}  // namespace

void RequireFiniteFields(const Message& message, const std::string& where) {
  RequireFiniteFieldsUnder(message, "", where);
}

template <typename Dtype>
void CheckBuiltNet(const Net<Dtype>& net) {
  // Names: weights, snapshots and the solverstate find layers by name, so two layers of one name that hold
  // parameters would load each other's (or not load at all). Without parameters the name only labels the log,
  // and Caffe's own nets repeat it (mnist_autoencoder's two 'loss' layers): a warning then.
  std::map<std::string, std::vector<int>> by_name;
  for (int l = 0; l < net.num_layers(); ++l) by_name[net.layer_names()[l]].push_back(l);
  for (const auto& [name, ids] : by_name) {
    if (ids.size() < 2) continue;
    std::string types;
    bool parameters = false;
    for (int l : ids) {
      Layer<Dtype>& layer = *net.layers()[l];
      types += (types.empty() ? "" : ", ") + std::string(layer.type());
      parameters = parameters || !layer.blobs().empty();
    }
    STRATA_REQUIRE(!parameters) << "net '" << net.name() << "': " << ids.size() << " layers are named '" << name
                                << "' (" << types << "), and parameters are found by layer name (weights, "
                                << "snapshots, the solverstate): one would load into another; rename them";
    LOG(WARNING) << "net '" << net.name() << "': " << ids.size() << " layers are named '" << name << "' (" << types
                 << ", none with parameters); layer_by_name reaches the last one";
  }

  // In place: the forward writes the top over the bottom, so a backward that reads the bottom's data would read
  // the output instead (an in-place InnerProduct's weight gradient, an AbsVal's sign).
  for (int l = 0; l < net.num_layers(); ++l) {
    if (!net.layer_need_backward(l) || net.layers()[l]->BackwardWorksInPlace()) continue;
    for (int top : net.top_ids()[l]) {
      for (int bottom : net.bottom_ids()[l]) {
        STRATA_REQUIRE(top != bottom)
            << "layer '" << net.layer_names()[l] << "' (" << net.layers()[l]->type() << ") runs in place (top '"
            << net.blob_names()[top] << "' is its bottom), but its backward reads its bottom's data, which the "
            << "forward overwrites; give it its own top blob";
      }
    }
  }
}

template void CheckBuiltNet<float>(const Net<float>&);
template void CheckBuiltNet<double>(const Net<double>&);

}  // namespace strata
