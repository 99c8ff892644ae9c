#include "strata/solvers/kfac_preconditioner.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <sstream>
#include <string>

#include "strata/layers/convolution_layer.hpp"
#include "strata/comm/collectives.hpp"
#include "strata/device.hpp"
#include "kfac_math.hpp"
#include "strata/math_functions.hpp"
#include "strata/solvers/sgd_optimizers.hpp"

namespace strata {

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The time once the device has finished what was launched (a span between two holds its device work).
double synced_now_ms() {
  if (Strata::mode() == Strata::GPU) gpu_synchronize();
  return now_ms();
}

// Adds the milliseconds since it was made to `part` of *total when it goes out of scope, and of *synced when that is
// given, with the device synchronised at both ends so that the span holds the part's own device work.
template <typename Times>
class Stopwatch {
 public:
  Stopwatch(double Times::*part, Times* total, Times* synced) : part_(part), total_(total), synced_(synced) {
    if (synced_) gpu_synchronize();
    t0_ = now_ms();
  }
  ~Stopwatch() {
    if (synced_) gpu_synchronize();
    const double ms = now_ms() - t0_;
    total_->*part_ += ms;
    if (synced_) synced_->*part_ += ms;
  }

 private:
  double Times::*part_;
  Times* total_;
  Times* synced_;
  double t0_ = 0;
};

// The blocks in the rank order of their owners: how the buffers of the reduce-scatter and the allgather are laid
// out, each rank's blocks one contiguous share.
std::vector<int> owner_order(const std::vector<int>& owners) {
  std::vector<int> order(owners.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return owners[x] < owners[y]; });
  return order;
}

}  // namespace

template <typename Dtype>
KfacPreconditioner<Dtype>::KfacPreconditioner(const SolverParameter& param, Net<Dtype>* net)
    : param_(param), kp_(param.kfac_param()), net_(net) {
  STRATA_REQUIRE(kp_.damping() > 0) << "kfac_param.damping must be positive, got " << kp_.damping();
  STRATA_REQUIRE(!kp_.has_damping_start() || kp_.damping_start() > 0)
      << "kfac_param.damping_start must be positive, got " << kp_.damping_start();
  STRATA_REQUIRE(kp_.damping_warmup_iters() >= 0)
      << "kfac_param.damping_warmup_iters must not be negative, got " << kp_.damping_warmup_iters();
  STRATA_REQUIRE(kp_.factor_decay() >= 0 && kp_.factor_decay() < 1)
      << "kfac_param.factor_decay must be in [0, 1), got " << kp_.factor_decay();
  STRATA_REQUIRE(kp_.factor_interval() > 0) << "kfac_param.factor_interval must be positive, got "
                                            << kp_.factor_interval();
  STRATA_REQUIRE(kp_.inverse_interval() > 0) << "kfac_param.inverse_interval must be positive, got "
                                             << kp_.inverse_interval();
  STRATA_REQUIRE(kp_.kl_clip() >= 0) << "kfac_param.kl_clip must not be negative (0 turns it off), got "
                                     << kp_.kl_clip();
  STRATA_REQUIRE(kp_.max_factor_dim() > 0) << "kfac_param.max_factor_dim must be positive, got "
                                           << kp_.max_factor_dim();
  STRATA_REQUIRE(kp_.split_damping() || kp_.inverse_method() == KfacParameter::EIGEN)
      << "kfac_param: inverse_method CHOLESKY needs split_damping: true (the unsplit damping needs the "
      << "factors' eigenbases; use inverse_method: EIGEN)";
  FindBlocks();
  if (kp_.fisher() == KfacParameter::TRUE_FISHER) {
    for (int i = 0; i < net->num_layers(); ++i) {
      const std::string type = net->layers()[i]->type();
      if (type == "SoftmaxWithLoss") softmax_losses_.push_back(i);
    }
    STRATA_REQUIRE(!softmax_losses_.empty())
        << "kfac_param.fisher TRUE_FISHER samples labels from a SoftmaxWithLoss layer, and the net has none; "
        << "use fisher: EMPIRICAL";
  }
  collected_iter_.assign(blocks_.size(), -1);
  net->add_before_backward_hook([this](int layer_id) { CollectFactors(*net_, layer_id); }, this);
}

template <typename Dtype>
KfacPreconditioner<Dtype>::~KfacPreconditioner() {
  net_->RemoveHooks(this);
  for (Net<Dtype>* copy : copies_) copy->RemoveHooks(this);
}

template <typename Dtype>
void KfacPreconditioner<Dtype>::AddNetCopy(Net<Dtype>* copy) {
  CHECK_EQ(copy->num_layers(), net_->num_layers()) << "K-FAC: a net copy with other layers";
  copies_.push_back(copy);
  copy->add_before_backward_hook([this, copy](int layer_id) { CollectFactors(*copy, layer_id); }, this);
}

template <typename Dtype>
void KfacPreconditioner<Dtype>::RemoveNetCopy(Net<Dtype>* copy) {
  copy->RemoveHooks(this);
  copies_.erase(std::remove(copies_.begin(), copies_.end(), copy), copies_.end());
}

