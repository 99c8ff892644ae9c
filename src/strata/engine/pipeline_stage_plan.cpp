#include "strata/engine/pipeline_stage_plan.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>

#include "strata/engine/layer_timing.hpp"
#include "strata/net.hpp"
#include "strata/optimizer.hpp"
#include "strata/solver_param.hpp"
#include "strata/util/io.hpp"

namespace strata {

namespace {

// What the planner (PlanCuts) weighs, per layer of `filtered` (split layers are not in it; they are left out).
struct LayerLoads {
  std::vector<double> ms;        // per pass: forward + backward, and the optimizer stage's work (stage_ms)
  std::vector<double> stage_ms;  // per pass: what the stage's passes collect, and its update spread over them
  std::vector<double> bytes;     // the parameters, the outputs of one micro-batch and the stage's own state
};

// The whole net's layer times (engine/layer_timing.hpp) and sizes, with the work of the optimizer's stage before
// its rule (K-FAC's factors, inversions and preconditioning: GradientStage::MeasureLayerCosts), whose per-update
// share is spread over the update's `micro_batches`. Times are averaged over the ranks of `world`, so that every
// rank plans the same cuts.
template <typename Dtype>
LayerLoads MeasureLayerLoads(Net<Dtype>& net, const NetParameter& filtered, const SolverParameter& param,
                             int passes, MPI_Comm world) {
  LayerTimingOptions o;
  o.iterations = passes;
  const LayerTimes t = MeasureLayerTimes(net, o);
  typename GradientStage<Dtype>::LayerCosts stage;
  {
    const std::unique_ptr<Optimizer<Dtype>> optimizer = OptimizerRegistry<Dtype>::Create(param, &net);
    if (optimizer->stage()) stage = optimizer->stage()->MeasureLayerCosts(passes);
  }
  const size_t n = static_cast<size_t>(filtered.layer_size());
  const double micro_batches = std::max(1, param.iter_size());
  LayerLoads loads{std::vector<double>(n, 0), std::vector<double>(n, 0), std::vector<double>(n, 0)};
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = filtered.layer(static_cast<int>(i)).name();
    if (!net.has_layer(name)) continue;
    const size_t l = static_cast<size_t>(net.layer_index(name));
    loads.ms[i] = t.fwd_ms[l] + t.bwd_ms[l];
    if (!stage.per_pass_ms.empty()) loads.stage_ms[i] = stage.per_pass_ms[l] + stage.per_update_ms[l] / micro_batches;
    double b = 0;
    for (const auto& p : net.layers()[l]->blobs()) b += static_cast<double>(p->count());
    for (const Blob<Dtype>* top : net.top_vecs()[l]) b += static_cast<double>(top->count());
    loads.bytes[i] = b * sizeof(Dtype) + (stage.bytes.empty() ? 0 : stage.bytes[l]);
  }
  int ranks = 1;
  MPI_Comm_size(world, &ranks);
  for (std::vector<double>* v : {&loads.ms, &loads.stage_ms}) {
    MPI_Allreduce(MPI_IN_PLACE, v->data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, world);
    for (double& x : *v) x /= ranks;
  }
  for (size_t i = 0; i < n; ++i) loads.ms[i] += loads.stage_ms[i];
  return loads;
}

// Milliseconds per byte on each link between neighbouring stages (replica 0's ranks): messages of `bytes` there and
// back, the fastest of 3 after one untimed. What the planner charges a cut for what crosses it; every rank gets
// every link's.
std::vector<double> MeasureLinks(const PipelineGrid& grid, double bytes, MPI_Comm world) {
  const int size = static_cast<int>(std::clamp(bytes, 65536.0, 16777216.0));  // 64 KiB to 16 MiB
  std::vector<char> buffer(static_cast<size_t>(size));
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  const int tag = 7301;
  std::vector<double> ms_per_byte(static_cast<size_t>(grid.stages) - 1, 0);
  for (int s = 0; s + 1 < grid.stages; ++s) {
    const int a = grid.RankOf(s, 0), b = grid.RankOf(s + 1, 0);
    if (rank != a && rank != b) continue;
    const int other = rank == a ? b : a;
    double best = std::numeric_limits<double>::infinity();
    for (int rep = 0; rep < 4; ++rep) {
      const double t0 = MPI_Wtime();
      if (rank == a) STRATA_MPI_CHECK(MPI_Send(buffer.data(), size, MPI_CHAR, other, tag, world));
      STRATA_MPI_CHECK(MPI_Recv(buffer.data(), size, MPI_CHAR, other, tag, world, MPI_STATUS_IGNORE));
      if (rank == b) STRATA_MPI_CHECK(MPI_Send(buffer.data(), size, MPI_CHAR, other, tag, world));
      if (rep > 0) best = std::min(best, MPI_Wtime() - t0);
    }
    if (rank == a) ms_per_byte[static_cast<size_t>(s)] = best * 1000 / 2 / size;
  }
  MPI_Allreduce(MPI_IN_PLACE, ms_per_byte.data(), static_cast<int>(ms_per_byte.size()), MPI_DOUBLE, MPI_MAX, world);
  return ms_per_byte;
}

std::map<std::string, std::vector<int>> ShapesOf(const std::vector<std::string>& names,
                                                 const std::vector<std::vector<int>>& shapes) {
  std::map<std::string, std::vector<int>> out;
  for (size_t i = 0; i < names.size(); ++i) out[names[i]] = shapes[i];
  return out;
}

template <typename Dtype>
std::map<std::string, std::vector<int>> BlobShapes(const Net<Dtype>& net) {
  std::vector<std::vector<int>> shapes;
  for (const auto& b : net.blobs()) shapes.push_back(b->shape());
  return ShapesOf(net.blob_names(), shapes);
}

// A test net's stage 0 runs its data layers inline (one batch at a time): the source layers, then the compute
// layers without the Input layer that would receive their outputs.
NetParameter InlineSources(const StageNets& nets) {
  NetParameter merged = nets.compute;
  merged.clear_layer();
  for (const auto& l : nets.source.layer()) *merged.add_layer() = l;
  for (int i = 0; i < nets.compute.layer_size(); ++i) {
    if (i == 0 && nets.compute.layer(0).type() == "Input" && nets.source.layer_size() > 0) continue;
    *merged.add_layer() = nets.compute.layer(i);
  }
  return merged;
}

}  // namespace

