// Reading and writing protobuf files. Every reader turns a bad file into an Error naming the file (and, for
// text, the line and column); every writer goes through a temporary file, fsync and rename, so a crash never
// leaves a half-written file where a good one was.
#pragma once

#include <google/protobuf/message.h>

#include <functional>
#include <string>

#include "strata/proto/strata.pb.h"

namespace strata {

// How deeply messages may nest in a text file (a layer's filler is 3 levels down; each Reversible block nested in
// another adds 2): deeper is an error.
constexpr int kMaxProtoNesting = 100;

void ReadProtoFromTextFile(const std::string& filename, google::protobuf::Message* proto);
void ReadProtoFromTextString(const std::string& text, google::protobuf::Message* proto,
                             const std::string& origin = "<string>");
void ReadProtoFromBinaryFile(const std::string& filename, google::protobuf::Message* proto);
void ReadProtoFromBinaryString(const std::string& bytes, google::protobuf::Message* proto,
                               const std::string& origin = "<bytes>");
void WriteProtoToTextFile(const google::protobuf::Message& proto, const std::string& filename);
void WriteProtoToBinaryFile(const google::protobuf::Message& proto, const std::string& filename);

// Writes `bytes` to `filename` atomically: temporary file in the same directory, fsync, rename, fsync dir.
void WriteFileAtomically(const std::string& filename, const std::string& bytes);
// The same, the temporary file NAME.tmp.PID created and written by `write` (given its path): for files written
// piece by piece. An exception from `write` removes the temporary file and goes on.
void WriteFileAtomically(const std::string& filename, const std::function<void(const std::string& tmp)>& write);
// Writes all `n` bytes to `fd` (the file `name`), or throws "cannot write NAME: REASON".
void WriteAll(int fd, const void* data, size_t n, const std::string& name);
bool FileExists(const std::string& filename);
// Makes sure `filename` can be written later: creates its directory (and any missing ones above it), then creates
// and removes a probe file there. Otherwise throws an Error naming `what` (a flag or field) and the reason. For
// checks before long work: a bad output path fails in the first second, not at the first snapshot.
void RequireWritableLocation(const std::string& filename, const std::string& what);

// Reads a net definition (text), upgrading Caffe's legacy V1 `layers` to `layer`.
void ReadNetParamsFromTextFile(const std::string& filename, NetParameter* param);
// Reads trained weights (a caffemodel, binary or HDF5, its checksum checked: ReadCaffemodel), upgrading V1 layers
// too.
void ReadNetParamsFromBinaryFile(const std::string& filename, NetParameter* param);
void ReadSolverParamsFromTextFile(const std::string& filename, SolverParameter* param);

// Converts Caffe's pre-2015 V1 layer list to the current one in place. Returns true if anything changed.
bool UpgradeV1Net(NetParameter* param);

}  // namespace strata
