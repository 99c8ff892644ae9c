// A small bounded blocking FIFO for handing preallocated batches between the prefetch thread and the layer.
// A fixed ring (no allocation after reset()); close() wakes every waiter and makes pop() return false,
// which is how the thread is told to stop.
#pragma once

#include <glog/logging.h>

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

namespace strata {

template <typename T>
class BlockingQueue {
 public:
  void push(T item) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      CHECK_LT(size_, items_.size()) << "BlockingQueue over capacity";
      items_[(head_ + size_) % items_.size()] = std::move(item);
      ++size_;
    }
    ready_.notify_one();
  }

  // Waits for an item; false once the queue is closed.
  bool pop(T* item) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [this] { return closed_ || size_ > 0; });
    if (closed_) return false;
    *item = std::move(items_[head_]);
    head_ = (head_ + 1) % items_.size();
    --size_;
    return true;
  }

  void close() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
    }
    ready_.notify_all();
  }

  // Empties the queue, sets its capacity and opens it again (only while no thread waits on it).
  void reset(size_t capacity) {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.assign(capacity, T());
    head_ = size_ = 0;
    closed_ = false;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<T> items_;
  size_t head_ = 0, size_ = 0;
  bool closed_ = false;
};

}  // namespace strata
