#include "strata/comm/hybrid_allreduce.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "strata/common.hpp"

namespace strata {

namespace {

std::string bytes_text(size_t b) { return b == CrossoverRow::kUnlimited ? "inf" : std::to_string(b); }
std::string known_algorithms() {
  std::string known;
  for (const auto& n : allreduce_algorithm_names()) known += (known.empty() ? "" : ", ") + n;
  return known;
}
std::string ranks_text(int r) { return r == CrossoverTable::kAnyRanks ? "*" : std::to_string(r); }
std::string layout_text(std::pair<int, int> l) { return std::to_string(l.first) + "x" + std::to_string(l.second); }

// A positive integer up to 2^24 (ranks, nodes or ranks per node).
bool parse_count(const std::string& s, int* out) {
  if (s.empty() || s[0] == '-' || s[0] == '+') return false;
  char* end = nullptr;
  errno = 0;
  long r = strtol(s.c_str(), &end, 10);
  if (*end != 0 || errno != 0 || r < 1 || r > 1 << 24) return false;
  *out = static_cast<int>(r);
  return true;
}

// Rows are checked in one place so that parse() and set() give the same messages.
std::string rows_problem(const std::vector<CrossoverRow>& rows) {
  if (rows.empty()) return "no rows";
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!is_allreduce_algorithm(rows[i].algorithm))
      return "unknown algorithm '" + rows[i].algorithm + "'";
    if (i > 0 && rows[i].max_bytes <= rows[i - 1].max_bytes)
      return "max_bytes must increase from row to row (" + bytes_text(rows[i].max_bytes) + " after " +
             bytes_text(rows[i - 1].max_bytes) + ")";
  }
  if (rows.back().max_bytes != CrossoverRow::kUnlimited)
    return "the last row must have max_bytes inf, so every size has an algorithm";
  return "";
}

}  // namespace

// Measured with allreduce_bench --tune on the development machine (2 cores, Open MPI 4.1.4, vader);
// docs/benchmarks.md has the runs. Rank counts not listed use the "*" rows.
CrossoverTable CrossoverTable::builtin() {
  // Measured on the development machine (docs/benchmarks.md): the shared-memory algorithm beat every
  // message-based one, Strata's and Open MPI's, at every size from 4 B to 256 MiB at 2, 4 and 8 ranks in
  // the same runs (vader moves large messages with CMA at about 12 GB/s where shm copies at memcpy speed,
  // and small ones cost shm one flag wait). Across machines shm hands the message to hier, whose network
  // part follows builtin_network().
  static const char* const kText = R"(
2 inf shm
4 inf shm
8 inf shm
* inf shm
)";
  return parse(kText, "built-in table");
}

NetworkCostModel CrossoverTable::builtin_network_model() { return NetworkCostModel{15e-6, 0.8e-9, 0.25e-9}; }

CrossoverTable CrossoverTable::builtin_network() {
  CrossoverTable table("built-in network table");
  // Unsegmented: a segment is an MPI message, and over TCP each one above the eager limit waits for the
  // receiver's go-ahead, which queues behind the data already in flight the other way. Across 2 hosts of the
  // test bed with 1 Gbit/s links, 16 MiB took 142 ms with vhd (the link's bound: 134 ms) against 234 ms with
  // vhd_seg (docs/benchmarks.md). On 2 nodes BRD is one exchange of the whole message where VHD makes two of
  // half of it: the same bytes, half the latency; unshaped it took 99 us at 256 KiB against 136 for VHD.
  table.set(2, {{262144, "brd"}, {CrossoverRow::kUnlimited, "vhd"}});
  table.set_model(builtin_network_model());
  return table;
}

