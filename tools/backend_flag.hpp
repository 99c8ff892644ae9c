// --backend, as Caffe's data tools take it (lmdb or leveldb), for the tools that read or write a database.
// Included by one source file per program (it defines the flag).
#pragma once

#include <gflags/gflags.h>

#include "strata/data/db.hpp"

DEFINE_string(backend, "lmdb", "The database backend: lmdb or leveldb.");

namespace strata {
inline RecordBackend BackendFlag() { return ParseRecordBackend(FLAGS_backend); }
}  // namespace strata
