#include "strata/scale/iteration_model.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <memory>

#include "strata/comm/hier_allreduce.hpp"
#include "strata/comm/hybrid_allreduce.hpp"
#include "strata/comm/topology.hpp"
#include "strata/common.hpp"
#include "strata/engine/bucket_plan.hpp"
#include "strata/engine/timeline.hpp"
#include "strata/net.hpp"
#include "strata/comm/allreduce_shape.hpp"

namespace strata {

// ---------------------------------------------------------------------------------------------------------------
// ScaleNet

double ScaleNet::gradient_bytes() const {
  double total = 0;
  for (const auto& b : buckets)
    for (double c : b.chunk_bytes) total += c;
  return total;
}

ScaleNet ScaleNet::at_batch(int new_batch) const {
  STRATA_REQUIRE(new_batch >= 1) << "the batch must be positive, got " << new_batch;
  ScaleNet out = *this;
  const double f = double(new_batch) / batch;
  for (double& t : out.forward_s) t *= f;
  for (double& t : out.backward_s) t *= f;
  out.batch = new_batch;
  return out;
}

ScaleNet ScaleNet::FromNet(const Net<float>& net, size_t chunk_bytes, size_t fusion_bytes) {
  STRATA_REQUIRE(chunk_bytes >= sizeof(float)) << "the chunk size must be at least one element";
  const BucketPlan plan(net, fusion_bytes / sizeof(float), chunk_bytes / sizeof(float));
  ScaleNet s;
  const int n = net.num_layers();
  s.layers = net.layer_names();
  s.forward_s.assign(n, 0);
  s.backward_s.assign(n, 0);
  s.batch = std::max(1, net.batch_size());
  // Buckets in the order the engine submits them: by the layer whose backward completes them, last layer first.
  std::vector<int> index_of(plan.num_buckets(), -1);
  for (int L = n - 1; L >= 0; --L) {
    for (int b : plan.buckets_after(L)) {
      ScaleNet::Bucket out;
      out.ready_after = L;
      for (const ElementRange& c : plan.chunks(b)) out.chunk_bytes.push_back(double(c.count) * sizeof(float));
      for (int p : plan.bucket(b).params) {
        const int unit = plan.unit_of(p);
        if (std::find(out.units.begin(), out.units.end(), unit) == out.units.end()) out.units.push_back(unit);
      }
      out.name = s.layers[plan.unit_of(plan.bucket(b).params.front())];
      index_of[b] = static_cast<int>(s.buckets.size());
      s.buckets.push_back(std::move(out));
    }
  }
  s.reads.resize(n);
  for (int L = 0; L < n; ++L) {
    for (int p : plan.reads(L)) {
      const int unit = plan.unit_of(p);
      if (std::find(s.reads[L].begin(), s.reads[L].end(), unit) == s.reads[L].end()) s.reads[L].push_back(unit);
    }
  }
  return s;
}

// ---------------------------------------------------------------------------------------------------------------
// The allreduce policy

namespace {

bool is_local_or_hier(const std::string& a) { return a == "shm" || a == "hier"; }

// The network algorithm hier runs across `nodes` nodes on a block of `bytes`.
std::string hier_network_choice(int nodes, double bytes) {
  static const CrossoverTable network = CrossoverTable::builtin_network();
  for (const auto& row : network.rows_for(nodes))
    if (bytes <= double(row.max_bytes)) return row.algorithm;
  return network.rows_for(nodes).back().algorithm;
}

std::string model_choice(const MachineSpec& machine, int ranks, double bytes, const std::vector<std::string>& among) {
  const NetworkCostModel model = machine.network();
  const std::string* best = &among.front();
  for (const auto& a : among)
    if (model.predict(a, ranks, bytes) < model.predict(*best, ranks, bytes)) best = &a;
  return *best;
}

}  // namespace

std::string ScaleAlgorithmChoice(const ScaleOptions& options, const MachineSpec& machine, const ClusterShape& cluster,
                                 double bytes) {
  const int ranks = cluster.ranks();
  std::string a = options.allreduce;
  if (a == "seed") return model_choice(machine, ranks, bytes, {"brd", "vhd"});
  if (a == "model") return model_choice(machine, ranks, bytes, {"brd", "vhd", "ring", "brb"});
  if (a == "hybrid") {
    static const CrossoverTable builtin = CrossoverTable::builtin();
    const CrossoverTable& table = options.table ? *options.table : builtin;
    std::vector<int> node_of(ranks);
    for (int r = 0; r < ranks; ++r) node_of[r] = r / cluster.ranks_per_node;
    const auto rows = table.rows_for(Topology::from_nodes(0, node_of));
    a = rows.back().algorithm;
    for (const auto& row : rows) {
      if (bytes <= double(row.max_bytes)) {
        a = row.algorithm;
        break;
      }
    }
  }
  if (a == "shm" && cluster.nodes > 1) return "hier";  // as ShmAllreduce hands a job on several machines on
  if (a == "hier" && cluster.nodes == 1) return "shm";
  const auto& shaped = shaped_allreduce_algorithms();
  STRATA_REQUIRE(is_local_or_hier(a) || std::find(shaped.begin(), shaped.end(), a) != shaped.end())
      << "the scaling model has no shape for allreduce algorithm '" << a
      << "' (it models hybrid, seed, model, shm, hier, brb, brd, vhd, vhd_seg, ring, ring_seg and linear)";
  return a;
}

// ---------------------------------------------------------------------------------------------------------------
// The simulation

namespace {

enum class Resource { kDelay, kLink, kCpu, kGpu, kCopyOut, kCopyBack };

// A piece of work: `remaining` seconds at full speed; `demand` cores (CPU work only).
struct Work {
  Resource resource = Resource::kDelay;
  double remaining = 0;
  double demand = 1;
  std::string name;
  const char* category = "";
  bool wakes = false;  // ends with the thread woken by a message (MachineSpec::wakeup applies)
};

// One chunk of a bucket, from submission to its reduction (and update).
struct Chunk {
  int bucket = 0;
  double bytes = 0;
  int iteration = 0;
  bool copied_out = false;   // GPU: on the host
  bool copied_back = false;  // GPU: back on the device
  bool back_queued = false;
  int index = 0;  // within its bucket
};

class Simulation {
 public:
  Simulation(const ScaleNet& net, const MachineSpec& machine, const ClusterShape& cluster, const ScaleOptions& options,
             Timeline* timeline)
      : net_(net), machine_(machine), cluster_(cluster), options_(options), timeline_(timeline) {
    STRATA_REQUIRE(cluster.nodes >= 1 && cluster.ranks_per_node >= 1)
        << "a cluster needs at least one node of at least one rank";
    STRATA_REQUIRE(options.threads >= 1) << "the scaling model needs at least one communication thread";
    STRATA_REQUIRE(options.compute_threads >= 1) << "the computation needs at least one thread";
    STRATA_REQUIRE(options.iterations >= 3) << "the scaling model needs at least 3 iterations to measure one";
    STRATA_REQUIRE(net.forward_s.size() == net.layers.size() && net.backward_s.size() == net.layers.size() &&
                   net.reads.size() == net.layers.size())
        << "the net's times do not cover its layers";
    cores_ = std::max(1.0, double(machine.cores) / cluster.ranks_per_node);
    const int n = static_cast<int>(net.layers.size());
    unit_buckets_.assign(n, 0);
    for (const auto& b : net.buckets)
      for (int u : b.units) ++unit_buckets_[u];
    unit_done_.assign(n, -1);
    threads_.resize(options.threads);
    // The first layer whose forward waits for each bucket's update.
    first_reader_.assign(net.buckets.size(), n);
    for (size_t b = 0; b < net.buckets.size(); ++b)
      for (int L = 0; L < n; ++L)
        for (int r : net.reads[L])
          if (std::find(net.buckets[b].units.begin(), net.buckets[b].units.end(), r) != net.buckets[b].units.end())
            first_reader_[b] = std::min(first_reader_[b], L);
    algorithm_.resize(net.buckets.size());
    chunk_work_.resize(net.buckets.size());
    bucket_remaining_.assign(net.buckets.size(), 0);
    unit_reduced_.assign(n, 0);
    // Each bucket's chunks get their algorithm's work once; every iteration repeats it. Most chunks have the
    // chunk size, so the policy is asked once per distinct size.
    std::map<double, std::string> choice;
    for (size_t b = 0; b < net.buckets.size(); ++b) {
      for (double bytes : net.buckets[b].chunk_bytes) {
        auto it = choice.find(bytes);
        if (it == choice.end()) it = choice.emplace(bytes, ScaleAlgorithmChoice(options, machine, cluster, bytes)).first;
        if (algorithm_[b].empty()) algorithm_[b] = Label(it->second, bytes);
        chunk_work_[b].push_back(ReduceWork(it->second, bytes));
      }
    }
  }

