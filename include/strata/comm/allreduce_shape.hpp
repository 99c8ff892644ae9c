// The shape of one allreduce as Strata's algorithms run it: its phases, and in each phase the bytes the busiest
// rank moves over its link and sums. This is what the scaling model (strata/scale/iteration_model.hpp) times, and
// what the seed paper's table 1 counts. With M bytes on N ranks (p the largest power of two <= N, r = N - p):
//
//   algorithm  phases              busiest rank: link bytes     sums              all ranks: bytes sent  sums
//   brb        2 ceil(log2 N)      2 M ceil(log2 N)              M ceil(log2 N)    2 M (N-1)              M (N-1)
//   brd        log2 p (+2)         M log2 p (+2 M)               M log2 p (+M)     M p log2 p (+2 r M)    M p log2 p (+r M)
//   vhd        2 log2 p (+2)       2 M (p-1)/p (+2 M)            M (p-1)/p (+M)    2 M (p-1) (+2 r M)     M (p-1) (+r M)
//   ring       2 (N-1)             2 M (N-1)/N                   M (N-1)/N         2 M (N-1)              M (N-1)
//   linear     2                   2 M (N-1)                     M (N-1)           2 M (N-1)              M (N-1)
//
// (+...) is the fold when N is not a power of two (docs/allreduce.md): the first 2r ranks pair up, one of each
// pair sends its buffer to the other, which sums it, runs the algorithm among p ranks and sends the result back.
// A rank's link is full duplex, so a phase in which it sends and receives at once counts max(sent, received):
// for powers of two the rows are exactly the seed paper's table 1. vhd_seg and ring_seg have the shapes of vhd
// and ring (their segments pipeline the sums behind the transfers; the model does not credit that).
#pragma once

#include <string>
#include <vector>

namespace strata {

struct AllreducePhase {
  double link_bytes = 0;  // the busiest rank's bytes on its link (max of sent and received)
  double sum_bytes = 0;   // the bytes it sums
};

struct AllreduceShape {
  std::string algorithm;
  int ranks = 1;
  double bytes = 0;
  std::vector<AllreducePhase> phases;  // the busiest rank's phases, in order
  double total_sent_bytes = 0;         // over all ranks
  double total_sum_bytes = 0;

  int num_phases() const { return static_cast<int>(phases.size()); }
  double rank_link_bytes() const;  // the busiest rank's link bytes over all phases
  double rank_sum_bytes() const;
  // alpha seconds per phase, beta seconds per link byte, gamma seconds per byte summed: the same predictions as
  // NetworkCostModel::predict.
  double seconds(double alpha, double beta, double gamma) const;
};

// Throws strata::Error for an algorithm that is not a network algorithm (brb, brd, vhd, vhd_seg, ring,
// ring_seg, linear) or ranks < 1.
AllreduceShape ShapeAllreduce(const std::string& algorithm, int ranks, double bytes);

// The network algorithms ShapeAllreduce covers.
const std::vector<std::string>& shaped_allreduce_algorithms();

}  // namespace strata
