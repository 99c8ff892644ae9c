#include "strata/layers/memory_data_layer.hpp"

#include <cstdint>
#include <cstring>

#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void MemoryDataLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const MemoryDataParameter& mp = this->layer_param_.memory_data_param();
  // uint32 fields: refuse values that do not fit an int before they wrap negative.
  const auto positive = [](uint32_t v) { return v > 0 && v <= static_cast<uint32_t>(INT32_MAX); };
  STRATA_REQUIRE(positive(mp.batch_size()) && positive(mp.channels()) && positive(mp.height()) &&
                 positive(mp.width()))
      << "memory_data_param: batch_size, channels, height and width must all be given and positive (got "
      << mp.batch_size() << ", " << mp.channels() << ", " << mp.height() << ", " << mp.width() << ")";
  batch_size_ = static_cast<int>(mp.batch_size());
  channels_ = static_cast<int>(mp.channels());
  height_ = static_cast<int>(mp.height());
  width_ = static_cast<int>(mp.width());
  const int64_t size = static_cast<int64_t>(channels_) * height_ * width_;
  STRATA_REQUIRE(size <= INT32_MAX) << "memory_data_param: one example of " << channels_ << " x " << height_
                                    << " x " << width_ << " values is too large";
  size_ = static_cast<int>(size);
}

template <typename Dtype>
void MemoryDataLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  top[0]->Reshape({batch_size_, channels_, height_, width_});
  top[1]->Reshape({batch_size_});
}

template <typename Dtype>
void MemoryDataLayer<Dtype>::Reset(Dtype* data, Dtype* labels, int n) {
  STRATA_REQUIRE(data != nullptr && labels != nullptr) << this->describe() << ": Reset needs data and labels";
  STRATA_REQUIRE(n > 0 && n % batch_size_ == 0) << this->describe() << ": Reset with " << n
                                                << " examples, which is not a positive multiple of the batch size "
                                                << batch_size_;
  data_ = data;
  labels_ = labels;
  n_ = n;
  pos_ = 0;
  has_new_data_ = true;
}

template <typename Dtype>
void MemoryDataLayer<Dtype>::set_batch_size(int new_size) {
  STRATA_REQUIRE(!has_new_data_) << this->describe()
                                 << ": cannot change the batch size until the current data has been consumed";
  STRATA_REQUIRE(new_size > 0) << this->describe() << ": the batch size must be positive, got " << new_size;
  STRATA_REQUIRE(n_ == 0 || n_ % new_size == 0)
      << this->describe() << ": batch size " << new_size << " does not divide the " << n_ << " examples given";
  batch_size_ = new_size;
  pos_ = 0;
}

template <typename Dtype>
void MemoryDataLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  STRATA_REQUIRE(data_ != nullptr) << this->describe() << ": no data; call Reset(data, labels, n) before Forward";
  std::memcpy(top[0]->mutable_cpu_data(), data_ + static_cast<size_t>(pos_) * size_,
              sizeof(Dtype) * static_cast<size_t>(batch_size_) * size_);
  std::memcpy(top[1]->mutable_cpu_data(), labels_ + pos_, sizeof(Dtype) * batch_size_);
  pos_ = (pos_ + batch_size_) % n_;
  has_new_data_ = false;
}

STRATA_INSTANTIATE_CLASS(MemoryDataLayer);
REGISTER_LAYER_CLASS(MemoryData);

}  // namespace strata
