#include "strata/util/io.hpp"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/text_format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "strata/common.hpp"
#include "strata/util/snapshot_files.hpp"

namespace strata {

using google::protobuf::Message;

namespace {

// Collects the parser's first error as "file:line:column: message".
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  explicit FirstErrorCollector(std::string origin) : origin_(std::move(origin)) {}
  void AddError(int line, int column, const std::string& message) override {
    if (!first_.empty()) return;
    std::ostringstream s;
    // The parser counts from 0; editors count from 1.
    s << origin_ << ":" << line + 1 << ":" << column + 1 << ": " << message;
    first_ = s.str();
  }
  const std::string& first() const { return first_; }

 private:
  std::string origin_;
  std::string first_;
};

std::string read_whole_file(const std::string& filename) {
  std::ifstream in(filename, std::ios::binary);
  STRATA_REQUIRE(in.good()) << "cannot open " << filename << ": " << std::strerror(errno);
  std::ostringstream s;
  s << in.rdbuf();
  STRATA_REQUIRE(!in.bad()) << "error reading " << filename;
  return s.str();
}

}  // namespace

bool FileExists(const std::string& filename) {
  struct stat st;
  return ::stat(filename.c_str(), &st) == 0;
}

void RequireWritableLocation(const std::string& filename, const std::string& what) {
  const size_t slash = filename.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : filename.substr(0, slash);
  // mkdir -p: each prefix in turn; one that exists (as a directory) is fine.
  for (size_t at = dir.find('/', 1);; at = dir.find('/', at + 1)) {
    const std::string part = dir.substr(0, at);
    struct stat st;
    if (::stat(part.c_str(), &st) != 0) {
      STRATA_REQUIRE(::mkdir(part.c_str(), 0755) == 0 || errno == EEXIST)
          << what << " '" << filename << "': cannot create directory " << part << ": " << std::strerror(errno);
    } else {
      STRATA_REQUIRE(S_ISDIR(st.st_mode)) << what << " '" << filename << "': " << part << " is not a directory";
    }
    if (at == std::string::npos) break;
  }
  const std::string probe = dir + "/.strata-write-check." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  STRATA_REQUIRE(fd >= 0) << what << " '" << filename << "': cannot write in " << dir << ": " << std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
}

void ReadProtoFromTextString(const std::string& text, Message* proto, const std::string& origin) {
  google::protobuf::TextFormat::Parser parser;
  FirstErrorCollector errors(origin);
  parser.RecordErrorsTo(&errors);
  // Protobuf's text parser recurses once per nested message with no limit of its own: a file nested thousands of
  // levels deep (Reversible blocks inside Reversible blocks) overflowed the stack. Binary parsing stops at 100.
  parser.SetRecursionLimit(kMaxProtoNesting);
  if (!parser.ParseFromString(text, proto)) {
    STRATA_FAIL() << "cannot parse " << proto->GetTypeName() << " from " << errors.first();
  }
}

void ReadProtoFromTextFile(const std::string& filename, Message* proto) {
  ReadProtoFromTextString(read_whole_file(filename), proto, filename);
}

void ReadProtoFromBinaryString(const std::string& bytes, Message* proto, const std::string& origin) {
  // Protobuf's streams count in int: a file of 2 GiB or more cannot be parsed (and its size would wrap).
  STRATA_REQUIRE(bytes.size() < static_cast<size_t>(INT32_MAX))
      << origin << " is " << bytes.size() << " bytes; binary protos must be smaller than 2 GiB";
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT32_MAX);
  STRATA_REQUIRE(proto->ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage())
      << "cannot parse " << origin << " as a binary " << proto->GetTypeName() << " (truncated or corrupt file?)";
  std::string missing = proto->InitializationErrorString();
  STRATA_REQUIRE(missing.empty()) << origin << ": missing required fields: " << missing;
}

void ReadProtoFromBinaryFile(const std::string& filename, Message* proto) {
  ReadProtoFromBinaryString(read_whole_file(filename), proto, filename);
}

void WriteAll(int fd, const void* data, size_t n, const std::string& name) {
  const char* bytes = static_cast<const char*>(data);
  size_t written = 0;
  while (written < n) {
    const ssize_t w = ::write(fd, bytes + written, n - written);
    if (w < 0 && errno == EINTR) continue;
    STRATA_REQUIRE(w >= 0) << "cannot write " << name << ": " << std::strerror(errno);
    written += static_cast<size_t>(w);
  }
}

