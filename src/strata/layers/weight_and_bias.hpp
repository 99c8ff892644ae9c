// The learnable blobs of the layers that hold a weight and an optional bias (Convolution, Deconvolution, Embed).
// Private to src/strata/layers.
#pragma once

#include <memory>
#include <vector>

#include "strata/filler.hpp"
#include "strata/layer.hpp"

namespace strata {

// Blobs that came with the layer (a caffemodel) must be a weight of `weight_shape` and, with `bias_term`, a bias
// of `bias_size`; otherwise they are made and filled by the two fillers. Every blob takes a gradient.
template <typename Dtype>
void SetUpWeightAndBias(std::vector<std::shared_ptr<Blob<Dtype>>>* blobs, const std::vector<int>& weight_shape,
                        bool bias_term, int bias_size, const FillerParameter& weight_filler,
                        const FillerParameter& bias_filler) {
  const size_t count = bias_term ? 2 : 1;
  if (!blobs->empty()) {
    STRATA_REQUIRE(blobs->size() == count) << "expected " << count << " parameter blobs, got " << blobs->size();
    STRATA_REQUIRE((*blobs)[0]->shape() == weight_shape)
        << "weight shape " << (*blobs)[0]->shape_string() << " does not match the expected "
        << Blob<Dtype>(weight_shape).shape_string();
    STRATA_REQUIRE(!bias_term || (*blobs)[1]->shape() == std::vector<int>{bias_size})
        << "bias shape " << (*blobs)[1]->shape_string() << " does not match num_output " << bias_size;
    return;
  }
  blobs->resize(count);
  (*blobs)[0] = std::make_shared<Blob<Dtype>>(weight_shape);
  GetFiller<Dtype>(weight_filler)->Fill((*blobs)[0].get());
  if (bias_term) {
    (*blobs)[1] = std::make_shared<Blob<Dtype>>(std::vector<int>{bias_size});
    GetFiller<Dtype>(bias_filler)->Fill((*blobs)[1].get());
  }
}

}  // namespace strata
