// The hybrid allreduce's crossover table file (--allreduce_table, comm_param.tuning_table): parsed, and a
// table that parses must print as text that parses back to the same table.
#include <cstdlib>
#include <string>

#include "fuzz_util.hpp"
#include "strata/comm/hybrid_allreduce.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  strata::CrossoverTable table;
  try {
    table = strata::CrossoverTable::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const strata::Error&) {
    return 0;
  }
  const std::string text = table.to_text();
  const strata::CrossoverTable again = strata::CrossoverTable::parse(text, "fuzz round trip");
  if (again.to_text() != text) std::abort();  // printing lost or changed a row
  for (int ranks : {1, 2, 3, 8}) {
    try {
      table.rows_for(ranks);
    } catch (const strata::Error&) {
    }
  }
  return 0;
}
