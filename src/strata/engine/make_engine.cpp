#include "strata/engine/make_engine.hpp"

#include "strata/common.hpp"
#include "strata/net.hpp"

namespace strata {

EngineKind ChooseEngine(const SolverParameter& param, const EngineSetup& setup) {
  if (param.has_pipeline_param()) {
    // K-FAC's empirical Fisher is collected by each stage's own backward; the true Fisher's sampled labels are the
    // last stage's, and their backward would have to run through every stage before the real one.
    STRATA_REQUIRE(param.type() != "KFAC" || param.kfac_param().fisher() != KfacParameter::TRUE_FISHER)
        << "pipeline_param and the K-FAC solver's true Fisher (kfac_param.fisher TRUE_FISHER, the default) together "
        << "are not supported: the sampled labels' backward would have to run through every stage (use "
        << "kfac_param { fisher: EMPIRICAL })";
    STRATA_REQUIRE(!param.has_recompute_param())
        << "recompute_param and pipeline_param together are not supported: a pipeline stage recomputes with "
        << "pipeline_param { activations: RECOMPUTE }";
    STRATA_REQUIRE(param.blob_lifetime() != SolverParameter::FREE_AFTER_USE)
        << "blob_lifetime FREE_AFTER_USE and pipeline_param together are not supported: a pipeline stage holds its "
        << "micro-batches' activations itself (pipeline_param { activations })";
    STRATA_REQUIRE(setup.comm != nullptr)
        << "pipeline_param needs the ranks of an MPI job (strata train under mpirun), which this run was not given";
    return EngineKind::kPipeline;
  }
  // Several ranks (or a timeline, which only this engine records on one rank): the data-parallel engine.
  if (setup.comm && (setup.comm->size() > 1 || !setup.options.timeline_file.empty())) return EngineKind::kDataParallel;
  return EngineKind::kLocal;
}

template <typename Dtype>
EngineFactory<Dtype>::EngineFactory(const SolverParameter& param, const EngineSetup& setup)
    : param_(param), setup_(setup), kind_(ChooseEngine(param, setup)) {
  if (kind_ == EngineKind::kPipeline) {
    pipeline_ = std::make_unique<PipelineStagePlan>(PlanPipelineStage<Dtype>(param, *setup.comm));
  }
}

template <typename Dtype>
void EngineFactory<Dtype>::BuildNets(const std::function<Net<Dtype>*(const DataShard&)>& build) {
  if (!pipeline_) {
    build(setup_.comm ? DataShard{setup_.comm->rank(), setup_.comm->size()} : setup_.data_shard);
    return;
  }
  const PipelineGrid& grid = pipeline_->grid;
  // The stage's nets read the data shard of their replica.
  const DataShard shard{grid.replica, grid.replicas};
  if (grid.first() && pipeline_->nets.source.layer_size() > 0) {
    // Seeded as the whole net was, so the data layers (which come first) draw the same seeds.
    if (param_.random_seed() >= 0) Strata::set_random_seed(static_cast<uint64_t>(param_.random_seed()));
    source_ = std::make_unique<Net<Dtype>>(pipeline_->nets.source, shard);
  }
  Net<Dtype>* net = build(shard);
  if (!net->learnable_params().empty()) net->CopyTrainedLayersFrom(pipeline_->initial);
}

template <typename Dtype>
std::unique_ptr<TrainingEngine<Dtype>> EngineFactory<Dtype>::MakeEngine(
    Net<Dtype>* net, const std::vector<std::shared_ptr<Net<Dtype>>>& test_nets, Optimizer<Dtype>* optimizer) {
  switch (kind_) {
    case EngineKind::kDataParallel:
      return std::make_unique<DataParallelEngine<Dtype>>(net, optimizer, param_, *setup_.comm, setup_.policy,
                                                         setup_.options);
    case EngineKind::kPipeline: {
      std::vector<Net<Dtype>*> tests;
      for (const auto& t : test_nets) tests.push_back(t.get());
      return std::make_unique<PipelineEngine<Dtype>>(net, tests, optimizer, *setup_.comm, setup_.policy, *pipeline_,
                                                     std::move(source_), setup_.options);
    }
    case EngineKind::kLocal:
      break;
  }
  return std::make_unique<LocalEngine<Dtype>>(net, optimizer, param_.iter_size());
}

template class EngineFactory<float>;
template class EngineFactory<double>;

}  // namespace strata
