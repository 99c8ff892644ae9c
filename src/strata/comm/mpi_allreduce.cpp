#include "strata/comm/mpi_allreduce.hpp"

#include <algorithm>

#include "strata/common.hpp"
#include "strata/comm/allreduce_kernels.hpp"
#include "strata/comm/communicator.hpp"

namespace strata {

namespace {
const char* const kForcedNames[] = {"mpi",  "mpi_linear", "mpi_nonoverlapping", "mpi_recursive_doubling",
                                    "mpi_ring", "mpi_segmented_ring", "mpi_rabenseifner"};
constexpr size_t kMaxCallElems = size_t(1) << 28;

#ifdef OPEN_MPI
// Reads or writes one integer control variable of the MPI tool interface; false if it does not exist.
bool cvar_access(const char* name, int* value, bool write) {
  int index = -1;
  if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) return false;
  MPI_T_cvar_handle handle;
  int n = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &n) != MPI_SUCCESS) return false;
  int rc = write ? MPI_T_cvar_write(handle, value) : MPI_T_cvar_read(handle, value);
  MPI_T_cvar_handle_free(&handle);
  return rc == MPI_SUCCESS;
}
#endif
}  // namespace

int MpiAllreduce::openmpi_algorithm_of(const std::string& name) {
  for (int k = 0; k < 7; ++k)
    if (name == kForcedNames[k]) return k;
  return -1;
}

MpiAllreduce::MpiAllreduce(MPI_Comm comm, int openmpi_algorithm, size_t openmpi_segment_bytes)
    : Allreduce(comm), algorithm_(openmpi_algorithm) {
  CHECK(algorithm_ >= 0 && algorithm_ <= 6) << "Open MPI allreduce algorithms are 1..6";
  if (algorithm_ == 0) return;
#ifdef OPEN_MPI
  // MPI_T stays initialised for the rest of the process: each MPI_T_init_thread that finds it finalised
  // re-reads every MCA variable (about 0.2 s here), and a training run builds one instance per
  // communication thread.
  static const bool mpi_t_ready = [] {
    int provided = 0;
    return MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) == MPI_SUCCESS;
  }();
  STRATA_REQUIRE(mpi_t_ready) << "MPI_T_init_thread failed; cannot force an Open MPI algorithm";
  int dynamic = 0;
  bool ok = cvar_access("coll_tuned_use_dynamic_rules", &dynamic, false) && dynamic;
  int old_alg = 0, old_seg = 0, alg = algorithm_, seg = static_cast<int>(openmpi_segment_bytes);
  ok = ok && cvar_access("coll_tuned_allreduce_algorithm", &old_alg, false) &&
       cvar_access("coll_tuned_allreduce_algorithm_segmentsize", &old_seg, false);
  if (ok) {
    cvar_access("coll_tuned_allreduce_algorithm", &alg, true);
    cvar_access("coll_tuned_allreduce_algorithm_segmentsize", &seg, true);
    STRATA_MPI_CHECK(MPI_Comm_dup(comm, &own_comm_));
    cvar_access("coll_tuned_allreduce_algorithm", &old_alg, true);
    cvar_access("coll_tuned_allreduce_algorithm_segmentsize", &old_seg, true);
    comm_ = own_comm_;
  }
  STRATA_REQUIRE(ok) << name() << " needs Open MPI's coll_tuned component with coll_tuned_use_dynamic_rules=1 "
                     << "set before MPI_Init (allreduce_bench sets OMPI_MCA_coll_tuned_use_dynamic_rules=1)";
#else
  STRATA_FAIL() << name() << " forces an Open MPI algorithm, but this program is built against another MPI";
#endif
}

MpiAllreduce::~MpiAllreduce() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (own_comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&own_comm_);
}

std::string MpiAllreduce::name() const { return kForcedNames[algorithm_]; }

void MpiAllreduce::run(void* buf, size_t count, DataType t) {
  // MPI counts are int: very large buffers go in pieces.
  for (size_t b = 0; b < count; b += kMaxCallElems) {
    size_t n = std::min(kMaxCallElems, count - b);
    STRATA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, comm_detail::at(buf, b, t), static_cast<int>(n),
                                   mpi_type_of(t), MPI_SUM, comm_));
  }
}

}  // namespace strata
