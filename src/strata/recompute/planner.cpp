#include "strata/recompute/planner.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>

#include "strata/common.hpp"

namespace strata {
namespace {

// What moving from lower set L to lower set L' (a new segment V = L' \ L) costs and keeps.
struct Step {
  size_t peak_bytes = 0;      // the most V adds to what earlier segments keep, in its forward or its backward
  size_t boundary_bytes = 0;  // M(B): data of the part of V that nodes outside L' read, kept until V's
                              // backward
  double recompute = 0;       // T(R): what V's backward needs recomputed
  bool boundary_state = false;  // whether some boundary's backward reads saved state (else keep_state is moot)
  std::vector<int> boundary;
  std::vector<int> recomputed;  // R, ascending
};

// `keep_state`: the boundaries keep their saved state from forward too, instead of being recomputed for it.
Step MakeStep(const RecomputeGraph& g, const NodeSet& lower, const NodeSet& upper, bool last, bool keep_state) {
  Step s;
  const std::vector<int> seg = upper.minus(lower).members();
  NodeSet in_b(g.size());
  for (int v : seg) {
    for (int w : g.nodes[v].succs) {
      if (!upper.has(w)) {
        in_b.add(v);
        s.boundary.push_back(v);
        s.boundary_bytes += g.nodes[v].bytes + (keep_state ? g.nodes[v].state_bytes() : 0);
        if (g.nodes[v].backward_reads_state) s.boundary_state = true;
        break;
      }
    }
  }
  // R: nodes of V \ B that a backward reads and nodes of B whose saved state a backward reads, closed under
  // predecessors inside V \ B (walking the segment backwards in topological order reaches every such ancestor
  // in one pass; a boundary's data is kept, so a boundary predecessor need not be re-run for a successor).
  // The last segment's values and state are still there from forward.
  NodeSet in_r(g.size());
  if (!last) {
    for (auto it = seg.rbegin(); it != seg.rend(); ++it) {
      const int v = *it;
      const bool read =
          in_b.has(v) ? !keep_state && g.nodes[v].backward_reads_state : g.nodes[v].needed_in_backward;
      if (!in_r.has(v) && !read) continue;
      in_r.add(v);
      for (int p : g.nodes[v].preds)
        if (upper.has(p) && !lower.has(p) && !in_b.has(p)) in_r.add(p);
    }
    s.recomputed = in_r.members();
    for (int v : s.recomputed) s.recompute += g.nodes[v].flops;
  }
  NodeSet live = in_r, with_state = in_r;
  for (int v : seg) {
    if (last || in_b.has(v)) live.add(v);
    if (last || (keep_state && in_b.has(v))) with_state.add(v);
  }
  s.peak_bytes = g.SegmentPeak(lower, upper, live, with_state, last);
  return s;
}

std::string human(size_t bytes) {
  std::ostringstream o;
  o << bytes << " bytes (" << human_bytes(static_cast<double>(bytes)) << ")";
  return o.str();
}

}  // namespace

RecomputePlan EvaluateSegments(const RecomputeGraph& g, const std::vector<std::vector<int>>& segments,
                               const std::string& planner, const std::vector<bool>& keeps_state) {
  RecomputePlan plan;
  plan.planner = planner;
  plan.segments = segments;
  plan.keeps_state = keeps_state;
  plan.keeps_state.resize(segments.size(), false);
  STRATA_REQUIRE(keeps_state.size() <= segments.size())
      << planner << ": " << keeps_state.size() << " keep-state flags for " << segments.size() << " segments";
  NodeSet lower(g.size());
  size_t kept_bytes = 0, peak = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    STRATA_REQUIRE(!segments[i].empty()) << planner << ": segment " << i << " is empty";
    NodeSet upper = lower;
    for (int v : segments[i]) {
      STRATA_REQUIRE(v >= 0 && v < g.size() && !upper.has(v))
          << planner << ": node " << v << " is out of range or in two segments";
      upper.add(v);
    }
    for (int v : segments[i])
      for (int p : g.nodes[v].preds)
        STRATA_REQUIRE(upper.has(p)) << planner << ": segment " << i << " holds " << g.nodes[v].name
                                     << " but not its input " << g.nodes[p].name << " or an earlier segment";
    const bool last = i + 1 == segments.size();
    const Step s = MakeStep(g, lower, upper, last, plan.keeps_state[i]);
    peak = std::max(peak, kept_bytes + s.peak_bytes);
    plan.recompute.push_back(s.recomputed);
    if (last) {
      for (int v : segments[i]) plan.kept.push_back(v);
    } else {
      kept_bytes += s.boundary_bytes;
      plan.kept.insert(plan.kept.end(), s.boundary.begin(), s.boundary.end());
      plan.recompute_flops += s.recompute;
    }
    lower = upper;
  }
  STRATA_REQUIRE(lower.size() == g.size()) << planner << ": the segments cover " << lower.size() << " of "
                                           << g.size() << " nodes";
  std::sort(plan.kept.begin(), plan.kept.end());
  plan.peak_bytes = g.source_bytes + peak;
  return plan;
}

