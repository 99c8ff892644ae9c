// StageLink: the link between a pipeline stage and its neighbours. Boundary blobs travel as MPI point-to-point
// messages on a communicator of the link's own; sends are non-blocking from a copy of the blob, so the stage
// computes while its outputs leave (the copies count as activation memory until their send completes), and
// receives block until the data is there: that wait is the pipeline's bubble.
#pragma once

#include <mpi.h>

#include <vector>

#include "strata/blob.hpp"
#include "strata/engine/pipeline_stats.hpp"
#include "strata/engine/timeline.hpp"

namespace strata {

template <typename Dtype>
class StageLink {
 public:
  // On a duplicate of `world`; `stage` names this end in errors. Waits and bytes go into `stats`, waits into row
  // 0 of `timeline`.
  StageLink(MPI_Comm world, int stage, PipelineStats* stats, Timeline* timeline);
  // Waits for the sends in flight.
  ~StageLink();
  StageLink(const StageLink&) = delete;
  StageLink& operator=(const StageLink&) = delete;

  // `blob`'s data (or diff) from rank `from`; a message of another size ends the job with a message naming both.
  void Receive(Blob<Dtype>* blob, bool diff, int from, int tag);
  // `blob`'s data (or diff) to rank `to`, from a copy; returns at once.
  void Send(const Blob<Dtype>* blob, bool diff, int to, int tag);
  // Blocks until every send has left.
  void WaitSends();
  // The link's communicator, on which every rank of the job meets (AgreeOnAction).
  MPI_Comm comm() const { return comm_; }

 private:
  void ReleaseSendBuffer(size_t i);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int stage_;
  PipelineStats* stats_;
  Timeline* timeline_;
  std::vector<MPI_Request> requests_;
  std::vector<std::vector<Dtype>> send_buffers_;
};

}  // namespace strata