template <typename Dtype>
void KfacPreconditioner<Dtype>::FindBlocks() {
  Net<Dtype>* net = net_;
  blocks_of_layer_.assign(net->num_layers(), {});
  const auto& learnable = net->learnable_params();
  // A layer's blob is its learnable param only when it owns it; a layer that shares its weights gets SGD.
  const auto learnable_id = [&](Blob<Dtype>* blob) {
    const auto it = std::find(learnable.begin(), learnable.end(), blob);
    return it == learnable.end() ? -1 : static_cast<int>(it - learnable.begin());
  };
  for (int L = 0; L < net->num_layers(); ++L) {
    Layer<Dtype>* layer = net->layers()[L].get();
    const std::string type = layer->type();
    if ((type != "InnerProduct" && type != "Convolution") || layer->blobs().empty()) continue;
    typename KfacBlock<Dtype>::Shape s;
    s.layer_id = L;
    s.weight_param = learnable_id(layer->blobs()[0].get());
    if (layer->blobs().size() > 1) {
      s.bias = true;
      s.bias_param = learnable_id(layer->blobs()[1].get());
    }
    if (s.weight_param < 0 || (s.bias && s.bias_param < 0) || net->params_lr()[s.weight_param] == 0) {
      LOG(INFO) << "K-FAC: layer '" << net->layer_names()[L] << "' shares or freezes its weights: plain gradient";
      continue;
    }
    const Blob<Dtype>& w = *layer->blobs()[0];
    if (type == "InnerProduct") {
      const InnerProductParameter& ip = layer->layer_param().inner_product_param();
      s.kind = KfacBlock<Dtype>::Kind::kInnerProduct;
      s.name = net->layer_names()[L];
      s.outputs = static_cast<int>(ip.num_output());
      s.inputs = w.count() / s.outputs;
      s.transpose = ip.transpose();
      blocks_of_layer_[L].push_back(static_cast<int>(blocks_.size()));
      blocks_.push_back(std::make_unique<KfacBlock<Dtype>>(s, kp_.max_factor_dim()));
      continue;
    }
    const auto* conv = dynamic_cast<const ConvolutionLayer<Dtype>*>(layer);
    CHECK(conv) << "a Convolution layer that is not a ConvolutionLayer";
    s.kind = KfacBlock<Dtype>::Kind::kConvolution;
    s.groups = conv->group();
    s.outputs = conv->num_output() / s.groups;
    s.inputs = w.count() / conv->num_output();
    for (int g = 0; g < s.groups; ++g) {
      s.group = g;
      s.name = net->layer_names()[L] + (s.groups > 1 ? " group " + std::to_string(g) : "");
      blocks_of_layer_[L].push_back(static_cast<int>(blocks_.size()));
      blocks_.push_back(std::make_unique<KfacBlock<Dtype>>(s, kp_.max_factor_dim()));
    }
  }
  LOG(INFO) << "K-FAC: " << blocks_.size() << " Kronecker blocks";
}

template <typename Dtype>
double KfacPreconditioner<Dtype>::DampingAt(int iter) const {
  const int warmup = kp_.damping_warmup_iters();
  if (!kp_.has_damping_start() || warmup == 0) return kp_.damping();
  const double t = std::min(iter, warmup) / static_cast<double>(warmup);
  return kp_.damping_start() * std::pow(static_cast<double>(kp_.damping()) / kp_.damping_start(), t);
}

template <typename Dtype>
bool KfacPreconditioner<Dtype>::Collecting() const {
  return iter_ % kp_.factor_interval() == 0;
}

template <typename Dtype>
void KfacPreconditioner<Dtype>::CollectFactors(const Net<Dtype>& net, int layer_id) {
  if (blocks_of_layer_[layer_id].empty() || !Collecting()) return;
  // G from the true-Fisher backward when there is one, else from the real backward; A with it, from the inputs
  // that backward reads. So every pass of iter_size adds its samples once (as one pass over the whole batch
  // would), however often a recompute plan replays forward.
  if (in_statistics_pass() != (kp_.fisher() == KfacParameter::TRUE_FISHER)) return;
  Stopwatch watch(&Times::factors_ms, &times_, Synced());
  const double t0 = layer_factors_ms_ ? synced_now_ms() : 0;
  OnSolverDevice<Dtype>([&](auto m) { CollectFactorsOn(m, net, layer_id); });
  if (layer_factors_ms_) (*layer_factors_ms_)[static_cast<size_t>(layer_id)] += synced_now_ms() - t0;
}

