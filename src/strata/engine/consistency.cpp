#include "strata/engine/consistency.hpp"

#include <sstream>

#include "strata/comm/communicator.hpp"
#include "strata/net.hpp"

namespace strata {

template <typename Dtype>
uint64_t WeightsDigest(const Net<Dtype>& net) {
  uint64_t h = 1469598103934665603ull;
  for (const Blob<Dtype>* p : net.learnable_params()) {
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(p->cpu_data());
    const size_t n = sizeof(Dtype) * static_cast<size_t>(p->count());
    for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return h;
}

template <typename Dtype>
void CheckReplicasAgree(const Net<Dtype>& net, MPI_Comm comm, int iter) {
  const uint64_t mine = WeightsDigest(net);
  uint64_t lo = 0, hi = 0;
  STRATA_MPI_CHECK(MPI_Allreduce(&mine, &lo, 1, MPI_UINT64_T, MPI_MIN, comm));
  STRATA_MPI_CHECK(MPI_Allreduce(&mine, &hi, 1, MPI_UINT64_T, MPI_MAX, comm));
  if (lo == hi) return;
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