CrossoverTable CrossoverTable::parse(const std::string& text, const std::string& origin) {
  CrossoverTable table(origin);
  std::map<int, std::vector<CrossoverRow>> rows;
  std::map<int, int> first_line;
  std::vector<std::pair<int, int>> layouts;  // in order of first appearance
  std::istringstream in(text);
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    std::string content = line.substr(0, line.find('#'));
    std::istringstream fields(content);
    std::string ranks_s, bytes_s, alg, extra;
    if (!(fields >> ranks_s)) continue;  // blank or comment
    const std::string where = origin + ":" + std::to_string(lineno) + ": ";
    STRATA_REQUIRE((fields >> bytes_s >> alg) && !(fields >> extra))
        << where << "expected 'ranks max_bytes algorithm', got '" << line << "'";
    // The key of these rows: a rank count, "*" (kAnyRanks), or a layout HxL (stored as -(index + 1) while
    // parsing, so that one map keeps every list in file order).
    int ranks = kAnyRanks;
    if (ranks_s != "*") {
      const size_t x = ranks_s.find('x');
      int nodes = 0, per_node = 0;
      const bool layout = x != std::string::npos;
      bool ok = layout ? parse_count(ranks_s.substr(0, x), &nodes) && parse_count(ranks_s.substr(x + 1), &per_node)
                       : parse_count(ranks_s, &ranks);
      STRATA_REQUIRE(ok) << where << "ranks must be a positive integer, a layout NODESxRANKS (2x4) or *, got '"
                         << ranks_s << "'";
      if (layout) {
        auto it = std::find(layouts.begin(), layouts.end(), std::make_pair(nodes, per_node));
        if (it == layouts.end()) it = layouts.insert(layouts.end(), {nodes, per_node});
        ranks = -static_cast<int>(it - layouts.begin()) - 1;
      }
    }
    size_t max_bytes = CrossoverRow::kUnlimited;
    if (bytes_s != "inf") {
      char* end = nullptr;
      errno = 0;
      unsigned long long b = strtoull(bytes_s.c_str(), &end, 10);
      STRATA_REQUIRE(*end == 0 && errno == 0 && bytes_s[0] != '-')
          << where << "max_bytes must be a number of bytes or inf, got '" << bytes_s << "'";
      max_bytes = static_cast<size_t>(b);
    }
    STRATA_REQUIRE(is_allreduce_algorithm(alg))
        << where << "unknown algorithm '" << alg << "' (a row names one of " << known_algorithms() << ")";
    auto& list = rows[ranks];
    STRATA_REQUIRE(list.empty() || list.back().max_bytes < max_bytes)
        << where << "rows for ranks " << ranks_s << " must have increasing max_bytes (" << bytes_s
        << " after " << bytes_text(list.back().max_bytes) << ")";
    if (list.empty()) first_line[ranks] = lineno;
    list.push_back({max_bytes, alg});
  }
  STRATA_REQUIRE(!rows.empty()) << origin << ": no rows (expected lines 'ranks max_bytes algorithm')";
  for (auto& [ranks, list] : rows) {
    const std::string key = ranks < 0 ? layout_text(layouts[-ranks - 1]) : ranks_text(ranks);
    STRATA_REQUIRE(list.back().max_bytes == CrossoverRow::kUnlimited)
        << origin << ":" << first_line[ranks] << ": the rows for ranks " << key
        << " must end with max_bytes inf, so every size has an algorithm";
    if (ranks < 0) table.layout_rows_[layouts[-ranks - 1]] = std::move(list);
    else table.rows_[ranks] = std::move(list);
  }
  return table;
}