template <typename Dtype>
template <typename M>
void KfacPreconditioner<Dtype>::CollectFactorsOn(M m, const Net<Dtype>& net, int layer_id) {
  const Layer<Dtype>* layer = net.layers()[layer_id].get();
  for (int b : blocks_of_layer_[layer_id]) {
    KfacBlock<Dtype>& block = *blocks_[b];
    if (collected_iter_[b] != iter_) block.ResetFresh();  // the iteration's first pass
    collected_iter_[b] = iter_;
    for (const Blob<Dtype>* bottom : net.bottom_vecs()[layer_id]) {
      if (block.shape().kind == KfacBlock<Dtype>::Kind::kInnerProduct) {
        const int axis = bottom->CanonicalAxisIndex(layer->layer_param().inner_product_param().axis());
        block.CollectInnerProductA(m.data(*bottom), bottom->count(0, axis));
      } else {
        const auto* conv = static_cast<const ConvolutionLayer<Dtype>*>(layer);
        block.CollectConvolutionA(m.data(*bottom), bottom->count(0, conv->channel_axis()), conv->geometry());
      }
    }
    // The loss is a mean over the samples: a sample's own gradient is `samples` times its share of dy, and dy is
    // the loss scale times the unscaled one (a power of two divides out exactly). The optimizer sets it on net_.
    const double unscale = 1.0 / static_cast<double>(net_->loss_scale());
    for (const Blob<Dtype>* top : net.top_vecs()[layer_id]) {
      if (block.shape().kind == KfacBlock<Dtype>::Kind::kInnerProduct) {
        const int axis = top->num_axes() - 1;  // the inner product's output is rows x num_output
        const int rows = top->count(0, axis);
        block.CollectInnerProductG(m.diff(*top), rows, static_cast<Dtype>(rows * unscale));
      } else {
        const auto* conv = static_cast<const ConvolutionLayer<Dtype>*>(layer);
        const int images = top->count(0, conv->channel_axis());
        block.CollectConvolutionG(m.diff(*top), images, conv->geometry(), conv->num_output(),
                                  static_cast<Dtype>(images * unscale));
      }
    }
  }
}

template <typename Dtype>
void KfacPreconditioner<Dtype>::BeforeBackward(int pass) {
  if (kp_.fisher() != KfacParameter::TRUE_FISHER || !Collecting() || blocks_.empty()) return;
  Stopwatch watch(&Times::true_fisher_ms, &times_, Synced());
  Net<Dtype>* net = net_;
  if (!fisher_rng_seeded_) {
    // Each rank draws its own labels for its own samples.
    const int rank = collectives_ ? collectives_->rank() : 0;
    const int64_t seed = param_.random_seed() >= 0 ? param_.random_seed() : 20161123;
    fisher_rng_.seed(static_cast<uint32_t>(seed + 7919 * rank));
    fisher_rng_seeded_ = true;
  }
  // Labels drawn from the model's own predictive distribution, the softmax of the loss layer's scores.
  std::vector<std::vector<Dtype>> saved;
  for (int L : softmax_losses_) {
    const Layer<Dtype>* layer = net->layers()[L].get();
    const Blob<Dtype>* scores = net->bottom_vecs()[L][0];
    Blob<Dtype>* labels = net->bottom_vecs()[L][1];
    const int axis = scores->CanonicalAxisIndex(layer->layer_param().softmax_param().axis());
    const int outer = scores->count(0, axis), classes = scores->shape(axis), inner = scores->count(axis + 1);
    const LossParameter& lp = layer->layer_param().loss_param();
    saved.emplace_back(labels->cpu_data(), labels->cpu_data() + labels->count());
    const Dtype* s = scores->cpu_data();
    Dtype* y = labels->mutable_cpu_data();
    std::vector<double> p(classes);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    for (int o = 0; o < outer; ++o) {
      for (int i = 0; i < inner; ++i) {
        Dtype& label = y[o * inner + i];
        if (lp.has_ignore_label() && static_cast<int>(label) == lp.ignore_label()) continue;
        const Dtype* x = s + static_cast<size_t>(o) * classes * inner + i;
        double top = -INFINITY;
        for (int c = 0; c < classes; ++c) top = std::max(top, static_cast<double>(x[c * inner]));
        double total = 0;
        for (int c = 0; c < classes; ++c) total += p[c] = std::exp(static_cast<double>(x[c * inner]) - top);
        double u = uniform(fisher_rng_) * total;
        int c = 0;
        while (c < classes - 1 && u >= p[c]) u -= p[c++];
        label = static_cast<Dtype>(c);
      }
    }
  }
  // The sampled labels' gradients are only for G: the earlier passes' gradients (iter_size) are kept around
  // this backward and put back after it, where they are (on the GPU, the device).
  const auto& params = net->learnable_params();
  if (pass > 0) {
    kept_diffs_.resize(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      if (!kept_diffs_[i]) kept_diffs_[i] = std::make_unique<Blob<Dtype>>();
      kept_diffs_[i]->CopyFrom(*params[i], true, true);
    }
  }
  // The real backward follows on the same forward: a recompute plan or blob_lifetime FREE_AFTER_USE keeps what it
  // reads (docs/kfac.md, "True or empirical Fisher").
  statistics_pass_ = true;
  net->BackwardKeepingValues();
  statistics_pass_ = false;
  for (size_t k = 0; k < softmax_losses_.size(); ++k) {
    Blob<Dtype>* labels = net->bottom_vecs()[softmax_losses_[k]][1];
    std::copy(saved[k].begin(), saved[k].end(), labels->mutable_cpu_data());
  }
  if (pass == 0) {
    net->ClearParamDiffs();
  } else {
    for (size_t i = 0; i < params.size(); ++i) params[i]->CopyFrom(*kept_diffs_[i], true);
  }
}

