// What an allreduce should cost on a network, from three numbers (the Hockney model with a reduction term):
//   alpha  seconds per message (latency and software overhead),
//   beta   seconds per byte on the wire,
//   gamma  seconds per byte summed.
// For p ranks and M bytes (p' the largest power of two <= p, r = p - p'; a fold costs 2 (alpha + M beta) + M
// gamma when r > 0, as docs/allreduce.md describes):
//   brd   fold + log2 p' (alpha + M beta + M gamma)
//   vhd   fold + 2 log2 p' alpha + 2 (p'-1)/p' M beta + (p'-1)/p' M gamma
//   ring  2 (p-1) alpha + 2 (p-1)/p M beta + (p-1)/p M gamma
//   brb   2 log2 p (alpha + M beta) + log2 p M gamma   (rounded up: the tree's depth)
// It gives the crossover rows for layouts nobody measured (the network part of `hier` on node counts other
// than the measured ones), and `allreduce_bench --model` measures the three numbers between two ranks.
#pragma once

#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

namespace strata {

struct CrossoverRow;

struct NetworkCostModel {
  double alpha = 0;
  double beta = 0;
  double gamma = 0;

  // Predicted seconds for `algorithm` (brd, vhd, ring, brb, linear; vhd_seg and ring_seg as vhd and ring) on
  // `ranks` ranks and `bytes` bytes: each phase of its shape (strata/comm/allreduce_shape.hpp) costs alpha, beta
  // per byte on the link and gamma per byte summed. Throws strata::Error for an algorithm the model does not
  // cover.
  double predict(const std::string& algorithm, int ranks, double bytes) const;
  // Crossover rows for `ranks` ranks: at every power of two from 4 B to 1 GiB the candidate predicted fastest,
  // merged into rows (the last one unlimited).
  std::vector<CrossoverRow> rows(int ranks, const std::vector<std::string>& candidates = {"brd", "vhd", "ring"}) const;
  std::string describe() const;  // "alpha 15.0 us, beta 1.00 GB/s, gamma 4.00 GB/s"

  // alpha and beta fitted to measured allreduce times of `algorithm` on `ranks` ranks ({bytes, seconds} pairs),
  // with gamma given: least squares on the relative error of its shape's phases (strata/comm/allreduce_shape.hpp).
  // What the algorithm really costs at the sizes measured (per-message overheads a ping-pong does not see, such as
  // TCP's slow start after an idle gap) goes into alpha; alpha is kept at or above min_alpha (a ping-pong's: no
  // message costs less). Throws strata::Error with fewer than 2 distinct sizes.
  static NetworkCostModel fit(const std::string& algorithm, int ranks,
                              const std::vector<std::pair<double, double>>& samples, double gamma,
                              double min_alpha = 0);

  // Collective over comm: alpha and beta from ping-pongs of 8 B and 4 MiB between rank 0 and the last rank
  // (half a round trip each; on a job across nodes, put those two on different nodes), gamma from summing
  // 4 MiB of floats on rank 0. Every rank gets rank 0's figures.
  static NetworkCostModel measure(MPI_Comm comm);
};

}  // namespace strata
