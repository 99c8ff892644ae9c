// The tools' flag-value parsers (util/flag_parsing): byte sizes, geometric size ranges, memory budgets, comma
// lists and environment switches. Every malformed value is an Error naming the flag; none is quietly read as
// something else.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "strata/util/flag_parsing.hpp"

namespace strata {
namespace {

using testing_data::ExpectErrorContaining;

TEST(FlagParsing, SplitCommasDropsEmptyItems) {
  EXPECT_EQ(SplitCommas("a,b,,c,"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(SplitCommas("").empty());
  EXPECT_TRUE(SplitCommas(",,").empty());
  EXPECT_EQ(SplitCommas("x"), (std::vector<std::string>{"x"}));
}

TEST(FlagParsing, ByteSizes) {
  EXPECT_EQ(ParseByteSize("4", "--sizes"), 4u);
  EXPECT_EQ(ParseByteSize("4B", "--sizes"), 4u);
  EXPECT_EQ(ParseByteSize("64K", "--sizes"), 65536u);
  EXPECT_EQ(ParseByteSize("1.5M", "--sizes"), 1572864u);
  EXPECT_EQ(ParseByteSize("2GiB", "--sizes"), size_t(2) << 30);
}

// `allreduce_bench --sizes=0` used to measure 4 bytes without a word: sizes are positive byte counts.
TEST(FlagParsing, ByteSizesRejectZeroNegativeFractionsAndJunk) {
  ExpectErrorContaining([] { ParseByteSize("0", "--sizes"); }, {"--sizes", "positive", "'0'"});
  ExpectErrorContaining([] { ParseByteSize("0K", "--sizes"); }, {"--sizes", "positive"});
  ExpectErrorContaining([] { ParseByteSize("-4", "--sizes"); }, {"--sizes", "positive"});
  ExpectErrorContaining([] { ParseByteSize("0.3", "--sizes"); }, {"--sizes", "positive"});
  ExpectErrorContaining([] { ParseByteSize("3.5", "--sizes"); }, {"--sizes", "whole number"});
  ExpectErrorContaining([] { ParseByteSize("4X", "--min_bytes"); }, {"--min_bytes", "'4X'"});
  ExpectErrorContaining([] { ParseByteSize("", "--sizes"); }, {"--sizes"});
  ExpectErrorContaining([] { ParseByteSize(" 4", "--sizes"); }, {"--sizes"});
  // Values whose conversion to size_t was undefined behaviour.
  ExpectErrorContaining([] { ParseByteSize("inf", "--sizes"); }, {"--sizes", "'inf'"});
  ExpectErrorContaining([] { ParseByteSize("nan", "--sizes"); }, {"--sizes", "'nan'"});
  ExpectErrorContaining([] { ParseByteSize("1e30", "--sizes"); }, {"--sizes", "too large"});
  ExpectErrorContaining([] { ParseByteSize("99999999999G", "--sizes"); }, {"--sizes", "too large"});
}

// An environment switch is on unless set to exactly "0".
TEST(FlagParsing, EnvSwitchIsOnUnlessZero) {
  const char* name = "STRATA_TEST_ENV_SWITCH";
  unsetenv(name);
  EXPECT_TRUE(EnvSwitchOn(name));
  setenv(name, "0", 1);
  EXPECT_FALSE(EnvSwitchOn(name));
  for (const char* on : {"1", "", "00", "off"}) {
    setenv(name, on, 1);
    EXPECT_TRUE(EnvSwitchOn(name)) << "'" << on << "'";
  }
  unsetenv(name);
}

TEST(FlagParsing, GeometricSizes) {
  EXPECT_EQ(GeometricSizes(4, 256, 4), (std::vector<size_t>{4, 16, 64, 256}));
  EXPECT_EQ(GeometricSizes(4, 255, 4), (std::vector<size_t>{4, 16, 64}));
  EXPECT_EQ(GeometricSizes(7, 7, 2), (std::vector<size_t>{7}));
  // Near 2^62 the next product would wrap around 2^64; the list used to go on (or never end).
  const size_t top = size_t(1) << 62;
  const std::vector<size_t> big = GeometricSizes(1, top, 1 << 30);
  EXPECT_EQ(big, (std::vector<size_t>{1, size_t(1) << 30, size_t(1) << 60}));
  EXPECT_EQ(GeometricSizes(1, top, 2).size(), 63u);
  ExpectErrorContaining([] { GeometricSizes(0, 8, 2); }, {"--min_bytes"});
  ExpectErrorContaining([] { GeometricSizes(16, 8, 2); }, {"--min_bytes", "--max_bytes"});
  ExpectErrorContaining([] { GeometricSizes(1, 8, 1); }, {"--factor"});
  ExpectErrorContaining([] { GeometricSizes(1, 8, -3); }, {"--factor"});
}

TEST(FlagParsing, MemoryBudgets) {
  EXPECT_EQ(ParseMemoryBudget("123456", 1000), 123456u);
  EXPECT_EQ(ParseMemoryBudget("0.5", 1000), 500u);
  EXPECT_EQ(ParseMemoryBudget("1e-1", 1000), 100u);
  EXPECT_EQ(ParseMemoryBudget("12G", 1000), size_t{12} << 30);
  EXPECT_EQ(ParseMemoryBudget("1.5GiB", 1000), size_t{3} << 29);
  EXPECT_EQ(ParseMemoryBudget("512MiB", 1000), size_t{512} << 20);
  ExpectErrorContaining([] { ParseMemoryBudget("12GB", 1000); }, {"--budget", "12GB"});
  for (const char* bad : {"", "0", "-1", "abc", "12abc", "nan", "inf", " 5"}) {
    ExpectErrorContaining([&] { ParseMemoryBudget(bad, 1000); }, {"--budget", "positive"});
  }
  // Past the range of size_t: was undefined behaviour in the conversion.
  ExpectErrorContaining([] { ParseMemoryBudget("1e300", 1000); }, {"--budget", "too large"});
  ExpectErrorContaining([] { ParseMemoryBudget("99999999999999999999999", 1000); }, {"--budget", "too large"});
}

// The program: --sizes=0 is one error line and exit status 1, before any measuring. Skipped when the tool
// was not built (the test target does not depend on it).
TEST(FlagParsing, AllreduceBenchRefusesZeroSizes) {
  const std::string bench = std::string(STRATA_BINARY_DIR) + "/bin/allreduce_bench";
  if (!std::filesystem::exists(bench)) GTEST_SKIP() << "allreduce_bench not built";
  testing_data::TempDir dir;
  const std::string log = dir / "log";
  EXPECT_EQ(testing_data::Shell(bench + " --sizes=0 --algorithms=ring > " + log + " 2>&1"), 1)
      << testing_data::ReadAll(log);
  const std::string out = testing_data::ReadAll(log);
  EXPECT_NE(out.find("allreduce_bench: --sizes: sizes are positive byte counts, got '0'"), std::string::npos) << out;
  EXPECT_EQ(out.find("4 B"), std::string::npos) << out;
}

}  // namespace
}  // namespace strata
