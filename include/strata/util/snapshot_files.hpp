// Snapshot files that check themselves (docs/reliability.md): caffemodels and solverstates in either of Caffe's
// snapshot formats and of any size, each with a checksum of its content; a solverstate that names the caffemodel
// written with it, so that resuming refuses any other; and one run at a time on a snapshot prefix.
//
// BINARYPROTO files are written and read one record of their repeated message fields (a net's layers, a state's
// history blobs) at a time, each under protobuf's 2 GiB limit on one message, the file of any size: the wire
// format of a repeated field is the concatenation of its records, so Caffe reads the file as one message. Their
// checksum is their last field (NetParameter.checksum, SolverState.checksum). HDF5 files have Caffe's layout
// (/data/LAYER/I, and iter, learned_net, current_step, history/I) and the checksum in a root attribute.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "strata/proto/strata.pb.h"

namespace strata {

// Caffe's snapshot file names: ".caffemodel" / ".solverstate", with ".h5" after them for HDF5.
std::string CaffemodelExtension(SolverParameter::SnapshotFormat format);
std::string SolverstateExtension(SolverParameter::SnapshotFormat format);

// What reading a snapshot file found out about it.
struct SnapshotFileInfo {
  bool has_checksum = false;  // Strata wrote it (and its checksum matched; a mismatch is an Error)
  uint32_t checksum = 0;
  int iter = -1;  // a caffemodel's snapshot_iter (-1: not recorded)
};

// Writes `weights` (a net's ToProto) as the caffemodel `filename` in `format`, atomically, recording `iter` (-1:
// none) and a checksum, which it returns. Clears `weights`' checksum and snapshot_iter fields first.
uint32_t WriteCaffemodel(NetParameter* weights, int iter, const std::string& filename,
                         SolverParameter::SnapshotFormat format);
// Reads a caffemodel of either format (HDF5 told by its signature). A checksum that does not match the content
// is an Error naming the file; a file without one (Caffe's, or Strata's before checksums) loads unchecked.
SnapshotFileInfo ReadCaffemodel(const std::string& filename, NetParameter* weights);

// Whether `filename` begins with HDF5's signature (how a caffemodel's format is told, whatever its name).
bool IsHdf5File(const std::string& filename);

void WriteSolverState(SolverState* state, const std::string& filename, SolverParameter::SnapshotFormat format);
void ReadSolverState(const std::string& filename, SolverState* state);

// Records in `state` the caffemodel written with it: Caffe's learned_net (as given) and Strata's name relative to
// `state_file`'s directory, checksum and iteration.
void RecordCaffemodel(const std::string& model_file, uint32_t checksum, int iter, const std::string& state_file,
                      SolverState* state);
// Reads the caffemodel that `state` (read from `state_file`) was written with into `weights` and returns its path
// ("" when the state names none). A state that records the caffemodel's checksum finds it beside itself and
// refuses a file of another checksum or iteration with one Error; an older state's learned_net loads with a
// warning that it cannot be checked.
std::string ReadPairedCaffemodel(const SolverState& state, const std::string& state_file, NetParameter* weights);

// Claims `prefix` for this process's snapshots: an exclusive lock (flock) on PREFIX.lock, which names this host
// and process and is held until the process ends; another live holder is an Error naming it. Then removes the
// temporary files (PREFIX_iter_*.tmp.PID) whose process is gone. Claiming a prefix this process holds does
// nothing more.
void ClaimSnapshotPrefix(const std::string& prefix);

// Whether a net whose layers hold these bytes of parameters (name, bytes) can be written in `format`: BINARYPROTO
// holds at most 2 GiB per layer (one protobuf message); more is an Error naming the layer and pointing to HDF5.
void RequireSnapshotFits(const std::vector<std::pair<std::string, uint64_t>>& layer_bytes,
                         SolverParameter::SnapshotFormat format);

}  // namespace strata
