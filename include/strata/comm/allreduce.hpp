// The one interface every allreduce algorithm shares: an in-place element-wise sum of a float or double
// buffer over all ranks of a communicator, after which every rank holds bit-identical values.
//
// Gloo's habit: the constructor does all the planning that depends only on the communicator (who talks
// to whom in which phase); run() works out the split of this call's buffer (a few divisions) and moves
// bytes. Scratch memory is kept between calls and only grows, so a steady training loop allocates
// nothing. An instance is not thread-safe: give each communication thread its own instance on its own
// communicator (Communicator::thread_comm).
//
// Bit-identical results: each algorithm computes every element's final value in one place (or, in the
// butterfly, as x + y on both partners of a pair, and IEEE addition is commutative) and copies it to
// the others, so the summation order of an element never depends on which rank looks at it.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace strata {

enum class DataType { kFloat, kDouble };

template <typename T> DataType data_type_of();
template <> inline DataType data_type_of<float>() { return DataType::kFloat; }
template <> inline DataType data_type_of<double>() { return DataType::kDouble; }

inline size_t size_of(DataType t) { return t == DataType::kFloat ? sizeof(float) : sizeof(double); }
inline MPI_Datatype mpi_type_of(DataType t) { return t == DataType::kFloat ? MPI_FLOAT : MPI_DOUBLE; }
const char* data_type_name(DataType t);
// "float" or "double"; throws strata::Error otherwise.
DataType data_type_from_name(const std::string& name);

class Allreduce {
 public:
  explicit Allreduce(MPI_Comm comm);
  virtual ~Allreduce() = default;
  Allreduce(const Allreduce&) = delete;
  Allreduce& operator=(const Allreduce&) = delete;

  // The registered name ("brd", "ring_seg", ...).
  virtual std::string name() const = 0;
  // Sums buf[0..count) element-wise over every rank of the communicator, in place. Collective: every
  // rank calls it with the same count and type.
  virtual void run(void* buf, size_t count, DataType type) = 0;

  template <typename T> void run(T* buf, size_t count) { run(buf, count, data_type_of<T>()); }

  // What a message of `bytes` bytes runs, and why, where the algorithm chooses ("hybrid: row '* inf shm'
  // of the built-in table -> shm: ranks on 2 nodes -> hier over 2 nodes x 2 ranks, across nodes: brd").
  // Plain algorithms return their name.
  virtual std::string explain(size_t bytes) const {
    (void)bytes;
    return name();
  }

  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 protected:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

// The algorithms by name: linear, brb, brd, vhd, vhd_seg, ring, ring_seg, shm, hier (ranks on several machines:
// hier_allreduce.hpp), mpi (MPI_Allreduce itself) and Open MPI's own algorithms forced by name (mpi_ring, ...).
// "hybrid" is not among them: it is a policy over these (strata/comm/hybrid_allreduce.hpp).
const std::vector<std::string>& allreduce_algorithm_names();
bool is_allreduce_algorithm(const std::string& name);
// Constructs the named algorithm on comm (collective only in the sense that every rank must build the
// same algorithm). Throws strata::Error naming the known algorithms if the name is unknown.
std::unique_ptr<Allreduce> make_allreduce_algorithm(const std::string& name, MPI_Comm comm);
// "unknown allreduce algorithm 'x' (known: ...)".
std::string unknown_allreduce_message(const std::string& name);

// The segment size the *_seg variants cut their messages into: big enough that the MPI overhead per
// message is small, small enough that two segments of scratch stay in the L2 cache while they are summed.
constexpr size_t kDefaultSegmentBytes = 256 * 1024;

}  // namespace strata