template <typename Dtype>
PipelineStagePlan PlanPipelineStage(const SolverParameter& param, const Communicator& comm) {
  const PipelineParameter& pp = param.pipeline_param();
  const PipelineGrid grid = PipelineGrid::Of(pp, comm.rank(), comm.size());

  // The whole train net, as one rank would build it: its shapes, its initial weights, its layer times.
  NetParameter train = TrainNetParam(param);
  UpgradeV1Net(&train);
  NetParameter filtered;
  Net<Dtype>::FilterNet(train, &filtered);
  std::map<std::string, std::vector<int>> shapes;
  NetParameter initial;
  std::vector<std::string> cuts(pp.cut().begin(), pp.cut().end());
  {
    if (param.random_seed() >= 0) Strata::set_random_seed(static_cast<uint64_t>(param.random_seed()));
    Net<Dtype> whole(train);
    shapes = BlobShapes(whole);
    whole.ToProto(&initial, false);
    if (cuts.empty() && grid.stages > 1) {
      const LayerLoads loads = MeasureLayerLoads(whole, filtered, param,
                                                 static_cast<int>(std::max(1u, pp.plan_passes())), comm.world());
      std::map<std::string, double> blob_bytes;
      for (size_t b = 0; b < whole.blobs().size(); ++b) {
        blob_bytes[whole.blob_names()[b]] = static_cast<double>(whole.blobs()[b]->count()) * sizeof(Dtype);
      }
      CutCosts links;
      links.bytes = CrossingBytes(filtered, blob_bytes);
      links.ms_per_byte =
          MeasureLinks(grid, *std::max_element(links.bytes.begin(), links.bytes.end()), comm.world());
      cuts = PlanCuts(filtered, loads.ms, loads.bytes, grid.stages, links);
      if (comm.rank() == 0) {
        std::ostringstream l;
        for (size_t s = 0; s < links.ms_per_byte.size(); ++s) {
          l << " " << s << " -> " << s + 1 << " " << 1e-6 / std::max(1e-300, links.ms_per_byte[s]) << " GB/s;";
        }
        LOG(INFO) << "Pipeline planner: the links between stages (replica 0's ranks; a cut costs each stage beside it "
                  << "what crosses it, both ways):" << l.str();
        const std::string type = OptimizerRegistry<Dtype>::TypeOf(param);
        const bool stage = std::any_of(loads.stage_ms.begin(), loads.stage_ms.end(), [](double v) { return v > 0; });
        std::ostringstream s;
        for (size_t i = 0; i < loads.ms.size(); ++i) {
          s << " " << filtered.layer(static_cast<int>(i)).name() << " " << loads.ms[i] << " ms";
          if (loads.stage_ms[i] > 0) s << " (" << type << " " << loads.stage_ms[i] << ")";
          s << " " << loads.bytes[i] / 1048576.0 << " MiB, a cut before it sends " << links.bytes[i] / 1048576.0
            << " MiB;";
        }
        LOG(INFO) << "Pipeline planner: time per pass (the mean of " << pp.plan_passes() << "; forward + backward"
                  << (stage ? " + " + type + "'s own work, its update's share spread over " +
                                  std::to_string(std::max(1, param.iter_size())) + " micro-batches"
                            : std::string())
                  << ") and memory (parameters, outputs" << (stage ? ", " + type + "'s state" : std::string())
                  << ") per layer:" << s.str();
      }
    }
  }
  const StageCut cut = CutNet(filtered, cuts);
  const StageNets nets = MakeStageNets(filtered, cut, grid.stage, shapes);
  if (comm.rank() == 0) {
    std::ostringstream s;
    for (int st = 0; st < cut.stages(); ++st) {
      const int stem = pp.reversible() ? cut.reversible_prefix(st) : -1;
      s << "\n  stage " << st
        << (stem == 0 ? " (reversible)" : stem > 0 ? " (reversible after a stem of " + std::to_string(stem) + ")" : "")
        << ":";
      for (size_t i = 0; i < cut.layers.size(); ++i) {
        if (cut.stage_of[i] == st) s << " " << cut.layers[i].name();
      }
      if (st + 1 < cut.stages()) {
        s << "\n    sends:";
        for (const auto& b : cut.cross[static_cast<size_t>(st)]) s << " " << b;
      }
    }
    LOG(INFO) << "Pipeline: " << grid.stages << " stage(s) x " << grid.replicas << " replica(s), "
              << (pp.cut_size() ? "cuts as given" : "cuts planned from measured layer times") << s.str();
  }

  // The test nets, cut like the train net.
  SolverParameter stage_param = param;
  stage_param.clear_net();
  stage_param.clear_train_net();
  stage_param.clear_train_net_param();
  stage_param.clear_test_net();
  stage_param.clear_test_net_param();
  stage_param.clear_train_state();
  stage_param.clear_test_state();
  *stage_param.mutable_net_param() = nets.compute;
  std::vector<TestStage> tests;
  for (NetParameter test : TestNetParams(param)) {
    UpgradeV1Net(&test);
    NetParameter test_filtered;
    Net<Dtype>::FilterNet(test, &test_filtered);
    TestStage t;
    t.cut = CutLike(test_filtered, cut);
    std::map<std::string, std::vector<int>> test_shapes;
    {
      Net<Dtype> whole(test);
      test_shapes = BlobShapes(whole);
    }
    const StageNets test_nets = MakeStageNets(test_filtered, t.cut, grid.stage, test_shapes);
    t.send_blobs = test_nets.send_blobs;
    *stage_param.add_test_net_param() = grid.first() ? InlineSources(test_nets) : test_nets.compute;
    tests.push_back(std::move(t));
  }
  PipelineStagePlan plan;
  plan.param = std::move(stage_param);
  plan.grid = grid;
  plan.cut = cut;
  plan.nets = nets;
  plan.tests = std::move(tests);
  plan.initial = std::move(initial);
  return plan;
}

template PipelineStagePlan PlanPipelineStage<float>(const SolverParameter&, const Communicator&);
template PipelineStagePlan PlanPipelineStage<double>(const SolverParameter&, const Communicator&);

}  // namespace strata
