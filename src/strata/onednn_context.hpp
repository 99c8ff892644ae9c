// The oneDNN engine and stream every oneDNN layer runs on, and the translation of oneDNN's exceptions into
// Strata's. Private to libstrata (src/): public headers never include oneDNN.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <string>

namespace strata {
namespace onednn {

// The process's one CPU engine (created on first use).
dnnl::engine& cpu_engine();
// This thread's stream on it. oneDNN's CPU streams execute synchronously: a primitive's results are in place when
// execute() returns (the stream is still waited on, which costs nothing, so that a later asynchronous runtime
// cannot change that).
dnnl::stream& cpu_stream();
// Rethrows a dnnl::error from `what` (e.g. "Convolution: creating the forward primitive") as a strata::Error.
[[noreturn]] void Fail(const dnnl::error& e, const std::string& what);

}  // namespace onednn
}  // namespace strata
