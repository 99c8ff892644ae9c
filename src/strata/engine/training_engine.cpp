#include "strata/engine/training_engine.hpp"

#include <cmath>

#include "strata/common.hpp"
#include "strata/net.hpp"
#include "strata/optimizer.hpp"

namespace strata {

SignalAction ParseSignalAction(const std::string& name) {
  if (name == "stop") return SignalAction::kStop;
  if (name == "snapshot") return SignalAction::kSnapshot;
  if (name == "none") return SignalAction::kNone;
  STRATA_FAIL() << "unknown signal effect '" << name << "' (expected stop, snapshot or none)";
  return SignalAction::kNone;
}

void RequireFiniteLoss(double loss, int iter) {
  if (!std::isfinite(loss)) {
    STRATA_FAIL() << "the loss is " << loss << " at iteration " << iter
                  << "; training stopped (lower base_lr, or check the data)";
  }
}

template <typename Dtype>
const std::vector<Blob<Dtype>*>& TrainingEngine<Dtype>::TestForward(Net<Dtype>& net, Dtype* loss) {
  return net.Forward(loss);
}

template <typename Dtype>
void TrainingEngine<Dtype>::TrainForward(Net<Dtype>& net, Dtype* loss) {
  net.Forward(loss);
}

template <typename Dtype>
Dtype LocalEngine<Dtype>::Iterate(Dtype rate, int iter) {
  optimizer_->BeginIteration(iter);
  if (!optimizer_->gradients_zeroed()) net_->ClearParamDiffs();
  this->iteration_dropped_ = false;
  Dtype loss = 0;
  for (int pass = 0; pass < iter_size_; ++pass) {
    Dtype l = 0;
    net_->Forward(&l);
    optimizer_->BeforeBackward(pass);
    net_->Backward();
    loss += l;
    // A signal is honoured within one micro-batch, whatever iter_size is: the iteration is dropped, not applied.
    if (pass + 1 < iter_size_ && this->StopRequested()) {
      this->iteration_dropped_ = true;
      return loss / (pass + 1);
    }
  }
  loss /= iter_size_;
  RequireFiniteLoss(loss, iter);
  optimizer_->Apply(rate, iter);
  return loss;
}

STRATA_INSTANTIATE_CLASS(TrainingEngine);
STRATA_INSTANTIATE_CLASS(LocalEngine);

}  // namespace strata
