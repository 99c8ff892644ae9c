// PlanPipelineStage: the first job of a pipeline job, before the loop builds its nets: which stage this rank runs,
// and that stage's train and test nets, cut from the whole net (pipeline_plan.hpp does the cutting; this builds the
// whole net once to learn what the cutting needs). PipelineEngine (pipeline_engine.hpp) then runs the stage.
#pragma once

#include <string>
#include <vector>

#include "strata/comm/communicator.hpp"
#include "strata/engine/pipeline_plan.hpp"
#include "strata/proto/strata.pb.h"

namespace strata {

// A test net's cut, and the blobs this rank's stage of it sends on.
struct TestStage {
  StageCut cut;
  std::vector<std::string> send_blobs;
};

// This rank's stage of a pipeline job, planned before the loop builds its nets: the whole train net is built once
// (with the solver's random_seed, so the weights start as one rank's would) to learn its shapes, weights and, when
// pipeline_param names no cuts, its layer times (pipeline_param.plan_passes, averaged over the ranks) and sizes
// for the planner (PlanCuts); then the stage's nets are cut. Collective over `comm`. Errors (one clear message
// each): stages x replicas not the rank count, a bad cut, more stages than layers.
struct PipelineStagePlan {
  SolverParameter param;   // the solver on this stage's nets: the train net and the test nets cut
  PipelineGrid grid;
  StageCut cut;            // the train net's cut
  StageNets nets;          // this stage's train nets
  std::vector<TestStage> tests;  // tests[i] goes with test net i
  NetParameter initial;    // the whole net's initial weights, which the stage's net starts from
};
template <typename Dtype>
PipelineStagePlan PlanPipelineStage(const SolverParameter& param, const Communicator& comm);

}  // namespace strata
