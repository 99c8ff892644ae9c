#include "strata/comm/allreduce.hpp"

#include <algorithm>
#include <cstdlib>

#include "strata/common.hpp"
#include "strata/comm/brb_allreduce.hpp"
#include "strata/comm/brd_allreduce.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/comm/hier_allreduce.hpp"
#include "strata/comm/linear_allreduce.hpp"
#include "strata/comm/mpi_allreduce.hpp"
#include "strata/comm/ring_allreduce.hpp"
#include "strata/comm/shm_allreduce.hpp"
#include "strata/comm/vhd_allreduce.hpp"

namespace strata {

const char* data_type_name(DataType t) { return t == DataType::kFloat ? "float" : "double"; }

DataType data_type_from_name(const std::string& name) {
  if (name == "float") return DataType::kFloat;
  if (name == "double") return DataType::kDouble;
  STRATA_FAIL() << "unknown data type '" << name << "' (expected float or double)";
  return DataType::kFloat;
}

Allreduce::Allreduce(MPI_Comm comm) : comm_(comm) {
  STRATA_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  STRATA_MPI_CHECK(MPI_Comm_size(comm, &size_));
}

const std::vector<std::string>& allreduce_algorithm_names() {
  static const std::vector<std::string> names = {
      "linear", "brb", "brd", "vhd", "vhd_seg", "ring", "ring_seg", "shm", "hier", "mpi",
      "mpi_linear", "mpi_nonoverlapping", "mpi_recursive_doubling", "mpi_ring", "mpi_segmented_ring",
      "mpi_rabenseifner"};
  return names;
}

bool is_allreduce_algorithm(const std::string& name) {
  const auto& names = allreduce_algorithm_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

size_t segment_bytes() {
  static const size_t bytes = [] {
    const char* env = getenv("STRATA_ALLREDUCE_SEGMENT_BYTES");
    return env ? static_cast<size_t>(atoll(env)) : kDefaultSegmentBytes;
  }();
  return bytes;
}

std::unique_ptr<Allreduce> make_allreduce_algorithm(const std::string& name, MPI_Comm comm) {
  if (name == "linear") return std::make_unique<LinearAllreduce>(comm);
  if (name == "brb") return std::make_unique<BrbAllreduce>(comm);
  if (name == "brd") return std::make_unique<BrdAllreduce>(comm);
  if (name == "vhd") return std::make_unique<VhdAllreduce>(comm, 0);
  if (name == "vhd_seg") return std::make_unique<VhdAllreduce>(comm, segment_bytes());
  if (name == "ring") return std::make_unique<RingAllreduce>(comm, 0);
  if (name == "ring_seg") return std::make_unique<RingAllreduce>(comm, segment_bytes());
  if (name == "shm") return std::make_unique<ShmAllreduce>(comm);
  if (name == "hier") return std::make_unique<HierarchicalAllreduce>(comm);
  int k = MpiAllreduce::openmpi_algorithm_of(name);
  // Open MPI's segmented ring is measured with 1 MiB segments, its best here (docs/allreduce.md).
  if (k >= 0) return std::make_unique<MpiAllreduce>(comm, k, k == 5 ? (1 << 20) : 0);
  STRATA_FAIL() << unknown_allreduce_message(name);
  return nullptr;
}

std::string unknown_allreduce_message(const std::string& name) {
  std::string known;
  for (const auto& n : allreduce_algorithm_names()) known += n + ", ";
  return "unknown allreduce algorithm '" + name + "' (known: " + known + "and hybrid)";
}

}  // namespace strata