RecomputePlan StoreAllPlan(const RecomputeGraph& g) {
  std::vector<std::vector<int>> segs;
  if (g.size() > 0) {
    segs.emplace_back();
    for (int v = 0; v < g.size(); ++v) segs[0].push_back(v);
  }
  return EvaluateSegments(g, segs, "store_all");
}

RecomputePlan SqrtPlan(const RecomputeGraph& g, int segments) {
  const int n = g.size();
  int s = segments > 0 ? segments : static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n))));
  s = std::min(s, n);
  std::vector<std::vector<int>> segs(s);
  // Node v goes to segment floor(v * s / n): sizes differ by at most one. A prefix of a topological order is
  // always a lower set, so this is a valid chain on any graph.
  for (int v = 0; v < n; ++v) segs[static_cast<size_t>(v) * s / n].push_back(v);
  return EvaluateSegments(g, segs, "sqrt");
}

std::vector<NodeSet> EnumerateLowerSets(const RecomputeGraph& g, int cap) {
  const int n = g.size();
  std::vector<NodeSet> out;
  NodeSet in(n), out_set(n);
  bool overflow = false;
  // Decide nodes in topological order: a node whose input was left out must be left out too; any other
  // node may go either way. Every leaf is a distinct lower set, so the work is O(n x number of sets).
  std::function<void(int)> rec = [&](int v) {
    if (overflow) return;
    if (v == n) {
      if (static_cast<int>(out.size()) >= cap) {
        overflow = true;
        return;
      }
      out.push_back(in);
      return;
    }
    bool forced_out = false;
    for (int p : g.nodes[v].preds) forced_out |= out_set.has(p);
    if (!forced_out) {
      in.add(v);
      rec(v + 1);
      in.remove(v);
    }
    out_set.add(v);
    rec(v + 1);
    out_set.remove(v);
  };
  rec(0);
  if (overflow) out.clear();
  return out;
}

LowerSetPlanner::LowerSetPlanner(const RecomputeGraph& g, int max_lower_sets) : g_(g) {
  const int n = g.size();
  sets_ = EnumerateLowerSets(g, max_lower_sets);
  if (sets_.empty()) {
    // Too many to enumerate: every node's ancestor closure and every prefix of the topological order.
    exact_ = false;
    std::vector<NodeSet> anc(n, NodeSet(n));
    for (int v = 0; v < n; ++v) {
      for (int p : g.nodes[v].preds)
        for (int a : anc[p].members()) anc[v].add(a);
      anc[v].add(v);
      sets_.push_back(anc[v]);
    }
    NodeSet prefix(n);
    sets_.push_back(prefix);
    for (int v = 0; v < n; ++v) {
      prefix.add(v);
      sets_.push_back(prefix);
    }
    std::sort(sets_.begin(), sets_.end());
    sets_.erase(std::unique(sets_.begin(), sets_.end()), sets_.end());
  }
  std::stable_sort(sets_.begin(), sets_.end(),
                   [](const NodeSet& a, const NodeSet& b) { return a.size() < b.size(); });
  CHECK_EQ(sets_.front().size(), 0);
  CHECK_EQ(sets_.back().size(), n);
}

