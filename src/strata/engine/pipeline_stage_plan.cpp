#include "strata/engine/pipeline_stage_plan.hpp"

#include <map>

#include "strata/engine/layer_timing.hpp"
#include "strata/net.hpp"
#include "strata/solver_param.hpp"
#include "strata/util/io.hpp"

namespace strata {

namespace {

// Whole-net layer times, forward + backward per pass (engine/layer_timing.hpp), per layer of `filtered` (split
// layers are not in it; their time is left out). Averaged over the ranks of `world`, so that every rank plans the
// same cuts.
template <typename Dtype>
std::vector<double> MeasureLayerCosts(Net<Dtype>& net, const NetParameter& filtered, int passes, MPI_Comm world) {
  LayerTimingOptions o;
  o.iterations = passes;
  const LayerTimes t = MeasureLayerTimes(net, o);
  std::vector<double> cost(static_cast<size_t>(filtered.layer_size()), 0);
  for (int i = 0; i < filtered.layer_size(); ++i) {
    if (net.has_layer(filtered.layer(i).name())) {
      const size_t l = static_cast<size_t>(net.layer_index(filtered.layer(i).name()));
      cost[static_cast<size_t>(i)] = t.fwd_ms[l] + t.bwd_ms[l];
    }
  }
  int ranks = 1;
  MPI_Comm_size(world, &ranks);
  MPI_Allreduce(MPI_IN_PLACE, cost.data(), static_cast<int>(cost.size()), MPI_DOUBLE, MPI_SUM, world);
  for (double& c : cost) c /= ranks;
  return cost;
}

// Each layer of `filtered`'s parameter bytes and output bytes (one micro-batch) in the whole net: what a stage
// holding it holds at least.
template <typename Dtype>
std::vector<double> LayerBytes(const Net<Dtype>& net, const NetParameter& filtered) {
  std::vector<double> bytes(static_cast<size_t>(filtered.layer_size()), 0);
  for (int i = 0; i < filtered.layer_size(); ++i) {
    const std::string& name = filtered.layer(i).name();
    if (!net.has_layer(name)) continue;
    const int l = net.layer_index(name);
    double b = 0;
    for (const auto& p : net.layers()[static_cast<size_t>(l)]->blobs()) b += static_cast<double>(p->count());
    for (const Blob<Dtype>* top : net.top_vecs()[static_cast<size_t>(l)]) b += static_cast<double>(top->count());
    bytes[static_cast<size_t>(i)] = b * sizeof(Dtype);
  }
  return bytes;
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
      const std::vector<double> cost =
          MeasureLayerCosts(whole, filtered, static_cast<int>(std::max(1u, pp.plan_passes())), comm.world());
      const std::vector<double> bytes = LayerBytes(whole, filtered);
      cuts = PlanCuts(filtered, cost, bytes, grid.stages);
      if (comm.rank() == 0) {
        std::ostringstream s;
        for (int i = 0; i < filtered.layer_size(); ++i) {
          s << " " << filtered.layer(i).name() << " " << cost[static_cast<size_t>(i)] << " ms "
            << bytes[static_cast<size_t>(i)] / 1048576.0 << " MiB;";
        }
        LOG(INFO) << "Pipeline planner: forward + backward time per pass (the mean of " << pp.plan_passes()
                  << "), parameters and outputs per layer:" << s.str();
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