template <typename Dtype>
void KfacPreconditioner<Dtype>::AssignOwners() {
  const int ranks = collectives_ ? collectives_->size() : 1;
  distributed_ = ranks > 1 && kp_.distribute_inverses();
  owners_.assign(blocks_.size(), 0);
  order_ = owner_order(owners_);
  if (!distributed_) return;
  // Longest inversion first, each to the least loaded rank: every rank computes the same assignment.
  std::vector<int> order(blocks_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int x, int y) { return blocks_[x]->inverse_cost() > blocks_[y]->inverse_cost(); });
  std::vector<double> load(ranks, 0.0);
  for (int b : order) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owners_[b] = r;
    load[r] += blocks_[b]->inverse_cost();
  }
  order_ = owner_order(owners_);
  for (size_t b = 0; b < blocks_.size(); ++b) {
    LOG(INFO) << "K-FAC: block " << blocks_[b]->shape().name << " (A " << blocks_[b]->a_dim() << ", G "
              << blocks_[b]->g_dim() << ") on rank " << owners_[b];
  }
}

template <typename Dtype>
bool KfacPreconditioner<Dtype>::Owns(int b) const {
  return !distributed_ || owners_[b] == collectives_->rank();
}

template <typename Dtype>
bool KfacPreconditioner<Dtype>::ReduceStatistics(int iter) {
  CHECK_EQ(iter, iter_) << "K-FAC: the update is not for the iteration whose factors were collected";
  if (owners_.empty()) AssignOwners();
  if (blocks_.empty() || !Collecting()) return true;
  if (reduced_iter_ != iter) {
    reduced_finite_ = ReduceFactors();
    reduced_iter_ = iter;
  }
  return reduced_finite_;
}

template <typename Dtype>
bool KfacPreconditioner<Dtype>::ReduceFactors() {
  const int ranks = collectives_ ? collectives_->size() : 1;
  const std::vector<int>& order = order_;
  std::vector<int> counts(ranks, 0);
  for (int b : order) counts[owners_[b]] += blocks_[b]->packed_factor_size();
  const int total = std::accumulate(counts.begin(), counts.end(), 0);
  factor_buffer_.Reshape({total});
  {
    // Packed on the solver's device; the reduction and the running averages (double) are on the host, so on the
    // GPU the buffer's one copy to the host is what leaves the device.
    Stopwatch watch(&Times::factors_ms, &times_, Synced());
    OnSolverDevice<Dtype>([&](auto m) {
      Dtype* p = total ? m.overwritten_data(factor_buffer_) : nullptr;  // every packed value written
      for (int b : order) {
        CHECK(collected_iter_[b] == iter_)
            << "K-FAC: block " << blocks_[b]->shape().name << " collected no factors this iteration";
        blocks_[b]->PackFresh(p);
        p += blocks_[b]->packed_factor_size();
      }
    });
  }
  if (total == 0) return true;
  if (ranks > 1) {
    Stopwatch watch(&Times::communication_ms, &times_, Synced());
    if (distributed_) {
      collectives_->ReduceScatter(factor_buffer_.mutable_cpu_data(), counts);
    } else {
      collectives_->Allreduce(factor_buffer_.mutable_cpu_data(), total);
    }
  }
  // A sum holds every rank's inf or NaN; distributed, each rank has only its share, so the ranks agree on a flag.
  const int rank = distributed_ ? collectives_->rank() : 0;
  const int start = std::accumulate(counts.begin(), counts.begin() + rank, 0);
  const int share = distributed_ ? counts[rank] : total;
  bool finite = true;
  {
    Stopwatch watch(&Times::factors_ms, &times_, Synced());
    finite = cpu_all_finite(static_cast<size_t>(share), factor_buffer_.cpu_data() + start);
  }
  if (!distributed_) return finite;
  Stopwatch watch(&Times::communication_ms, &times_, Synced());
  return collectives_->AllTrue(finite);
}

template <typename Dtype>
void KfacPreconditioner<Dtype>::FoldFactors() {
  const int ranks = collectives_ ? collectives_->size() : 1;
  Stopwatch watch(&Times::factors_ms, &times_, Synced());
  const Dtype* p = factor_buffer_.count() ? factor_buffer_.cpu_data() : nullptr;
  for (int b : order_) {
    if (Owns(b)) blocks_[b]->FoldFactors(p, ranks, kp_.factor_decay());
    p += blocks_[b]->packed_factor_size();
  }
}

