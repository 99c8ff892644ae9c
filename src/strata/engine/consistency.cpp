#include "strata/engine/consistency.hpp"

#include <sstream>

#include "strata/comm/communicator.hpp"
#include "strata/net.hpp"

namespace strata {

uint64_t Fnv1a(const void* data, size_t n, uint64_t digest) {
  const unsigned char* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) digest = (digest ^ bytes[i]) * 1099511628211ull;
  return digest;
}

bool SameOnAllRanks(uint64_t digest, MPI_Comm comm) {
  // max(d) and max(~d) = ~min(d): every rank has the same digest exactly when the two meet.
  uint64_t v[2] = {digest, ~digest};
  STRATA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_UINT64_T, MPI_MAX, comm));
  return v[0] == ~v[1];
}

template <typename Dtype>
uint64_t WeightsDigest(const Net<Dtype>& net) {
  uint64_t h = kFnv1aBasis;
  for (const Blob<Dtype>* p : net.learnable_params()) h = Fnv1a(p->cpu_data(), sizeof(Dtype) * p->count(), h);
  return h;
}

template <typename Dtype>
void CheckReplicasAgree(const Net<Dtype>& net, MPI_Comm comm, int iter) {
  const uint64_t mine = WeightsDigest(net);
  if (SameOnAllRanks(mine, comm)) return;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::ostringstream s;
  s << "the ranks' weights differ after iteration " << iter << " (rank " << rank << " digest " << std::hex << mine
    << ")";
  mpi_abort(s.str());
}

template uint64_t WeightsDigest(const Net<float>&);
template uint64_t WeightsDigest(const Net<double>&);
template void CheckReplicasAgree(const Net<float>&, MPI_Comm, int);
template void CheckReplicasAgree(const Net<double>&, MPI_Comm, int);

}  // namespace strata
