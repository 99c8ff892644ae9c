// K-FAC (solver type "KFAC"; docs/kfac.md): SGD on the natural gradient, with the Fisher of every InnerProduct
// and Convolution layer approximated by a Kronecker product of two small factors (KfacBlock). KfacPreconditioner
// is the optimizer's stage before the SGD rule (Optimizer::set_stage). One iteration:
//
//   forward   every factor_interval-th iteration, the after-forward hooks collect A from each block's input
//   [TRUE_FISHER: one more backward with labels sampled from the model's softmax, for G only]
//   backward  the before-backward hooks collect G from each block's output gradient
//   update    (Optimizer::Apply, with the whole gradient reduced across ranks, scaled to the mean and clipped)
//             factors: reduced to each block's owner (or to every rank) and folded into running averages
//             inverses: every inverse_interval-th iteration, by each block's owner
//             precondition: each owner its blocks' gradients; an allgather gives every rank every block's
//             KL clip; then the optimizer's weight decay and momentum SGD on the preconditioned gradient
//
// Owners are assigned once, greedily by the d^3 cost of each block's inversion, so that the ranks' shares of the
// inversion and preconditioning work come out even (the seed's model parallelism after the data parallelism).
// Blocks of other layers (BatchNorm, Scale, a bias without weights) get the plain gradient.
//
// The running factors and inverses are in the solverstate (SaveState), so a resumed run goes on exactly.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "strata/solvers/kfac_block.hpp"
#include "strata/optimizer.hpp"

namespace strata {

template <typename Dtype>
class KfacPreconditioner : public GradientStage<Dtype> {
 public:
  // Finds the blocks of `net` and attaches the statistics hooks to it. Errors: bad kfac_param settings, TRUE_FISHER
  // on a net it cannot run.
  KfacPreconditioner(const SolverParameter& param, Net<Dtype>* net);
  ~KfacPreconditioner() override;
  const char* type() const override { return "KFAC"; }

  void BeginIteration(int iter) override { iter_ = iter; }
  void BeforeBackward(int pass) override;
  bool in_statistics_pass() const override { return statistics_pass_; }
  // On factor iterations, the batch's factors reduced across the ranks (to each block's owner, or to every rank):
  // whether every one is finite. The output gradients they are made of carry the loss scale, which divides out.
  bool ReduceStatistics(int iter) override;
  // Folds the iteration's factors, inverts where due and preconditions every block's gradient (the steps above).
  void Precondition(Dtype rate, int iter, Dtype gradient_scale) override;
  void set_collectives(Collectives* collectives) override { collectives_ = collectives; }
  // A pipeline stage's other parts of the model: the KL clip's trust region spans the whole model, and a snapshot
  // holds every stage's blocks.
  void set_model_parts(Collectives* parts) override { model_parts_ = parts; }
  // A pipeline stage's copies of its net: their backwards collect factors as the net's do.
  void AddNetCopy(Net<Dtype>* copy) override;
  void RemoveNetCopy(Net<Dtype>* copy) override;
  // The running factors and inverses of every block (each from the rank that owns it) and each rank's
  // TRUE_FISHER engine; restored, a rank takes the blocks it owns and its own engine. A pipeline stage saves its
  // own blocks (the loop merges the stages') and restores its own from the whole net's.
  void SaveState(SolverState* state) override;
  void RestoreState(const SolverState& state, const std::string& origin) override;
  // Per layer: collecting its blocks' factors (per pass), packing and folding them, inverting and preconditioning
  // (per update), each divided by how often it runs (factor_interval, inverse_interval), and the blocks' bytes. As
  // one rank does them: with distribute_inverses a stage's replicas share the inversions and preconditioning.
  typename GradientStage<Dtype>::LayerCosts MeasureLayerCosts(int passes) override;

  const std::vector<std::unique_ptr<KfacBlock<Dtype>>>& blocks() const { return blocks_; }
  // The rank that inverts and preconditions block b (0 on one rank or when every rank does every block).
  int owner(int b) const { return owners_.empty() ? 0 : owners_[b]; }
  // The damping of iteration `iter` (the warm-up schedule).
  double DampingAt(int iter) const;

