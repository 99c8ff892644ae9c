// Helpers the MPI tests share: this process's place in MPI_COMM_WORLD and agreement across ranks.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "gpu_skip.hpp"

namespace strata {
namespace mpi_test {

inline int world_rank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int n;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// True on every rank iff `ok` on every rank.
inline bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

// True on every rank iff every rank passed the same value.
inline bool same_on_all_ranks(uint64_t v) {
  uint64_t lo = 0, hi = 0;
  MPI_Allreduce(&v, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&v, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

// Record i: a channels x 6 x 6 image of hashed pixels, label (7 i) mod 5. Deterministic, and varied enough that
// every record moves the weights differently.
inline Datum HashedRecord(int i, int channels) {
  std::vector<uint8_t> pixels(static_cast<size_t>(channels) * 36);
  for (size_t j = 0; j < pixels.size(); ++j) {
    const uint32_t h = static_cast<uint32_t>(i * 131 + static_cast<int>(j) * 17 + 7) * 2654435761u;
    pixels[j] = static_cast<uint8_t>(h >> 24);
  }
  return testing_data::MakeDatum(channels, 6, 6, pixels, (i * 7) % 5);
}

// Rank 0 writes records record(0 .. count - 1) into an LMDB in a temporary folder that *dir keeps; every rank
// returns the LMDB's path. Collective.
inline std::string SharedRecordDb(std::unique_ptr<testing_data::TempDir>* dir, int count,
                                  const std::function<Datum(int)>& record) {
  std::string path(256, '\0');
  if (world_rank() == 0) {
    *dir = std::make_unique<testing_data::TempDir>();
    std::vector<Datum> records;
    for (int i = 0; i < count; ++i) records.push_back(record(i));
    testing_data::WriteDatumDb(**dir / "db", records);
    path = **dir / "db";
    path.resize(256, '\0');
  }
  MPI_Bcast(&path[0], 256, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path.c_str();
}

}  // namespace mpi_test
}  // namespace strata
