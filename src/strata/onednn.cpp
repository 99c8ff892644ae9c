#include "strata/onednn.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "strata/onednn_context.hpp"
#include "strata/common.hpp"
#include "strata/memory_format.hpp"
#include "strata/parallel.hpp"

namespace strata {

namespace onednn {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpu_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

namespace {

// This thread's call buffer: grown, never shrunk, and freed with the thread.
struct ThreadBuffer {
  std::unique_ptr<char, decltype(&std::free)> data{nullptr, &std::free};
  size_t size = 0;
  bool open = false;
};
thread_local ThreadBuffer t_buffer;

}  // namespace

size_t CallBuffer::Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

CallBuffer::CallBuffer(size_t bytes) {
  ThreadBuffer& t = t_buffer;
  CHECK(!t.open) << "one oneDNN CallBuffer at a time per thread";
  if (bytes > t.size) {
    t.data.reset();  // free first: the peak is then the new size, not old + new
    t.data.reset(static_cast<char*>(std::aligned_alloc(kAlign, Aligned(bytes))));
    CHECK(t.data) << "cannot allocate " << bytes << " bytes for oneDNN's reordered operands";
    t.size = Aligned(bytes);
  }
  t.open = true;
  next_ = t.data.get();
  end_ = next_ + t.size;
}

CallBuffer::~CallBuffer() { t_buffer.open = false; }

void* CallBuffer::Take(size_t bytes) {
  CHECK_LE(bytes, static_cast<size_t>(end_ - next_)) << "a oneDNN call took more than it asked its CallBuffer for";
  void* p = next_;
  next_ += bytes;
  return p;
}

void Operand::Init(const dnnl::memory::desc& plain, const dnnl::memory::desc& chosen, bool input) {
  input_ = input;
  user_ = dnnl::memory(plain, cpu_engine(), DNNL_MEMORY_NONE);
  inner_ = dnnl::memory(chosen, cpu_engine(), DNNL_MEMORY_NONE);
  copy_ = dnnl::reorder();
  blocked_copy_ = dnnl::reorder();
  pending_ = Pending::kNone;
  chosen_is_plain_ = chosen == plain;
  const dnnl::memory::dims dims = plain.dims();
  blockable_ = dims.size() == 4 && dims[1] % kChannelBlock16 == 0 && plain.data_type() == dnnl::memory::data_type::f32;
  direct_blocked_ = false;
  if (blockable_) {
    const dnnl::memory::desc blocked(dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::aBcd16b);
    blocked_ = dnnl::memory(blocked, cpu_engine(), DNNL_MEMORY_NONE);
    direct_blocked_ = chosen == blocked;
  }
  inner_bytes_ = CallBuffer::Aligned(chosen.get_size());
}

void Operand::SetAlternate(const dnnl::memory::desc& alternate) {
  blocked_ = dnnl::memory(alternate, cpu_engine(), DNNL_MEMORY_NONE);
  blocked_copy_ = dnnl::reorder();
  blockable_ = true;
  direct_blocked_ = inner_.get_desc() == alternate;
}

void Operand::Copy(dnnl::memory& outer, dnnl::reorder& copy) {
  if (!copy) copy = input_ ? dnnl::reorder(outer, inner_) : dnnl::reorder(inner_, outer);
  if (input_) {
    copy.execute(cpu_stream(), outer, inner_);
  } else {
    copy.execute(cpu_stream(), inner_, outer);
  }
}

const dnnl::memory& Operand::In(const float* data, CallBuffer& buffer, bool blocked) {
  float* d = const_cast<float*>(data);  // oneDNN only reads an input
  if (blocked) {
    CHECK(blockable_) << "a blocked operand of a shape that has no blocked layout";
    blocked_.set_data_handle(d);
    if (direct_blocked_) return blocked_;
    inner_.set_data_handle(buffer.Take(inner_bytes_));
    Copy(blocked_, blocked_copy_);
    return inner_;
  }
  user_.set_data_handle(d);
  if (chosen_is_plain_) return user_;
  inner_.set_data_handle(buffer.Take(inner_bytes_));
  Copy(user_, copy_);
  return inner_;
}

const dnnl::memory& Operand::Target(float* data, CallBuffer& buffer, bool blocked) {
  if (blocked) {
    CHECK(blockable_) << "a blocked operand of a shape that has no blocked layout";
    blocked_.set_data_handle(data);
    if (direct_blocked_) {
      pending_ = Pending::kNone;
      return blocked_;
    }
    pending_ = Pending::kToBlocked;
  } else {
    user_.set_data_handle(data);
    if (chosen_is_plain_) {
      pending_ = Pending::kNone;
      return user_;
    }
    pending_ = Pending::kToUser;
  }
  inner_.set_data_handle(buffer.Take(inner_bytes_));
  return inner_;
}

void Operand::Out() {
  if (pending_ == Pending::kToUser) Copy(user_, copy_);
  if (pending_ == Pending::kToBlocked) Copy(blocked_, blocked_copy_);
  pending_ = Pending::kNone;
}

void Execute(const dnnl::primitive& primitive, std::unordered_map<int, dnnl::memory> args, Operand* out,
             dnnl::memory* workspace, void* workspace_data) {
  if (workspace && *workspace && workspace->get_desc().get_size() > 0) {
    workspace->set_data_handle(workspace_data);
    args.emplace(DNNL_ARG_WORKSPACE, *workspace);
  }
  primitive.execute(cpu_stream(), args);
  out->Out();
  cpu_stream().wait();
}

dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims, dnnl::memory::format_tag tag) {
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, tag);
}