template <typename Dtype>
template <typename M>
void KfacPreconditioner<Dtype>::GatherFactoredInputs(M m, Dtype gradient_scale) {
  // An inner product's gradient is dy^T [x 1] summed over the batch: over every rank's batch, averaged, once
  // the engine has reduced it and the solver scaled it. With one pass and no clipping it is exactly that, and
  // where the batch is narrower than the layer, preconditioning through x and dy is cheaper than through D; on
  // several ranks the rows of x and dy (a few hundred KiB for LeNet) are gathered first, still less than the
  // gather of D itself. Every rank decides alike: same net, same shapes.
  Net<Dtype>* net = net_;
  const int ranks = collectives_ ? collectives_->size() : 1;
  factored_.assign(blocks_.size(), Factored());
  // A recompute plan (a pass runner on the net) frees activations and their gradients as backward passes them:
  // only D is left then; so where a pipeline stage's last backward ran on a copy of the net.
  if (param_.iter_size() != 1 || param_.clip_gradients() >= 0 || !kp_.split_damping() ||
      net->pass_runner() != nullptr || !copies_.empty()) {
    return;
  }
  std::vector<int> chosen;
  size_t per_rank = 0;
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const auto& shape = blocks_[b]->shape();
    if (shape.kind != KfacBlock<Dtype>::Kind::kInnerProduct || shape.transpose) continue;
    const Blob<Dtype>* x = net->bottom_vecs()[shape.layer_id][0];
    const int axis = x->CanonicalAxisIndex(net->layers()[shape.layer_id]->layer_param().inner_product_param().axis());
    const int rows = x->count(0, axis);
    if (!blocks_[b]->FactoredIsCheaper(rows * ranks)) continue;
    factored_[b].rows = rows * ranks;
    chosen.push_back(static_cast<int>(b));
    per_rank += static_cast<size_t>(rows) * (shape.inputs + shape.outputs);
  }
  const auto x_of = [&](int b) { return net->bottom_vecs()[blocks_[b]->shape().layer_id][0]; };
  const auto dy_of = [&](int b) { return net->top_vecs()[blocks_[b]->shape().layer_id][0]; };
  if (ranks == 1) {
    for (int b : chosen) {
      factored_[b].x = m.data(*x_of(b));
      factored_[b].dy = m.diff(*dy_of(b));
      factored_[b].dy_scale = gradient_scale;  // 1 / the loss scale
    }
    return;
  }
  if (chosen.empty()) return;
  // On the host (the gather is MPI's): [rank 0: block x rows, block dy rows, next block ...][rank 1: ...], then
  // each block's rows of all ranks made contiguous in factored_inputs_, dy scaled as the solver scales the summed
  // gradient (1/N here, with one pass).
  Stopwatch watch(&Times::communication_ms, &times_, Synced());
  const int rank = collectives_->rank();
  factored_buffer_.resize(per_rank * ranks);
  Dtype* mine = factored_buffer_.data() + per_rank * rank;
  for (int b : chosen) {
    const int rows = factored_[b].rows / ranks, k = blocks_[b]->shape().inputs, g = blocks_[b]->shape().outputs;
    mine = std::copy_n(x_of(b)->cpu_data(), static_cast<size_t>(rows) * k, mine);
    mine = std::copy_n(dy_of(b)->cpu_diff(), static_cast<size_t>(rows) * g, mine);
  }
  collectives_->Allgather(factored_buffer_.data(), std::vector<int>(ranks, static_cast<int>(per_rank)));
  factored_inputs_.Reshape({static_cast<int>(per_rank * ranks)});
  Dtype* all = factored_inputs_.mutable_cpu_data();
  std::vector<size_t> starts;
  size_t offset = 0, start = 0;
  for (int b : chosen) {
    const int rows = factored_[b].rows / ranks, k = blocks_[b]->shape().inputs, g = blocks_[b]->shape().outputs;
    const size_t x_size = static_cast<size_t>(rows) * k, dy_size = static_cast<size_t>(rows) * g;
    for (int r = 0; r < ranks; ++r) {
      const Dtype* src = factored_buffer_.data() + per_rank * r + offset;
      std::copy_n(src, x_size, all + start + r * x_size);
      cpu_scale(rows * g, gradient_scale, src + x_size, all + start + ranks * x_size + r * dy_size);
    }
    starts.push_back(start);
    offset += x_size + dy_size;
    start += ranks * (x_size + dy_size);
  }
  const Dtype* inputs = m.data(factored_inputs_);
  for (size_t c = 0; c < chosen.size(); ++c) {
    Factored& f = factored_[chosen[c]];
    f.x = inputs + starts[c];
    f.dy = f.x + static_cast<size_t>(f.rows) * blocks_[chosen[c]]->shape().inputs;
  }
}

template <typename Dtype>
bool KfacPreconditioner<Dtype>::FactoredPrecondition(int b, Dtype* v) {
  const Factored& f = factored_[b];
  if (f.rows == 0 || !blocks_[b]->has_inverses()) return false;
  blocks_[b]->PreconditionFactored(f.x, f.dy, f.rows, f.dy_scale, v);
  return true;
}

