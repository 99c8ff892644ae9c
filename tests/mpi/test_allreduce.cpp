// The allreduce algorithms, the hybrid and the communicator, on however many ranks mpirun started.
// Data are small integers, so every sum is exact and the expected result is known on every rank; a
// second set of tests uses non-integer data, where summation order shows in the bits, to check that all
// ranks end bit-identical. Checks are EXPECTs aggregated over ranks after the collective, so a failing
// rank never skips a collective the others are waiting in.
#include <gtest/gtest.h>
#include <unistd.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "strata/common.hpp"
#include "mpi/mpi_test_util.hpp"
#include "strata/comm/allreduce.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/comm/cost_model.hpp"
#include "strata/comm/hier_allreduce.hpp"
#include "strata/comm/hybrid_allreduce.hpp"
#include "strata/comm/topology.hpp"
#include "strata/comm/allreduce_kernels.hpp"
#include "strata/comm/shm_allreduce.hpp"

namespace strata {
namespace {

using mpi_test::all_ranks;
using mpi_test::world_rank;
using mpi_test::world_size;

// Element i on rank r: a small integer, varied enough to catch misplaced blocks.
double input_value(size_t i, int r) { return static_cast<double>(static_cast<long>((i * 7 + r * 13) % 23) - 11); }
double expected_sum(size_t i, int n) {
  double s = 0;
  for (int r = 0; r < n; ++r) s += input_value(i, r);
  return s;
}

// The algorithms every test runs; the forced Open MPI ones are covered once, separately.
const std::vector<std::string> kAlgorithms = {"linear", "brb", "brd",  "vhd", "vhd_seg", "ring",
                                              "ring_seg", "shm", "hier", "mpi", "hybrid"};

std::unique_ptr<Allreduce> make(const std::string& name, MPI_Comm comm) {
  return AllreducePolicy::from_name(name).create(comm);
}

// The sizes the issue asks for: 0, 1, N-1, N+1, odd primes, 1 Mi + 3, and one that spans several
// segments without being a multiple of anything.
std::vector<size_t> test_counts(int n) {
  std::vector<size_t> c = {0, 1, size_t(n > 1 ? n - 1 : 0), size_t(n + 1), 3, 5, 7, 13, 31, 257, 1021, 4099,
                           65537 + 4, (size_t(1) << 20) + 3};
  return c;
}

class AllreduceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { MPI_Comm_dup(MPI_COMM_WORLD, &comm_); }
  static void TearDownTestSuite() { MPI_Comm_free(&comm_); }

  template <typename T>
  void check_sums(const std::string& name) {
    check_sums<T>(*make(name, comm_), name);
  }
  template <typename T>
  void check_sums(Allreduce& alg, const std::string& name) {
    const int r = world_rank(), n = world_size();
    std::vector<T> buf;
    for (size_t count : test_counts(n)) {
      buf.resize(count + 1);
      for (size_t i = 0; i < count; ++i) buf[i] = static_cast<T>(input_value(i, r));
      const T guard = static_cast<T>(12345.5);
      buf[count] = guard;  // one past the end must stay untouched
      alg.run(buf.data(), count);
      size_t bad = 0, first_bad = 0;
      for (size_t i = 0; i < count; ++i)
        if (buf[i] != static_cast<T>(expected_sum(i, n)) && bad++ == 0) first_bad = i;
      EXPECT_EQ(bad, 0u) << name << " count " << count << " rank " << r << ": first wrong element " << first_bad
                         << " = " << buf[first_bad] << ", expected " << expected_sum(first_bad, n);
      EXPECT_EQ(buf[count], guard) << name << " wrote past the end, count " << count;
      EXPECT_TRUE(all_ranks(bad == 0 && buf[count] == guard)) << name << " count " << count;
    }
  }

  // Non-integer data whose sum depends on the order of additions; every rank must hold the same bits.
  template <typename T>
  void check_bit_identical(const std::string& name) {
    check_bit_identical<T>(*make(name, comm_), name);
  }
  template <typename T>
  void check_bit_identical(Allreduce& alg, const std::string& name) {
    const int r = world_rank();
    std::mt19937 rng(1234 + r);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (size_t count : {size_t(world_size() + 1), size_t(1021), size_t(100003)}) {
      std::vector<T> buf(count);
      for (auto& x : buf) x = static_cast<T>(u(rng) * (1 + r * 1e3));
      alg.run(buf.data(), count);
      std::vector<T> root = buf;
      MPI_Bcast(root.data(), static_cast<int>(count * sizeof(T)), MPI_BYTE, 0, comm_);
      bool same = memcmp(root.data(), buf.data(), count * sizeof(T)) == 0;
      EXPECT_TRUE(all_ranks(same)) << name << " count " << count << ": ranks differ in the last bits";
    }
  }

  // `calls` allreduces of base + step * call doubles on a thread that sleeps in its waits (futexes), with the
  // ranks arriving late by turns: the others spin out and fall asleep, and a lost wake would hang.
  static void check_blocking_waits(Allreduce& alg, int calls, size_t base, size_t step) {
    const int r = world_rank(), n = world_size();
    comm_detail::set_thread_blocking_waits(true);
    bool ok = true;
    for (int call = 0; call < calls; ++call) {
      if (call % n == r) usleep(3000);  // this rank arrives late this time
      const size_t count = base + step * static_cast<size_t>(call);
      std::vector<double> d(count);
      for (size_t i = 0; i < count; ++i) d[i] = input_value(i, r);
      alg.run(d.data(), count);
      for (size_t i = 0; i < count; ++i) ok = ok && d[i] == expected_sum(i, n);
    }
    comm_detail::set_thread_blocking_waits(false);
    EXPECT_TRUE(all_ranks(ok));
  }

  static MPI_Comm comm_;
};
MPI_Comm AllreduceTest::comm_ = MPI_COMM_NULL;

TEST_F(AllreduceTest, EveryAlgorithmSumsFloat) {
  for (const auto& name : kAlgorithms) check_sums<float>(name);
}

TEST_F(AllreduceTest, EveryAlgorithmSumsDouble) {
  for (const auto& name : kAlgorithms) check_sums<double>(name);
}

TEST_F(AllreduceTest, EveryAlgorithmIsBitIdenticalAcrossRanks) {
  for (const auto& name : kAlgorithms) {
    if (name == "mpi") continue;  // MPI_Allreduce does not promise it
    check_bit_identical<float>(name);
    check_bit_identical<double>(name);
  }
}

TEST_F(AllreduceTest, RepeatedCallsReuseScratchAndStayCorrect) {
  // Shrinking and growing sizes on one instance: stale scratch or request state would show here.
  for (const auto& name : {"vhd_seg", "ring_seg", "brd", "brb", "linear", "shm"}) {
    auto alg = make(name, comm_);
    const int r = world_rank(), n = world_size();
    bool ok = true;
    for (size_t count : {size_t(200000), size_t(3), size_t(70001), size_t(0), size_t(200000)}) {
      std::vector<float> buf(count);
      for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(input_value(i, r));
      alg->run(buf.data(), count);
      for (size_t i = 0; i < count; ++i) ok = ok && buf[i] == static_cast<float>(expected_sum(i, n));
    }
    EXPECT_TRUE(all_ranks(ok)) << name;
  }
}

TEST_F(AllreduceTest, ShmInManyChunksAlternatesItsSlotHalvesCorrectly) {
  // 256-byte chunks: the default chunk would take every test count in one round, so the flag
  // handshake between rounds, the reuse of each slot half two rounds later and the carrying of the round
  // count across calls would go untested. Unless the environment overrides the chunk size.
  ShmAllreduce alg(comm_, 256);
  const int r = world_rank(), n = world_size();
  bool ok = true;
  for (size_t count : {size_t(1), size_t(63), size_t(64), size_t(65), size_t(1021), size_t(4099), size_t(0),
                       size_t(20011)}) {
    std::vector<float> f(count);
    std::vector<double> d(count);
    for (size_t i = 0; i < count; ++i) f[i] = static_cast<float>(input_value(i, r)), d[i] = input_value(i, r);
    alg.run(f.data(), count);
    alg.run(d.data(), count);
    for (size_t i = 0; i < count; ++i)
      ok = ok && f[i] == static_cast<float>(expected_sum(i, n)) && d[i] == expected_sum(i, n);
  }
  EXPECT_TRUE(all_ranks(ok));
}

TEST_F(AllreduceTest, ShmBlockingWaitsWakeEverySleeper) {
  // The data-parallel engine's communication threads sleep on shm's flags (futexes) instead of polling. Ranks
  // arrive late by turns, so the others spin out and fall asleep, and a lost wake would hang this test; many
  // 256-byte chunks give both flags of many rounds their turn.
  ShmAllreduce alg(comm_, 256);
  check_blocking_waits(alg, 12, 257, 97);
}

TEST_F(AllreduceTest, OpenMpiForcedAlgorithmsWhenAvailable) {
#ifdef OPEN_MPI
  const int r = world_rank(), n = world_size();
  for (const auto& name : {"mpi_linear", "mpi_nonoverlapping", "mpi_recursive_doubling", "mpi_ring",
                           "mpi_segmented_ring", "mpi_rabenseifner"}) {
    auto alg = make(name, comm_);
    EXPECT_EQ(alg->name(), name);
    std::vector<double> buf(10007);
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = input_value(i, r);
    alg->run(buf.data(), buf.size());
    bool ok = true;
    for (size_t i = 0; i < buf.size(); ++i) ok = ok && buf[i] == expected_sum(i, n);
    EXPECT_TRUE(all_ranks(ok)) << name;
  }
#endif
}

// ---- hier: nodes of shared memory joined by the network ----

// The layouts a machine of N ranks can pretend to be: nodes of 1, 2 and 3 ranks (the last node smaller when
// they do not divide N), so the network part, uneven nodes and nodes of one rank all run under any mpirun.
std::vector<int> virtual_node_sizes() { return {1, 2, 3}; }

TEST_F(AllreduceTest, HierSumsAndIsBitIdenticalOnEveryNodeLayout) {
  const CrossoverTable network = CrossoverTable::builtin_network();
  for (int per_node : virtual_node_sizes()) {
    const Topology topo = Topology::virtual_nodes(comm_, per_node);
    // 64 KiB chunks: several blocks per chunk, and the largest test counts in many chunks (slot halves reused).
    HierarchicalAllreduce hier(comm_, topo, network, 65536);
    const std::string label = "hier over " + topo.describe();
    check_sums<float>(hier, label);
    check_sums<double>(hier, label);
    check_bit_identical<float>(hier, label);
    check_bit_identical<double>(hier, label);
  }
}

TEST_F(AllreduceTest, HierAlternatesSmallAndLargeChunksOnSharedSlots) {
  // Single-block chunks (one owner per node sums and exchanges; the others wait only for it) and chunks of
  // several blocks take different flag waits and write their slots differently; a slot half written two rounds later
  // must never be read stale. Counts alternate between the kinds, each call's values differ from the last
  // one's (a stale copy would show), and ranks arrive late by turns, with no barrier between calls. Both with
  // waits that poll and with waits that sleep on the flags (the data-parallel engine's).
  const int r = world_rank(), n = world_size();
  const size_t chunk_floats = 16384;  // 64 KiB chunks: kSingleBlockBytes is a quarter of one
  const std::vector<size_t> counts = {1, chunk_floats + 5, 3000, 3 * chunk_floats, 7, 4097, chunk_floats - 1,
                                      2 * chunk_floats + 4096, 2, 5000};
  for (int run = 0; run < 4; ++run) {
    const int per_node = 2 + run / 2;
    const bool sleeping = run % 2 == 1;
    const Topology topo = Topology::virtual_nodes(comm_, per_node);
    HierarchicalAllreduce hier(comm_, topo, CrossoverTable::builtin_network(), chunk_floats * sizeof(float));
    comm_detail::set_thread_blocking_waits(sleeping);
    bool ok = true;
    for (int call = 0; call < 3 * static_cast<int>(counts.size()); ++call) {
      if (call % n == r) usleep(1000);
      const size_t count = counts[call % counts.size()];
      std::vector<float> buf(count);
      for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(input_value(i + 7 * call, r));
      hier.run(buf.data(), count);
      for (size_t i = 0; i < count; ++i) ok = ok && buf[i] == static_cast<float>(expected_sum(i + 7 * call, n));
    }
    comm_detail::set_thread_blocking_waits(false);
    EXPECT_TRUE(all_ranks(ok)) << "hier over " << topo.describe() << (sleeping ? ", sleeping waits" : "");
  }
}

TEST_F(AllreduceTest, HierNetworkPartFollowsItsTable) {
  const int n = world_size(), r = world_rank();
  const Topology topo = Topology::virtual_nodes(comm_, 2);
  const std::string H = std::to_string(topo.nodes());
  CrossoverTable network = CrossoverTable::parse(H + " 1000 brb\n" + H + " inf vhd\n", "network table");
  HierarchicalAllreduce hier(comm_, topo, network, 1 << 20);
  if (topo.nodes() > 1) {
    EXPECT_EQ(hier.network_choice(1000), "brb");
    EXPECT_EQ(hier.network_choice(1001), "vhd");
  } else {
    EXPECT_EQ(hier.network_choice(1000), "");
  }
  std::vector<double> buf(300000);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = input_value(i, r);
  hier.run(buf.data(), buf.size());
  bool ok = true;
  for (size_t i = 0; i < buf.size(); ++i) ok = ok && buf[i] == expected_sum(i, n);
  EXPECT_TRUE(all_ranks(ok));
}

TEST_F(AllreduceTest, HierRefusesANetworkTableNamingShmOrHier) {
  const Topology topo = Topology::virtual_nodes(comm_, 1);
  if (topo.nodes() < 2) GTEST_SKIP() << "one rank: no network part";
  for (const char* alg : {"shm", "hier"}) {
    CrossoverTable bad = CrossoverTable::parse(std::string("* inf ") + alg + "\n", "bad.table");
    try {
      HierarchicalAllreduce h(comm_, topo, bad);
      ADD_FAILURE() << "a network table naming " << alg << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bad.table: the allreduce across nodes cannot be"), std::string::npos)
          << e.what();
    }
  }
}

TEST_F(AllreduceTest, HierBlockingWaitsWakeEverySleeper) {
  // As ShmBlockingWaitsWakeEverySleeper, for the node part of hier: ranks arrive late by turns.
  const Topology topo = Topology::virtual_nodes(comm_, 2);
  HierarchicalAllreduce hier(comm_, topo, CrossoverTable::builtin_network(), 4096);
  check_blocking_waits(hier, 8, 2049, 977);
}

TEST(TopologyTest, VirtualNodesNumberNodesAndLocalRanksInRankOrder) {
  const int n = world_size(), r = world_rank();
  const Topology t = Topology::virtual_nodes(MPI_COMM_WORLD, 2);
  EXPECT_EQ(t.size, n);
  EXPECT_EQ(t.nodes(), (n + 1) / 2);
  EXPECT_EQ(t.node, r / 2);
  EXPECT_EQ(t.local_rank, r % 2);
  EXPECT_EQ(t.max_local_size(), n == 1 ? 1 : 2);
  EXPECT_EQ(t.uniform(), n % 2 == 0 || n == 1);
}

TEST(TopologyTest, NodesAreTheMachinesTheRanksRunOn) {
  // Ranks with the same host name share a node (on one machine, all of them; on the multi-host test bed,
  // each namespace's ranks).
  const int n = world_size(), r = world_rank();
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  std::vector<char> names(static_cast<size_t>(n) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                MPI_COMM_WORLD);
  auto host = [&](int q) { return std::string(&names[static_cast<size_t>(q) * MPI_MAX_PROCESSOR_NAME]); };
  const Topology t = Topology::of(MPI_COMM_WORLD);
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(t.node_of[q] == t.node, host(q) == host(r)) << "ranks " << r << " and " << q << " on " << host(r)
                                                          << " and " << host(q) << ": " << t.describe();
  }
  EXPECT_EQ(t.ranks_of_node[t.node][t.local_rank], r);
}

TEST(TopologyTest, DescribesUniformAndUnevenLayouts) {
  EXPECT_EQ(Topology::from_nodes(0, {0, 0, 1, 1}).describe(), "2 nodes x 2 ranks");
  EXPECT_EQ(Topology::from_nodes(2, {0, 0, 1, 2}).describe(), "3 nodes (2+1+1 ranks)");
  EXPECT_EQ(Topology::from_nodes(0, {0}).describe(), "1 node x 1 rank");
  const Topology t = Topology::from_nodes(3, {0, 1, 0, 1, 2});
  EXPECT_EQ(t.node, 1);
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_EQ(t.ranks_of_node[0], (std::vector<int>{0, 2}));
  EXPECT_THROW(Topology::from_nodes(0, {1, 0}), Error);
}

// ---- the hybrid ----

TEST_F(AllreduceTest, HybridSwitchesWhereItsTableSays) {
  const int n = world_size(), r = world_rank();
  const std::string N = std::to_string(n);
  CrossoverTable table = CrossoverTable::parse(
      N + " 64 brb\n" + N + " 4096 brd\n" + N + " 65536 vhd\n" + N + " inf ring_seg\n", "test table");
  HybridAllreduce hybrid(comm_, table);
  struct Case { size_t bytes; const char* expect; };
  for (Case c : {Case{0, "brb"}, Case{4, "brb"}, Case{64, "brb"}, Case{68, "brd"}, Case{4096, "brd"},
                 Case{4100, "vhd"}, Case{65536, "vhd"}, Case{65540, "ring_seg"}, Case{1 << 22, "ring_seg"}}) {
    EXPECT_EQ(hybrid.choice(c.bytes), c.expect) << c.bytes << " bytes";
    size_t count = c.bytes / sizeof(float);
    std::vector<float> buf(count);
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(input_value(i, r));
    hybrid.run(buf.data(), count);
    EXPECT_EQ(hybrid.last_choice(), c.expect) << c.bytes << " bytes";
    bool ok = true;
    for (size_t i = 0; i < count; ++i) ok = ok && buf[i] == static_cast<float>(expected_sum(i, n));
    EXPECT_TRUE(all_ranks(ok)) << c.bytes << " bytes via " << c.expect;
  }
  // Double counts bytes, not elements: 16 doubles = 128 bytes is past the brb row.
  EXPECT_EQ(hybrid.choice(16 * sizeof(double)), "brd");
}