  ScaleResult Run() {
    const int iterations = options_.iterations;
    forward_start_.assign(iterations + 1, 0);
    waited_.assign(iterations, 0);
    computed_.assign(iterations, 0);
    comm_busy_.assign(iterations, 0);
    for (;;) {
      StartWhatCan();
      if (compute_step_ >= TotalComputeSteps() && AllCommunicationDone()) break;
      Advance();
    }
    ScaleResult r;
    // Iterations 1 .. iterations-2 are measured: the first has no previous updates to wait for, the last's
    // successor is not simulated.
    const int first = 1, last = iterations - 2;
    r.iteration_s = (forward_start_[last + 1] - forward_start_[first]) / (last + 1 - first);
    for (int it = first; it <= last; ++it) {
      r.exposed_s += waited_[it];
      r.compute_s += computed_[it];
      r.comm_busy_s += comm_busy_[it];
    }
    const double count = last + 1 - first;
    r.exposed_s /= count;
    r.compute_s /= count;
    r.comm_busy_s /= count;
    r.bucket_algorithm = algorithm_;
    return r;
  }

 private:
  struct Agent {
    bool busy = false;
    Work work;
    double started = 0;
    std::deque<Work> program;  // what follows the current work (communication threads: a chunk's steps)
  };
  struct Thread {
    Agent agent;
    std::deque<int> queue;  // chunk ids, in submission order
    int current = -1;
    double started = 0;  // when it took the current chunk
  };