template <typename Dtype>
void KfacPreconditioner<Dtype>::PreconditionAll(Dtype rate, Dtype gradient_scale) {
  const auto& params = net_->learnable_params();
  const int ranks = collectives_ ? collectives_->size() : 1;
  const std::vector<int>& order = order_;
  std::vector<int> counts(ranks, 0), offset(blocks_.size(), 0);
  int total = 0;
  for (int b : order) {
    offset[b] = total;
    counts[owners_[b]] += blocks_[b]->matrix_size();
    total += blocks_[b]->matrix_size();
  }
  // This rank's blocks are one contiguous share of the buffers (all of them, unless distributed).
  const int rank = distributed_ ? collectives_->rank() : 0;
  const int mine_start = std::accumulate(counts.begin(), counts.begin() + rank, 0);
  const int mine = distributed_ ? counts[rank] : total;
  update_buffer_.Reshape({total});
  gradient_buffer_.Reshape({total});
  OnSolverDevice<Dtype>([&](auto m) {
    GatherFactoredInputs(m, gradient_scale);
    Stopwatch watch(&Times::precondition_ms, &times_, Synced());
    // Both written whole here (the other ranks' shares of the updates by the allgather below, before they are read):
    // on the GPU no stale copy comes up from the host after the last iteration's collectives.
    Dtype* gradients = m.overwritten_data(gradient_buffer_);
    Dtype* updates = m.overwritten_data(update_buffer_);
    for (size_t b = 0; b < blocks_.size(); ++b) {
      KfacBlock<Dtype>& block = *blocks_[b];
      Dtype* g = gradients + offset[b];
      block.GatherGradient(params, g);
      if (!Owns(static_cast<int>(b))) continue;
      Dtype* v = updates + offset[b];
      if (!block.has_inverses()) {
        m.copy(block.matrix_size(), g, v);  // no factors yet: the plain gradient
      } else if (!FactoredPrecondition(static_cast<int>(b), v)) {
        block.Precondition(g, v);
      }
    }
    // One check of this rank's share (on the GPU, one wait for the device), block by block only if it fails.
    if (m.all_finite(mine, updates + mine_start)) return;
    for (size_t b = 0; b < blocks_.size(); ++b) {
      const int n = blocks_[b]->matrix_size();
      // A block without inverses passed its gradient through: nothing of K-FAC's to fall back from.
      if (!Owns(static_cast<int>(b)) || !blocks_[b]->has_inverses() || m.all_finite(n, updates + offset[b])) continue;
      LOG(WARNING) << "K-FAC: " << blocks_[b]->shape().name << ": the preconditioned gradient is not finite; "
                   << "using the plain gradient this iteration";
      m.copy(n, gradients + offset[b], updates + offset[b]);
    }
  });
  if (distributed_) {
    Stopwatch watch(&Times::communication_ms, &times_, Synced());
    collectives_->Allgather(update_buffer_.mutable_cpu_data(), counts);
  }
  // The trust region: the step lr * v may change the model's predictions (the KL divergence, to second order
  // lr^2 v^T F v ~ lr^2 <v, g>) by at most kl_clip.
  Stopwatch watch(&Times::precondition_ms, &times_, Synced());
  OnSolverDevice<Dtype>([&](auto m) {
    double nu = 1;
    if (kp_.kl_clip() > 0) {
      const int n = static_cast<int>(blocks_.size());
      std::vector<int> sizes(n);
      std::vector<double> dots(n);
      for (int b = 0; b < n; ++b) sizes[b] = blocks_[b]->matrix_size();
      m.block_dots(n, offset.data(), sizes.data(), m.data(update_buffer_), m.data(gradient_buffer_), dots.data());
      double vg = 0;
      for (int b = 0; b < n; ++b) {
        const double lr = rate * net_->params_lr()[blocks_[b]->shape().weight_param];
        vg += lr * lr * dots[b];
      }
      nu = KlClipScale(vg);
    }
    Dtype* updates = m.mutable_data(update_buffer_);
    for (size_t b = 0; b < blocks_.size(); ++b) {
      Dtype* v = updates + offset[b];
      if (nu != 1) m.scal(blocks_[b]->matrix_size(), static_cast<Dtype>(nu), v);
      blocks_[b]->ScatterGradient(v, params);
    }
  });
}

template <typename Dtype>
void KfacPreconditioner<Dtype>::Precondition(Dtype rate, int iter, Dtype gradient_scale) {
  const bool factors_finite = ReduceStatistics(iter);  // Apply has reduced them already: only looked up
  if (!blocks_.empty()) {
    if (Collecting() && factors_finite) {
      FoldFactors();
    } else if (Collecting()) {
      // A dynamic loss scale has skipped such a step already (Optimizer::Apply); a static one, or none, keeps the
      // running factors rather than an inf that no later batch would decay away.
      LOG(WARNING) << "K-FAC: iteration " << iter << "'s factors are not finite; the running factors are kept";
    }
    const bool scheduled = iter % kp_.inverse_interval() == 0;
    Stopwatch watch(&Times::inverses_ms, &times_, Synced());
    for (size_t b = 0; b < blocks_.size(); ++b) {
      KfacBlock<Dtype>& block = *blocks_[b];
      if (!Owns(static_cast<int>(b)) || !block.has_factors()) continue;
      if (scheduled || !block.has_inverses()) {
        block.ComputeInverses(DampingAt(iter), kp_.split_damping(), kp_.inverse_method());
      }
    }
  }
  if (!blocks_.empty()) {
    PreconditionAll(rate, gradient_scale);
  } else if (kp_.kl_clip() > 0 && model_parts_) {
    KlClipScale(0);  // the other parts' trust region counts on this part's share
  }
  LogTimes(iter);
}

