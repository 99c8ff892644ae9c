// The allreduce flags of the tools that allreduce (strata, allreduce_bench). libstrata reads no flags: a tool
// turns these into an AllreducePolicy with allreduce_policy_from_flags(). Include it from one .cpp per program,
// since it defines the flags.
#pragma once

#include <gflags/gflags.h>

#include "strata/comm/hybrid_allreduce.hpp"

DEFINE_string(allreduce, "hybrid",
              "Allreduce algorithm for gradients: hybrid (size-dependent, see --allreduce_table) or one of "
              "linear, brb, brd, vhd, vhd_seg, ring, ring_seg, shm, mpi (docs/allreduce.md)");
DEFINE_string(allreduce_table, "",
              "Crossover table file for the hybrid allreduce (written by allreduce_bench --tune); empty: "
              "the built-in table");

namespace strata {

// --allreduce (a name, default hybrid) and --allreduce_table (a table file for the hybrid; implies hybrid).
inline AllreducePolicy allreduce_policy_from_flags() {
  return AllreducePolicy::from_spec(FLAGS_allreduce, FLAGS_allreduce_table);
}

}  // namespace strata
