// oneDNN (Debian's libdnnl, 2.x), the CPU engine of the layers where it is faster than Strata's own im2col + BLAS
// path (docs/onednn.md). libstrata links it privately: this header says what it does without including it.
#pragma once

#include <string>
#include <vector>

namespace strata {

// The instruction set oneDNN's kernels use on this CPU, as oneDNN reports it ("AVX2", "AVX-512 core", ...).
std::string onednn_cpu_isa();
// What precision: BF16 gets on this CPU (docs/onednn.md): "native" (AVX-512 BF16 or AMX instructions),
// "emulated" (AVX-512 without them: oneDNN rounds to bfloat16 and multiplies in float), or "none" (before
// AVX-512: the layers compute in float).
std::string onednn_bf16_support();
// Whether oneDNN has bfloat16 convolutions here (native or emulated).
bool onednn_has_bf16();
// "MAJOR.MINOR.PATCH" of the oneDNN libstrata runs with.
std::string onednn_version();

// What `engine: DEFAULT` gives a layer type on the CPU, in float: oneDNN where measurement showed it faster
// (docs/benchmarks.md, "oneDNN CPU engine"), Strata's own (CAFFE) path otherwise. Double always runs the CAFFE
// path: oneDNN computes in float.
struct CpuEngineChoice {
  const char* layer_type;  // "Convolution"
  bool onednn_available;   // `engine: ONEDNN` is accepted
  bool onednn_by_default;  // `engine: DEFAULT` runs oneDNN
};
// Every layer type whose parameters have an `engine` field, in the catalogue's order.
const std::vector<CpuEngineChoice>& cpu_engine_choices();
// Whether `engine: DEFAULT` runs oneDNN for `layer_type` (false for a type not in cpu_engine_choices()). The
// environment variable STRATA_DEFAULT_CPU_ENGINE=CAFFE (or ONEDNN) makes DEFAULT mean that engine for every type
// that has it, for measuring one against the other with one binary.
bool onednn_by_default(const std::string& layer_type);
// The CPU part of `strata device_query`: oneDNN's version and ISA, the compute threads, and the engine each layer
// type of cpu_engine_choices() runs on the CPU with `engine: DEFAULT`.
std::string cpu_engine_report();

}  // namespace strata
