// The tools' flag values: allreduce_bench's --sizes (comma list of byte counts), --min_bytes/--max_bytes/
// --factor, and strata's --budget. The input is one flag value; its first byte also serves as --factor.
#include <string>

#include "fuzz_util.hpp"
#include "strata/util/flag_parsing.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string value(reinterpret_cast<const char*>(data), size);
  try {
    for (const std::string& item : strata::SplitCommas(value)) strata::ParseByteSize(item, "--sizes");
  } catch (const strata::Error&) {
  }
  try {
    strata::ParseMemoryBudget(value, size_t(1) << 40);
  } catch (const strata::Error&) {
  }
  try {
    // --min_bytes from the first item, --max_bytes from the last.
    const auto items = strata::SplitCommas(value);
    if (!items.empty()) {
      const size_t lo = strata::ParseByteSize(items.front(), "--min_bytes");
      const size_t hi = strata::ParseByteSize(items.back(), "--max_bytes");
      strata::GeometricSizes(lo, hi, static_cast<int8_t>(data[0]));
    }
  } catch (const strata::Error&) {
  }
  return 0;
}
