#include "strata/engine/stage_link.hpp"

#include <string>

#include "strata/comm/communicator.hpp"
#include "strata/memory_tracker.hpp"

namespace strata {

namespace {

template <typename Dtype>
MPI_Datatype mpi_type() {
  return sizeof(Dtype) == sizeof(float) ? MPI_FLOAT : MPI_DOUBLE;
}

}  // namespace

template <typename Dtype>
StageLink<Dtype>::StageLink(MPI_Comm world, int stage, PipelineStats* stats, Timeline* timeline)
    : stage_(stage), stats_(stats), timeline_(timeline) {
  STRATA_MPI_CHECK(MPI_Comm_dup(world, &comm_));
}

template <typename Dtype>
StageLink<Dtype>::~StageLink() {
  if (!requests_.empty()) MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  while (!send_buffers_.empty()) ReleaseSendBuffer(send_buffers_.size() - 1);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

template <typename Dtype>
void StageLink<Dtype>::Receive(Blob<Dtype>* blob, bool diff, int from, int tag) {
  const double ts = timeline_->now_us();
  Dtype* dst = diff ? blob->mutable_cpu_diff() : blob->mutable_cpu_data();
  MPI_Status status;
  STRATA_MPI_CHECK(MPI_Recv(dst, blob->count(), mpi_type<Dtype>(), from, tag, comm_, &status));
  int got = 0;
  MPI_Get_count(&status, mpi_type<Dtype>(), &got);
  if (got != blob->count()) {
    mpi_abort("pipeline stage " + std::to_string(stage_) + ": a message of " + std::to_string(got) +
              " values arrived for a blob of " + std::to_string(blob->count()) + " (the stages disagree on shapes)");
  }
  stats_->wait_ms += (timeline_->now_us() - ts) / 1000;
  timeline_->Record("wait", "wait", 0, ts);
}

template <typename Dtype>
void StageLink<Dtype>::Send(const Blob<Dtype>* blob, bool diff, int to, int tag) {
  // Finished sends give their buffers back; the rest stay in flight while this stage computes.
  for (size_t i = 0; i < requests_.size();) {
    int done = 0;
    STRATA_MPI_CHECK(MPI_Test(&requests_[i], &done, MPI_STATUS_IGNORE));
    if (done) {
      ReleaseSendBuffer(i);
    } else {
      ++i;
    }
  }
  const Dtype* src = diff ? blob->cpu_diff() : blob->cpu_data();
  send_buffers_.emplace_back(src, src + blob->count());
  MemoryTracker::allocated(MemoryCategory::kActivation, send_buffers_.back().size() * sizeof(Dtype));
  requests_.emplace_back();
  STRATA_MPI_CHECK(MPI_Isend(send_buffers_.back().data(), blob->count(), mpi_type<Dtype>(), to, tag, comm_,
                             &requests_.back()));
  stats_->bytes_sent += static_cast<double>(blob->count()) * sizeof(Dtype);
}

template <typename Dtype>
void StageLink<Dtype>::WaitSends() {
  const double t0 = timeline_->now_us();
  if (!requests_.empty()) {
    STRATA_MPI_CHECK(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE));
  }
  while (!send_buffers_.empty()) ReleaseSendBuffer(send_buffers_.size() - 1);
  stats_->wait_ms += (timeline_->now_us() - t0) / 1000;
}

template <typename Dtype>
void StageLink<Dtype>::ReleaseSendBuffer(size_t i) {
  MemoryTracker::released(MemoryCategory::kActivation, send_buffers_[i].size() * sizeof(Dtype));
  requests_.erase(requests_.begin() + static_cast<long>(i));
  send_buffers_.erase(send_buffers_.begin() + static_cast<long>(i));
}

STRATA_INSTANTIATE_CLASS(StageLink);

}  // namespace strata