  int Layers() const { return static_cast<int>(net_.layers.size()); }
  int TotalComputeSteps() const { return options_.iterations * 2 * Layers() + (Single() ? options_.iterations : 0); }
  bool Single() const { return cluster_.ranks() == 1; }

  // How reports name algorithm a on `bytes`: hier with one rank per node is its network algorithm alone.
  std::string Label(const std::string& a, double bytes) const {
    if (a != "hier" || Single()) return a;
    const int L = cluster_.ranks_per_node;
    const bool single_block = bytes <= double(HierarchicalAllreduce::kSingleBlockBytes);
    const std::string network = hier_network_choice(cluster_.nodes, single_block ? bytes : bytes / L);
    return L == 1 ? network : "hier+" + network;
  }

  // The work of reducing `bytes` with algorithm a (without the copies and the update).
  std::vector<Work> ReduceWork(const std::string& a, double bytes) const {
    std::vector<Work> w;
    if (Single()) return w;
    auto add = [&w](Resource r, double s, const std::string& name, const char* cat) {
      if (s > 0) w.push_back(Work{r, s, 1, name, cat});
    };
    // A wait for a message: kept even when free, since the wake-up may cost. (Shared memory's flag waits sleep on
    // a futex, whose wake-up preempts the computation at once.)
    auto wait = [&w, this](double s, const std::string& name) {
      if (s > 0 || machine_.wakeup > 0) w.push_back(Work{Resource::kDelay, s, 1, name, "allreduce", true});
    };
    auto network = [&](const std::string& alg, int ranks, double m, double share) {
      const AllreduceShape shape = ShapeAllreduce(alg, ranks, m);
      for (const auto& p : shape.phases) {
        wait(machine_.alpha, alg + " latency");
        add(Resource::kLink, p.link_bytes * share * machine_.beta, alg + " transfer", "allreduce");
        add(Resource::kCpu, p.sum_bytes * machine_.gamma, alg + " sum", "allreduce");
      }
    };
    const int L = cluster_.ranks_per_node, H = cluster_.nodes;
    if (is_local_or_hier(a)) {
      // Copy the blocks others own in, flag, sum the own block over L ranks, (network), flag, copy the rest out.
      const bool single_block = a == "hier" && bytes <= double(HierarchicalAllreduce::kSingleBlockBytes);
      const int blocks = single_block ? 1 : L;
      const double block = bytes / blocks;
      if (L > 1) {
        add(Resource::kCpu, bytes * (L - 1) / L * machine_.local_copy, "shm copy in", "allreduce");
        add(Resource::kDelay, machine_.local_alpha, "shm flag", "allreduce");
        add(Resource::kCpu, block * (L - 1) * machine_.gamma, "shm sum", "allreduce");
      }
      // Every rank of the node carries its block over the node's link at once: they share it.
      if (H > 1) network(hier_network_choice(H, block), H, block, blocks);
      if (L > 1) {
        add(Resource::kDelay, machine_.local_alpha, "shm flag", "allreduce");
        add(Resource::kCpu, bytes * (L - 1) / L * machine_.local_copy, "shm copy out", "allreduce");
      }
      return w;
    }
    // A flat algorithm over every rank: the L ranks of a node share its link.
    network(a, cluster_.ranks(), bytes, L);
    return w;
  }