void WriteFileAtomically(const std::string& filename, const std::function<void(const std::string& tmp)>& write) {
  const std::string tmp = filename + ".tmp." + std::to_string(::getpid());
  try {
    write(tmp);
    // The data reach the disk before the rename makes them the file's.
    const int fd = ::open(tmp.c_str(), O_RDONLY);
    STRATA_REQUIRE(fd >= 0) << "cannot open " << tmp << ": " << std::strerror(errno);
    if (::fsync(fd) != 0) {
      const int err = errno;
      ::close(fd);
      STRATA_FAIL() << "cannot flush " << tmp << ": " << std::strerror(err);
    }
    ::close(fd);
    STRATA_REQUIRE(::rename(tmp.c_str(), filename.c_str()) == 0)
        << "cannot rename " << tmp << " to " << filename << ": " << std::strerror(errno);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  // Make the rename itself durable.
  const size_t slash = filename.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : filename.substr(0, slash + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void WriteFileAtomically(const std::string& filename, const std::string& bytes) {
  WriteFileAtomically(filename, [&](const std::string& tmp) {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    STRATA_REQUIRE(fd >= 0) << "cannot create " << tmp << ": " << std::strerror(errno);
    try {
      WriteAll(fd, bytes.data(), bytes.size(), tmp);
    } catch (...) {
      ::close(fd);
      throw;
    }
    STRATA_REQUIRE(::close(fd) == 0) << "cannot write " << tmp << ": " << std::strerror(errno);
  });
}

void WriteProtoToTextFile(const Message& proto, const std::string& filename) {
  std::string text;
  CHECK(google::protobuf::TextFormat::PrintToString(proto, &text));
  WriteFileAtomically(filename, text);
}

void WriteProtoToBinaryFile(const Message& proto, const std::string& filename) {
  std::string bytes;
  CHECK(proto.SerializeToString(&bytes)) << "cannot serialise " << proto.GetTypeName();
  WriteFileAtomically(filename, bytes);
}

namespace {

const char* V1TypeName(V1LayerParameter::LayerType type) {
  switch (type) {
    case V1LayerParameter::ACCURACY: return "Accuracy";
    case V1LayerParameter::CONCAT: return "Concat";
    case V1LayerParameter::CONVOLUTION: return "Convolution";
    case V1LayerParameter::DATA: return "Data";
    case V1LayerParameter::DROPOUT: return "Dropout";
    case V1LayerParameter::ELTWISE: return "Eltwise";
    case V1LayerParameter::FLATTEN: return "Flatten";
    case V1LayerParameter::INNER_PRODUCT: return "InnerProduct";
    case V1LayerParameter::LRN: return "LRN";
    case V1LayerParameter::POOLING: return "Pooling";
    case V1LayerParameter::RELU: return "ReLU";
    case V1LayerParameter::SIGMOID: return "Sigmoid";
    case V1LayerParameter::SOFTMAX: return "Softmax";
    case V1LayerParameter::SOFTMAX_LOSS: return "SoftmaxWithLoss";
    case V1LayerParameter::SPLIT: return "Split";
    case V1LayerParameter::TANH: return "TanH";
    case V1LayerParameter::SLICE: return "Slice";
    case V1LayerParameter::SILENCE: return "Silence";
    case V1LayerParameter::EUCLIDEAN_LOSS: return "EuclideanLoss";
    case V1LayerParameter::ARGMAX: return "ArgMax";
    case V1LayerParameter::IMAGE_DATA: return "ImageData";
    case V1LayerParameter::MEMORY_DATA: return "MemoryData";
    case V1LayerParameter::DUMMY_DATA: return "DummyData";
    case V1LayerParameter::POWER: return "Power";
    case V1LayerParameter::EXP: return "Exp";
    case V1LayerParameter::ABSVAL: return "AbsVal";
    case V1LayerParameter::BNLL: return "BNLL";
    case V1LayerParameter::THRESHOLD: return "Threshold";
    case V1LayerParameter::MVN: return "MVN";
    case V1LayerParameter::DECONVOLUTION: return "Deconvolution";
    case V1LayerParameter::HINGE_LOSS: return "HingeLoss";
    case V1LayerParameter::INFOGAIN_LOSS: return "InfogainLoss";
    case V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS: return "MultinomialLogisticLoss";
    case V1LayerParameter::SIGMOID_CROSS_ENTROPY_LOSS: return "SigmoidCrossEntropyLoss";
    case V1LayerParameter::CONTRASTIVE_LOSS: return "ContrastiveLoss";
    case V1LayerParameter::HDF5_DATA: return "HDF5Data";
    case V1LayerParameter::HDF5_OUTPUT: return "HDF5Output";
    case V1LayerParameter::IM2COL: return "Im2col";
    case V1LayerParameter::WINDOW_DATA: return "WindowData";
    default: return "";
  }
}

void UpgradeV1Layer(const V1LayerParameter& v1, LayerParameter* layer) {
  layer->set_name(v1.name());
  layer->set_type(V1TypeName(v1.type()));
  STRATA_REQUIRE(!layer->type().empty() || v1.type() == V1LayerParameter::NONE)
      << "legacy layer '" << v1.name() << "' has an unsupported V1 type " << static_cast<int>(v1.type());
  for (const auto& b : v1.bottom()) layer->add_bottom(b);
  for (const auto& t : v1.top()) layer->add_top(t);
  for (const auto& r : v1.include()) *layer->add_include() = r;
  for (const auto& r : v1.exclude()) *layer->add_exclude() = r;
  for (const auto& b : v1.blobs()) *layer->add_blobs() = b;
  const int num_params = std::max({v1.param_size(), v1.blobs_lr_size(), v1.weight_decay_size()});
  for (int i = 0; i < num_params; ++i) {
    ParamSpec* spec = layer->add_param();
    if (i < v1.param_size()) spec->set_name(v1.param(i));
    if (i < v1.blobs_lr_size()) spec->set_lr_mult(v1.blobs_lr(i));
    if (i < v1.weight_decay_size()) spec->set_decay_mult(v1.weight_decay(i));
  }
  for (float w : v1.loss_weight()) layer->add_loss_weight(w);
  if (v1.has_accuracy_param()) *layer->mutable_accuracy_param() = v1.accuracy_param();
  if (v1.has_concat_param()) *layer->mutable_concat_param() = v1.concat_param();
  if (v1.has_convolution_param()) *layer->mutable_convolution_param() = v1.convolution_param();
  if (v1.has_data_param()) *layer->mutable_data_param() = v1.data_param();
  if (v1.has_dropout_param()) *layer->mutable_dropout_param() = v1.dropout_param();
  if (v1.has_eltwise_param()) *layer->mutable_eltwise_param() = v1.eltwise_param();
  if (v1.has_inner_product_param()) *layer->mutable_inner_product_param() = v1.inner_product_param();
  if (v1.has_lrn_param()) *layer->mutable_lrn_param() = v1.lrn_param();
  if (v1.has_pooling_param()) *layer->mutable_pooling_param() = v1.pooling_param();
  if (v1.has_relu_param()) *layer->mutable_relu_param() = v1.relu_param();
  if (v1.has_sigmoid_param()) *layer->mutable_sigmoid_param() = v1.sigmoid_param();
  if (v1.has_softmax_param()) *layer->mutable_softmax_param() = v1.softmax_param();
  if (v1.has_tanh_param()) *layer->mutable_tanh_param() = v1.tanh_param();
  if (v1.has_transform_param()) *layer->mutable_transform_param() = v1.transform_param();
  if (v1.has_loss_param()) *layer->mutable_loss_param() = v1.loss_param();
  if (v1.has_contrastive_loss_param()) *layer->mutable_contrastive_loss_param() = v1.contrastive_loss_param();
  if (v1.has_hinge_loss_param()) *layer->mutable_hinge_loss_param() = v1.hinge_loss_param();
  if (v1.has_infogain_loss_param()) *layer->mutable_infogain_loss_param() = v1.infogain_loss_param();
  if (v1.has_argmax_param()) *layer->mutable_argmax_param() = v1.argmax_param();
  if (v1.has_dummy_data_param()) *layer->mutable_dummy_data_param() = v1.dummy_data_param();
  if (v1.has_exp_param()) *layer->mutable_exp_param() = v1.exp_param();
  if (v1.has_hdf5_data_param()) *layer->mutable_hdf5_data_param() = v1.hdf5_data_param();
  if (v1.has_hdf5_output_param()) *layer->mutable_hdf5_output_param() = v1.hdf5_output_param();
  if (v1.has_image_data_param()) *layer->mutable_image_data_param() = v1.image_data_param();
  if (v1.has_memory_data_param()) *layer->mutable_memory_data_param() = v1.memory_data_param();
  if (v1.has_mvn_param()) *layer->mutable_mvn_param() = v1.mvn_param();
  if (v1.has_power_param()) *layer->mutable_power_param() = v1.power_param();
  if (v1.has_slice_param()) *layer->mutable_slice_param() = v1.slice_param();
  if (v1.has_threshold_param()) *layer->mutable_threshold_param() = v1.threshold_param();
  if (v1.has_window_data_param()) *layer->mutable_window_data_param() = v1.window_data_param();
}

}  // namespace

bool UpgradeV1Net(NetParameter* param) {
  if (param->layers_size() == 0) return false;
  STRATA_REQUIRE(param->layer_size() == 0)
      << "net '" << param->name() << "' mixes the legacy 'layers' list with 'layer'; use one";
  for (const auto& v1 : param->layers()) UpgradeV1Layer(v1, param->add_layer());
  param->clear_layers();
  return true;
}

void ReadNetParamsFromTextFile(const std::string& filename, NetParameter* param) {
  ReadProtoFromTextFile(filename, param);
  UpgradeV1Net(param);
}

void ReadNetParamsFromBinaryFile(const std::string& filename, NetParameter* param) {
  ReadCaffemodel(filename, param);
  UpgradeV1Net(param);
}

void ReadSolverParamsFromTextFile(const std::string& filename, SolverParameter* param) {
  ReadProtoFromTextFile(filename, param);
}

}  // namespace strata
