// strata: the command-line front end.
//   strata time  --model=NET [--iterations=N] [--phase=TRAIN|TEST]   per-layer forward/backward timing
//                                                                   and whole SGD steps (images/s)
//                [--budget=B --planner=P]                              ... under a recomputation plan
//   strata train --solver=S [--weights=W | --snapshot=S]             (training issue)
//   strata test  --model=NET --weights=W --iterations=N               (training issue)
//   strata device_query [--gpu=N]                                     what the GPUs are
//   strata plan  --model=NET --budget=B [--planner=P] [--gpu=N]       recomputation plans within a budget
//   strata draw  --model=NET --out=PICTURE.png|.svg|.pdf|.dot        the net through Graphviz (draw_net.py)
//   strata scale --model=NET [--times=F] [--network=M] [--nodes=...]  data-parallel speed-up predicted to many
//                                                                   nodes (docs/scale.md)
// --gpu=N (or solver_mode: GPU for train) runs on GPU N; under mpirun without --gpu each rank takes the GPU of
// its local rank on the node.
// Every bad input ends in one "error: ..." line and exit status 1.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <csignal>
#include <cstring>
#include <unistd.h>

#include "strata/comm/communicator.hpp"
#include "strata/comm/hybrid_allreduce.hpp"
#include "strata/common.hpp"
#include "strata/device.hpp"
#include "strata/engine/data_parallel_engine.hpp"
#include "strata/engine/layer_timing.hpp"
#include "strata/engine/make_engine.hpp"
#include "strata/engine/pipeline_engine.hpp"
#include "strata/engine/timeline.hpp"
#include "strata/memory_tracker.hpp"
#include "strata/net.hpp"
#include "strata/onednn.hpp"
#include "strata/plugin.hpp"
#include "strata/recompute/executor.hpp"
#include "strata/recompute/graph.hpp"
#include "strata/recompute/planner.hpp"
#include "strata/solver.hpp"
#include "strata/util/flag_parsing.hpp"
#include "strata/util/io.hpp"
#include "strata/util/net_drawing.hpp"
#include "strata/scale/iteration_model.hpp"
#include "strata/scale/machine.hpp"
#include "strata/scale/scale_inputs.hpp"
#include "tool_main.hpp"
#include "allreduce_flags.hpp"  // --allreduce_table

DEFINE_string(model, "", "The net definition (prototxt).");
DEFINE_string(phase, "TRAIN", "TRAIN or TEST: which phase's layers `time` builds.");
DEFINE_int32(level, 0, "Net state level.");
DEFINE_string(precision, "", "time, plan: FP32, BF16 or FP16, the precision of every layer that sets none "
              "(docs/onednn.md, docs/gpu.md); "
              "default: what the model says.");
DEFINE_string(stage, "", "Comma-separated net state stages.");
DEFINE_int32(iterations, 50, "time: iterations to time; test: batches to score; train: overrides max_iter.");
DEFINE_int32(warmup, 2, "Untimed iterations before timing.");
DEFINE_bool(step, true, "time: also time whole SGD steps (forward, backward, update) with no per-layer "
            "synchronisation, and print images/s.");
DEFINE_int64(seed, 1701, "Random seed for fillers and random inputs.");
DEFINE_string(solver, "", "The solver definition (prototxt), for train.");
DEFINE_string(weights, "", "Comma-separated caffemodels to initialise from (train) or to test (test).");
DEFINE_bool(strict_weights, false, "train, test: layers with parameters that no --weights file sets are an error "
            "(by default a warning naming them: Caffe's partial fine-tuning).");
DEFINE_string(snapshot, "", "A .solverstate to resume training from.");
DEFINE_string(sigint_effect, "stop", "What SIGINT and SIGTERM do during training: stop, snapshot or none.");
DEFINE_string(sighup_effect, "snapshot", "What SIGHUP does during training: stop, snapshot or none.");
DEFINE_string(timeline, "", "train: write a Chrome-trace JSON of every layer's forward, backward, chunk "
                            "transfers and updates on every rank to this file; time: of every layer's forward and "
                            "backward in the timed iterations.");
DEFINE_int32(gpu, -1, "Run on this GPU (train, test, time; plan: count the bytes as there); device_query: the GPU "
                      "to describe (default all). train with solver_mode GPU and no --gpu: the GPU of this rank's "
                      "local rank.");
DEFINE_bool(tf32, false, "GPU: let cuBLAS and cuDNN use TF32 tensor cores for float (faster, ~1e-3 relative "
                         "error in products).");
DEFINE_bool(gpu_deterministic, false, "GPU: only deterministic cuDNN algorithms (bit-identical reruns).");
DEFINE_string(gpu_channels_last, "16bit", "GPU: which convolutions compute channels-last (NHWC), the layers after "
                                          "them keeping it: 16bit (those with precision BF16 or FP16), all (float "
                                          "ones too) or none (bf16, true and false: 16bit, 16bit and none).");
DEFINE_int32(cudnn_workspace_mb, 1024, "GPU: the most workspace one cuDNN convolution algorithm may use (MiB).");
DEFINE_string(budget, "", "plan, time: activation memory budget, in bytes (\"200000000\", \"12G\", \"512MiB\") or "
                          "as a fraction of store-all with a decimal point (\"0.5\").");
DEFINE_string(blob_lifetime, "keep", "time: keep (every blob kept, Caffe's way and training's default) or "
                                     "free_after_use (each freed after its last use: the solver's blob_lifetime).");
DEFINE_string(planner, "all", "plan: store_all, sqrt, dp (least recomputation within the budget), dp_memory "
                              "(least memory) or all.");
DEFINE_string(out, "", "draw: the picture to write: NAME.png, .svg or .pdf (through Graphviz's dot), or NAME.dot.");
DEFINE_string(rankdir, "LR", "draw: the direction of the graph: LR, TB, RL or BT.");
DEFINE_int32(max_lower_sets, 2000, "plan: enumerate lower sets exactly up to this many; beyond, the DP runs "
                                   "over each node's ancestor closure and each topological prefix.");
DEFINE_string(allreduce, "hybrid",
              "train: the allreduce algorithm for gradients: hybrid (size-dependent, see --allreduce_table) or one "
              "of linear, brb, brd, vhd, vhd_seg, ring, ring_seg, shm, mpi (docs/allreduce.md); overrides the "
              "solver's comm_param. scale: also seed (BRD or VHD, the seed paper's hybrid) or model (the fastest by the "
              "machine's figures).");

DEFINE_int32(batch, 0, "scale: the batch per rank to model (default: the batch of the times).");
DEFINE_string(nodes, "1,2,...,4096", "scale: node counts to model: \"1,2,4\" or \"1,2,...,4096\" (doubling).");
DEFINE_int32(ranks_per_node, 1, "scale: ranks on each node (they share its link and cores).");
DEFINE_string(network, "", "scale: the machine file (docs/scale.md; allreduce_bench --model --model_out writes "
              "one); default: the built-in figures.");
DEFINE_string(times, "", "scale: per-layer times at a batch (docs/scale.md); default: measure the net here.");
DEFINE_string(times_out, "", "scale: write the per-layer times used to this file.");
DEFINE_int32(comm_threads, 1, "scale: communication threads per rank.");
DEFINE_int32(compute_threads, 1, "scale: CPU training: the cores each rank's computation keeps busy.");
DEFINE_int64(chunk_bytes, 4 << 20, "scale: gradients larger than this are reduced in chunks of this size.");
DEFINE_int64(fusion_bytes, 0, "scale: gradients smaller than this are packed into buckets of this size.");
DEFINE_bool(overlap, true, "scale: reduce each layer's gradient during backward (false: after backward).");
DEFINE_int32(reference_batch, 256, "scale: the seed paper's reference batch b_ref of s = t(1,b_ref)/t(N,b) x b/b_ref x N.");
DEFINE_string(dispatch, "round_robin", "scale: how chunks reach the communication threads: round_robin (Strata's "
              "engine), shared (one queue, oldest first) or lowest_layer_first (what the next forward needs first).");
DEFINE_bool(copies_block_compute, false, "scale, GPU: the copies to and from the host stop the computation while "
            "they run (a cudaMemcpy on the default stream) instead of running beside it on copy streams.");
DEFINE_int32(pipeline_stages, 0, "time: cut the train net into this many pipeline stages, one per rank (run under "
             "mpirun -np STAGES; docs/pipeline.md) and report each stage's compute, wait, bytes and peak memory.");
DEFINE_string(pipeline_cut, "", "time --pipeline_stages: the first layer of each stage after the first, comma-separated "
              "(default: the planner's cuts).");
DEFINE_int32(micro_batches, 4, "time --pipeline_stages: micro-batches per iteration.");
DEFINE_string(schedule, "SYNC", "time --pipeline_stages: SYNC or ASYNC.");
DEFINE_int32(timeline_nodes, 0, "scale: the node count --timeline draws (default: the largest of --nodes).");