  // Starts every piece of work whose turn has come, until nothing more can start.
  void StartWhatCan() {
    for (bool again = true; again;) {
      again = false;
      again |= StartCompute();
      for (int t = 0; t < options_.threads; ++t) again |= StartThread(t);
      again |= StartCopy(&copy_out_, &copy_out_queue_, Resource::kCopyOut);
      again |= StartCopy(&copy_back_, &copy_back_queue_, Resource::kCopyBack);
    }
  }

  // The computation's steps: per iteration, forward 0..n-1, backward n-1..0 (and on one rank the update).
  bool StartCompute() {
    if (compute_.busy || compute_step_ >= TotalComputeSteps()) return false;
    const int n = Layers(), per = 2 * n + (Single() ? 1 : 0);
    const int it = compute_step_ / per, k = compute_step_ % per;
    if (k < n) {
      // Forward of layer k: waits for the updates of what it reads (overlap off: for every update).
      if (it > 0) {
        bool ready = true;
        if (!options_.overlap && k == 0) {
          for (int u = 0; u < n; ++u)
            if (unit_buckets_[u] > 0 && unit_done_[u] < it - 1) ready = false;
        }
        for (int u : net_.reads[k])
          if (unit_done_[u] < it - 1) ready = false;
        if (!ready) {
          if (wait_started_ < 0) wait_started_ = now_;
          return false;
        }
      }
      if (wait_started_ >= 0) {
        waited_[it] += now_ - wait_started_;
        wait_started_ = -1;
      }
      if (k == 0) forward_start_[it] = now_;
      Begin(&compute_, ComputeWork(net_.forward_s[k], net_.layers[k], "forward"));
    } else if (k < 2 * n) {
      const int L = 2 * n - 1 - k;
      Begin(&compute_, ComputeWork(net_.backward_s[L], net_.layers[L], "backward"));
    } else {
      // One rank: the solver updates every parameter after backward, on the computation's thread.
      Work w = ComputeWork(options_.gpu ? 0 : net_.gradient_bytes() * machine_.update, "update", "update");
      w.demand = 1;
      Begin(&compute_, w);
    }
    return true;
  }

  Work ComputeWork(double seconds, const std::string& name, const char* category) const {
    return Work{options_.gpu ? Resource::kGpu : Resource::kCpu, seconds, double(options_.compute_threads), name,
                category};
  }

  void ComputeDone() {
    const int n = Layers(), per = 2 * n + (Single() ? 1 : 0);
    const int it = compute_step_ / per, k = compute_step_ % per;
    computed_[it] += now_ - compute_.started;
    ++compute_step_;
    if (k < n || k >= 2 * n || Single()) {
      if (k == per - 1 && Single()) MarkAllUpdated(it);
      return;
    }
    const int L = 2 * n - 1 - k;
    if (options_.overlap) {
      SubmitAfter(L, it);
    } else if (L == 0) {
      for (int layer = n - 1; layer >= 0; --layer) SubmitAfter(layer, it);
    }
  }

  void MarkAllUpdated(int it) {
    for (int u = 0; u < Layers(); ++u) unit_done_[u] = it;
  }

  void SubmitAfter(int layer, int it) {
    for (size_t b = 0; b < net_.buckets.size(); ++b) {
      if (net_.buckets[b].ready_after != layer) continue;
      bucket_remaining_[b] = static_cast<int>(net_.buckets[b].chunk_bytes.size());
      for (size_t c = 0; c < net_.buckets[b].chunk_bytes.size(); ++c) {
        Chunk chunk;
        chunk.bucket = static_cast<int>(b);
        chunk.bytes = net_.buckets[b].chunk_bytes[c];
        chunk.iteration = it;
        chunk.copied_out = chunk.copied_back = !options_.gpu || machine_.pcie <= 0;
        chunk.index = static_cast<int>(c);
        chunks_.push_back(chunk);
        const int id = static_cast<int>(chunks_.size()) - 1;
        if (options_.dispatch == ScaleOptions::Dispatch::kRoundRobin)
          threads_[next_task_++ % threads_.size()].queue.push_back(id);
        else
          shared_queue_.push_back(id);
        if (!chunk.copied_out) copy_out_queue_.push_back(id);
      }
      if (net_.buckets[b].chunk_bytes.empty()) BucketDone(static_cast<int>(b), it);
    }
  }

