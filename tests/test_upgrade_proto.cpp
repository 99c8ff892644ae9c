// The legacy net formats src/strata/util/io.cpp reads. A V1 net (Caffe's pre-2015 `layers { type: CONVOLUTION }`
// list with blobs_lr / weight_decay) upgrades to exactly the NetParameter of its modern `layer { type:
// "Convolution" }` form, from text, from a binary caffemodel with weights, and when a Net is built from the file.
// V0 nets (`layers { layer { ... } }`, before 2014) are not upgraded: Strata reads only the V0 block's name and
// type, so a V0 file's layer fields are refused as unknown.
#include <gtest/gtest.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstring>
#include <string>

#include "data_test_util.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing_data::TempDir;
using testing_data::WriteFile;

// The net's legacy inputs, the same in both forms.
const std::string kInputs = R"(
name: "legacy"
input: "data"
input_dim: 2 input_dim: 3 input_dim: 8 input_dim: 8
input: "label"
input_dim: 2 input_dim: 1 input_dim: 1 input_dim: 1
)";

const std::string kV1Net = kInputs + R"(
layers {
  name: "conv1" type: CONVOLUTION bottom: "data" top: "conv1"
  blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } }
}
layers { name: "relu1" type: RELU bottom: "conv1" top: "conv1" relu_param { negative_slope: 0.1 } }
layers {
  name: "pool1" type: POOLING bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 }
}
layers {
  name: "ip1" type: INNER_PRODUCT bottom: "pool1" top: "ip1"
  param: "shared_w" param: "shared_b" blobs_lr: 1
  inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.1 } }
}
layers {
  name: "loss" type: SOFTMAX_LOSS bottom: "ip1" bottom: "label" top: "loss" loss_weight: 2
  include { phase: TRAIN }
}
layers { name: "acc" type: ACCURACY bottom: "ip1" bottom: "label" top: "acc" exclude { phase: TRAIN } }
)";

// The same net as Caffe writes it since 2015.
const std::string kModernNet = kInputs + R"(
layer {
  name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } }
}
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" relu_param { negative_slope: 0.1 } }
layer {
  name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 }
}
layer {
  name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1"
  param { name: "shared_w" lr_mult: 1 } param { name: "shared_b" }
  inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.1 } }
}
layer {
  name: "loss" type: "SoftmaxWithLoss" bottom: "ip1" bottom: "label" top: "loss" loss_weight: 2
  include { phase: TRAIN }
}
layer { name: "acc" type: "Accuracy" bottom: "ip1" bottom: "label" top: "acc" exclude { phase: TRAIN } }
)";

NetParameter Parse(const std::string& text) {
  NetParameter p;
  ReadProtoFromTextString(text, &p);
  return p;
}

void ExpectSameNet(const NetParameter& got, const NetParameter& want) {
  std::string differences;
  MessageDifferencer diff;
  diff.ReportDifferencesToString(&differences);
  EXPECT_TRUE(diff.Compare(got, want)) << differences;
}

TEST(UpgradeProto, V1NetBecomesItsModernForm) {
  NetParameter net = Parse(kV1Net);
  ASSERT_EQ(net.layers_size(), 6);
  EXPECT_TRUE(UpgradeV1Net(&net));
  EXPECT_EQ(net.layers_size(), 0) << "the legacy list is cleared";
  ExpectSameNet(net, Parse(kModernNet));
  NetParameter modern = Parse(kModernNet);
  EXPECT_FALSE(UpgradeV1Net(&modern)) << "a modern net has nothing to upgrade";
  ExpectSameNet(modern, Parse(kModernNet));
}

TEST(UpgradeProto, EveryV1TypeHasItsModernName) {
  const std::pair<V1LayerParameter::LayerType, const char*> names[] = {
      {V1LayerParameter::CONCAT, "Concat"},          {V1LayerParameter::DATA, "Data"},
      {V1LayerParameter::DROPOUT, "Dropout"},        {V1LayerParameter::ELTWISE, "Eltwise"},
      {V1LayerParameter::FLATTEN, "Flatten"},        {V1LayerParameter::LRN, "LRN"},
      {V1LayerParameter::SIGMOID, "Sigmoid"},        {V1LayerParameter::SOFTMAX, "Softmax"},
      {V1LayerParameter::SPLIT, "Split"},            {V1LayerParameter::TANH, "TanH"},
      {V1LayerParameter::SLICE, "Slice"},            {V1LayerParameter::DECONVOLUTION, "Deconvolution"},
      {V1LayerParameter::EUCLIDEAN_LOSS, "EuclideanLoss"}};
  NetParameter net;
  for (const auto& [type, name] : names) net.add_layers()->set_type(type);
  UpgradeV1Net(&net);
  ASSERT_EQ(net.layer_size(), static_cast<int>(std::size(names)));
  for (size_t i = 0; i < std::size(names); ++i) EXPECT_EQ(net.layer(i).type(), names[i].second);
}