namespace strata {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// GPU mode when asked for (--gpu=N, or `wanted`: solver_mode GPU): picks the device before anything else
// touches CUDA (and before MPI_Init), then switches the process's mode. Returns whether the GPU is used.
// --gpu=N without such a GPU is an error, and so is solver_mode GPU without one: a run that asked for a GPU and
// quietly trains on the CPU instead is not the run that was asked for.
GpuOptions::ChannelsLast parse_channels_last(const std::string& s) {
  using C = GpuOptions::ChannelsLast;
  if (s == "16bit" || s == "bf16" || s == "true") return C::k16Bit;
  if (s == "all") return C::kAll;
  if (s == "none" || s == "false") return C::kNone;
  STRATA_FAIL() << "--gpu_channels_last must be 16bit, all or none, got '" << s << "'";
  return C::k16Bit;
}

bool setup_gpu(bool wanted) {
  const GpuOptions::ChannelsLast channels_last = parse_channels_last(FLAGS_gpu_channels_last);
  if (FLAGS_gpu < 0 && wanted) {
    STRATA_REQUIRE(gpu_build() && gpu_device_count() > 0)
        << "the solver says solver_mode: GPU, but " << (gpu_build() ? "the CUDA runtime finds no GPU on this machine"
                                                                   : "this build of Strata has no GPU support")
        << "; set solver_mode: CPU in " << FLAGS_solver << " to train on the CPU";
  }
  if (!wanted && FLAGS_gpu < 0) {
    Strata::set_mode(Strata::CPU);
    return false;
  }
  STRATA_REQUIRE(FLAGS_cudnn_workspace_mb >= 0) << "--cudnn_workspace_mb must not be negative";
  GpuOptions& o = gpu_options();
  o.allow_tf32 = FLAGS_tf32;
  o.deterministic = FLAGS_gpu_deterministic;
  o.channels_last = channels_last;
  o.workspace_limit = static_cast<size_t>(FLAGS_cudnn_workspace_mb) << 20;
  const int device = select_gpu_device(FLAGS_gpu);
  Strata::set_mode(Strata::GPU);
  LOG(INFO) << "Using GPU " << device << (o.allow_tf32 ? " (TF32 allowed)" : "")
            << (o.deterministic ? " (deterministic cuDNN)" : "")
            << (channels_last == GpuOptions::ChannelsLast::kAll    ? " (channels-last in float too)"
                : channels_last == GpuOptions::ChannelsLast::kNone ? " (channels-first)"
                                                                   : "");
  return true;
}

Phase parse_phase(const std::string& s) {
  if (s == "TRAIN") return TRAIN;
  if (s == "TEST") return TEST;
  STRATA_FAIL() << "--phase must be TRAIN or TEST, got '" << s << "'";
  return TRAIN;
}

std::vector<std::string> parse_stages() { return SplitCommas(FLAGS_stage); }

Precision parse_precision() {
  Precision p = FP32;
  STRATA_REQUIRE(Precision_Parse(FLAGS_precision, &p)) << "--precision must be FP32, BF16 or FP16, got '"
                                                        << FLAGS_precision << "'";
  return p;
}

// The number of classes a label blob indexes into, if the blob is the label bottom of a layer that reads labels
// (Layer::LabelBottom: a loss, Accuracy).
int label_classes(const Net<float>& net, int blob_id) {
  // Follow the blob through Split layers to its consumers.
  std::vector<int> frontier{blob_id};
  while (!frontier.empty()) {
    const int b = frontier.back();
    frontier.pop_back();
    for (int l = 0; l < net.num_layers(); ++l) {
      const auto& bottoms = net.bottom_ids()[l];
      const Layer<float>& layer = *net.layers()[l];
      for (size_t k = 0; k < bottoms.size(); ++k) {
        if (bottoms[k] != b) continue;
        if (layer.IsSplit()) {
          for (int t : net.top_ids()[l]) frontier.push_back(t);
        } else if (static_cast<int>(k) == layer.LabelBottom()) {
          const auto* scores = net.bottom_vecs()[l][0];
          return scores->num_axes() > 1 ? scores->shape(1) : scores->count();
        }
      }
    }
  }
  return 0;
}

// Random inputs, never zeros: zeros make ReLU and pooling look cheap and hide unwritten outputs.
void fill_inputs(Net<float>& net) {
  Strata::set_random_seed(static_cast<uint64_t>(FLAGS_seed));
  for (int id : net.input_blob_ids()) {
    Blob<float>* blob = net.blobs()[id].get();
    const int classes = label_classes(net, id);
    float* data = blob->mutable_cpu_data();
    if (classes > 0) {
      std::uniform_int_distribution<int> dist(0, classes - 1);
      for (int i = 0; i < blob->count(); ++i) data[i] = static_cast<float>(dist(Strata::rng()));
    } else {
      rng_uniform<float>(blob->count(), -1.f, 1.f, data);
    }
  }
}

size_t parse_budget(const std::string& s, size_t store_all);

SolverParameter::BlobLifetime parse_blob_lifetime() {
  STRATA_REQUIRE(FLAGS_blob_lifetime == "free_after_use" || FLAGS_blob_lifetime == "keep")
      << "--blob_lifetime must be free_after_use or keep, got '" << FLAGS_blob_lifetime << "'";
  return FLAGS_blob_lifetime == "keep" ? SolverParameter::KEEP : SolverParameter::FREE_AFTER_USE;
}

// The plan --planner names (dp for "all") within --budget.
RecomputePlan choose_plan(const RecomputeGraph& g) {
  const size_t budget = parse_budget(FLAGS_budget, g.total_bytes());
  const std::string planner = FLAGS_planner == "all" ? "dp" : FLAGS_planner;
  STRATA_REQUIRE(planner == "store_all" || planner == "sqrt" || planner == "dp" || planner == "dp_memory")
      << "--planner must be store_all, sqrt, dp or dp_memory, got '" << FLAGS_planner << "'";
  return MakePlan(g, planner, budget, FLAGS_max_lower_sets);
}

// Runs the net under a recomputation plan (InstallRecomputePlan): `chosen` (made for a net built from the same
// definition), or else the one --planner names. Returns the plan installed.
RecomputePlan install_plan(Net<float>* net, const RecomputePlan* chosen = nullptr) {
  const RecomputePlan plan = chosen ? *chosen : choose_plan(ExtractGraph(*net));
  InstallRecomputePlan(net, plan);
  return plan;
}

// GPU work is asynchronous: a timed span ends when the device has finished it.
void sync_device(bool gpu) {
  if (gpu) gpu_synchronize();
}

// Each layer's forward and backward, averaged over --iterations after --warmup (engine/layer_timing.hpp).
LayerTimes measure_layers(Net<float>& net, Timeline* timeline) {
  LOG(INFO) << "Warming up for " << FLAGS_warmup << " iteration(s)";
  LayerTimingOptions o;
  o.warmup = FLAGS_warmup;
  o.iterations = FLAGS_iterations;
  o.timeline = timeline;
  o.reset_memory_peaks = true;  // the peak of the timed passes alone: the first ones may hold what later do not
  return MeasureLayerTimes(net, o);
}

// --model in the net state --phase, --level and the stages ask for, with --precision where given.
NetParameter read_model(Phase phase, const std::vector<std::string>& stages) {
  NetParameter param;
  ReadNetParamsFromTextFile(FLAGS_model, &param);
  param.mutable_state()->set_phase(phase);
  param.mutable_state()->set_level(FLAGS_level);
  param.mutable_state()->clear_stage();
  for (const std::string& s : stages) param.mutable_state()->add_stage(s);
  if (!FLAGS_precision.empty()) param.set_precision(parse_precision());
  return param;
}

// Caffe's `time`: forward and backward layer by layer. Each layer's span ends with a device synchronisation, so
// on the GPU the totals here include one per layer; time_sgd_steps gives the undisturbed time of a step.
// Returns the recompute plan it ran under (none without --budget).
RecomputePlan time_layers(bool gpu, Phase phase, const std::vector<std::string>& stages) {
  Strata::set_random_seed(static_cast<uint64_t>(FLAGS_seed));
  Net<float> net(read_model(phase, stages));
  fill_inputs(net);
  RecomputePlan plan;
  if (!FLAGS_budget.empty()) plan = install_plan(&net);
  else if (parse_blob_lifetime() == SolverParameter::FREE_AFTER_USE)
    InstallRecomputePlan(&net, StoreAllPlan(ExtractGraph(net)));  // as the solver does (blob_lifetime)
  const int n = net.num_layers();
  Timeline timeline(!FLAGS_timeline.empty());  // the timed iterations' layers, for chrome://tracing
  const LayerTimes t = measure_layers(net, &timeline);
  std::printf("Average time per layer:\n");
  size_t width = 0;
  for (const auto& name : net.layer_names()) width = std::max(width, name.size());
  for (int i = 0; i < n; ++i) {
    std::printf("%*s\tforward: %.4f ms.\n", static_cast<int>(width), net.layer_names()[i].c_str(), t.fwd_ms[i]);
    std::printf("%*s\tbackward: %.4f ms.\n", static_cast<int>(width), net.layer_names()[i].c_str(), t.bwd_ms[i]);
  }
  std::printf("Average Forward pass: %.4f ms.\n", t.fwd_total_ms);
  std::printf("Average Backward pass: %.4f ms.\n", t.bwd_total_ms);
  std::printf("Average Forward-Backward: %.4f ms.\n", t.fwd_total_ms + t.bwd_total_ms);
  std::printf("Total Time: %.4f ms.\n", (t.fwd_total_ms + t.bwd_total_ms) * FLAGS_iterations);
  std::printf("Total learnable parameters: %zu\n", net.num_learnable_values());
  // On the GPU, the device's bytes (the host holds only the inputs' staging copies).
  const MemorySpace space = gpu ? MemorySpace::kDevice : MemorySpace::kHost;
  const size_t peak_activation = MemoryTracker::peak(MemoryCategory::kActivation, space);
  std::printf("Peak activation memory: %zu bytes (%s)%s\n", peak_activation,
              human_bytes(static_cast<double>(peak_activation)).c_str(), gpu ? " on the GPU" : "");
  std::printf("Peak workspace memory: %zu bytes%s\n", MemoryTracker::peak(MemoryCategory::kWorkspace, space),
              gpu ? " on the GPU" : "");
  if (timeline.enabled()) {
    timeline.Write(FLAGS_timeline);
    std::printf("Timeline of the %d timed iteration(s): %s\n", FLAGS_iterations, FLAGS_timeline.c_str());
  }
  if (!FLAGS_budget.empty()) {
    std::printf("Recompute plan: %s, %zu segments, predicted peak activation memory %zu bytes (%s; data, "
                "gradients and layers' saved state), predicted recomputation %.4g GFLOP\n", plan.planner.c_str(),
                plan.segments.size(), plan.peak_bytes, human_bytes(static_cast<double>(plan.peak_bytes)).c_str(),
                plan.recompute_flops / 1e9);
  }
  return plan;
}

// Whole training steps as `strata train` runs them on one rank: forward, backward and the update of an SGD
// solver (momentum 0.9, weight decay 5e-4: the usual ImageNet settings, and what benchmarks/gpu_pytorch.py runs),
// with no synchronisation inside a step, timed over --iterations steps after --warmup; under `plan` with --budget.
void time_sgd_steps(bool gpu, const std::vector<std::string>& stages, const RecomputePlan& plan) {
  SolverParameter param;
  param.set_net(FLAGS_model);
  param.set_type("SGD");
  param.set_base_lr(0.01f);
  param.set_lr_policy("fixed");
  param.set_momentum(0.9f);
  param.set_weight_decay(5e-4f);
  param.set_max_iter(FLAGS_warmup + FLAGS_iterations);
  param.set_display(0);
  param.set_random_seed(FLAGS_seed);
  if (!FLAGS_precision.empty()) param.set_precision(parse_precision());
  param.set_blob_lifetime(parse_blob_lifetime());
  param.mutable_train_state()->set_level(FLAGS_level);
  for (const auto& stage : stages) param.mutable_train_state()->add_stage(stage);
  auto solver = SolverRegistry<float>::Create(param);
  Net<float>& net = *solver->net();
  fill_inputs(net);
  if (!FLAGS_budget.empty()) install_plan(&net, &plan);
  const int batch = net.batch_size();
  solver->Step(FLAGS_warmup);
  sync_device(gpu);
  const auto t0 = Clock::now();
  solver->Step(FLAGS_iterations);
  sync_device(gpu);
  const double ms = ms_since(t0) / FLAGS_iterations;
  std::printf("Average SGD step (forward, backward, update; not synchronised per layer): %.4f ms", ms);
  if (batch > 0) std::printf(", %.1f images/s (batch %d)", batch * 1000.0 / ms, batch);
  std::printf(".\n");
}

// `strata time --pipeline_stages=S` under mpirun: the train net cut into S stages, --warmup untimed then
// --iterations timed iterations of --micro_batches micro-batches (learning rate 0: the weights stay), and the
// per-stage table of docs/pipeline.md on rank 0's standard output.
int time_pipeline(int* argc, char*** argv) {
  STRATA_REQUIRE(FLAGS_micro_batches > 0) << "--micro_batches must be positive";
  PipelineParameter::Schedule schedule = PipelineParameter::SYNC;
  STRATA_REQUIRE(PipelineParameter::Schedule_Parse(FLAGS_schedule, &schedule))
      << "--schedule must be SYNC or ASYNC, got '" << FLAGS_schedule << "'";
  SolverParameter param;
  ReadNetParamsFromTextFile(FLAGS_model, param.mutable_net_param());
  param.mutable_net_param()->set_force_backward(true);  // a deploy net has no loss: time its backward anyway
  for (const std::string& st : parse_stages()) param.mutable_train_state()->add_stage(st);
  param.mutable_train_state()->set_level(FLAGS_level);
  param.set_base_lr(0);
  param.set_max_iter(FLAGS_warmup + FLAGS_iterations);
  param.set_iter_size(FLAGS_micro_batches);
  param.set_display(0);
  param.set_snapshot_after_train(false);
  param.set_random_seed(FLAGS_seed);
  PipelineParameter* pp = param.mutable_pipeline_param();
  pp->set_stages(static_cast<uint32_t>(FLAGS_pipeline_stages));
  pp->set_schedule(schedule);
  if (!FLAGS_pipeline_cut.empty()) {
    for (const std::string& c : SplitCommas(FLAGS_pipeline_cut)) pp->add_cut(c);
  }
  Communicator::set_default_mpi_tuning();
  Communicator comm(argc, argv, 0);
  Strata::set_solver_rank(comm.rank());
  Strata::set_solver_count(comm.size());
  if (comm.rank() != 0) FLAGS_minloglevel = std::max(FLAGS_minloglevel, 1);
  std::unique_ptr<Solver<float>> solver;
  try {
    if (comm.rank() == 0 && !FLAGS_timeline.empty()) RequireWritableLocation(FLAGS_timeline, "--timeline");
    EngineSetup setup;
    setup.comm = &comm;
    setup.options.timeline_file = FLAGS_timeline;
    solver = SolverRegistry<float>::Create(param, setup);
    auto* engine = static_cast<PipelineEngine<float>*>(solver->engine());
    solver->Step(FLAGS_warmup);
    engine->Drain();
    engine->ResetStats();
    solver->Step(FLAGS_iterations);
    engine->Drain();
    const std::vector<PipelineStats> stats = engine->GatherStats();
    if (comm.rank() == 0) {
      std::printf("%d stage(s), %d micro-batches of %d per iteration, %s, %d iteration(s) after %d warm-up:\n%s\n",
                  engine->grid().stages, FLAGS_micro_batches, solver->net()->batch_size(), FLAGS_schedule.c_str(),
                  FLAGS_iterations, FLAGS_warmup, PipelineStatsTable(stats).c_str());
    }
    if (!FLAGS_timeline.empty()) engine->Finish(solver->iter());
  } catch (const std::exception& e) {
    if (comm.size() > 1) mpi_abort(e.what());
    throw;
  }
  return 0;
}

int time_command(int* argc, char*** argv) {
  STRATA_REQUIRE(!FLAGS_model.empty()) << "strata time needs --model=NET.prototxt";
  STRATA_REQUIRE(FLAGS_iterations > 0) << "--iterations must be positive";
  STRATA_REQUIRE(FLAGS_warmup >= 0) << "--warmup must not be negative";
  STRATA_REQUIRE(FLAGS_pipeline_stages >= 0) << "--pipeline_stages must not be negative";
  if (!FLAGS_precision.empty()) parse_precision();  // a bad value fails before anything is built
  if (FLAGS_pipeline_stages > 0) return time_pipeline(argc, argv);
  const Phase phase = parse_phase(FLAGS_phase);
  const std::vector<std::string> stages = parse_stages();
  if (!FLAGS_timeline.empty()) RequireWritableLocation(FLAGS_timeline, "--timeline");
  const bool gpu = setup_gpu(false);
  const RecomputePlan plan = time_layers(gpu, phase, stages);
  // The layer-by-layer net is gone by now: the step's net does not share the device with it.
  if (FLAGS_step && phase == TRAIN) time_sgd_steps(gpu, stages, plan);
  return 0;
}

// `strata scale`: the data-parallel iteration simulated on every node count of --nodes (docs/scale.md).
int scale_command() {
  STRATA_REQUIRE(!FLAGS_model.empty()) << "strata scale needs --model=NET.prototxt";
  STRATA_REQUIRE(FLAGS_chunk_bytes >= 4) << "--chunk_bytes must be at least 4";
  STRATA_REQUIRE(FLAGS_fusion_bytes >= 0) << "--fusion_bytes cannot be negative";
  STRATA_REQUIRE(FLAGS_reference_batch >= 1) << "--reference_batch must be positive";
  STRATA_REQUIRE(FLAGS_batch >= 0) << "--batch cannot be negative";
  STRATA_REQUIRE(FLAGS_ranks_per_node >= 1) << "--ranks_per_node must be positive";
  const std::vector<int> nodes = ParseNodeCounts(FLAGS_nodes);
  const MachineSpec machine = FLAGS_network.empty() ? MachineSpec() : MachineSpec::load(FLAGS_network);
  if (!FLAGS_timeline.empty()) RequireWritableLocation(FLAGS_timeline, "--timeline");
  if (!FLAGS_times_out.empty()) RequireWritableLocation(FLAGS_times_out, "--times_out");
  ScaleOptions options;
  options.gpu = machine.pcie > 0;
  options.overlap = FLAGS_overlap;
  options.threads = FLAGS_comm_threads;
  options.compute_threads = FLAGS_compute_threads;
  options.allreduce = FLAGS_allreduce;
  options.copies_block_compute = FLAGS_copies_block_compute;
  if (FLAGS_dispatch == "shared") options.dispatch = ScaleOptions::Dispatch::kShared;
  else if (FLAGS_dispatch == "lowest_layer_first") options.dispatch = ScaleOptions::Dispatch::kLowestLayerFirst;
  else STRATA_REQUIRE(FLAGS_dispatch == "round_robin")
      << "--dispatch must be round_robin, shared or lowest_layer_first, got '" << FLAGS_dispatch << "'";
  std::unique_ptr<CrossoverTable> table;
  if (!FLAGS_allreduce_table.empty()) {
    STRATA_REQUIRE(FLAGS_allreduce == "hybrid") << "--allreduce_table is the hybrid's table; --allreduce is '"
                                                << FLAGS_allreduce << "'";
    table = std::make_unique<CrossoverTable>(CrossoverTable::load(FLAGS_allreduce_table));
    options.table = table.get();
  }
  // Every algorithm name is checked before any simulation.
  ScaleAlgorithmChoice(options, machine, {nodes.back(), FLAGS_ranks_per_node}, 4);

  const std::vector<std::string> stages = parse_stages();
  Strata::set_random_seed(static_cast<uint64_t>(FLAGS_seed));
  ScaleNet net;
  std::string source;
  {
    Net<float> built(FLAGS_model, TRAIN, FLAGS_level, &stages);
    net = ScaleNet::FromNet(built, static_cast<size_t>(FLAGS_chunk_bytes), static_cast<size_t>(FLAGS_fusion_bytes));
    if (!FLAGS_times.empty()) {
      LoadLayerTimes(FLAGS_times, &net);
      source = FLAGS_times;
    } else {
      fill_inputs(built);
      setup_gpu(false);
      const LayerTimes t = measure_layers(built, nullptr);
      for (int i = 0; i < built.num_layers(); ++i) {
        net.forward_s[i] = t.fwd_ms[i] / 1000;
        net.backward_s[i] = t.bwd_ms[i] / 1000;
      }
      source = "measured here (" + std::to_string(FLAGS_iterations) + " iterations)";
    }
  }
  if (!FLAGS_times_out.empty()) WriteFileAtomically(FLAGS_times_out, LayerTimesText(net));
  const int batch = FLAGS_batch > 0 ? FLAGS_batch : net.batch;
  const ScaleNet at_batch = net.at_batch(batch);

  double compute_ms = 0;
  for (size_t i = 0; i < at_batch.layers.size(); ++i) compute_ms += (at_batch.forward_s[i] + at_batch.backward_s[i]) * 1e3;
  std::printf("strata scale: %s, batch %d per rank (times from %s at batch %d; forward+backward %.2f ms), %.1f MiB "
              "of gradients in %zu buckets\n", FLAGS_model.c_str(), batch, source.c_str(), net.batch, compute_ms,
              at_batch.gradient_bytes() / (1 << 20), at_batch.buckets.size());
  std::printf("machine (%s): %s\n", machine.origin.c_str(), machine.describe().c_str());
  std::printf("%s training, %d rank(s) per node, overlap %s, %d communication thread(s) (%s), chunks of %lld "
              "bytes, allreduce %s%s\n", options.gpu ? "GPU" : "CPU", FLAGS_ranks_per_node, options.overlap ? "on" : "off",
              options.threads, FLAGS_dispatch.c_str(), static_cast<long long>(FLAGS_chunk_bytes), options.allreduce.c_str(),
              table ? (" (table " + FLAGS_allreduce_table + ")").c_str() : "");

  const ScaleResult reference = SimulateIteration(net.at_batch(FLAGS_reference_batch), machine, {1, 1}, options);
  std::printf("reference t(1,%d) = %.2f ms\n\n", FLAGS_reference_batch, reference.iteration_s * 1e3);
  std::printf("| nodes | ranks | iteration ms | compute ms | exposed comm ms | comm busy ms | speed-up s | "
              "efficiency | t(N,b)/t(1,%d) | chunks by algorithm |\n|---|---|---|---|---|---|---|---|---|---|\n",
              FLAGS_reference_batch);
  std::vector<std::vector<std::string>> by_layer;  // by node count: each bucket's algorithm
  for (int n : nodes) {
    const ClusterShape cluster{n, FLAGS_ranks_per_node};
    const ScaleResult r = SimulateIteration(at_batch, machine, cluster, options);
    std::map<std::string, int> counts;
    for (size_t b = 0; b < at_batch.buckets.size(); ++b)
      if (cluster.ranks() > 1) counts[r.bucket_algorithm[b]] += static_cast<int>(at_batch.buckets[b].chunk_bytes.size());
    std::string algorithms;
    for (const auto& c : counts) algorithms += (algorithms.empty() ? "" : ", ") + c.first + " " + std::to_string(c.second);
    const double s = SeedSpeedUp(reference.iteration_s, FLAGS_reference_batch, r.iteration_s, batch, cluster.ranks());
    std::printf("| %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.3f | %.3f | %s |\n", n, cluster.ranks(),
                r.iteration_s * 1e3, r.compute_s * 1e3, r.exposed_s * 1e3, r.comm_busy_s * 1e3, s,
                s / cluster.ranks(), r.iteration_s / reference.iteration_s, algorithms.empty() ? "-" : algorithms.c_str());
    by_layer.push_back(r.bucket_algorithm);
  }
  std::printf("\nAlgorithm of each gradient's chunks, by node count:\n\n| gradient | bytes | chunks |");
  for (int n : nodes) std::printf(" %d |", n);
  std::printf("\n|---|---|---|");
  for (size_t i = 0; i < nodes.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (size_t b = 0; b < at_batch.buckets.size(); ++b) {
    double bytes = 0;
    for (double c : at_batch.buckets[b].chunk_bytes) bytes += c;
    std::printf("| %s | %.0f | %zu |", at_batch.buckets[b].name.c_str(), bytes, at_batch.buckets[b].chunk_bytes.size());
    for (size_t i = 0; i < nodes.size(); ++i)
      std::printf(" %s |", nodes[i] * FLAGS_ranks_per_node > 1 ? by_layer[i][b].c_str() : "-");
    std::printf("\n");
  }
  if (!FLAGS_timeline.empty()) {
    const int n = FLAGS_timeline_nodes > 0 ? FLAGS_timeline_nodes : nodes.back();
    Timeline timeline(true);
    timeline.NameRow(0, options.gpu ? "GPU computation" : "computation");
    for (int t = 0; t < options.threads; ++t) timeline.NameRow(t + 1, "communication thread " + std::to_string(t + 1));
    if (options.gpu) {
      timeline.NameRow(options.threads + 1, "copies to the host (step 1)");
      timeline.NameRow(options.threads + 2, "copies to the GPU (step 3)");
    }
    SimulateIteration(at_batch, machine, {n, FLAGS_ranks_per_node}, options, &timeline);
    timeline.Write(FLAGS_timeline);
    std::printf("\nTimeline of %d simulated iterations on %d node(s): %s\n", options.iterations, n, FLAGS_timeline.c_str());
  }
  return 0;
}

// Signals only set a flag; the solver polls it between iterations.
volatile std::sig_atomic_t g_got_sigint = 0;
volatile std::sig_atomic_t g_got_sighup = 0;
// Said at once (write(2) is async-signal-safe), not at the next iteration: under mpirun, SIGTERM is also how
// a rank learns that another rank has died, and it may then be waiting in an allreduce that never ends until
// mpirun kills it.
char g_sigint_note[160] = "strata: SIGINT/SIGTERM received; stopping after this micro-batch\n";
void on_sigint(int) {
  g_got_sigint = 1;
  ssize_t ignored = write(STDERR_FILENO, g_sigint_note, std::strlen(g_sigint_note));
  (void)ignored;
}
void on_sighup(int) { g_got_sighup = 1; }

std::function<SignalAction()> install_signal_handlers() {
  const SignalAction int_effect = ParseSignalAction(FLAGS_sigint_effect);
  const SignalAction hup_effect = ParseSignalAction(FLAGS_sighup_effect);
  struct sigaction sa = {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sa.sa_handler = on_sighup;
  sigaction(SIGHUP, &sa, nullptr);
  return [int_effect, hup_effect] {
    if (g_got_sigint) {
      g_got_sigint = 0;
      LOG(INFO) << "Interrupted (SIGINT/SIGTERM)";
      return int_effect;
    }
    if (g_got_sighup) {
      g_got_sighup = 0;
      LOG(INFO) << "SIGHUP";
      return hup_effect;
    }
    return SignalAction::kNone;
  };
}

// The allreduce for gradients: the command line wins over the solver's comm_param.
AllreducePolicy gradient_policy(const CommParameter& comm) {
  const bool flag_given = !gflags::GetCommandLineFlagInfoOrDie("allreduce").is_default ||
                          !FLAGS_allreduce_table.empty();
  if (flag_given) return AllreducePolicy::from_spec(FLAGS_allreduce, FLAGS_allreduce_table);
  if (comm.has_tuning_table()) return AllreducePolicy::from_table_file(comm.tuning_table());
  std::string name = comm.algorithm();
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return AllreducePolicy::from_name(name);
}

int train(int* argc, char*** argv) {
  STRATA_REQUIRE(!FLAGS_solver.empty()) << "strata train needs --solver=SOLVER.prototxt";
  STRATA_REQUIRE(FLAGS_weights.empty() || FLAGS_snapshot.empty())
      << "give --weights (start from trained weights) or --snapshot (resume), not both";
  SolverParameter param = ReadSolverParam(FLAGS_solver);
  if (!gflags::GetCommandLineFlagInfoOrDie("iterations").is_default) {
    STRATA_REQUIRE(FLAGS_iterations >= 0) << "--iterations must not be negative";
    param.set_max_iter(FLAGS_iterations);
  }
  // The GPU is chosen before MPI comes up: a CUDA-aware MPI picks its device at MPI_Init. As in Caffe, only a
  // solver_mode the solver states selects the GPU (the field's default is GPU).
  const bool gpu = setup_gpu(param.has_solver_mode() && param.solver_mode() == SolverParameter::GPU);
  DataParallelOptions options = DataParallelOptions::FromProto(param.comm_param(), gpu);
  options.timeline_file = FLAGS_timeline;
  const AllreducePolicy policy = gradient_policy(param.comm_param());
  const StallLimits stall = StallLimits().with_environment();
  // MPI comes up here: one communicator per communication thread, waiting threads yield their core.
  Communicator::set_default_mpi_tuning();
  Communicator comm(argc, argv, options.threads);
  // A collective that waits too long names the ranks it waits for (docs/reliability.md).
  comm.start_watchdog(stall);
  Strata::set_solver_rank(comm.rank());
  Strata::set_solver_count(comm.size());
  if (comm.size() > 1) {
    std::snprintf(g_sigint_note, sizeof(g_sigint_note), "strata: rank %d of %d: SIGINT/SIGTERM received; stopping "
                  "after this iteration (mpirun sends SIGTERM when another rank has ended)\n", comm.rank(),
                  comm.size());
  }
  if (comm.rank() != 0) FLAGS_minloglevel = std::max(FLAGS_minloglevel, 1);  // rank 0 logs progress
  // Outside the try: an error must end the job (or stop the engine's threads) before the solver is destroyed,
  // since the engine's communication threads may still be applying updates to it.
  std::unique_ptr<Solver<float>> solver;
  try {
    // Output paths are checked before any work, by rank 0, which writes them (Solve checks the snapshots').
    if (comm.rank() == 0 && !FLAGS_timeline.empty()) RequireWritableLocation(FLAGS_timeline, "--timeline");
    Strata::set_mode(gpu ? Strata::GPU : Strata::CPU);
    // The engine (local, data-parallel over the ranks, or a pipeline with pipeline_param) is MakeEngine's choice.
    EngineSetup setup;
    setup.comm = &comm;
    setup.policy = policy;
    setup.options = options;
    // Caffe's `caffe train`: --weights replaces the solver's weights field, --snapshot drops it. The tool loads
    // them itself (the solver would load the field), for --strict_weights.
    std::vector<std::string> weights(param.weights().begin(), param.weights().end());
    std::string origin = "the solver's weights";
    if (!gflags::GetCommandLineFlagInfoOrDie("weights").is_default) {
      weights = SplitCommas(FLAGS_weights);
      origin = "--weights";
      STRATA_REQUIRE(!weights.empty()) << "--weights names no file";
    } else if (!FLAGS_snapshot.empty()) {
      weights.clear();
    }
    param.clear_weights();
    solver = SolverRegistry<float>::Create(param, setup);
    solver->SetActionFunction(install_signal_handlers());
    if (!weights.empty()) LoadWeights(solver->net(), weights, origin, FLAGS_strict_weights);
    solver->Solve(FLAGS_snapshot);
  } catch (const std::exception& e) {
    // One rank's error would leave the others waiting in a collective: end the whole job.
    if (comm.size() > 1) mpi_abort(e.what());  // it names the rank
    if (solver) solver->set_engine(nullptr);   // its threads finish before the solver goes
    throw;
  }
  return 0;
}

int test_command() {
  STRATA_REQUIRE(!FLAGS_model.empty()) << "strata test needs --model=NET.prototxt";
  STRATA_REQUIRE(!FLAGS_weights.empty()) << "strata test needs --weights=MODEL.caffemodel";
  STRATA_REQUIRE(FLAGS_iterations > 0) << "--iterations must be positive";
  const std::vector<std::string> stages = parse_stages();
  setup_gpu(false);
  Net<float> net(FLAGS_model, TEST, FLAGS_level, &stages);
  // A deploy net's Input layers are filled by the program that uses it; here nothing would fill them, and the
  // scores would be those of whatever the blobs hold.
  std::string inputs;
  for (int id : net.input_blob_ids()) inputs += (inputs.empty() ? "'" : ", '") + net.blob_names()[id] + "'";
  STRATA_REQUIRE(inputs.empty()) << FLAGS_model << ": net '" << net.name() << "' reads its input " << inputs
                                 << " from Input layers, which strata test cannot fill; give the net with its "
                                 << "data layers (the train/test prototxt, not the deploy one)";
  LoadWeights(&net, SplitCommas(FLAGS_weights), "--weights", FLAGS_strict_weights);
  LOG(INFO) << "Running for " << FLAGS_iterations << " iterations.";
  // As Caffe's `caffe test`: every output value of every batch, then the loss and each output's mean once, in
  // the order of the net's outputs (one line per element of a multi-valued output), all on the log.
  std::vector<double> scores;
  std::vector<int> score_output;  // which output each score belongs to
  double loss = 0;
  for (int i = 0; i < FLAGS_iterations; ++i) {
    float iter_loss = 0;
    const auto& outputs = net.Forward(&iter_loss);
    loss += iter_loss;
    size_t k = 0;
    for (size_t o = 0; o < outputs.size(); ++o) {
      const std::string& name = net.blob_names()[net.output_blob_ids()[o]];
      for (int j = 0; j < outputs[o]->count(); ++j, ++k) {
        const double score = outputs[o]->cpu_data()[j];
        if (i == 0) {
          scores.push_back(score);
          score_output.push_back(static_cast<int>(o));
        } else {
          scores[k] += score;
        }
        LOG(INFO) << "Batch " << i << ", " << name << " = " << score;
      }
    }
  }
  LOG(INFO) << "Loss: " << loss / FLAGS_iterations;
  for (size_t k = 0; k < scores.size(); ++k) {
    const int id = net.output_blob_ids()[score_output[k]];
    const double mean = scores[k] / FLAGS_iterations, weight = net.blob_loss_weights()[id];
    std::ostringstream s;
    s << net.blob_names()[id] << " = " << mean;
    if (weight) s << " (* " << weight << " = " << weight * mean << " loss)";
    LOG(INFO) << s.str();
  }
  return 0;
}

// The net as a picture, as Caffe's draw_net.py: the phase's layers, with blob shapes and parameter counts when the
// net can be built here (it cannot when a data source is missing; then from the prototxt alone, with a warning).
int draw_command() {
  STRATA_REQUIRE(!FLAGS_model.empty()) << "strata draw needs --model=NET.prototxt";
  STRATA_REQUIRE(!FLAGS_out.empty()) << "strata draw needs --out=PICTURE.png|.svg|.pdf|.dot";
  const size_t dot_at = FLAGS_out.rfind('.');
  const std::string format = dot_at == std::string::npos ? "" : FLAGS_out.substr(dot_at + 1);
  STRATA_REQUIRE(format == "png" || format == "svg" || format == "pdf" || format == "dot")
      << "--out=" << FLAGS_out << ": the name must end in .png, .svg, .pdf or .dot";
  NetParameter param;
  ReadNetParamsFromTextFile(FLAGS_model, &param);
  param.mutable_state()->set_phase(parse_phase(FLAGS_phase));
  param.mutable_state()->set_level(FLAGS_level);
  param.mutable_state()->clear_stage();
  for (const auto& stage : parse_stages()) param.mutable_state()->add_stage(stage);
  NetParameter filtered;
  Net<float>::FilterNet(param, &filtered);
  NetDrawingDetails details;
  try {
    Net<float> net(filtered);
    for (size_t b = 0; b < net.blobs().size(); ++b) details.blob_shapes[net.blob_names()[b]] = net.blobs()[b]->shape();
    for (int l = 0; l < net.num_layers(); ++l) {
      long long values = 0;
      for (const auto& blob : net.layers()[l]->blobs()) values += blob->count();
      details.layer_params[net.layer_names()[l]] = values;
    }
  } catch (const Error& e) {
    LOG(WARNING) << "drawing '" << FLAGS_model << "' without blob shapes, since the net cannot be built here: "
                 << e.what();
  }
  const std::string dot = NetToDot(filtered, details, FLAGS_rankdir);
  const std::string dot_file = format == "dot" ? FLAGS_out : FLAGS_out + ".dot.tmp";
  {
    std::ofstream out(dot_file);
    out << dot;
    STRATA_REQUIRE(out.good()) << "cannot write '" << dot_file << "'";
  }
  if (format != "dot") {
    const std::string command = "dot -T" + format + " '" + dot_file + "' -o '" + FLAGS_out + "' 2>&1";
    const int status = std::system(command.c_str());
    std::remove(dot_file.c_str());
    STRATA_REQUIRE(status == 0) << "Graphviz's dot could not draw " << FLAGS_out << " (exit status " << status
                                << "; is the graphviz package installed? --out=NAME.dot needs no Graphviz)";
  }
  LOG(INFO) << "Drew " << filtered.layer_size() << " layers of '" << filtered.name() << "' to " << FLAGS_out;
  return 0;
}

int device_query() {
  // The CPU first (oneDNN's ISA, the engine each layer type runs), then the GPUs of a GPU build.
  std::printf("%s", cpu_engine_report().c_str());
  // Without GPUs the CPU is the whole answer; asking for one (--gpu=N) that is not there is an error.
  const int count = gpu_device_count();
  if (FLAGS_gpu < 0 && (!gpu_build() || count == 0)) {
    std::printf("no GPUs: %s\n",
                gpu_build() ? "the CUDA runtime finds none on this machine"
                            : "this build of Strata has no GPU support (no CUDA toolkit at build time)");
    return 0;
  }
  STRATA_REQUIRE(gpu_build()) << "this build of Strata has no GPU support (no CUDA toolkit at build time)";
  STRATA_REQUIRE(count > 0) << "the CUDA runtime finds no GPU on this machine";
  STRATA_REQUIRE(FLAGS_gpu < count) << "GPU " << FLAGS_gpu << " was requested, but this machine has " << count;
  std::printf("%d GPU%s\n", count, count == 1 ? "" : "s");
  for (int d = 0; d < count; ++d) {
    if (FLAGS_gpu >= 0 && d != FLAGS_gpu) continue;
    std::printf("%s", gpu_device_report(d).c_str());
  }
  return 0;
}

// "123456" -> bytes; "0.5" -> that fraction of store-all.
size_t parse_budget(const std::string& s, size_t store_all) {
  STRATA_REQUIRE(!s.empty()) << "strata plan needs --budget=BYTES or --budget=FRACTION (e.g. 0.5 of store-all)";
  return ParseMemoryBudget(s, store_all);
}

int plan_command() {
  STRATA_REQUIRE(!FLAGS_model.empty()) << "strata plan needs --model=NET.prototxt";
  const std::vector<std::string> names = {"store_all", "sqrt", "dp", "dp_memory"};
  STRATA_REQUIRE(FLAGS_planner == "all" || std::find(names.begin(), names.end(), FLAGS_planner) != names.end())
      << "--planner must be store_all, sqrt, dp, dp_memory or all, got '" << FLAGS_planner << "'";
  STRATA_REQUIRE(FLAGS_max_lower_sets > 0) << "--max_lower_sets must be positive";
  const Phase phase = parse_phase(FLAGS_phase);
  const std::vector<std::string> stages = parse_stages();
  // On a GPU the layers that compute in bfloat16 keep their blobs in half the bytes, which the graph counts.
  setup_gpu(false);
  Net<float> net(read_model(phase, stages));
  const RecomputeGraph g = ExtractGraph(net);
  const size_t store_all = g.total_bytes();
  const size_t budget = parse_budget(FLAGS_budget, store_all);
  LowerSetPlanner dp(g, FLAGS_max_lower_sets);

  std::vector<RecomputePlan> plans;
  auto wanted = [](const char* p) { return FLAGS_planner == "all" || FLAGS_planner == p; };
  if (wanted("store_all")) plans.push_back(StoreAllPlan(g));
  if (wanted("sqrt")) plans.push_back(SqrtPlan(g));
  // A budget no plan meets is an error naming the smallest feasible one, whichever planner was asked for.
  RecomputePlan best = dp.Plan(budget);
  if (wanted("dp")) plans.push_back(best);
  if (wanted("dp_memory")) plans.push_back(dp.MinMemoryPlan());

  const double fwd = g.forward_flops();
  std::printf("Model: %s (%s), %d layers -> %d planned nodes (in-place and aliasing layers fused), "
              "%zu source layer(s) pinned\n", FLAGS_model.c_str(), phase == TRAIN ? "TRAIN" : "TEST",
              net.num_layers(), g.size(), g.source_layers.size());
  std::printf("Store-all peak activation memory (data, saved state, gradients): %zu bytes (%s), of which "
              "sources and outputs %zu bytes; forward %.4g GFLOP\n",
              store_all, human_bytes(static_cast<double>(store_all)).c_str(), g.source_bytes, fwd / 1e9);
  std::printf("Budget: %zu bytes (%s, %.1f%% of store-all)\n", budget, human_bytes(static_cast<double>(budget)).c_str(),
              100.0 * budget / std::max<size_t>(store_all, 1));
  std::printf("Lower sets: %s, %zu in the DP's family (--max_lower_sets=%d)\n",
              dp.exact() ? "all enumerated (exact DP)" : "too many to enumerate (approximate DP)",
              dp.lower_sets().size(), FLAGS_max_lower_sets);
  std::printf("Kept = values forward keeps for backward; time x = (3F + R) / 3F taking backward as 2 forwards.\n\n");

  auto row = [&](const char* label, const std::function<std::string(const RecomputePlan&)>& cell) {
    std::printf("%-24s", label);
    for (const auto& p : plans) std::printf("%18s", cell(p).c_str());
    std::printf("\n");
  };
  auto fmt = [](const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), f, v);
    return std::string(buf);
  };
  row("planner", [](const RecomputePlan& p) { return p.planner; });
  row("segments", [](const RecomputePlan& p) { return std::to_string(p.segments.size()); });
  row("kept nodes", [](const RecomputePlan& p) { return std::to_string(p.kept.size()); });
  row("peak activation (B)", [](const RecomputePlan& p) { return std::to_string(p.peak_bytes); });
  row("peak activation", [](const RecomputePlan& p) { return human_bytes(static_cast<double>(p.peak_bytes)); });
  row("peak / store-all", [&](const RecomputePlan& p) {
    return fmt("%.1f%%", 100.0 * p.peak_bytes / std::max<size_t>(store_all, 1));
  });
  row("within budget", [&](const RecomputePlan& p) { return std::string(p.peak_bytes <= budget ? "yes" : "NO"); });
  row("recompute (GFLOP)", [&](const RecomputePlan& p) { return fmt("%.4g", p.recompute_flops / 1e9); });
  row("recompute / forward", [&](const RecomputePlan& p) {
    return fmt("%.1f%%", fwd > 0 ? 100.0 * p.recompute_flops / fwd : 0.0);
  });
  row("est. time x", [&](const RecomputePlan& p) { return fmt("%.3f", fwd > 0 ? 1 + p.recompute_flops / (3 * fwd) : 1.0); });

  for (const auto& p : plans) {
    std::printf("\n%s: %zu segment(s)\n", p.planner.c_str(), p.segments.size());
    for (size_t i = 0; i < p.segments.size(); ++i) {
      const auto& seg = p.segments[i];
      std::string kept;
      for (int v : seg) {
        if (!std::binary_search(p.kept.begin(), p.kept.end(), v)) continue;
        if (i + 1 == p.segments.size()) {
          kept = "(all: last segment)";
          break;
        }
        for (int b : g.nodes[v].blobs) kept += (kept.empty() ? "" : " ") + net.blob_names()[b];
      }
      std::printf("  %3zu  %s .. %s (%zu node%s)  keeps: %s\n", i + 1, g.nodes[seg.front()].name.c_str(),
                  g.nodes[seg.back()].name.c_str(), seg.size(), seg.size() == 1 ? "" : "s", kept.c_str());
    }
  }
  return 0;
}

struct Command {
  const char* name;
  const char* help;
  std::function<int(int*, char***)> run;
};

const std::vector<Command>& commands() {
  static const std::vector<Command> cmds = {
      {"train", "train a net (under mpirun for data parallelism): --solver=S [--weights=W | --snapshot=S] "
                "[--iterations=N] [--timeline=F]", train},
      {"test", "score a trained net: --model=NET --weights=W [--iterations=N]",
       [](int*, char***) { return test_command(); }},
      {"time", "time a net's forward and backward, layer by layer, then whole SGD steps: --model=NET "
               "[--budget=B --planner=P: under a recomputation plan] [--pipeline_stages=S [--pipeline_cut=L1,L2] "
               "[--micro_batches=K] [--schedule=SYNC|ASYNC]: per stage, under mpirun -np S]",
       time_command},
      {"plan", "recomputation plans within a memory budget, each planner side by side: --model=NET "
               "--budget=BYTES|FRACTION [--planner=store_all|sqrt|dp|dp_memory|all]",
       [](int*, char***) { return plan_command(); }},
      {"scale", "predict data-parallel iteration time and speed-up on many nodes: --model=NET [--times=F] "
                "[--network=MACHINE] [--nodes=1,2,...,4096] [--batch=B] [--timeline=F] (docs/scale.md)",
       [](int*, char***) { return scale_command(); }},
      {"device_query", "describe the GPUs: [--gpu=N]", [](int*, char***) { return device_query(); }},
      {"draw", "draw the net with Graphviz: --model=NET --out=PICTURE.png|.svg|.pdf|.dot [--phase=TRAIN|TEST] "
               "[--rankdir=LR]",
       [](int*, char***) { return draw_command(); }},
  };
  return cmds;
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  std::string usage = "command [flags]\ncommands:\n";
  for (const auto& c : strata::commands()) usage += std::string("  ") + c.name + "\t" + c.help + "\n";
  usage += "custom layers from shared libraries (every command): --plugin=LIB[,LIB...] (repeatable), or "
           "STRATA_PLUGINS=LIB[:LIB...] in the environment (mpirun passes it to every rank)\n";
  gflags::SetUsageMessage(usage);
  gflags::SetVersionString("0.1.0");
  strata::SetLoggingDefaults();
  std::vector<std::string> plugins;
  try {
    plugins = strata::TakePluginArguments(&argc, argv);
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  if (argc != 2) {
    std::fprintf(stderr, "usage: strata %s", usage.c_str());
    return 1;
  }
  const std::string name = argv[1];
  for (const auto& c : strata::commands()) {
    if (name != c.name) continue;
    try {
      strata::LoadPlugins(plugins);
      return c.run(&argc, &argv);
    } catch (const strata::Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "error: unknown command '%s'\nusage: strata %s", name.c_str(), usage.c_str());
  return 1;
}