TEST_F(AllreduceTest, HybridUsesStarRowsForOtherRankCountsAndRefusesMissingOnes) {
  const int n = world_size();
  CrossoverTable star = CrossoverTable::parse("* 100 brd\n* inf ring\n", "star");
  EXPECT_EQ(HybridAllreduce(comm_, star).choice(101), "ring");
  CrossoverTable other = CrossoverTable::parse(std::to_string(n + 1) + " inf ring\n", "other.table");
  try {
    HybridAllreduce h(comm_, other);
    ADD_FAILURE() << "a table without rows for " << n << " ranks was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no rows for " + std::to_string(n) + " ranks"), std::string::npos)
        << e.what();
  }
}

TEST_F(AllreduceTest, BuiltinTableCoversEveryRankCount) {
  // rows_for returns a reference into the table, so the table must outlive it.
  const CrossoverTable builtin = CrossoverTable::builtin();
  for (int n : {1, 2, 3, 4, 5, 7, 8, 16, 1000}) {
    const auto& rows = builtin.rows_for(n);
    ASSERT_FALSE(rows.empty());
    EXPECT_EQ(rows.back().max_bytes, CrossoverRow::kUnlimited);
  }
}

TEST_F(AllreduceTest, HybridAndHierExplainTheirChoice) {
  HybridAllreduce hybrid(comm_, CrossoverTable::builtin());
  const std::string why = hybrid.explain(1 << 20);
  EXPECT_EQ(why.rfind("hybrid: row '", 0), 0u) << why;
  EXPECT_NE(why.find("of the built-in table -> shm"), std::string::npos) << why;
  const Topology topo = Topology::virtual_nodes(comm_, 2);
  HierarchicalAllreduce hier(comm_, topo, CrossoverTable::builtin_network());
  const std::string hier_why = hier.explain(1 << 20);
  EXPECT_EQ(hier_why.rfind("hier over " + topo.describe(), 0), 0u) << hier_why;
  // Across nodes a 1 MiB message is two blocks of 512 KiB per chunk: past BRD's rows, so vhd on a
  // power-of-two number of nodes and ring on the others.
  const int h = topo.nodes();
  if (h > 1) {
    EXPECT_NE(hier_why.find("across nodes hybrid: row '"), std::string::npos) << hier_why;
    const std::string last = (h & (h - 1)) == 0 ? "-> vhd" : "-> ring";
    EXPECT_EQ(hier_why.substr(hier_why.size() - std::min(hier_why.size(), last.size())), last) << hier_why;
    EXPECT_NE(hier.explain(64).find("-> brd"), std::string::npos) << hier.explain(64);
  }
}