CrossoverTable CrossoverTable::load(const std::string& path) {
  std::ifstream in(path);
  STRATA_REQUIRE(in) << "cannot open allreduce table file '" << path << "'";
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

void CrossoverTable::set(int ranks, std::vector<CrossoverRow> rows) {
  std::string problem = rows_problem(rows);
  STRATA_REQUIRE(problem.empty()) << origin_ << ": rows for ranks " << ranks_text(ranks) << ": " << problem;
  rows_[ranks] = std::move(rows);
}

void CrossoverTable::set_layout(int nodes, int per_node, std::vector<CrossoverRow> rows) {
  const std::string key = layout_text({nodes, per_node});
  STRATA_REQUIRE(nodes >= 1 && per_node >= 1) << origin_ << ": no layout " << key;
  std::string problem = rows_problem(rows);
  STRATA_REQUIRE(problem.empty()) << origin_ << ": rows for ranks " << key << ": " << problem;
  layout_rows_[{nodes, per_node}] = std::move(rows);
}

void CrossoverTable::set_model(const NetworkCostModel& model) {
  model_ = model;
  has_model_ = true;
}

std::vector<CrossoverRow> CrossoverTable::rows_for(const Topology& topology, std::string* key) const {
  if (topology.uniform()) {
    auto it = layout_rows_.find({topology.nodes(), topology.local_size()});
    if (it != layout_rows_.end()) {
      if (key) *key = layout_text(it->first);
      return it->second;
    }
  }
  if (key) *key = rows_.count(topology.size) ? ranks_text(topology.size) : has_model_ ? "model" : "*";
  return rows_for(topology.size);
}

std::vector<CrossoverRow> CrossoverTable::rows_for(int ranks) const {
  auto it = rows_.find(ranks);
  if (it == rows_.end() && has_model_) return model_.rows(ranks);
  if (it == rows_.end()) it = rows_.find(kAnyRanks);
  if (it == rows_.end()) {
    std::string have;
    for (const auto& kv : rows_) have += (have.empty() ? "" : ", ") + ranks_text(kv.first);
    for (const auto& kv : layout_rows_) have += (have.empty() ? "" : ", ") + layout_text(kv.first);
    STRATA_FAIL() << origin_ << " has no rows for " << ranks << " ranks (it has rows for " << have
                  << "); run allreduce_bench --tune under mpirun -np " << ranks << " to measure them";
  }
  return it->second;
}

std::string CrossoverTable::to_text() const {
  std::ostringstream out;
  out << "# Strata allreduce crossover table (docs/allreduce.md).\n"
      << "# A message of B bytes on N ranks uses the first row for N whose max_bytes >= B;\n"
      << "# ranks HxL: H nodes of L ranks each, before the rows for their count H*L;\n"
      << "# rows with ranks * apply to rank counts without rows of their own.\n"
      << "# ranks  max_bytes  algorithm\n";
  auto write = [&](const std::string& key, const std::vector<CrossoverRow>& list) {
    for (const auto& row : list) out << key << " " << bytes_text(row.max_bytes) << " " << row.algorithm << "\n";
  };
  for (const auto& kv : layout_rows_) write(layout_text(kv.first), kv.second);
  for (const auto& kv : rows_)
    if (kv.first != kAnyRanks) write(ranks_text(kv.first), kv.second);
  if (has_model_) out << "# other rank counts: the cost model's predictions (" << model_.describe() << ")\n";
  auto any = rows_.find(kAnyRanks);
  if (any != rows_.end()) write("*", any->second);
  return out.str();
}

void CrossoverTable::save(const std::string& path) const {
  std::ofstream out(path);
  STRATA_REQUIRE(out) << "cannot write allreduce table file '" << path << "'";
  out << to_text();
  out.close();
  STRATA_REQUIRE(out) << "error writing allreduce table file '" << path << "'";
}

HybridAllreduce::HybridAllreduce(MPI_Comm comm, const CrossoverTable& table)
    : Allreduce(comm), origin_(table.origin()), rows_(table.rows_for(Topology::detect(comm), &key_)) {
  for (const auto& row : rows_) {
    auto& alg = algorithms_[row.algorithm];
    if (!alg) alg = make_allreduce_algorithm(row.algorithm, comm);
    row_algorithm_.push_back(alg.get());
  }
}

const std::string& HybridAllreduce::choice(size_t bytes) const {
  for (const auto& row : rows_)
    if (bytes <= row.max_bytes) return row.algorithm;
  return rows_.back().algorithm;  // unreachable: the last row is unlimited
}

HybridAllreduce::~HybridAllreduce() = default;

std::string HybridAllreduce::explain(size_t bytes) const {
  size_t i = 0;
  while (i + 1 < rows_.size() && bytes > rows_[i].max_bytes) ++i;
  return "hybrid: row '" + key_ + " " + bytes_text(rows_[i].max_bytes) + " " + rows_[i].algorithm + "' of the " +
         origin_ + " -> " + row_algorithm_[i]->explain(bytes);
}

void HybridAllreduce::run(void* buf, size_t count, DataType type) {
  const size_t bytes = count * size_of(type);
  size_t i = 0;
  while (i + 1 < rows_.size() && bytes > rows_[i].max_bytes) ++i;
  last_ = rows_[i].algorithm;
  row_algorithm_[i]->run(buf, count, type);
}

AllreducePolicy AllreducePolicy::from_name(const std::string& name) {
  if (name == "hybrid") return hybrid(CrossoverTable::builtin());
  STRATA_REQUIRE(is_allreduce_algorithm(name)) << unknown_allreduce_message(name);
  AllreducePolicy p;
  p.forced_ = name;
  return p;
}

AllreducePolicy AllreducePolicy::from_table_file(const std::string& path) {
  return hybrid(CrossoverTable::load(path));
}

AllreducePolicy AllreducePolicy::hybrid(CrossoverTable table) {
  AllreducePolicy p;
  p.table_ = std::move(table);
  return p;
}

AllreducePolicy AllreducePolicy::from_spec(const std::string& name, const std::string& table_file) {
  if (table_file.empty()) return from_name(name);
  STRATA_REQUIRE(name == "hybrid") << "the crossover table '" << table_file
                                   << "' is a table for the hybrid, but the algorithm asked for is " << name;
  return from_table_file(table_file);
}

std::unique_ptr<Allreduce> AllreducePolicy::create(MPI_Comm comm) const {
  if (!forced_.empty()) return make_allreduce_algorithm(forced_, comm);
  return std::make_unique<HybridAllreduce>(comm, table_);
}

std::string AllreducePolicy::describe() const {
  return forced_.empty() ? "hybrid (" + table_.origin() + ")" : forced_;
}

}  // namespace strata
