// MakeEngine: which TrainingEngine runs a training job, and building it: the one place that chooses, for the tools,
// the tests and the loop alike.
//
//   one process (no communicator)                  LocalEngine
//   pipeline_param in the solver                   PipelineEngine: the nets cut into stages across the ranks
//   more than one rank (or a --timeline)           DataParallelEngine
//
// A pipeline stage's nets are its cut of the solver's nets, so the engine is built in steps around the loop's
// nets: EngineFactory chooses (refusing what the engine cannot run) and plans a pipeline's stages, the loop builds
// its nets from net_param() inside BuildNets, then MakeEngine builds the engine on those nets and the optimizer.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/comm/communicator.hpp"
#include "strata/comm/hybrid_allreduce.hpp"
#include "strata/engine/data_parallel_engine.hpp"
#include "strata/engine/pipeline_engine.hpp"
#include "strata/engine/training_engine.hpp"
#include "strata/optimizer.hpp"

namespace strata {

// How a training job runs beside its nets and optimizer: its ranks and how they communicate.
struct EngineSetup {
  const Communicator* comm = nullptr;  // null: one process
  AllreducePolicy policy = AllreducePolicy::from_name("hybrid");
  DataParallelOptions options;         // options.timeline_file: a Chrome trace (data-parallel and pipeline engines)
  // The share of the data the nets read when there is no communicator (a caller that installs a data-parallel
  // engine of its own); with one, EngineFactory derives it from the ranks.
  DataShard data_shard;
};

enum class EngineKind { kLocal, kDataParallel, kPipeline };

// Which engine runs `param` under `setup`. Combinations that cannot run are refused here, before any net is built,
// with one message naming both settings (pipeline_param with K-FAC, clip_gradients, recompute_param, blob_lifetime
// FREE_AFTER_USE or loss_scale, or without MPI ranks).
EngineKind ChooseEngine(const SolverParameter& param, const EngineSetup& setup);

template <typename Dtype>
class EngineFactory {
 public:
  // Chooses the engine (ChooseEngine); a pipeline plans its stages here (collective over setup.comm).
  EngineFactory(const SolverParameter& param, const EngineSetup& setup);
  // What the loop builds its nets from: the solver parameter itself, or a pipeline stage's cut of its nets.
  const SolverParameter& net_param() const { return pipeline_ ? pipeline_->param : param_; }
  // Runs `build` (the loop building its train and test nets; returns the train net) with the shard their data layers
  // read: a pipeline stage's replica (its nets then start from the whole net's initial weights), else the
  // communicator's rank of its size, else setup.data_shard.
  void BuildNets(const std::function<Net<Dtype>*(const DataShard&)>& build);
  // The engine on the loop's nets and optimizer (once).
  std::unique_ptr<TrainingEngine<Dtype>> MakeEngine(Net<Dtype>* net,
                                                    const std::vector<std::shared_ptr<Net<Dtype>>>& test_nets,
                                                    Optimizer<Dtype>* optimizer);

 private:
  SolverParameter param_;
  EngineSetup setup_;
  EngineKind kind_;
  std::unique_ptr<PipelineStagePlan> pipeline_;
  std::unique_ptr<Net<Dtype>> source_;  // a pipeline's stage 0: the net of its data layers
};

}  // namespace strata
