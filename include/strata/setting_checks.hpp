// Checks of what a run is given, made before its first iteration (docs/reliability.md, "Bad input is refused
// before the first iteration"). Each refuses with one strata::Error naming the setting or layer and what was
// expected. Solver settings: src/strata/solvers/solver_checks.cpp; nets: src/strata/net_checks.cpp. A layer's
// own parameters (BatchNorm's moving_average_fraction, Reversible's gamma...) are checked by the layer's SetUp.
#pragma once

#include <string>

#include "strata/proto/strata.pb.h"

namespace google {
namespace protobuf {
class Message;
}  // namespace protobuf
}  // namespace google

namespace strata {

template <typename Dtype>
class Net;

// Every float and double field set in `message`, and in the messages inside it, is finite (a NaN or an infinity
// in a filler, lr_mult, momentum or eps trains to NaN or not at all). Blob values (BlobProto) are data, not
// settings, and nested nets are left to their own Net. `where` starts the message ("layer 'bn' (BatchNorm)").
void RequireFiniteFields(const google::protobuf::Message& message, const std::string& where);

// The solver's settings, apart from its nets (each is checked when it is built).
void CheckSolverParam(const SolverParameter& param);

// One update sums replicas x iter_size gradient contributions in float: from 2^24 on, one more contribution the
// size of the average is below half an ulp of the sum and is lost, so more are refused.
void CheckGradientContributions(int replicas, int iter_size);

// The weights a snapshot is about to write are finite: a diverged run must end non-zero, never leaving a NaN
// model as its newest snapshot.
void RequireFiniteWeights(const NetParameter& weights, int iter);
template <typename Dtype>
void RequireFiniteWeights(const Net<Dtype>& net, int iter);

// What a built net must hold: layer names that find one layer with parameters each (weights, snapshots and the
// solverstate go by name), and no in-place layer whose backward reads the bottom its forward overwrote
// (Layer::BackwardWorksInPlace). Called at the end of Net::Init.
template <typename Dtype>
void CheckBuiltNet(const Net<Dtype>& net);

}  // namespace strata
