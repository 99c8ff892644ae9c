// The allreduce flag both tools that allreduce share (strata, allreduce_bench): the hybrid's crossover table.
// libstrata reads no flags. Include it from one .cpp per program, since it defines the flag. (strata's --allreduce,
// the algorithm for gradients, is its own: allreduce_bench names its algorithms with --algorithms.)
#pragma once

#include <gflags/gflags.h>

DEFINE_string(allreduce_table, "",
              "Crossover table file for the hybrid allreduce (written by allreduce_bench --tune); empty: "
              "the built-in table");
