// Replica consistency: in data-parallel training every rank applies the same update to the same sum, so every
// rank's weights must be bit-identical. A digest of the weights, compared across the ranks, checks that.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>

namespace strata {

template <typename Dtype>
class Net;

// FNV-1a over `n` bytes, going on from `digest` (start with kFnv1aBasis): the same on every build and process,
// unlike std::hash.
constexpr uint64_t kFnv1aBasis = 1469598103934665603ull;
uint64_t Fnv1a(const void* data, size_t n, uint64_t digest = kFnv1aBasis);

// Whether `digest` is the same on every rank of `comm` (collective: one allreduce).
bool SameOnAllRanks(uint64_t digest, MPI_Comm comm);

// A 64-bit digest (FNV-1a) of the bytes of every learnable parameter: equal on every rank when training is
// consistent.
template <typename Dtype>
uint64_t WeightsDigest(const Net<Dtype>& net);

// Compares the digests of every rank of `comm` (collective) and ends the whole job with one message naming the
// iteration if they differ.
template <typename Dtype>
void CheckReplicasAgree(const Net<Dtype>& net, MPI_Comm comm, int iter);

}  // namespace strata