template <typename Dtype>
double KfacPreconditioner<Dtype>::KlClipScale(double vg) {
  if (model_parts_) {
    Stopwatch watch(&Times::communication_ms, &times_, Synced());
    model_parts_->Allreduce(&vg, 1);
  }
  return vg > 0 ? std::min(1.0, std::sqrt(kp_.kl_clip() / vg)) : 1.0;
}

template <typename Dtype>
void KfacPreconditioner<Dtype>::SaveState(SolverState* state) {
  if (owners_.empty()) AssignOwners();
  // This rank's part: the blocks it holds factors of (its own, where the inverses are distributed), its engine.
  KfacState mine;
  for (size_t b = 0; b < blocks_.size(); ++b) {
    if (Owns(static_cast<int>(b)) && blocks_[b]->has_factors()) blocks_[b]->SaveState(mine.add_block());
  }
  std::ostringstream engine;
  if (fisher_rng_seeded_) engine << fisher_rng_;
  mine.add_rank_fisher_rng(engine.str());
  std::string bytes;
  CHECK(mine.SerializeToString(&bytes));
  const std::vector<std::string> parts =
      collectives_ ? collectives_->GatherToRoot(bytes) : std::vector<std::string>{bytes};
  if (collectives_ && collectives_->rank() != 0) return;
  // The blocks in the net's order, whichever rank held each.
  std::map<std::string, KfacBlockState> held;
  KfacState* all = state->mutable_kfac();
  for (const std::string& part : parts) {
    KfacState rank;
    CHECK(rank.ParseFromString(part));
    for (const KfacBlockState& block : rank.block()) held[block.name()] = block;
    all->add_rank_fisher_rng(rank.rank_fisher_rng(0));
  }
  for (const auto& block : blocks_) {
    const auto it = held.find(block->shape().name);
    if (it != held.end()) *all->add_block() = it->second;
  }
}

template <typename Dtype>
void KfacPreconditioner<Dtype>::RestoreState(const SolverState& state, const std::string& origin) {
  if (!state.has_kfac()) {
    if (!blocks_.empty()) {
      LOG(WARNING) << origin << " holds no K-FAC factors (written by another solver type, or before Strata saved "
                   << "them): the resumed run collects them anew, so it differs from an uninterrupted one";
    }
    return;
  }
  const KfacState& kfac = state.kfac();
  if (owners_.empty()) AssignOwners();
  std::map<std::string, int> index;
  for (size_t b = 0; b < blocks_.size(); ++b) index[blocks_[b]->shape().name] = static_cast<int>(b);
  // A pipeline stage finds its own blocks among every stage's: each block must be some stage's (counted over the
  // stages before any restores, so that they all stop alike).
  int matched = 0;
  for (const KfacBlockState& block : kfac.block()) {
    const bool ours = index.count(block.name()) > 0;
    STRATA_REQUIRE(ours || model_parts_) << origin << " holds K-FAC factors of block '" << block.name()
                                         << "', which this net does not have (a different net?)";
    matched += ours ? 1 : 0;
  }
  if (model_parts_) {
    double all = matched;
    model_parts_->Allreduce(&all, 1);
    STRATA_REQUIRE(all == kfac.block_size())
        << origin << " holds K-FAC factors of " << kfac.block_size() - static_cast<int>(all)
        << " block(s) that no stage of this pipeline has (a different net?)";
  }
  for (const KfacBlockState& block : kfac.block()) {
    const auto it = index.find(block.name());
    if (it != index.end() && Owns(it->second)) blocks_[static_cast<size_t>(it->second)]->RestoreState(block, origin);
  }
  const int rank = collectives_ ? collectives_->rank() : 0;
  if (rank < kfac.rank_fisher_rng_size() && !kfac.rank_fisher_rng(rank).empty()) {
    std::istringstream engine(kfac.rank_fisher_rng(rank));
    engine >> fisher_rng_;
    STRATA_REQUIRE(!engine.fail()) << origin << ": rank " << rank << "'s K-FAC label engine is corrupt";
    fisher_rng_seeded_ = true;
  }
}

