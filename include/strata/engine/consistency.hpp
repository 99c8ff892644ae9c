// Replica consistency: in data-parallel training every rank applies the same update to the same sum, so every
// rank's weights must be bit-identical. A digest of the weights, compared across the ranks, checks that.
#pragma once

#include <mpi.h>

#include <cstdint>

namespace strata {

template <typename Dtype>
class Net;

// A 64-bit digest (FNV-1a) of the bytes of every learnable parameter: equal on every rank when training is
// consistent.
template <typename Dtype>
uint64_t WeightsDigest(const Net<Dtype>& net);

// Compares the digests of every rank of `comm` (collective) and ends the whole job with one message naming the
// iteration if they differ.
template <typename Dtype>
void CheckReplicasAgree(const Net<Dtype>& net, MPI_Comm comm, int iter);

}  // namespace strata