// ---- the network cost model ----

TEST(NetworkCostModelTest, PredictsTheSeedPapersHybridAndRingOffPowersOfTwo) {
  const NetworkCostModel m{15e-6, 0.8e-9, 0.25e-9};
  // One exchange of the whole message against log2 p of them, and halving beats the butterfly when large.
  EXPECT_DOUBLE_EQ(m.predict("brd", 2, 1000), 15e-6 + 1000 * 1.05e-9);
  EXPECT_LT(m.predict("brd", 8, 64), m.predict("vhd", 8, 64));
  EXPECT_LT(m.predict("vhd", 8, 64 << 20), m.predict("brd", 8, 64 << 20));
  EXPECT_LT(m.predict("ring", 3, 64 << 20), m.predict("vhd", 3, 64 << 20));  // VHD's fold on 3 ranks
  EXPECT_EQ(m.predict("ring", 1, 1 << 20), 0.0);
  EXPECT_THROW(m.predict("shm", 4, 100), Error);
  for (int p : {2, 3, 4, 5, 8, 64}) {
    const auto rows = m.rows(p);
    ASSERT_FALSE(rows.empty());
    EXPECT_EQ(rows.front().algorithm, "brd") << p << " ranks";
    EXPECT_EQ(rows.back().max_bytes, CrossoverRow::kUnlimited);
    EXPECT_EQ(rows.back().algorithm, (p & (p - 1)) == 0 ? "vhd" : "ring") << p << " ranks";
    for (size_t i = 1; i < rows.size(); ++i) EXPECT_LT(rows[i - 1].max_bytes, rows[i].max_bytes);
  }
  // A faster network moves the crossover up: its latency is worth more bytes.
  const NetworkCostModel fast{15e-6, 0.08e-9, 0.25e-9};
  EXPECT_GT(fast.rows(8).front().max_bytes, m.rows(8).front().max_bytes);
}

TEST(NetworkCostModelTest, TablesFallBackOnTheModelBeforeStarRows) {
  CrossoverTable t = CrossoverTable::parse("2 inf ring\n* inf linear\n", "t.table");
  t.set_model(NetworkCostModel{15e-6, 0.8e-9, 0.25e-9});
  EXPECT_EQ(t.rows_for(2).back().algorithm, "ring");  // its own rows first
  EXPECT_EQ(t.rows_for(3).back().algorithm, "ring");  // the model: ring on 3
  EXPECT_EQ(t.rows_for(4).back().algorithm, "vhd");
  std::string key;
  t.rows_for(Topology::from_nodes(0, {0, 1, 2}), &key);
  EXPECT_EQ(key, "model");
  EXPECT_NE(t.to_text().find("# other rank counts: the cost model's predictions (alpha 15.0 us"), std::string::npos);
  // The built-in network table: measured rows on 2 nodes, the model elsewhere.
  const CrossoverTable net = CrossoverTable::builtin_network();
  EXPECT_EQ(net.rows_for(2).front().max_bytes, 262144u);
  EXPECT_EQ(net.rows_for(6).back().algorithm, "ring");
  EXPECT_EQ(net.rows_for(16).back().algorithm, "vhd");
}

TEST(NetworkCostModelTest, MeasuresPositiveFiguresTheSameOnEveryRank) {
  const NetworkCostModel m = NetworkCostModel::measure(MPI_COMM_WORLD);
  EXPECT_GT(m.gamma, 0.0);
  if (world_size() > 1) {
    EXPECT_GT(m.alpha, 0.0);
    EXPECT_GE(m.beta, 0.0);
  }
  EXPECT_TRUE(mpi_test::same_on_all_ranks(static_cast<uint64_t>(m.alpha * 1e12)));
  EXPECT_TRUE(mpi_test::same_on_all_ranks(static_cast<uint64_t>(m.gamma * 1e15)));
}