  // Milliseconds spent on K-FAC's own work since construction, for the overhead table.
  struct Times {
    double factors_ms = 0, true_fisher_ms = 0, inverses_ms = 0, precondition_ms = 0, communication_ms = 0;
  };
  const Times& times() const { return times_; }

 private:
  void FindBlocks();
  bool Collecting() const;
  // From the backward of layer `layer_id` of `net` (net_ or a copy of it).
  void CollectFactors(const Net<Dtype>& net, int layer_id);
  // The steps on the solver's device: M is kfac_math.hpp's CpuKfacMath or GpuKfacMath.
  template <typename M>
  void CollectFactorsOn(M m, const Net<Dtype>& net, int layer_id);
  void AssignOwners();
  // Packs the fresh factors and reduces them across the ranks; whether they are all finite (agreed by the ranks).
  bool ReduceFactors();
  // Folds the reduced factors into each owned block's running averages.
  void FoldFactors();
  void PreconditionAll(Dtype rate, Dtype gradient_scale);
  // What the KL clip scales every update by, from this part's sum of lr^2 <v, g> (summed over the model's parts).
  double KlClipScale(double vg);
  void LogTimes(int iter);
  // On the GPU the host reaches a part when its work is launched, not done: the last iteration of each display
  // window synchronises the device around every part, adding it to synced_ too (returned then, else null), and
  // LogTimes reports that iteration.
  Times* Synced();
  // Inner products whose gradient is cheaper to precondition through its factors dy^T [x 1]
  // (KfacBlock::PreconditionFactored): which, with every rank's rows of x and dy (on the solver's device).
  struct Factored {
    int rows = 0;  // over all ranks; 0: precondition D itself
    const Dtype* x = nullptr;
    const Dtype* dy = nullptr;
    Dtype dy_scale = 1;  // what dy is still to be scaled by, as the solver scaled the summed gradient
  };
  template <typename M>
  void GatherFactoredInputs(M m, Dtype gradient_scale);
  // Preconditions block b's gradient through its factors if GatherFactoredInputs chose it; false if not.
  bool FactoredPrecondition(int b, Dtype* v);
  bool Owns(int b) const;

  SolverParameter param_;
  KfacParameter kp_;
  Net<Dtype>* net_;
  std::vector<Net<Dtype>*> copies_;  // AddNetCopy's
  Collectives* collectives_ = nullptr;
  Collectives* model_parts_ = nullptr;
  int iter_ = 0;                  // the iteration whose statistics the hooks collect
  int reduced_iter_ = -1;         // the iteration whose factors factor_buffer_ holds reduced
  bool reduced_finite_ = true;    // and whether they are all finite
  bool statistics_pass_ = false;
  std::vector<std::unique_ptr<KfacBlock<Dtype>>> blocks_;
  std::vector<std::vector<int>> blocks_of_layer_;
  std::vector<int> collected_iter_;   // the iteration each block last collected its factors in
  std::vector<int> owners_;           // empty until the first update
  std::vector<int> order_;            // the blocks by owner: the layout of the factor and update buffers
  bool distributed_ = false;          // owners differ (several ranks and distribute_inverses)
  std::vector<int> softmax_losses_;   // SoftmaxWithLoss layers, for TRUE_FISHER
  std::mt19937 fisher_rng_;
  bool fisher_rng_seeded_ = false;
  std::vector<std::unique_ptr<Blob<Dtype>>> kept_diffs_;  // the gradients around a later pass's true-Fisher backward
  // On the solver's device: packed factors, preconditioned and plain gradients (as block matrices), and the
  // gathered rows of x and dy of the factored blocks.
  Blob<Dtype> factor_buffer_, update_buffer_, gradient_buffer_, factored_inputs_;
  std::vector<Dtype> factored_buffer_;  // on the host, for the allgather
  std::vector<Factored> factored_;
  Times times_;
  std::vector<double>* layer_factors_ms_ = nullptr;  // while MeasureLayerCosts runs: CollectFactors's time per layer
  Times reported_;  // times_ as the last progress line found them
  Times synced_, synced_reported_;  // the GPU's synchronised iterations alone, and as last reported
};

}  // namespace strata