template <typename Dtype>
typename GradientStage<Dtype>::LayerCosts KfacPreconditioner<Dtype>::MeasureLayerCosts(int passes) {
  const size_t layers = static_cast<size_t>(net_->num_layers());
  std::vector<double> collect(layers, 0), fold(layers, 0), invert(layers, 0), precondition(layers, 0);
  auto layer_of = [this](size_t b) { return static_cast<size_t>(blocks_[b]->shape().layer_id); };
  const auto& params = net_->learnable_params();
  int factors = 0, matrices = 0;
  for (const auto& block : blocks_) {
    factors += block->packed_factor_size();
    matrices = std::max(matrices, block->matrix_size());
  }
  factor_buffer_.Reshape({std::max(1, factors)});
  gradient_buffer_.Reshape({std::max(1, matrices)});
  update_buffer_.Reshape({std::max(1, matrices)});
  // Pass 0's collection and preconditioning are not timed (they allocate the blocks' buffers). The inversions run
  // in pass 0 alone, timed: their cost is their sizes', and the widest blocks' take seconds.
  for (int pass = 0; pass <= passes; ++pass) {
    const bool timed = pass > 0;
    auto add = [&](std::vector<double>* to, size_t layer, double t0) {
      if (timed) (*to)[layer] += synced_now_ms() - t0;
    };
    net_->ClearParamDiffs();
    BeginIteration(0);  // a factor iteration
    layer_factors_ms_ = timed ? &collect : nullptr;
    net_->Forward();
    BeforeBackward(0);  // TRUE_FISHER's own backward collects G (its backward is no layer's)
    net_->Backward();
    layer_factors_ms_ = nullptr;
    OnSolverDevice<Dtype>([&](auto m) {
      Dtype* p = m.overwritten_data(factor_buffer_);
      for (size_t b = 0; b < blocks_.size(); ++b) {
        const double t0 = synced_now_ms();
        blocks_[b]->PackFresh(p);
        add(&fold, layer_of(b), t0);
        p += blocks_[b]->packed_factor_size();
      }
    });
    const Dtype* packed = factor_buffer_.cpu_data();  // on the GPU, the iteration's one copy to the host: no layer's
    for (size_t b = 0; b < blocks_.size(); ++b) {
      const double t0 = synced_now_ms();
      blocks_[b]->FoldFactors(packed, 1, kp_.factor_decay());
      add(&fold, layer_of(b), t0);
      packed += blocks_[b]->packed_factor_size();
    }
    for (size_t b = 0; pass == 0 && b < blocks_.size(); ++b) {
      const double t0 = synced_now_ms();
      blocks_[b]->ComputeInverses(DampingAt(0), kp_.split_damping(), kp_.inverse_method());
      invert[layer_of(b)] += synced_now_ms() - t0;
    }
    OnSolverDevice<Dtype>([&](auto m) {
      Dtype* g = m.overwritten_data(gradient_buffer_);
      Dtype* v = m.overwritten_data(update_buffer_);
      for (size_t b = 0; b < blocks_.size(); ++b) {
        const double t0 = synced_now_ms();
        blocks_[b]->GatherGradient(params, g);
        blocks_[b]->Precondition(g, v);
        blocks_[b]->ScatterGradient(v, params);
        add(&precondition, layer_of(b), t0);
      }
    });
  }
  typename GradientStage<Dtype>::LayerCosts costs;
  costs.per_pass_ms.assign(layers, 0);
  costs.per_update_ms.assign(layers, 0);
  costs.bytes.assign(layers, 0);
  const double n = std::max(1, passes);
  for (size_t l = 0; l < layers; ++l) {
    costs.per_pass_ms[l] = collect[l] / n / kp_.factor_interval();
    costs.per_update_ms[l] =
        fold[l] / n / kp_.factor_interval() + invert[l] / kp_.inverse_interval() + precondition[l] / n;
  }
  for (size_t b = 0; b < blocks_.size(); ++b) costs.bytes[layer_of(b)] += blocks_[b]->state_bytes();
  return costs;
}

template <typename Dtype>
typename KfacPreconditioner<Dtype>::Times* KfacPreconditioner<Dtype>::Synced() {
  const int display = param_.display();
  const bool sampled = Strata::mode() == Strata::GPU && display > 0 && (iter_ + 1) % display == 0;
  return sampled ? &synced_ : nullptr;
}

template <typename Dtype>
void KfacPreconditioner<Dtype>::LogTimes(int iter) {
  const int display = param_.display();
  if (!display || (iter + 1) % display != 0) return;
  // On the GPU, the one iteration timed with the device synchronised; on the CPU, the window's mean.
  const bool gpu = Strata::mode() == Strata::GPU;
  const Times& now = gpu ? synced_ : times_;
  const Times& last = gpu ? synced_reported_ : reported_;
  const double n = gpu ? 1 : display;
  LOG(INFO) << "K-FAC per iteration (" << (gpu ? "iteration " + std::to_string(iter) + ", the device synchronised"
                                               : "last " + std::to_string(display))
            << "): factors " << (now.factors_ms - last.factors_ms) / n << " ms, true-Fisher backward "
            << (now.true_fisher_ms - last.true_fisher_ms) / n << " ms, inverses "
            << (now.inverses_ms - last.inverses_ms) / n << " ms, preconditioning "
            << (now.precondition_ms - last.precondition_ms) / n << " ms, communication "
            << (now.communication_ms - last.communication_ms) / n << " ms";
  reported_ = times_;
  synced_reported_ = synced_;
}

STRATA_INSTANTIATE_CLASS(KfacPreconditioner);

namespace {

// "KFAC": momentum SGD with K-FAC's preconditioning as the stage before it.
template <typename Dtype>
std::unique_ptr<Optimizer<Dtype>> MakeKfacOptimizer(const SolverParameter& param, Net<Dtype>* net) {
  auto optimizer = std::make_unique<SGDOptimizer<Dtype>>(param, net);
  optimizer->set_stage(std::make_unique<KfacPreconditioner<Dtype>>(param, net));
  return optimizer;
}

OptimizerRegisterer<float> g_kfac_float("KFAC", MakeKfacOptimizer<float>);
OptimizerRegisterer<double> g_kfac_double("KFAC", MakeKfacOptimizer<double>);

}  // namespace

}  // namespace strata