// Every parameter message Caffe's V1 layers carry comes across (a V1 siamese net's contrastive_loss_param, a V1
// HDF5 net's hdf5_data_param, ...).
TEST(UpgradeProto, EveryV1ParameterComesAcross) {
  NetParameter net = Parse(R"(
layers { name: "c" type: CONTRASTIVE_LOSS contrastive_loss_param { margin: 2 } }
layers { name: "h" type: HINGE_LOSS hinge_loss_param { norm: L2 } }
layers { name: "i" type: INFOGAIN_LOSS infogain_loss_param { source: "H.binaryproto" } }
layers { name: "a" type: ARGMAX argmax_param { top_k: 3 } }
layers { name: "d" type: DUMMY_DATA dummy_data_param { num: 4 channels: 1 height: 1 width: 1 } }
layers { name: "e" type: EXP exp_param { base: 2 } }
layers { name: "h5" type: HDF5_DATA hdf5_data_param { source: "list.txt" batch_size: 8 } }
layers { name: "o5" type: HDF5_OUTPUT hdf5_output_param { file_name: "out.h5" } }
layers { name: "im" type: IMAGE_DATA image_data_param { source: "list.txt" batch_size: 2 } }
layers { name: "m" type: MEMORY_DATA memory_data_param { batch_size: 2 channels: 1 height: 1 width: 1 } }
layers { name: "n" type: MVN mvn_param { across_channels: true } }
layers { name: "p" type: POWER power_param { power: 3 } }
layers { name: "s" type: SLICE slice_param { slice_point: 1 } }
layers { name: "t" type: THRESHOLD threshold_param { threshold: 0.5 } }
)");
  ASSERT_TRUE(UpgradeV1Net(&net));
  ASSERT_EQ(net.layer_size(), 14);
  EXPECT_EQ(net.layer(0).type(), "ContrastiveLoss");
  EXPECT_EQ(net.layer(0).contrastive_loss_param().margin(), 2);
  EXPECT_EQ(net.layer(1).hinge_loss_param().norm(), HingeLossParameter::L2);
  EXPECT_EQ(net.layer(2).infogain_loss_param().source(), "H.binaryproto");
  EXPECT_EQ(net.layer(3).argmax_param().top_k(), 3u);
  EXPECT_EQ(net.layer(4).dummy_data_param().num(0), 4u);
  EXPECT_EQ(net.layer(5).exp_param().base(), 2);
  EXPECT_EQ(net.layer(6).hdf5_data_param().batch_size(), 8u);
  EXPECT_EQ(net.layer(7).hdf5_output_param().file_name(), "out.h5");
  EXPECT_EQ(net.layer(8).image_data_param().batch_size(), 2u);
  EXPECT_EQ(net.layer(9).memory_data_param().channels(), 1u);
  EXPECT_TRUE(net.layer(10).mvn_param().across_channels());
  EXPECT_EQ(net.layer(11).power_param().power(), 3);
  EXPECT_EQ(net.layer(12).slice_param().slice_point(0), 1u);
  EXPECT_EQ(net.layer(13).threshold_param().threshold(), 0.5f);
}

TEST(UpgradeProto, MixingLegacyAndModernLayersIsAnError) {
  NetParameter net = Parse(kModernNet);
  net.add_layers()->set_type(V1LayerParameter::RELU);
  try {
    UpgradeV1Net(&net);
    ADD_FAILURE() << "a net with both lists was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mixes the legacy 'layers' list with 'layer'"), std::string::npos)
        << e.what();
  }
}

TEST(UpgradeProto, FilesUpgradeOnReadWithTheirWeights) {
  TempDir dir;
  WriteFile(dir / "v1.prototxt", kV1Net);
  NetParameter from_text;
  ReadNetParamsFromTextFile(dir / "v1.prototxt", &from_text);
  ExpectSameNet(from_text, Parse(kModernNet));

  // A V1 caffemodel: the weights travel with their layer.
  NetParameter v1 = Parse(kV1Net);
  BlobProto* w = v1.mutable_layers(0)->add_blobs();
  w->mutable_shape()->add_dim(2);
  w->add_data(0.5f);
  w->add_data(-1.5f);
  WriteProtoToBinaryFile(v1, dir / "v1.caffemodel");
  NetParameter from_binary;
  ReadNetParamsFromBinaryFile(dir / "v1.caffemodel", &from_binary);
  NetParameter want = Parse(kModernNet);
  *want.mutable_layer(0)->add_blobs() = *w;
  ExpectSameNet(from_binary, want);
}

TEST(UpgradeProto, NetsBuiltFromBothFormsAreTheSame) {
  TempDir dir;
  WriteFile(dir / "v1.prototxt", kV1Net);
  WriteFile(dir / "modern.prototxt", kModernNet);
  Strata::set_random_seed(3);
  Net<float> legacy(dir / "v1.prototxt", TRAIN);
  Strata::set_random_seed(3);
  Net<float> modern(dir / "modern.prototxt", TRAIN);
  ASSERT_EQ(legacy.layer_names(), modern.layer_names());
  ASSERT_EQ(legacy.learnable_params().size(), modern.learnable_params().size());
  for (size_t i = 0; i < legacy.learnable_params().size(); ++i) {
    const Blob<float>* a = legacy.learnable_params()[i];
    const Blob<float>* b = modern.learnable_params()[i];
    ASSERT_EQ(a->shape(), b->shape());
    EXPECT_EQ(std::memcmp(a->cpu_data(), b->cpu_data(), a->count() * sizeof(float)), 0) << "parameter " << i;
  }
  EXPECT_EQ(legacy.params_lr(), modern.params_lr());
  EXPECT_FLOAT_EQ(legacy.params_lr()[1], 2.f);  // conv1's bias, from blobs_lr
  EXPECT_FALSE(legacy.has_layer("acc")) << "the exclude rule survived the upgrade";
}

TEST(UpgradeProto, V0NetsAreNotSupported) {
  // Caffe's V0 form nests each layer's fields in a `layer` block; Strata does not convert it.
  const char* v0 = R"(
    name: "v0"
    layers { layer { name: "conv1" type: "conv" num_output: 4 kernelsize: 3 } bottom: "data" top: "conv1" })";
  NetParameter net;
  try {
    ReadProtoFromTextString(v0, &net, "v0.prototxt");
    ADD_FAILURE() << "a V0 layer's fields parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_output"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata
