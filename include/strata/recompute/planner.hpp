// Recomputation planners (docs/recompute.md). A plan cuts the graph's nodes into segments
// V1, V2, ..., Vk such that every prefix L_i = V1 u ... u Vi is a lower set (closed under predecessors).
// Forward keeps, of each segment but the last, only its boundary B_i (the values a node outside L_i reads);
// backward recomputes segment i from the kept values just before running its backward. The last segment is
// kept whole, since its backward follows its forward at once.
//
// Cost model: activation data, gradients and layers' saved state, as the recompute executor frees them
// (RecomputeGraph::SegmentPeak):
//   peak  = source_bytes + max_i ( K_{i-1} + P(L_{i-1}, L_i) )
//   cost  = sum over i < k of T(R_i)
// where K_{i-1} is the data of B_1 u ... u B_{i-1} (and their saved state for segments that keep it), P the most
// segment i holds beyond that in its forward or its backward (its data and state, its gradients, and the
// gradients it writes into earlier nodes), and R_i the part of V_i \ B_i that some backward reads, plus the
// boundaries whose saved state backward reads unless the segment keeps it, together with their ancestors inside
// V_i \ B_i (what must be recomputed for segment i's backward).
// The planners:
//   StoreAllPlanner   one segment: nothing recomputed, everything kept (what Net does without a plan)
//   SqrtPlanner       Chen et al. 2016: ceil(sqrt(n)) segments of equal node count in topological order
//   LowerSetPlanner   Kusumoto et al. 2019: dynamic program over lower sets, least recomputation within a
//                     memory budget (time-centric) or least memory (memory-centric). Exact when the graph has
//                     at most `max_lower_sets` lower sets; otherwise over a family that holds every
//                     node's ancestor closure and every prefix of the topological order (so it is never worse
//                     than SqrtPlanner's segmentation, which is such a chain of prefixes).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "strata/proto/strata.pb.h"
#include "strata/recompute/graph.hpp"

namespace strata {

struct RecomputePlan {
  std::string planner;                     // "store_all", "sqrt", "dp" / "dp_approx" (+ "_memory")
  std::vector<std::vector<int>> segments;  // node ids, each segment in topological order
  std::vector<int> kept;                   // nodes whose values forward keeps for backward (boundaries and
                                           // the whole last segment), ascending
  std::vector<std::vector<int>> recompute;  // per segment, the nodes its backward re-runs first (R_i)
  // Per segment: whether forward keeps its boundaries' saved state as well as their data. When not, the
  // boundaries whose backward reads their state are in R_i (re-run from the same inputs, same values).
  std::vector<bool> keeps_state;
  size_t peak_bytes = 0;                   // predicted peak activation data, sources included
  double recompute_flops = 0;              // predicted extra forward work per iteration
  bool exact = true;                       // false when the DP ran over the approximate family
  size_t lower_sets = 0;                   // lower sets the DP considered (0 for the other planners)
};

// Peak and cost of a chain of lower sets given as segments (in order); checks that it is one.
// `keeps_state` per segment, false where not given (RecomputePlan::keeps_state).
RecomputePlan EvaluateSegments(const RecomputeGraph& g, const std::vector<std::vector<int>>& segments,
                               const std::string& planner, const std::vector<bool>& keeps_state = {});

RecomputePlan StoreAllPlan(const RecomputeGraph& g);
// `segments` <= 0 means ceil(sqrt(n)).
RecomputePlan SqrtPlan(const RecomputeGraph& g, int segments = 0);

class LowerSetPlanner {
 public:
  enum class Mode { kTime, kMemory };
  explicit LowerSetPlanner(const RecomputeGraph& g, int max_lower_sets = 2000);

  // Least recomputation with peak_bytes <= budget. Throws an Error naming the smallest feasible budget when
  // no plan of the family meets it.
  RecomputePlan Plan(size_t budget_bytes) const;
  // Least peak memory, and among plans of that peak the least recomputation.
  RecomputePlan MinMemoryPlan() const;
  // The smallest peak any plan of the family reaches.
  size_t MinFeasibleBytes() const;

  bool exact() const { return exact_; }
  const std::vector<NodeSet>& lower_sets() const { return sets_; }

 private:
  // The DP: for every lower set and every kept-boundary size t reachable, the best (cost, peak) so far.
  // Returns false when the budget cannot be met.
  bool Solve(Mode mode, size_t budget_bytes, RecomputePlan* plan) const;

  const RecomputeGraph& g_;
  bool exact_ = true;
  std::vector<NodeSet> sets_;  // sorted by size; sets_[0] is empty, the last is every node
};

// The plan `planner` names ("store_all", "sqrt", "dp" within the budget, "dp_memory"): what the solver's
// recompute_param and the tools ask for. An unknown name or an infeasible budget is an Error.
RecomputePlan MakePlan(const RecomputeGraph& g, const std::string& planner, size_t budget_bytes,
                       int max_lower_sets = 2000);
// The plan a solver's recompute_param asks for: its planner within budget_bytes, or within budget_fraction of
// store-all's peak (g.total_bytes(); the fraction wins when both are given, and neither means store-all's peak).
// A fraction that is not positive is an Error, as for MakePlan.
RecomputePlan MakePlan(const RecomputeGraph& g, const RecomputeParameter& param);

// Every lower set of `g`, or an empty vector when there are more than `cap` (exact enumeration refused).
std::vector<NodeSet> EnumerateLowerSets(const RecomputeGraph& g, int cap);

}  // namespace strata
