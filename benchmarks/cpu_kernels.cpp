// The CPU hot loops on their own, through libstrata's public API, one compute thread, data in cache: the best of
// many repetitions, so that a shared machine's noise (other processes) does not reach the figures. For comparing
// builds (docs/benchmarks.md, "Portable binaries"): compile it once per build folder and run the programs in turn.
//
//   B=build-cpu; g++ -std=c++17 -O2 -fopenmp benchmarks/cpu_kernels.cpp -Iinclude -I$B/generated \
//     -I/usr/include/x86_64-linux-gnu/openblas-pthread -I/usr/lib/x86_64-linux-gnu/openmpi/include \
//     -DOMPI_SKIP_MPICXX=1 -L$B -lstrata -lprotobuf -lglog -lgflags -Wl,-rpath,$PWD/$B -o $B/cpu_kernels
//   build-cpu/cpu_kernels
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "strata/comm/allreduce_kernels.hpp"
#include "strata/layer_factory.hpp"
#include "strata/parallel.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"

namespace {

using strata::Blob;
using Clock = std::chrono::steady_clock;

template <typename F>
double BestMicroseconds(F f, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return best;
}

// The allreduce's sum kernel, dst += src, on page-aligned buffers placed alike in every build.
void SumInto(size_t n) {
  float* dst = static_cast<float*>(std::aligned_alloc(4096, n * sizeof(float) + 4096));
  float* src = static_cast<float*>(std::aligned_alloc(4096, n * sizeof(float) + 4096)) + 64;
  std::fill(dst, dst + n, 1.f);
  std::fill(src, src + n, 2.f);
  const double us = BestMicroseconds(
      [&] { strata::comm_detail::sum_into(dst, src, n, strata::DataType::kFloat); }, 2000);
  std::printf("%-24s forward %9.1f us  (%5.1f GB/s)\n", ("sum_into " + std::to_string(n)).c_str(), us,
              3.0 * n * sizeof(float) / us / 1e3);
  std::free(dst);
  std::free(src - 64);
}

// One layer's Forward and Backward on a bottom of `shape` with fixed values.
void Layer(const char* name, const std::string& param_text, const std::vector<int>& shape) {
  strata::LayerParameter param;
  strata::ReadProtoFromTextString(param_text, &param);
  auto layer = strata::LayerRegistry<float>::CreateLayer(param);
  Blob<float> x(shape), y;
  float* xd = x.mutable_cpu_data();
  for (int i = 0; i < x.count(); ++i) xd[i] = 0.01f * ((i * 7919) % 1000) - 5.f;
  layer->SetUp({&x}, {&y});
  float* dy = y.mutable_cpu_diff();
  for (int i = 0; i < y.count(); ++i) dy[i] = 0.001f * ((i * 104729) % 1000) - 0.5f;
  const double forward = BestMicroseconds([&] { layer->Forward({&x}, {&y}); }, 400);
  const double backward = BestMicroseconds([&] { layer->Backward({&y}, {true}, {&x}); }, 400);
  std::printf("%-24s forward %9.1f us  backward %9.1f us\n", name, forward, backward);
}

// The one-pass update of a solver type over the 1M weights of one InnerProduct layer.
void Update(const char* type) {
  strata::SolverParameter param;
  strata::ReadProtoFromTextString(std::string("type: '") + type + "' base_lr: 0.01 momentum: 0.9 "
      "weight_decay: 0.0005 lr_policy: 'fixed' net_param { "
      "layer { name: 'in' type: 'Input' top: 'x' input_param { shape { dim: 1 dim: 1024 } } } "
      "layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'y' inner_product_param { num_output: 1024 } } }",
      &param);
  auto solver = strata::SolverRegistry<float>::Create(param);
  const size_t n = solver->net()->learnable_params()[0]->count();
  strata::Optimizer<float>& optimizer = *solver->optimizer();
  const double us = BestMicroseconds([&] { optimizer.UpdateSlice(0, 0, n, 0.01f, 0, 1.f); }, 200);
  std::printf("%-24s update  %9.1f us\n", (std::string(type) + " UpdateSlice 1M").c_str(), us);
}

}  // namespace

int main() {
  strata::set_compute_threads(1);
  SumInto(16384);    // one 64 KiB segment
  SumInto(1 << 20);  // 4 MiB
  const std::vector<int> act = {8, 64, 32, 32};  // 512 Ki values
  Layer("ReLU", "type: 'ReLU'", act);
  Layer("Sigmoid", "type: 'Sigmoid'", act);
  Layer("TanH", "type: 'TanH'", act);
  Layer("Softmax C=64 (strided)", "type: 'Softmax'", act);
  Layer("Softmax C=1000", "type: 'Softmax'", {512, 1000});
  Layer("MaxPool 3x3 s2", "type: 'Pooling' pooling_param { pool: MAX kernel_size: 3 stride: 2 }", act);
  Layer("AvePool 3x3 s1 p1", "type: 'Pooling' pooling_param { pool: AVE kernel_size: 3 stride: 1 pad: 1 }", act);
  Layer("LRN across 5", "type: 'LRN' lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 }", act);
  Layer("LRN within 3", "type: 'LRN' lrn_param { local_size: 3 norm_region: WITHIN_CHANNEL }", act);
  Layer("Dropout", "type: 'Dropout'", act);
  Update("SGD");
  Update("Adam");
  return 0;
}