bool LowerSetPlanner::Solve(Mode mode, size_t budget_bytes, RecomputePlan* plan) const {
  struct Entry {
    size_t kept;   // M(B_1 u ... u B_i) after this prefix
    size_t peak;   // the largest kept + M(V_j) so far (sources not included)
    double cost;
    int from_set, from_entry;
    bool keep_state;  // of the segment that led here
  };
  const int num = static_cast<int>(sets_.size());
  const int full = num - 1;
  const size_t limit = budget_bytes >= g_.source_bytes ? budget_bytes - g_.source_bytes : 0;
  if (mode == Mode::kTime && budget_bytes < g_.source_bytes) return false;
  std::vector<std::vector<Entry>> states(num);
  states[0].push_back({0, 0, 0.0, -1, -1, false});
  std::vector<int> sizes(num);
  for (int i = 0; i < num; ++i) sizes[i] = sets_[i].size();

  for (int j = 1; j < num; ++j) {
    std::vector<Entry> cand;
    for (int i = 0; i < j; ++i) {
      if (states[i].empty() || sizes[i] >= sizes[j] || !sets_[i].subset_of(sets_[j])) continue;
      // Each segment two ways when its boundaries hold state their backward reads: keep it (memory) or
      // recompute the boundaries for it (time).
      for (bool keep_state : {false, true}) {
        const Step s = MakeStep(g_, sets_[i], sets_[j], j == full, keep_state);
        for (int e = 0; e < static_cast<int>(states[i].size()); ++e) {
          const Entry& from = states[i][e];
          Entry to;
          to.peak = std::max(from.peak, from.kept + s.peak_bytes);
          if (mode == Mode::kTime && to.peak > limit) continue;
          to.kept = from.kept + (j == full ? 0 : s.boundary_bytes);
          to.cost = from.cost + (j == full ? 0.0 : s.recompute);
          to.from_set = i;
          to.from_entry = e;
          to.keep_state = keep_state;
          cand.push_back(to);
        }
        if (!s.boundary_state || j == full) break;
      }
    }
    // Keep only entries no other entry beats: the future depends on `kept` alone, so an entry with at least
    // as much kept memory and no better objective can never lead to a better plan.
    auto objective = [mode](const Entry& e) { return mode == Mode::kTime ? e.cost : static_cast<double>(e.peak); };
    std::sort(cand.begin(), cand.end(), [&](const Entry& a, const Entry& b) {
      if (a.kept != b.kept) return a.kept < b.kept;
      return objective(a) < objective(b);
    });
    double best = std::numeric_limits<double>::infinity();
    for (const Entry& c : cand) {
      if (objective(c) < best) {
        best = objective(c);
        states[j].push_back(c);
      }
    }
  }
  if (states[full].empty()) return false;
  int best = 0;
  for (int e = 1; e < static_cast<int>(states[full].size()); ++e) {
    const Entry& a = states[full][e];
    const Entry& b = states[full][best];
    const bool better = mode == Mode::kTime ? a.cost < b.cost : a.peak < b.peak;
    if (better) best = e;
  }
  // Walk back the chain of lower sets into segments.
  std::vector<std::vector<int>> segments;
  std::vector<bool> keeps_state;
  for (int j = full, e = best; j > 0;) {
    const Entry& en = states[j][e];
    segments.push_back(sets_[j].minus(sets_[en.from_set]).members());
    keeps_state.push_back(en.keep_state);
    j = en.from_set;
    e = en.from_entry;
  }
  std::reverse(segments.begin(), segments.end());
  std::reverse(keeps_state.begin(), keeps_state.end());
  const Entry& fin = states[full][best];
  *plan = EvaluateSegments(g_, segments, std::string(exact_ ? "dp" : "dp_approx") +
                                             (mode == Mode::kMemory ? "_memory" : ""), keeps_state);
  // The plan is re-evaluated from its segments alone; the DP's bookkeeping must agree with that.
  CHECK_EQ(plan->peak_bytes, g_.source_bytes + fin.peak);
  CHECK_LE(std::abs(plan->recompute_flops - fin.cost), 1e-9 * std::max(1.0, fin.cost));
  plan->exact = exact_;
  plan->lower_sets = sets_.size();
  return true;
}

size_t LowerSetPlanner::MinFeasibleBytes() const {
  if (g_.size() == 0) return g_.source_bytes;
  RecomputePlan p;
  CHECK(Solve(Mode::kMemory, 0, &p));
  return p.peak_bytes;
}

RecomputePlan LowerSetPlanner::MinMemoryPlan() const {
  RecomputePlan p = Plan(MinFeasibleBytes());
  p.planner += "_memory";
  return p;
}

RecomputePlan LowerSetPlanner::Plan(size_t budget_bytes) const {
  if (g_.size() == 0) {
    STRATA_REQUIRE(budget_bytes >= g_.source_bytes)
        << "memory budget " << human(budget_bytes) << " is below the smallest feasible budget "
        << human(g_.source_bytes) << " (the data layers' outputs alone)";
    return StoreAllPlan(g_);
  }
  RecomputePlan p;
  if (!Solve(Mode::kTime, budget_bytes, &p)) {
    const size_t min_bytes = MinFeasibleBytes();
    STRATA_FAIL() << "memory budget " << human(budget_bytes)
                  << " is below what any recomputation plan can meet; the smallest feasible budget is "
                  << human(min_bytes) << " (store-all needs " << human(g_.total_bytes()) << ")"
                  << (exact_ ? "" : "; the lower-set family was approximate, an exact search might go lower");
  }
  return p;
}

RecomputePlan MakePlan(const RecomputeGraph& g, const std::string& planner, size_t budget_bytes,
                       int max_lower_sets) {
  if (planner == "store_all") return StoreAllPlan(g);
  if (planner == "sqrt") return SqrtPlan(g);
  STRATA_REQUIRE(planner == "dp" || planner == "dp_memory")
      << "unknown recomputation planner '" << planner << "' (store_all, sqrt, dp or dp_memory)";
  LowerSetPlanner dp(g, max_lower_sets);
  return planner == "dp" ? dp.Plan(budget_bytes) : dp.MinMemoryPlan();
}

RecomputePlan MakePlan(const RecomputeGraph& g, const RecomputeParameter& param) {
  size_t budget = g.total_bytes();
  if (param.has_budget_bytes()) budget = param.budget_bytes();
  if (param.has_budget_fraction()) {
    STRATA_REQUIRE(param.budget_fraction() > 0) << "recompute_param.budget_fraction must be positive";
    budget = static_cast<size_t>(param.budget_fraction() * static_cast<double>(g.total_bytes()));
  }
  return MakePlan(g, param.planner(), budget);
}

}  // namespace strata