// ---- table files and names: the bad-input paths ----

TEST(CrossoverTableTest, LayoutRowsComeBeforeRankCountRows) {
  const CrossoverTable t = CrossoverTable::parse(
      "4 inf ring\n2x2 100 brd\n2x2 inf hier\n* 10 brb\n* inf shm\n", "layouts.table");
  std::string key;
  const auto& two_by_two = t.rows_for(Topology::from_nodes(0, {0, 0, 1, 1}), &key);
  EXPECT_EQ(key, "2x2");
  ASSERT_EQ(two_by_two.size(), 2u);
  EXPECT_EQ(two_by_two[0].algorithm, "brd");
  EXPECT_EQ(two_by_two[1].algorithm, "hier");
  EXPECT_EQ(t.rows_for(Topology::from_nodes(0, {0, 0, 0, 0}), &key)[0].algorithm, "ring");  // 1x4: its count
  EXPECT_EQ(key, "4");
  EXPECT_EQ(t.rows_for(Topology::from_nodes(0, {0, 0, 1}), &key)[0].algorithm, "brb");  // uneven, 3 ranks: *
  EXPECT_EQ(key, "*");
  // The text form keeps every row and parses back to itself.
  const std::string text = t.to_text();
  EXPECT_EQ(CrossoverTable::parse(text, "again").to_text(), text);
  EXPECT_NE(text.find("2x2 100 brd\n2x2 inf hier\n"), std::string::npos) << text;
}

