// Parsers for the values of the tools' command-line flags (byte counts, memory budgets, comma lists). They
// live in the library, not in each tool, so that the tools and fuzz/tool_flags.cpp run the same code; every
// malformed value is an Error naming the flag and the value.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace strata {

// "a,b,,c" -> {"a", "b", "c"}: empty items are dropped.
std::vector<std::string> SplitCommas(const std::string& s);

// A positive whole number of bytes, with an optional suffix: B, K/k/KiB, M/MiB, G/GiB (powers of 1024).
// "64K" -> 65536, "1.5M" -> 1572864. Zero, negative, fractional byte counts ("0.3") and sizes beyond 2^62
// are errors; `flag` (e.g. "--sizes") names the flag in the message.
size_t ParseByteSize(const std::string& s, const std::string& flag);

// lo, lo * factor, lo * factor^2, ... up to hi (--min_bytes, --max_bytes, --factor). Error unless
// 1 <= lo <= hi and factor >= 2.
std::vector<size_t> GeometricSizes(size_t lo, size_t hi, int factor);

// Whether the environment switch `name` is on: it is unless set to "0" (STRATA_BLOCKED_LAYOUTS,
// STRATA_FUSE_LAYERS, STRATA_CONV_NHWC: switches that turn an optimisation off for a before/after measurement).
bool EnvSwitchOn(const char* name);

// A memory budget: a positive byte count ("200000000", or with ParseByteSize's units: "12G", "1.5GiB") or,
// written with a decimal point or exponent and no unit, a fraction of `store_all` ("0.5"). Errors name `flag`.
size_t ParseMemoryBudget(const std::string& s, size_t store_all, const std::string& flag = "--budget");

}  // namespace strata
