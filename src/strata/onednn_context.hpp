// The oneDNN engine and stream every oneDNN layer runs on, and the translation of oneDNN's exceptions into
// Strata's. Private to libstrata (src/): public headers never include oneDNN.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <string>
#include <unordered_map>

namespace strata {
namespace onednn {

// The process's one CPU engine (created on first use).
dnnl::engine& cpu_engine();
// This thread's stream on it. oneDNN's CPU streams execute synchronously: a primitive's results are in place when
// execute() returns (the stream is still waited on, which costs nothing, so that a later asynchronous runtime
// cannot change that).
dnnl::stream& cpu_stream();
// The reordered copies one primitive call works on (Operand below) live only during that call, so they are cut
// from one buffer per thread, grown to the largest call so far, rather than each operand of each layer keeping a
// buffer of its own for the layer's life (which held nearly half of LeNet's peak heap in training; docs/onednn.md
// has the figures). Open one per call, sized with the sum of its operands' bytes(); one at a time per thread.
class CallBuffer {
 public:
  explicit CallBuffer(size_t bytes);
  ~CallBuffer();
  CallBuffer(const CallBuffer&) = delete;
  CallBuffer& operator=(const CallBuffer&) = delete;
  // `bytes` of the buffer (a multiple of kAlign: Aligned(n), or an Operand's bytes()), not handed out before in
  // this call.
  void* Take(size_t bytes);

  static constexpr size_t kAlign = 64;
  // `bytes` rounded up to a multiple of kAlign: what a buffer of `bytes` takes of a CallBuffer.
  static size_t Aligned(size_t bytes);

 private:
  char* next_;
  char* end_;
};

// One tensor of a primitive: `user` is the layer's plain memory (its pointer set on every call), `inner` the
// memory in the layout the primitive computes in. When oneDNN chose the plain layout they are the same memory
// and nothing is copied; otherwise `inner` is taken from the call's CallBuffer, filled from `user` (an input) or
// copied back to it (an output) by a reorder made once. A 4-D float tensor whose channels are a multiple of 16 may
// also be handed over in the blocked layout (strata/memory_format.hpp, `blocked` true): where the primitive computes in
// that layout itself (computes_blocked()), it reads or writes the layer's memory directly, with no copy at all.
class Operand {
 public:
  void Init(const dnnl::memory::desc& plain, const dnnl::memory::desc& chosen, bool input);
  // Makes `alternate` the layout the operand comes in when `blocked` (instead of the channel-blocked one): a
  // parameter's CustomFormat (strata/memory_format.hpp). After Init.
  void SetAlternate(const dnnl::memory::desc& alternate);
  // What the reordered copy takes of a CallBuffer (for an operand in the blocked layout when `blocked`): 0 when the
  // primitive computes on the layer's memory itself.
  size_t bytes(bool blocked = false) const {
    return (blocked ? !direct_blocked_ : !chosen_is_plain_) ? inner_bytes_ : 0;
  }
  bool computes_blocked() const { return direct_blocked_; }
  // The input at `data`, in the primitive's layout.
  const dnnl::memory& In(const float* data, CallBuffer& buffer, bool blocked = false);
  // Where the primitive writes an output bound for `data`; Out() then brings it there (within the same call).
  const dnnl::memory& Target(float* data, CallBuffer& buffer, bool blocked = false);
  void Out();

 private:
  // The reorder between `inner_` and `outer` (user_ or blocked_), made on first use.
  void Copy(dnnl::memory& outer, dnnl::reorder& copy);

  dnnl::memory user_, inner_, blocked_;
  dnnl::reorder copy_, blocked_copy_;
  bool input_ = true, chosen_is_plain_ = true, blockable_ = false, direct_blocked_ = false;
  enum class Pending { kNone, kToUser, kToBlocked } pending_ = Pending::kNone;
  size_t inner_bytes_ = 0;
};

// Runs `primitive` on `args`, with `workspace` (oneDNN's record of a forward, kept in the layer's memory at
// `workspace_data`) as one more argument unless it is null or empty, brings `out` back to the layer's memory and
// waits for the stream.
void Execute(const dnnl::primitive& primitive, std::unordered_map<int, dnnl::memory> args, Operand* out,
             dnnl::memory* workspace = nullptr, void* workspace_data = nullptr);

// A plain float tensor of `dims` in layout `tag`, and one whose layout the primitive chooses (float unless `type`
// says otherwise: an Operand's reorder then also converts, e.g. to bfloat16 and back).
dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims, dnnl::memory::format_tag tag);
dnnl::memory::desc AnyDesc(const dnnl::memory::dims& dims,
                           dnnl::memory::data_type type = dnnl::memory::data_type::f32);

// Whether oneDNN gave `pd` its reference kernel (plain loops, many times slower than its optimised ones).
bool IsReference(const dnnl::primitive_desc& pd);

// Rethrows a dnnl::error from `what` (e.g. "Convolution: creating the forward primitive") as a strata::Error.
[[noreturn]] void Fail(const dnnl::error& e, const std::string& what);

}  // namespace onednn
}  // namespace strata