  bool StartThread(int t) {
    Thread& th = threads_[t];
    if (th.agent.busy) return false;
    if (th.current < 0) {
      const int id = NextChunk(&th);
      if (id < 0) return false;
      th.current = id;
      th.started = now_;
      const Chunk& c = chunks_[id];
      const auto& work = chunk_work_[c.bucket][c.index];
      th.agent.program.assign(work.begin(), work.end());
      if (!options_.gpu && machine_.update > 0)
        th.agent.program.push_back(Work{Resource::kCpu, c.bytes * machine_.update, 1, "update", "update"});
    }
    Chunk& c = chunks_[th.current];
    if (!th.agent.program.empty()) {
      Work w = th.agent.program.front();
      th.agent.program.pop_front();
      if (w.category == std::string("allreduce"))
        w.name = net_.buckets[c.bucket].name + " " + algorithm_[c.bucket] + ": " + w.name;
      if (w.wakes && ComputationHoldsTheCores()) w.remaining += machine_.wakeup;
      Begin(&th.agent, w);
      return true;
    }
    if (!c.copied_back) {  // the copy back to the device, then the chunk is reduced
      if (!c.back_queued) {
        c.back_queued = true;
        copy_back_queue_.push_back(th.current);
        return true;
      }
      return false;
    }
    comm_busy_[c.iteration] += now_ - th.started;
    const int id = th.current;
    th.current = -1;
    ChunkDone(id);
    return true;
  }

  // The chunk a free thread takes next (-1: none ready), removed from its queue. A chunk is ready once it is on
  // the host. Round-robin: the head of the thread's own queue. Shared: the oldest ready chunk. Lowest layer
  // first: the ready chunk whose update the next forward needs first (the lowest layer), oldest first.
  int NextChunk(Thread* th) {
    if (options_.dispatch == ScaleOptions::Dispatch::kRoundRobin) {
      if (th->queue.empty() || !chunks_[th->queue.front()].copied_out) return -1;
      const int id = th->queue.front();
      th->queue.pop_front();
      return id;
    }
    auto best = shared_queue_.end();
    for (auto it = shared_queue_.begin(); it != shared_queue_.end(); ++it) {
      if (!chunks_[*it].copied_out) continue;
      if (best == shared_queue_.end()) best = it;
      if (options_.dispatch == ScaleOptions::Dispatch::kShared) break;
      if (first_reader_[chunks_[*it].bucket] < first_reader_[chunks_[*best].bucket]) best = it;
    }
    if (best == shared_queue_.end()) return -1;
    const int id = *best;
    shared_queue_.erase(best);
    return id;
  }

  // CPU training whose computation keeps every core of the rank busy: a woken thread waits for one.
  bool ComputationHoldsTheCores() const {
    return !options_.gpu && compute_.busy && compute_.work.resource == Resource::kCpu &&
           compute_.work.demand >= cores_;
  }

  bool StartCopy(Agent* stream, std::deque<int>* queue, Resource r) {
    if (stream->busy || queue->empty()) return false;
    const Chunk& c = chunks_[queue->front()];
    // Copies on the computation's stream share the GPU with it: each runs at half speed while both do.
    Begin(stream, Work{options_.copies_block_compute ? Resource::kGpu : r, c.bytes * machine_.pcie, 1,
                       net_.buckets[c.bucket].name, r == Resource::kCopyOut ? "copy to host" : "copy to device"});
    return true;
  }

  void ChunkDone(int id) {
    const Chunk& c = chunks_[id];
    if (--bucket_remaining_[c.bucket] == 0) BucketDone(c.bucket, c.iteration);
  }

  void BucketDone(int b, int it) {
    for (int u : net_.buckets[b].units) {
      if (++unit_reduced_[u] == unit_buckets_[u]) {
        unit_reduced_[u] = 0;
        unit_done_[u] = it;
      }
    }
  }