dnnl::memory::desc AnyDesc(const dnnl::memory::dims& dims, dnnl::memory::data_type type) {
  return dnnl::memory::desc(dims, type, dnnl::memory::format_tag::any);
}

bool IsReference(const dnnl::primitive_desc& pd) { return std::string(pd.impl_info_str()).rfind("ref", 0) == 0; }

void Fail(const dnnl::error& e, const std::string& what) {
  STRATA_FAIL() << what << ": oneDNN refused (" << e.what() << ", status " << static_cast<int>(e.status) << ")";
  throw;  // not reached: STRATA_FAIL throws at the end of its statement
}

}  // namespace onednn

std::string onednn_cpu_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "SSE4.1";
    case dnnl::cpu_isa::avx: return "AVX";
    case dnnl::cpu_isa::avx2: return "AVX2";
    case dnnl::cpu_isa::avx2_vnni: return "AVX2 + VNNI";
    case dnnl::cpu_isa::avx512_mic: return "AVX-512 (Xeon Phi)";
    case dnnl::cpu_isa::avx512_mic_4ops: return "AVX-512 (Xeon Phi, 4FMAPS)";
    case dnnl::cpu_isa::avx512_core: return "AVX-512 core";
    case dnnl::cpu_isa::avx512_core_vnni: return "AVX-512 core + VNNI";
    case dnnl::cpu_isa::avx512_core_bf16: return "AVX-512 core + VNNI + BF16";
    case dnnl::cpu_isa::avx512_core_amx: return "AVX-512 core + AMX";
    case dnnl::cpu_isa::all: return "all (no limit reported)";
  }
  return "unknown (" + std::to_string(static_cast<int>(dnnl::get_effective_cpu_isa())) + ")";
}

bool onednn_has_bf16() {
  // oneDNN 2.6's bfloat16 convolutions start at avx512_core (emulating the bfloat16 instructions there).
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx: return true;
    default: return false;
  }
}

std::string onednn_bf16_support() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx) return "native";
  return onednn_has_bf16() ? "emulated" : "none";
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  std::ostringstream s;
  s << v->major << "." << v->minor << "." << v->patch;
  return s.str();
}

const std::vector<CpuEngineChoice>& cpu_engine_choices() {
  // The DEFAULT column is the measurement in docs/benchmarks.md ("oneDNN CPU engine"); change it only with a
  // new measurement there.
  static const std::vector<CpuEngineChoice> choices{
      {"Convolution", true, true}, {"Deconvolution", true, true}, {"InnerProduct", true, false},
      {"LRN", true, false},
      {"Pooling", true, true},     {"ReLU", true, false},         {"Sigmoid", false, false},
      {"Softmax", true, false},    {"SPP", false, false},         {"TanH", false, false},
  };
  return choices;
}

namespace {

// STRATA_DEFAULT_CPU_ENGINE=CAFFE or ONEDNN overrides the table for every layer type (ONEDNN: those that have a
// oneDNN engine), so that one binary measures both (benchmarks/cpu_vs_pytorch.py, docs/onednn.md). Anything else
// is an error when a layer asks.
enum class Override { kNone, kCaffe, kOneDnn };

Override DefaultOverride() {
  static const Override o = [] {
    const char* v = std::getenv("STRATA_DEFAULT_CPU_ENGINE");
    if (!v || !*v) return Override::kNone;
    const std::string s(v);
    if (s == "CAFFE") return Override::kCaffe;
    if (s == "ONEDNN") return Override::kOneDnn;
    STRATA_FAIL() << "STRATA_DEFAULT_CPU_ENGINE must be CAFFE or ONEDNN, got '" << s << "'";
    return Override::kNone;
  }();
  return o;
}

}  // namespace

bool onednn_by_default(const std::string& layer_type) {
  for (const CpuEngineChoice& c : cpu_engine_choices()) {
    if (layer_type != c.layer_type) continue;
    switch (DefaultOverride()) {
      case Override::kCaffe: return false;
      case Override::kOneDnn: return c.onednn_available;
      case Override::kNone: return c.onednn_by_default;
    }
  }
  return false;
}

std::string cpu_engine_report() {
  std::ostringstream s;
  s << "CPU: oneDNN " << onednn_version() << ", kernels for " << onednn_cpu_isa() << ", " << compute_threads()
    << " compute thread" << (compute_threads() == 1 ? "" : "s") << "\n";
  s << "bfloat16 (precision: BF16): " << onednn_bf16_support() << "\n";
  s << "CPU engine per layer type with engine: DEFAULT, in float (double: CAFFE):\n";
  for (const CpuEngineChoice& c : cpu_engine_choices()) {
    char line[128];
    const char* engine = onednn_by_default(c.layer_type) ? "oneDNN" : "CAFFE";
    std::snprintf(line, sizeof line, "  %-12s %s%s\n", c.layer_type, engine,
                  c.onednn_available ? "  (engine: ONEDNN or CAFFE to choose)" : "");
    s << line;
  }
  return s.str();
}

}  // namespace strata
