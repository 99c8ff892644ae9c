// BucketPlan: which gradients the data-parallel engine reduces together, and when each is ready.
//
// Backward finishes the learnable parameters in an order fixed by the net (a shared parameter is final only after
// the lowest layer that uses it). The plan walks that order and packs consecutive gradients smaller than the
// fusion size into one bucket (one allreduce for many biases); any other gradient is a bucket of its own, cut into
// chunks of chunk_elems. A bucket is complete after the backward of the layer of its last gradient, and a
// parameter is applied by the update of its "unit", the layer after whose backward it is final. Every rank builds
// the same plan from the same net, so the collectives match across ranks. The GPU staging lays out its buffers by
// the same buckets and chunks (strata/engine/gradient_staging.hpp).
#pragma once

#include <cstddef>
#include <vector>

namespace strata {

template <typename Dtype>
class Net;

struct ElementRange {
  size_t offset = 0;
  size_t count = 0;
};

// How a bucket of `elements` is cut into the tasks of the communication threads: a single gradient into chunks of
// chunk_elems (the last one shorter), a packed bucket (at most the fusion size) into one chunk.
std::vector<ElementRange> CutBucket(size_t elements, bool packed, size_t chunk_elems);

class BucketPlan {
 public:
  struct Bucket {
    std::vector<int> params;  // learnable param ids, in backward order
    size_t elements = 0;
    // Several small gradients packed into one buffer for one allreduce.
    bool packed() const { return params.size() > 1; }
  };

  // Gradients below fusion_elems elements are packed together (0: none); larger ones are cut into chunks of chunk_elems.
  // Parameters with lr_mult 0 (frozen weights, BatchNorm statistics) and empty ones are not reduced.
  template <typename Dtype>
  BucketPlan(const Net<Dtype>& net, size_t fusion_elems, size_t chunk_elems);

  const std::vector<Bucket>& buckets() const { return buckets_; }
  const Bucket& bucket(int b) const { return buckets_[b]; }
  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  // The chunks of bucket b (CutBucket), cut once.
  const std::vector<ElementRange>& chunks(int b) const { return chunks_[b]; }
  size_t chunk_elems() const { return chunk_elems_; }

  // The bucket of learnable param p, or -1 when it is not reduced.
  int bucket_of(int p) const { return bucket_of_param_[p]; }
  // The layer whose update applies learnable param p (its gradient is final after that layer's backward).
  int unit_of(int p) const { return unit_of_param_[p]; }
  // The reduced params layer L's update applies (final after its backward, in some bucket), and their counts.
  const std::vector<int>& unit_params(int layer) const { return unit_params_[layer]; }
  int params_in_unit(int layer) const { return unit_total_[layer]; }
  const std::vector<int>& unit_totals() const { return unit_total_; }
  // The buckets complete once layer L's backward is done, in submission order.
  const std::vector<int>& buckets_after(int layer) const { return layer_buckets_[layer]; }
  // The reduced params layer L reads in forward: what its next forward waits for.
  const std::vector<int>& reads(int layer) const { return layer_reads_[layer]; }
  // The learnable params that hold statistics forward computes (BatchNorm), averaged rather than reduced.
  const std::vector<int>& statistic_params() const { return statistic_params_; }

 private:
  size_t chunk_elems_;
  std::vector<Bucket> buckets_;
  std::vector<std::vector<ElementRange>> chunks_;
  std::vector<int> bucket_of_param_;
  std::vector<int> unit_of_param_;
  std::vector<std::vector<int>> unit_params_;
  std::vector<int> unit_total_;
  std::vector<std::vector<int>> layer_buckets_;
  std::vector<std::vector<int>> layer_reads_;
  std::vector<int> statistic_params_;
};

}  // namespace strata