  bool AllCommunicationDone() const {
    for (const auto& th : threads_)
      if (th.agent.busy || th.current >= 0 || !th.queue.empty()) return false;
    return shared_queue_.empty() && !copy_out_.busy && !copy_back_.busy && copy_out_queue_.empty() && copy_back_queue_.empty();
  }

  void Begin(Agent* a, const Work& w) {
    a->busy = true;
    a->work = w;
    a->started = now_;
    if (a->work.remaining <= 0) Finish(a);
    else active_.push_back(a);
  }

  // Moves time to the next completion, sharing the link and the cores among what is running.
  void Advance() {
    STRATA_REQUIRE(!active_.empty()) << "the scaling model stalled (nothing running, work left): a bug";
    double cpu_demand = 0;
    int flows = 0, gpu_users = 0;
    for (const Agent* a : active_) {
      if (a->work.resource == Resource::kCpu) cpu_demand += a->work.demand;
      if (a->work.resource == Resource::kLink) ++flows;
      if (a->work.resource == Resource::kGpu) ++gpu_users;
    }
    const double cpu_rate = cpu_demand > cores_ ? cores_ / cpu_demand : 1.0;
    auto rate = [&](const Agent* a) {
      switch (a->work.resource) {
        case Resource::kCpu: return cpu_rate;
        case Resource::kLink: return 1.0 / flows;
        case Resource::kGpu: return 1.0 / gpu_users;
        default: return 1.0;
      }
    };
    double dt = std::numeric_limits<double>::infinity();
    for (const Agent* a : active_) dt = std::min(dt, a->work.remaining / rate(a));
    now_ += dt;
    std::vector<Agent*> done;
    for (Agent* a : active_) {
      a->work.remaining -= dt * rate(a);
      if (a->work.remaining <= 1e-15) done.push_back(a);
    }
    active_.erase(std::remove_if(active_.begin(), active_.end(), [](const Agent* a) { return a->work.remaining <= 1e-15; }),
                  active_.end());
    for (Agent* a : done) Finish(a);
  }

  void Finish(Agent* a) {
    a->busy = false;
    if (timeline_ && now_ > a->started)
      timeline_->Add(a->work.name, a->work.category, RowOf(a), a->started * 1e6, (now_ - a->started) * 1e6);
    if (a == &compute_) {
      ComputeDone();
    } else if (a == &copy_out_) {
      chunks_[copy_out_queue_.front()].copied_out = true;
      copy_out_queue_.pop_front();
    } else if (a == &copy_back_) {
      chunks_[copy_back_queue_.front()].copied_back = true;
      copy_back_queue_.pop_front();
    }
  }

  int RowOf(const Agent* a) const {
    if (a == &compute_) return 0;
    if (a == &copy_out_) return options_.threads + 1;
    if (a == &copy_back_) return options_.threads + 2;
    for (int t = 0; t < options_.threads; ++t)
      if (a == &threads_[t].agent) return t + 1;
    return 0;
  }

  const ScaleNet& net_;
  const MachineSpec& machine_;
  const ClusterShape cluster_;
  const ScaleOptions& options_;
  Timeline* timeline_;
  double cores_ = 1;

  double now_ = 0;
  std::vector<Agent*> active_;
  Agent compute_, copy_out_, copy_back_;
  std::vector<Thread> threads_;
  std::deque<int> copy_out_queue_, copy_back_queue_;
  std::deque<int> shared_queue_;  // chunks not yet taken, when the threads share one queue
  std::vector<Chunk> chunks_;
  std::vector<std::vector<std::vector<Work>>> chunk_work_;  // by bucket, by chunk
  std::vector<std::string> algorithm_;
  std::vector<int> first_reader_;  // by bucket
  std::vector<int> bucket_remaining_;  // by bucket: chunks of this iteration not yet reduced
  std::vector<int> unit_buckets_, unit_done_;
  std::vector<int> unit_reduced_;  // by layer: its buckets reduced this iteration
  uint64_t next_task_ = 0;
  int compute_step_ = 0;
  double wait_started_ = -1;
  std::vector<double> forward_start_, waited_, computed_, comm_busy_;
};

}  // namespace

ScaleResult SimulateIteration(const ScaleNet& net, const MachineSpec& machine, const ClusterShape& cluster,
                              const ScaleOptions& options, Timeline* timeline) {
  Simulation sim(net, machine, cluster, options, timeline);
  return sim.Run();
}

}  // namespace strata
