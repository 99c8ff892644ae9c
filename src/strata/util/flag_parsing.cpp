#include "strata/util/flag_parsing.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "strata/common.hpp"

namespace strata {

namespace {

// The largest byte count a flag may give: far beyond any real message or budget, and small enough that the
// double -> size_t conversion is always defined (casting 1e300 or inf to size_t is undefined behaviour).
constexpr double kMaxFlagBytes = 4611686018427387904.0;  // 2^62

// Reads a whole string as a finite double (no leading/trailing junk except what `rest` receives).
bool parse_number(const std::string& s, double* v, std::string* rest) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(*v)) return false;
  *rest = end;
  return true;
}

}  // namespace

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= s.size()) {
    size_t end = s.find(',', begin);
    if (end == std::string::npos) end = s.size();
    if (end > begin) out.push_back(s.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

size_t ParseByteSize(const std::string& s, const std::string& flag) {
  const auto bad = [&] {
    return flag + ": cannot read size '" + s + "' (a positive number of bytes, e.g. 4, 64K, 256M, 1G)";
  };
  double v = 0;
  std::string suffix;
  STRATA_REQUIRE(parse_number(s, &v, &suffix)) << bad();
  double mult = 1;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") mult = 1024.0;
  else if (suffix == "M" || suffix == "MiB") mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB") mult = 1024.0 * 1024 * 1024;
  else STRATA_REQUIRE(suffix.empty() || suffix == "B") << bad();
  const double bytes = v * mult;
  STRATA_REQUIRE(bytes >= 1) << flag << ": sizes are positive byte counts, got '" << s << "'";
  STRATA_REQUIRE(bytes == std::floor(bytes)) << flag << ": '" << s << "' is not a whole number of bytes";
  STRATA_REQUIRE(bytes <= kMaxFlagBytes) << flag << ": '" << s << "' is too large (at most 2^62 bytes)";
  return static_cast<size_t>(bytes);
}

std::vector<size_t> GeometricSizes(size_t lo, size_t hi, int factor) {
  STRATA_REQUIRE(lo >= 1 && lo <= hi) << "need 1 <= --min_bytes <= --max_bytes, got " << lo << " and " << hi;
  STRATA_REQUIRE(factor >= 2) << "--factor must be at least 2, got " << factor;
  std::vector<size_t> sizes{lo};
  // Stop before the product would pass hi: near 2^64 it would wrap around and the list never end.
  while (sizes.back() <= hi / static_cast<size_t>(factor)) sizes.push_back(sizes.back() * factor);
  return sizes;
}

size_t ParseMemoryBudget(const std::string& s, size_t store_all, const std::string& flag) {
  const std::string expected =
      flag + " must be a positive number of bytes (12G, 512MiB), or a fraction such as 0.5, got '" + s + "'";
  double v = 0;
  std::string rest;
  if (parse_number(s, &v, &rest) && !rest.empty() && std::isalpha(static_cast<unsigned char>(rest[0]))) {
    return ParseByteSize(s, flag);  // a unit: "12GiB", "512M"
  }
  STRATA_REQUIRE(parse_number(s, &v, &rest) && rest.empty() && v > 0) << expected;
  const bool fraction = s.find_first_of(".eE") != std::string::npos;
  const double bytes = fraction ? v * static_cast<double>(store_all) : v;
  STRATA_REQUIRE(bytes <= kMaxFlagBytes) << flag << " '" << s << "' is too large (at most 2^62 bytes)";
  return static_cast<size_t>(bytes);
}

bool EnvSwitchOn(const char* name) {
  const char* v = std::getenv(name);
  return !(v && std::string(v) == "0");
}

}  // namespace strata
