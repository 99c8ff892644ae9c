// A small net for the GPU's whole-step tests: LeNet's layers and a residual block (BatchNorm + Scale + ReLU, which
// the net fuses, a sum, a Split), batch 16 of 8 x 12 x 12 images, 10 classes. tests/test_gpu_bf16.cpp and
// tests/test_gpu_channels_last.cpp train it in one format against another.
#pragma once

#include <algorithm>
#include <random>
#include <vector>

#include "strata/net.hpp"

namespace strata {
namespace gpu_compare {

inline constexpr const char* kResidualNet = R"(
name: "bf16net"
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 16 dim: 8 dim: 12 dim: 12 } shape { dim: 16 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "xavier" }
                            bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv_a" type: "Convolution" bottom: "pool1" top: "conv_a"
        convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: false weight_filler { type: "msra" } } }
layer { name: "bn_a" type: "BatchNorm" bottom: "conv_a" top: "conv_a" }
layer { name: "scale_a" type: "Scale" bottom: "conv_a" top: "conv_a"
        scale_param { bias_term: true filler { type: "uniform" min: 0.5 max: 1.5 }
                      bias_filler { type: "uniform" min: -0.5 max: 0.5 } } }
layer { name: "relu_a" type: "ReLU" bottom: "conv_a" top: "conv_a" }
layer { name: "conv_b" type: "Convolution" bottom: "conv_a" top: "conv_b"
        convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: false weight_filler { type: "msra" } } }
layer { name: "bn_b" type: "BatchNorm" bottom: "conv_b" top: "conv_b" }
layer { name: "scale_b" type: "Scale" bottom: "conv_b" top: "conv_b"
        scale_param { bias_term: true filler { type: "uniform" min: 0.5 max: 1.5 }
                      bias_filler { type: "uniform" min: -0.5 max: 0.5 } } }
layer { name: "res" type: "Eltwise" bottom: "pool1" bottom: "conv_b" top: "res" }
layer { name: "res_relu" type: "ReLU" bottom: "res" top: "res" }
layer { name: "conv2" type: "Convolution" bottom: "res" top: "conv2"
        convolution_param { num_output: 32 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2"
        pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool2" top: "ip1"
        inner_product_param { num_output: 32 weight_filler { type: "xavier" } } }
layer { name: "relu3" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
)";

// The batch both nets of a comparison train on: uniform images, random labels, drawn once.
struct ResidualBatch {
  std::vector<float> data = std::vector<float>(16 * 8 * 12 * 12), labels = std::vector<float>(16);
  ResidualBatch() {
    std::mt19937 gen(11);
    std::uniform_real_distribution<float> u(-1, 1);
    std::uniform_int_distribution<int> label(0, 9);
    for (float& v : data) v = u(gen);
    for (float& v : labels) v = static_cast<float>(label(gen));
  }
};

// Gives `net` the weights of `from` (the same net).
inline void CopyWeights(const Net<float>& from, Net<float>* net) {
  for (size_t i = 0; i < net->learnable_params().size(); ++i) {
    net->learnable_params()[i]->CopyFrom(*from.learnable_params()[i]);
  }
}

// One plain SGD step (lr 0.05) of the residual net on the batch; the loss before it.
inline float ResidualNetStep(Net<float>& net, const ResidualBatch& b) {
  std::copy(b.data.begin(), b.data.end(), net.blob_by_name("data")->mutable_cpu_data());
  std::copy(b.labels.begin(), b.labels.end(), net.blob_by_name("label")->mutable_cpu_data());
  net.ClearParamDiffs();
  const float loss = net.ForwardBackward();
  for (Blob<float>* p : net.learnable_params()) {
    p->scale_diff(0.05f);
    p->Update();
  }
  return loss;
}

}  // namespace gpu_compare
}  // namespace strata
