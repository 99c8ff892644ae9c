#include "strata/engine/training_engine.hpp"

#include "strata/common.hpp"
#include "strata/net.hpp"
#include "strata/solver.hpp"

namespace strata {

SignalAction ParseSignalAction(const std::string& name) {
  if (name == "stop") return SignalAction::kStop;
  if (name == "snapshot") return SignalAction::kSnapshot;
  if (name == "none") return SignalAction::kNone;
  STRATA_FAIL() << "unknown signal effect '" << name << "' (expected stop, snapshot or none)";
  return SignalAction::kNone;
}

template <typename Dtype>
const std::vector<Blob<Dtype>*>& TrainingEngine<Dtype>::TestForward(Net<Dtype>& net, Dtype* loss) {
  return net.Forward(loss);
}

template <typename Dtype>
void TrainingEngine<Dtype>::TrainForward(Net<Dtype>& net, Dtype* loss) {
  net.Forward(loss);
}

// The solver has set `rate` and `iter` as its current ones; ApplyUpdate reads them there.
template <typename Dtype>
Dtype LocalEngine<Dtype>::Iterate(Dtype rate, int iter) {
  Net<Dtype>& net = *solver_->net();
  if (!solver_->gradients_zeroed()) net.ClearParamDiffs();
  const int passes = solver_->param().iter_size();
  Dtype loss = 0;
  for (int pass = 0; pass < passes; ++pass) {
    Dtype l = 0;
    net.Forward(&l);
    solver_->BeforeBackward(pass);
    net.Backward();
    loss += l;
    // A signal is honoured within one micro-batch, whatever iter_size is: the iteration is dropped, not applied.
    if (pass + 1 < passes && solver_->StopRequestedInIteration()) return loss / (pass + 1);
  }
  loss /= passes;
  solver_->CheckLoss(loss);
  solver_->ApplyUpdate();
  return loss;
}

STRATA_INSTANTIATE_CLASS(TrainingEngine);
STRATA_INSTANTIATE_CLASS(LocalEngine);

}  // namespace strata