std::string parse_error(const std::string& text) {
  try {
    CrossoverTable::parse(text, "t.table");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CrossoverTableTest, RoundTripsThroughText) {
  CrossoverTable t = CrossoverTable::parse("# c\n\n2 16 brd   # small\n2 inf vhd_seg\n* inf ring\n", "x");
  CrossoverTable u = CrossoverTable::parse(t.to_text(), "y");
  EXPECT_EQ(t.to_text(), u.to_text());
  EXPECT_EQ(u.rows_for(2).size(), 2u);
  EXPECT_EQ(u.rows_for(2)[0].max_bytes, 16u);
  EXPECT_EQ(u.rows_for(3)[0].algorithm, "ring");
}

TEST(CrossoverTableTest, MalformedTablesSayWhatAndWhere) {
  EXPECT_NE(parse_error("2 16 brd\n2 inf\n").find("t.table:2: expected 'ranks max_bytes algorithm'"),
            std::string::npos);
  EXPECT_NE(parse_error("2 16 brd extra\n").find("t.table:1:"), std::string::npos);
  EXPECT_NE(parse_error("2 16 quicksort\n2 inf ring\n").find("unknown algorithm 'quicksort'"), std::string::npos);
  EXPECT_NE(parse_error("2 inf hybrid\n").find("unknown algorithm 'hybrid'"), std::string::npos);
  EXPECT_NE(parse_error("two 16 brd\n").find("ranks must be a positive integer"), std::string::npos);
  EXPECT_NE(parse_error("0 inf brd\n").find("ranks must be a positive integer"), std::string::npos);
  for (const char* layout : {"2x", "x2", "0x2", "2x0", "2x2x2", "-2x2"})
    EXPECT_NE(parse_error(std::string(layout) + " inf brd\n").find("a layout NODESxRANKS"), std::string::npos)
        << layout;
  EXPECT_NE(parse_error("2x2 inf brd\n2x2 16 brd\n").find("t.table:2: rows for ranks 2x2 must have increasing"),
            std::string::npos);
  EXPECT_NE(parse_error("2 16k brd\n").find("max_bytes must be a number of bytes or inf"), std::string::npos);
  EXPECT_NE(parse_error("2 -5 brd\n").find("max_bytes must be a number"), std::string::npos);
  EXPECT_NE(parse_error("2 64 brd\n2 16 vhd\n2 inf ring\n").find("t.table:2: rows for ranks 2 must have increasing"),
            std::string::npos);
  EXPECT_NE(parse_error("2 64 brd\n2 128 vhd\n").find("t.table:1: the rows for ranks 2 must end with max_bytes inf"),
            std::string::npos);
  EXPECT_NE(parse_error("# nothing\n\n").find("no rows"), std::string::npos);
}

TEST(CrossoverTableTest, MissingFileAndUnwritableFileAreErrors) {
  EXPECT_THROW(CrossoverTable::load("/nonexistent/strata.table"), Error);
  EXPECT_THROW(CrossoverTable::builtin().save("/nonexistent/dir/strata.table"), Error);
  EXPECT_THROW(AllreducePolicy::from_table_file("/nonexistent/strata.table"), Error);
}

TEST(CrossoverTableTest, SavedTableLoadsBack) {
  const std::string path = "/tmp/strata_test_table_" + std::to_string(getpid()) + "_" +
                           std::to_string(world_rank()) + ".txt";
  CrossoverTable::builtin().save(path);
  EXPECT_EQ(CrossoverTable::load(path).to_text(), CrossoverTable::builtin().to_text());
  std::remove(path.c_str());
}

TEST(AllreducePolicyTest, NamesAndUnknownNames) {
  EXPECT_TRUE(AllreducePolicy::from_name("hybrid").is_hybrid());
  EXPECT_EQ(AllreducePolicy::from_name("ring_seg").describe(), "ring_seg");
  try {
    AllreducePolicy::from_name("butterfly");
    ADD_FAILURE() << "unknown name accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown allreduce algorithm 'butterfly'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("ring_seg"), std::string::npos) << "the message lists the known names";
  }
  EXPECT_THROW(make_allreduce_algorithm("nope", MPI_COMM_WORLD), Error);
}

TEST(AllreducePolicyTest, FromSpecTakesANameAndATableForTheHybrid) {
  EXPECT_EQ(AllreducePolicy::from_spec("ring_seg", "").describe(), "ring_seg");
  EXPECT_EQ(AllreducePolicy::from_spec("hybrid", "").describe(), "hybrid (built-in table)");
  const std::string path = "/tmp/strata_test_spec_" + std::to_string(getpid()) + "_" +
                           std::to_string(world_rank()) + ".table";
  CrossoverTable::parse("* 64 brd\n* inf ring\n", "spec").save(path);
  EXPECT_EQ(AllreducePolicy::from_spec("hybrid", path).describe(), "hybrid (" + path + ")");
  try {
    AllreducePolicy::from_spec("ring", path);
    ADD_FAILURE() << "a table for a forced algorithm was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("table for the hybrid"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
  EXPECT_THROW(AllreducePolicy::from_spec("butterfly", ""), Error);
}

// ---- the communicator ----

TEST(CommunicatorTest, ThreadCommunicatorsAreDistinctAndConcurrentCollectivesDontMix) {
  Communicator comm(3);  // MPI is already up: no MPI_Init, no MPI_Finalize
  ASSERT_EQ(comm.size(), world_size());
  ASSERT_EQ(comm.rank(), world_rank());
  ASSERT_EQ(comm.thread_level(), MPI_THREAD_MULTIPLE);
  ASSERT_EQ(comm.num_comm_threads(), 3);
  int cmp = 0;
  MPI_Comm_compare(comm.thread_comm(0), comm.thread_comm(1), &cmp);
  EXPECT_EQ(cmp, MPI_CONGRUENT);  // same group, different context: messages cannot cross
  // Three threads run different algorithms on different sizes at once; each must get its own sums.
  const int r = comm.rank(), n = comm.size();
  bool ok[3] = {false, false, false};
  std::vector<std::thread> threads;
  const char* names[3] = {"ring_seg", "brd", "vhd"};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      auto alg = make_allreduce_algorithm(names[t], comm.thread_comm(t));
      bool good = true;
      for (int iter = 0; iter < 5; ++iter) {
        size_t count = 1000 * (t + 1) + 17 * iter;
        std::vector<float> buf(count);
        for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(input_value(i + t, r));
        alg->run(buf.data(), count);
        for (size_t i = 0; i < count; ++i) good = good && buf[i] == static_cast<float>(expected_sum(i + t, n));
      }
      ok[t] = good;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_TRUE(all_ranks(ok[0] && ok[1] && ok[2]));
}

}  // namespace
}  // namespace strata
