// The hybrid: not an algorithm of its own but a policy over them (seed paper section 4: BRD for small
// messages, VHD for large). For each rank count a crossover table lists which algorithm handles messages
// up to which size; run() looks the size up and hands the buffer to that algorithm.
//
// Table file format (text, one rule per line; '#' starts a comment; blank lines ignored):
//
//     # ranks  max_bytes  algorithm
//     2        16384      brd
//     2        inf        ring_seg
//     *        65536      brd
//     *        inf        vhd_seg
//
//     2x2      65536      hier
//     2x2      inf        hier
//
// A message of B bytes on N ranks uses the first row for N (in file order) whose max_bytes >= B. The
// rows of one rank count must have increasing max_bytes and end with "inf". The first field may also be a
// layout, HxL: H machines ("nodes") with L ranks each (strata/comm/topology.hpp). Ranks spread evenly over
// H nodes use the rows for HxL when the table has them, else the rows for their count H*L. Rows with ranks
// "*" apply to rank counts (and layouts) that have no rows of their own; a table with neither is an error
// on N ranks (it was tuned for other rank counts). `allreduce_bench --tune` writes these files, for the
// layout it runs on when that spans several nodes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/comm/allreduce.hpp"
#include "strata/comm/cost_model.hpp"
#include "strata/comm/topology.hpp"

namespace strata {

struct CrossoverRow {
  static constexpr size_t kUnlimited = SIZE_MAX;
  size_t max_bytes;       // kUnlimited for "inf"
  std::string algorithm;  // an allreduce_algorithm_names() entry
};

class CrossoverTable {
 public:
  static constexpr int kAnyRanks = 0;  // the "*" rows

  // An empty table (no rows yet); `origin` names it in error messages.
  explicit CrossoverTable(std::string origin = "built-in table") : origin_(std::move(origin)) {}

  // The defaults measured on the development machine (2 cores, Open MPI 4.1 vader; docs/benchmarks.md).
  static CrossoverTable builtin();
  // The default for the part of `hier` that crosses the network (one rank per node), unsegmented (over TCP
  // every segment costs a handshake), never shm or hier. On 2 nodes, as measured on the test bed: BRD up to
  // 256 KiB (it moves no more bytes than VHD there, in half the messages), then VHD. Other node counts take
  // builtin_network_model()'s predictions among brd, vhd and ring: the seed paper's hybrid (BRD while a
  // message costs its latency, VHD for large ones) with ring where VHD's fold costs a whole extra message.
  static CrossoverTable builtin_network();
  // The model behind it: alpha 15 us, 10 Gbit/s (beta 0.8 ns/B), sums at 4 GB/s (docs/allreduce.md);
  // `allreduce_bench --model` measures a network's own.
  static NetworkCostModel builtin_network_model();
  // Parses the text format above; errors throw strata::Error naming origin and line.
  static CrossoverTable parse(const std::string& text, const std::string& origin);
  static CrossoverTable load(const std::string& path);

  // Replaces the rows for one rank count (kAnyRanks for "*"); throws strata::Error if they are invalid.
  void set(int ranks, std::vector<CrossoverRow> rows);
  // Replaces the rows for a layout of `nodes` nodes of `per_node` ranks each.
  void set_layout(int nodes, int per_node, std::vector<CrossoverRow> rows);
  // Rank counts without rows of their own take the model's predictions (before any "*" rows).
  void set_model(const NetworkCostModel& model);
  // The rows that apply on `ranks` ranks: its own, else the model's, else "*"; throws strata::Error if the
  // table has none for it.
  std::vector<CrossoverRow> rows_for(int ranks) const;
  // The rows that apply to ranks placed as `topology` says: its layout's, else as rows_for(its rank count).
  // key (if not null) gets the first field of the rows chosen ("2x2", "4", "model", "*").
  std::vector<CrossoverRow> rows_for(const Topology& topology, std::string* key = nullptr) const;
  std::string to_text() const;
  void save(const std::string& path) const;  // throws strata::Error if the file cannot be written
  const std::string& origin() const { return origin_; }

 private:
  std::map<int, std::vector<CrossoverRow>> rows_;
  std::map<std::pair<int, int>, std::vector<CrossoverRow>> layout_rows_;  // by (nodes, ranks per node)
  bool has_model_ = false;
  NetworkCostModel model_;
  std::string origin_ = "built-in table";
};

class HybridAllreduce : public Allreduce {
 public:
  // Collective over comm. Builds every algorithm the table's rows for this communicator name: the rows for
  // its layout (Topology::detect), else for its size (throws strata::Error if the table has neither).
  HybridAllreduce(MPI_Comm comm, const CrossoverTable& table);
  ~HybridAllreduce() override;
  std::string name() const override { return "hybrid"; }
  void run(void* buf, size_t count, DataType type) override;
  using Allreduce::run;
  std::string explain(size_t bytes) const override;

  // The algorithm a message of `bytes` bytes goes to.
  const std::string& choice(size_t bytes) const;
  // The algorithm the last run() used (empty before the first).
  const std::string& last_choice() const { return last_; }

 private:
  std::string origin_, key_;  // the table's name and the first field of the rows used
  std::vector<CrossoverRow> rows_;
  std::vector<Allreduce*> row_algorithm_;  // parallel to rows_
  std::map<std::string, std::unique_ptr<Allreduce>> algorithms_;
  std::string last_;
};

// What a training run (or the benchmark) allreduces with: one algorithm forced by name, or the hybrid
// over a crossover table (built in, or loaded from a file).
class AllreducePolicy {
 public:
  // "hybrid" is the hybrid over the built-in table; any algorithm name forces that algorithm.
  // Throws strata::Error for an unknown name.
  static AllreducePolicy from_name(const std::string& name);
  // The hybrid over the table in this file (errors as CrossoverTable::load).
  static AllreducePolicy from_table_file(const std::string& path);
  static AllreducePolicy hybrid(CrossoverTable table);
  // A name as from_name and a table file for the hybrid (empty: the built-in table): what the tools'
  // --allreduce and --allreduce_table flags give (tools/allreduce_flags.hpp). A table file with any name
  // but "hybrid" throws strata::Error.
  static AllreducePolicy from_spec(const std::string& name, const std::string& table_file);

  // The algorithm object for one communicator (one per communication thread). Throws strata::Error
  // when a hybrid table has no rows for the communicator's size.
  std::unique_ptr<Allreduce> create(MPI_Comm comm) const;
  bool is_hybrid() const { return forced_.empty(); }
  std::string describe() const;

 private:
  std::string forced_;  // empty: hybrid over table_
  CrossoverTable table_;
};

}  // namespace strata
