#include "strata/engine/bucket_plan.hpp"

#include <algorithm>

#include "strata/net.hpp"

namespace strata {

std::vector<ElementRange> CutBucket(size_t elements, bool packed, size_t chunk_elems) {
  const size_t step = packed ? elements : std::max<size_t>(1, chunk_elems);
  std::vector<ElementRange> chunks;
  for (size_t offset = 0; offset < elements; offset += step) {
    chunks.push_back({offset, std::min(step, elements - offset)});
  }
  return chunks;
}

template <typename Dtype>
BucketPlan::BucketPlan(const Net<Dtype>& net, size_t fusion_elems, size_t chunk_elems) : chunk_elems_(chunk_elems) {
  const int num_layers = net.num_layers();
  const auto& lr = net.params_lr();
  const size_t num_params = net.learnable_params().size();
  bucket_of_param_.assign(num_params, -1);
  unit_of_param_.assign(num_params, -1);
  unit_total_.assign(num_layers, 0);
  layer_buckets_.assign(num_layers, {});
  layer_reads_.assign(num_layers, {});

  // The order in which gradients become final during backward, and the update unit of each.
  std::vector<int> order;
  for (int L = num_layers - 1; L >= 0; --L) {
    for (int p : net.learnable_params_final_after(L)) {
      unit_of_param_[p] = L;
      if (lr[p] == 0) continue;  // no gradient to reduce (frozen weights, BatchNorm statistics)
      order.push_back(p);
    }
  }
  for (size_t p = 0; p < num_params; ++p) {
    if (net.learnable_param_is_statistic(static_cast<int>(p))) statistic_params_.push_back(static_cast<int>(p));
  }

  // Buckets: consecutive small gradients (in backward order) packed up to fusion_elems; others alone. Empty
  // gradients are in no bucket: nothing to reduce or wait for.
  auto close = [&](Bucket& b) {
    if (b.params.empty()) return;
    const int id = static_cast<int>(buckets_.size());
    for (int p : b.params) {
      bucket_of_param_[p] = id;
      ++unit_total_[unit_of_param_[p]];
    }
    layer_buckets_[unit_of_param_[b.params.back()]].push_back(id);
    buckets_.push_back(std::move(b));
    b = Bucket();
  };
  Bucket open;
  for (int p : order) {
    const size_t n = static_cast<size_t>(net.learnable_params()[p]->count());
    if (n == 0) continue;
    if (fusion_elems == 0 || n >= fusion_elems) {
      close(open);
      Bucket alone;
      alone.params = {p};
      alone.elements = n;
      close(alone);
      continue;
    }
    if (open.elements + n > fusion_elems) close(open);
    open.params.push_back(p);
    open.elements += n;
  }
  close(open);

  unit_params_.assign(num_layers, {});
  for (int L = 0; L < num_layers; ++L) {
    for (int p : net.learnable_params_of_layer(L)) {
      if (bucket_of_param_[p] >= 0) layer_reads_[L].push_back(p);
    }
    for (int p : net.learnable_params_final_after(L)) {
      if (bucket_of_param_[p] >= 0) unit_params_[L].push_back(p);
    }
  }
  for (const Bucket& b : buckets_) chunks_.push_back(CutBucket(b.elements, b.packed(), chunk_elems_));
}

template BucketPlan::BucketPlan(const Net<float>&, size_t, size_t);
template BucketPlan::BucketPlan(const Net<double>&, size_t, size_t);

}  // namespace strata
