// Things every part of Strata uses: the error type for bad user input, the runtime context (CPU/GPU mode,
// random number generators) and the explicit-instantiation helper for float/double classes.
#pragma once

#include <glog/logging.h>

#include <cstdint>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace strata {

// Bad input from a user (a prototxt, a file, a flag) is reported with an Error: the tools catch it, print
// one clear message and exit non-zero. glog CHECKs are kept for programmer errors (broken invariants).
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Builds an Error message with stream syntax and throws it when the statement ends:
//   STRATA_REQUIRE(n > 0) << "batch_size must be positive, got " << n;
class ErrorThrower {
 public:
  ErrorThrower() = default;
  ErrorThrower(const ErrorThrower&) = delete;
  ~ErrorThrower() noexcept(false) { throw Error(stream_.str()); }
  std::ostringstream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

#define STRATA_REQUIRE(cond) \
  if (cond) {                \
  } else                     \
    ::strata::ErrorThrower().stream()

#define STRATA_FAIL() ::strata::ErrorThrower().stream()

// Runtime context shared by the whole process.
class Strata {
 public:
  enum Mode { CPU, GPU };

  static Mode mode() { return mode_; }
  static void set_mode(Mode mode) { mode_ = mode; }
  // Seeds the calling thread's generator; other threads seed their own (see rng()).
  static void set_random_seed(uint64_t seed);
  // The calling thread's random engine. Deterministic per thread once seeded.
  static std::mt19937& rng();
  // A seed derived from the calling thread's engine, for handing to another thread or component.
  static uint64_t draw_seed();

  // This process's rank r of the job's N, set where MPI comes up (strata train, the Python module): rank 0 logs
  // and writes snapshots. Never the data shard, which a Net is given (DataShard, layer.hpp). 0 of 1 alone.
  static int solver_rank() { return solver_rank_; }
  static int solver_count() { return solver_count_; }
  static void set_solver_rank(int rank) { solver_rank_ = rank; }
  static void set_solver_count(int count) { solver_count_ = count; }
  static bool root_solver() { return solver_rank_ == 0; }

 private:
  static Mode mode_;
  static int solver_rank_;
  static int solver_count_;
};

// Marks a small inline function that the CPU code and the CUDA kernels both call, so both compute the same thing.
#ifdef __CUDACC__
#define STRATA_HOST_DEVICE __host__ __device__
#else
#define STRATA_HOST_DEVICE
#endif

#define STRATA_INSTANTIATE_CLASS(classname) \
  template class classname<float>;          \
  template class classname<double>

// Formats bytes as "12.3 MiB" for logs.
std::string human_bytes(double bytes);

}  // namespace strata
