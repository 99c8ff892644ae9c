// MachineSpec: what the scaling model (strata/scale/iteration_model.hpp) knows about the machines a job runs on:
// the network between nodes (the Hockney figures alpha, beta and a reduction rate gamma, as in
// strata/comm/cost_model.hpp), shared memory inside a node, the GPU's link to its host, and the cores.
//
// File format (text; '#' starts a comment; one "key value" per line; every key optional, units in the name):
//
//     alpha_us          2.0     # seconds per message between nodes (latency and software overhead)
//     bandwidth_GBps    6.8     # a node's link, each direction (GB = 1e9 bytes)
//     reduce_GBps       5.0     # bytes one core sums per second (gamma = 1 / this)
//     local_alpha_us    1.0     # one flag wait of shared memory inside a node
//     local_copy_GBps   8.0     # bytes one core copies through shared memory per second
//     pcie_GBps         6.0     # GPU <-> host copies, each direction; 0: CPU training (no copies)
//     update_GBps       4.0     # bytes of gradient one core updates per second (CPU training's one-pass sweep)
//     wakeup_us         0       # a communication thread's wait to be scheduled when the computation holds every
//                               # core of its rank (CPU training with no spare core): added to each message
//                               # between nodes (MPI polls and yields; shared memory's futex wakes preempt)
//     cores             12      # cores per node
//
// `allreduce_bench --model --model_out=FILE` writes one measured between two ranks (docs/scale.md).
#pragma once

#include <string>

#include "strata/comm/cost_model.hpp"

namespace strata {

struct MachineSpec {
  std::string origin = "built-in machine";
  double alpha = 15e-6;            // s per message between nodes
  double beta = 1.0 / 1.25e9;      // s per byte on a node's link (10 Gbit/s)
  double gamma = 1.0 / 4e9;        // s per byte summed on one core
  double local_alpha = 2e-6;       // s per shared-memory flag wait
  double local_copy = 1.0 / 10e9;  // s per byte copied through shared memory
  double pcie = 0;                 // s per byte between GPU and host (0: no GPU)
  double update = 1.0 / 4e9;       // s per gradient byte of a CPU update sweep
  double wakeup = 0;               // s a woken communication thread waits for a core the computation holds
  int cores = 2;                   // per node

  // The network's figures as the cost model holds them.
  NetworkCostModel network() const { return {alpha, beta, gamma}; }
  // The file format above; throws strata::Error naming origin and line for an unknown key, a value that is not
  // a number, or one out of range (negative, or a zero rate where a rate is needed).
  static MachineSpec parse(const std::string& text, const std::string& origin);
  static MachineSpec load(const std::string& path);
  std::string to_text() const;
  void save(const std::string& path) const;
  std::string describe() const;  // one line
};

}  // namespace strata
