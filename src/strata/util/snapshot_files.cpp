#include "strata/util/snapshot_files.hpp"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "strata/common.hpp"
#include "strata/util/hdf5_util.hpp"
#include "strata/util/io.hpp"

namespace strata {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::internal::WireFormatLite;

namespace {

// The checksum field's content: this magic, then the CRC-32, little-endian. The magic lets a reader find the
// field from the file's end, so that a damaged tag cannot make a checked file pass as one without a checksum.
constexpr char kMagic[] = "strataCK";
constexpr size_t kMagicSize = sizeof(kMagic) - 1;
constexpr size_t kChecksumSize = kMagicSize + 4;
constexpr char kHdf5Signature[] = "\x89HDF\r\n\x1a\n";
// HDF5 names (Caffe's, then Strata's additions, which Caffe's readers never look up).
constexpr char kHdf5ChecksumAttribute[] = "strata_checksum";
constexpr char kHdf5Iter[] = "strata_iter";
constexpr char kHdf5State[] = "strata_state";

uint32_t Crc(uint32_t crc, const void* data, size_t n) {
  return static_cast<uint32_t>(crc32_z(crc, static_cast<const Bytef*>(data), n));
}

std::string Hex(uint32_t v) {
  std::ostringstream s;
  s << std::hex << std::setw(8) << std::setfill('0') << v;
  return s.str();
}

std::string ErrnoText() { return errno ? std::string(": ") + std::strerror(errno) : std::string(); }

// A file descriptor closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting the error (a delayed write error shows here).
  void Close(const std::string& name) {
    const int fd = fd_;
    fd_ = -1;
    STRATA_REQUIRE(::close(fd) == 0) << "cannot write " << name << ": " << std::strerror(errno);
  }

 private:
  int fd_;
};

// ---- BINARYPROTO: records streamed, checksum trailer ----

const FieldDescriptor* ChecksumField(const Message& msg) {
  const FieldDescriptor* f = msg.GetDescriptor()->FindFieldByName("checksum");
  CHECK(f && f->type() == FieldDescriptor::TYPE_BYTES) << msg.GetTypeName() << " has no checksum field";
  return f;
}

// The checksum field as the file's last bytes: tag, length, magic, CRC.
std::string Trailer(const Message& msg, uint32_t crc) {
  uint8_t tag[8];
  const uint8_t* end = CodedOutputStream::WriteVarint32ToArray(
      WireFormatLite::MakeTag(ChecksumField(msg)->number(), WireFormatLite::WIRETYPE_LENGTH_DELIMITED), tag);
  std::string t(reinterpret_cast<const char*>(tag), static_cast<size_t>(end - tag));
  t.push_back(static_cast<char>(kChecksumSize));
  t.append(kMagic, kMagicSize);
  for (int i = 0; i < 4; ++i) t.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  return t;
}

// The repeated message fields of `msg`'s type, in field-number order: the records written one at a time.
std::vector<const FieldDescriptor*> RecordFields(const Message& msg) {
  std::vector<const FieldDescriptor*> fields;
  const Descriptor* d = msg.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated() && f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) fields.push_back(f);
  }
  std::sort(fields.begin(), fields.end(),
            [](const FieldDescriptor* a, const FieldDescriptor* b) { return a->number() < b->number(); });
  return fields;
}

// A file written through protobuf's streams, the CRC-32 of its bytes kept as they go.
class ChecksummedFile : public google::protobuf::io::CopyingOutputStream {
 public:
  explicit ChecksummedFile(const std::string& path)
      : path_(path), fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)) {
    STRATA_REQUIRE(fd_.get() >= 0) << "cannot create " << path << ": " << std::strerror(errno);
  }
  bool Write(const void* buffer, int size) override {
    try {
      WriteAll(fd_.get(), buffer, static_cast<size_t>(size), path_);
    } catch (const Error& e) {
      if (error_.empty()) error_ = e.what();
      return false;
    }
    crc_ = Crc(crc_, buffer, static_cast<size_t>(size));
    return true;
  }
  // Throws the first failed write's error.
  void Check() const {
    if (!error_.empty()) throw Error(error_);
  }
  uint32_t crc() const { return crc_; }
  int fd() const { return fd_.get(); }
  void Close() { fd_.Close(path_); }

 private:
  std::string path_;
  Fd fd_;
  std::string error_;
  uint32_t crc_ = 0;
};

// Writes `msg` to `path` (a new file): its fields but the repeated messages in one piece, then each record of
// those on its own, then the checksum of it all as the last field. Returns the checksum.
uint32_t WriteStreamed(Message* msg, const std::string& path) {
  const Reflection* r = msg->GetReflection();
  r->ClearField(msg, ChecksumField(*msg));
  // The records move aside while the rest is serialised, and come back whatever happens.
  const std::vector<const FieldDescriptor*> fields = RecordFields(*msg);
  std::unique_ptr<Message> records(msg->New());
  r->SwapFields(msg, records.get(), fields);
  struct SwapBack {
    const Reflection* r;
    Message* a;
    Message* b;
    const std::vector<const FieldDescriptor*>& fields;
    ~SwapBack() { r->SwapFields(a, b, fields); }
  } back{r, msg, records.get(), fields};

  ChecksummedFile file(path);
  {
    google::protobuf::io::CopyingOutputStreamAdaptor out(&file, 1 << 20);
    std::string head;
    CHECK(msg->SerializeToString(&head)) << "cannot serialise " << msg->GetTypeName();
    {
      CodedOutputStream coded(&out);
      coded.WriteRaw(head.data(), static_cast<int>(head.size()));
    }
    for (const FieldDescriptor* f : fields) {
      for (int k = 0; k < r->FieldSize(*records, f); ++k) {
        const Message& record = r->GetRepeatedMessage(*records, f, k);
        const size_t size = record.ByteSizeLong();
        STRATA_REQUIRE(size <= static_cast<size_t>(INT_MAX))
            << "cannot write " << path << ": " << f->name() << " record " << k << " is " << size
            << " bytes, over protobuf's 2 GiB limit on one message (snapshot_format: HDF5 has none)";
        CodedOutputStream coded(&out);
        coded.WriteTag(WireFormatLite::MakeTag(f->number(), WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
        coded.WriteVarint32(static_cast<uint32_t>(size));
        record.SerializeWithCachedSizes(&coded);
        if (coded.HadError()) break;
      }
      file.Check();
    }
    out.Flush();
    file.Check();
  }
  const uint32_t crc = file.crc();
  const std::string trailer = Trailer(*msg, crc);
  WriteAll(file.fd(), trailer.data(), trailer.size(), path);
  file.Close();
  return crc;
}

// Reads the checksum trailer of the open file `fd` of `size` bytes; false when it has none. A trailer whose CRC
// differs from the bytes before it, or that is damaged, is an Error naming `filename`.
bool VerifyTrailer(int fd, uint64_t size, const Message& type, const std::string& filename, uint32_t* crc) {
  const std::string form = Trailer(type, 0);
  const size_t n = form.size();
  if (size < n) return false;
  std::string tail(n, '\0');
  STRATA_REQUIRE(::pread(fd, &tail[0], n, static_cast<off_t>(size - n)) == static_cast<ssize_t>(n))
      << "cannot read " << filename << ErrnoText();
  if (tail.compare(n - kChecksumSize, kMagicSize, kMagic) != 0) return false;
  STRATA_REQUIRE(tail.compare(0, n - 4, form, 0, n - 4) == 0)
      << filename << " is corrupt: its checksum field is damaged";
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) stored |= static_cast<uint32_t>(static_cast<uint8_t>(tail[n - 4 + i])) << (8 * i);
  uint32_t computed = 0;
  std::vector<char> buffer(4 << 20);
  for (uint64_t at = 0; at < size - n;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), size - n - at));
    const ssize_t got = ::pread(fd, buffer.data(), want, static_cast<off_t>(at));
    STRATA_REQUIRE(got > 0) << "cannot read " << filename << ErrnoText();
    computed = Crc(computed, buffer.data(), static_cast<size_t>(got));
    at += static_cast<uint64_t>(got);
  }
  STRATA_REQUIRE(computed == stored)
      << filename << " is corrupt: its content's checksum (CRC-32) is " << Hex(computed) << ", the file records "
      << Hex(stored) << " (changed bytes, or an incomplete copy)";
  *crc = stored;
  return true;
}

// Parses the open file `fd` of `size` bytes into `msg`, one top-level field at a time: a record of a repeated
// message field straight into its place, the other fields collected and merged at the end. Each field gets a
// fresh CodedInputStream, whose byte count (an int) then never passes 2 GiB.
void ParseStreamed(int fd, uint64_t size, const std::string& filename, Message* msg) {
  msg->Clear();
  const Reflection* r = msg->GetReflection();
  const Descriptor* d = msg->GetDescriptor();
  const std::string corrupt =
      "cannot parse " + filename + " as a binary " + msg->GetTypeName() + " (truncated or corrupt file?)";
  google::protobuf::io::FileInputStream file(fd, 1 << 20);
  std::string rest;
  for (uint64_t at = 0; at < size;) {
    CodedInputStream in(&file);
    in.SetTotalBytesLimit(INT_MAX);
    const uint32_t tag = in.ReadTag();
    if (tag == 0) throw Error(corrupt);
    const FieldDescriptor* f = d->FindFieldByNumber(static_cast<int>(WireFormatLite::GetTagFieldNumber(tag)));
    if (f && f->is_repeated() && f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t length = 0;
      if (!in.ReadVarint32(&length) || length > static_cast<uint32_t>(INT_MAX)) throw Error(corrupt);
      const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
      Message* record = r->AddMessage(msg, f);
      if (!record->MergePartialFromCodedStream(&in) || !in.ConsumedEntireMessage() || in.BytesUntilLimit() != 0) {
        throw Error(corrupt);
      }
      in.PopLimit(limit);
    } else {
      google::protobuf::io::StringOutputStream rest_stream(&rest);
      CodedOutputStream rest_coded(&rest_stream);
      if (!WireFormatLite::SkipField(&in, tag, &rest_coded)) throw Error(corrupt);
    }
    at += static_cast<uint64_t>(in.CurrentPosition());
    STRATA_REQUIRE(at <= size) << corrupt;
  }
  CodedInputStream rest_in(reinterpret_cast<const uint8_t*>(rest.data()), static_cast<int>(rest.size()));
  if (!msg->MergePartialFromCodedStream(&rest_in) || !rest_in.ConsumedEntireMessage()) throw Error(corrupt);
  STRATA_REQUIRE(msg->IsInitialized()) << filename << ": missing required fields: " << msg->InitializationErrorString();
}

// Reads a BINARYPROTO snapshot file of any size, checking its checksum when it has one.
SnapshotFileInfo ReadStreamed(const std::string& filename, Message* msg) {
  Fd fd(::open(filename.c_str(), O_RDONLY));
  STRATA_REQUIRE(fd.get() >= 0) << "cannot open " << filename << ": " << std::strerror(errno);
  struct stat st;
  STRATA_REQUIRE(::fstat(fd.get(), &st) == 0) << "cannot read " << filename << ErrnoText();
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  SnapshotFileInfo info;
  info.has_checksum = VerifyTrailer(fd.get(), size, *msg, filename, &info.checksum);
  ParseStreamed(fd.get(), size, filename, msg);
  // A checksum field anywhere but at the end was not written by Strata as it is now.
  STRATA_REQUIRE(info.has_checksum || !msg->GetReflection()->HasField(*msg, ChecksumField(*msg)))
      << filename << " is corrupt: its checksum field is not its last";
  return info;
}

// ---- HDF5: Caffe's layout, checksum attribute ----

namespace h5 = hdf5;
using Group = h5::Handle<H5Gclose>;
using Object = h5::Handle<H5Oclose>;
using Attribute = h5::Handle<H5Aclose>;

std::vector<std::string> LinkNames(hid_t group, const std::string& filename) {
  H5G_info_t info;
  STRATA_REQUIRE(H5Gget_info(group, &info) >= 0) << "cannot read " << filename << " (HDF5)";
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t n = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    STRATA_REQUIRE(n >= 0) << "cannot read " << filename << " (HDF5)";
    std::string name(static_cast<size_t>(n) + 1, '\0');
    H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, &name[0], name.size(), H5P_DEFAULT);
    name.resize(static_cast<size_t>(n));
    names.push_back(name);
  }
  return names;
}

std::vector<hsize_t> Dims(hid_t dataset) {
  h5::Dataspace space(H5Dget_space(dataset));
  const int rank = space.ok() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(rank, 0)));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

// The CRC-32 of every dataset under `group` (its path, shape and bytes as stored), in HDF5's name order: the
// HDF5 files' checksum, computed alike when written and when read.
uint32_t ContentChecksum(hid_t group, const std::string& path, uint32_t crc, const std::string& filename) {
  for (const std::string& name : LinkNames(group, filename)) {
    Object obj(H5Oopen(group, name.c_str(), H5P_DEFAULT));
    STRATA_REQUIRE(obj.ok()) << "cannot read " << filename << ": " << path << name << " (HDF5)";
    const std::string full = path + name;
    if (H5Iget_type(obj.get()) == H5I_GROUP) {
      crc = ContentChecksum(obj.get(), full + "/", crc, filename);
      continue;
    }
    if (H5Iget_type(obj.get()) != H5I_DATASET) continue;
    crc = Crc(crc, full.c_str(), full.size() + 1);
    for (hsize_t d : Dims(obj.get())) {
      const uint64_t v = d;
      crc = Crc(crc, &v, sizeof(v));
    }
    h5::Datatype stored(H5Dget_type(obj.get()));
    h5::Datatype native(H5Tget_native_type(stored.get(), H5T_DIR_ASCEND));
    h5::Dataspace space(H5Dget_space(obj.get()));
    const hssize_t points = H5Sget_simple_extent_npoints(space.get());
    STRATA_REQUIRE(native.ok() && points >= 0) << "cannot read " << filename << ": " << full << " (HDF5)";
    std::vector<char> bytes(H5Tget_size(native.get()) * static_cast<size_t>(points));
    STRATA_REQUIRE(bytes.empty() || H5Dread(obj.get(), native.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) >= 0)
        << filename << " is corrupt: cannot read " << full << " (HDF5)";
    crc = Crc(crc, bytes.data(), bytes.size());
  }
  return crc;
}

// Writes the checksum attribute of the open file `file`; returns the checksum.
uint32_t WriteHdf5Checksum(hid_t file, const std::string& filename) {
  const uint32_t crc = ContentChecksum(file, "/", 0, filename);
  h5::Dataspace scalar(H5Screate(H5S_SCALAR));
  Attribute attr(H5Acreate2(file, kHdf5ChecksumAttribute, H5T_NATIVE_UINT32, scalar.get(), H5P_DEFAULT, H5P_DEFAULT));
  STRATA_REQUIRE(attr.ok() && H5Awrite(attr.get(), H5T_NATIVE_UINT32, &crc) >= 0)
      << "cannot write " << filename << " (HDF5)" << ErrnoText();
  STRATA_REQUIRE(H5Fflush(file, H5F_SCOPE_GLOBAL) >= 0) << "cannot write " << filename << " (HDF5)" << ErrnoText();
  return crc;
}

// Checks the checksum attribute of the open file `file`, when it has one.
SnapshotFileInfo VerifyHdf5Checksum(hid_t file, const std::string& filename) {
  SnapshotFileInfo info;
  if (H5Aexists(file, kHdf5ChecksumAttribute) <= 0) return info;
  Attribute attr(H5Aopen(file, kHdf5ChecksumAttribute, H5P_DEFAULT));
  uint32_t stored = 0;
  STRATA_REQUIRE(attr.ok() && H5Aread(attr.get(), H5T_NATIVE_UINT32, &stored) >= 0)
      << filename << " is corrupt: its checksum attribute cannot be read";
  const uint32_t computed = ContentChecksum(file, "/", 0, filename);
  STRATA_REQUIRE(computed == stored)
      << filename << " is corrupt: its content's checksum (CRC-32) is " << Hex(computed) << ", the file records "
      << Hex(stored) << " (changed bytes, or an incomplete copy)";
  info.has_checksum = true;
  info.checksum = stored;
  return info;
}

// A creation property list of class `cls` (file, group, dataset) without HDF5's default timestamps in object
// headers: the same snapshot is then the same bytes (the fault matrix compares resumed and straight runs with cmp).
hid_t Untimed(hid_t cls) {
  const hid_t list = H5Pcreate(cls);
  H5Pset_obj_track_times(list, 0);
  return list;
}

void WriteHdf5Dataset(hid_t loc, const std::string& name, hid_t type, const std::vector<hsize_t>& dims,
                      const void* data, const std::string& filename) {
  h5::Dataspace space(dims.empty() ? H5Screate(H5S_SCALAR)
                                   : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  h5::PropertyList dcpl(Untimed(H5P_DATASET_CREATE));
  h5::Dataset ds(space.ok() ? H5Dcreate2(loc, name.c_str(), type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT)
                            : -1);
  STRATA_REQUIRE(ds.ok() && H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0)
      << "cannot write " << filename << ": dataset " << name << " (HDF5)" << ErrnoText();
}

void WriteHdf5Blob(hid_t loc, const std::string& name, const BlobProto& blob, bool diff, const std::string& filename) {
  std::vector<hsize_t> dims;
  if (blob.has_shape()) {
    for (int64_t d : blob.shape().dim()) dims.push_back(static_cast<hsize_t>(d));
  } else {
    dims = {static_cast<hsize_t>(blob.num()), static_cast<hsize_t>(blob.channels()),
            static_cast<hsize_t>(blob.height()), static_cast<hsize_t>(blob.width())};
  }
  if (dims.empty()) dims.push_back(1);  // a scalar blob: one value
  const bool dbl = diff ? blob.double_diff_size() > 0 : blob.double_data_size() > 0;
  const void* data = diff ? (dbl ? static_cast<const void*>(blob.double_diff().data()) : blob.diff().data())
                          : (dbl ? static_cast<const void*>(blob.double_data().data()) : blob.data().data());
  WriteHdf5Dataset(loc, name, dbl ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT, dims, data, filename);
}

void ReadHdf5Blob(hid_t loc, const std::string& name, BlobProto* blob, const std::string& filename) {
  h5::Dataset ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT));
  STRATA_REQUIRE(ds.ok()) << filename << ": no dataset " << name << " (HDF5)";
  hsize_t count = 1;
  for (hsize_t d : Dims(ds.get())) {
    blob->mutable_shape()->add_dim(static_cast<int64_t>(d));
    count *= d;
  }
  STRATA_REQUIRE(count <= static_cast<hsize_t>(INT_MAX)) << filename << ": dataset " << name << " is too large";
  h5::Datatype stored(H5Dget_type(ds.get()));
  STRATA_REQUIRE(H5Tget_class(stored.get()) == H5T_FLOAT) << filename << ": dataset " << name << " is not floating-point";
  herr_t ok;
  if (H5Tget_size(stored.get()) > sizeof(float)) {
    blob->mutable_double_data()->Resize(static_cast<int>(count), 0.0);
    ok = H5Dread(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, blob->mutable_double_data()->mutable_data());
  } else {
    blob->mutable_data()->Resize(static_cast<int>(count), 0.0f);
    ok = H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, blob->mutable_data()->mutable_data());
  }
  STRATA_REQUIRE(ok >= 0) << filename << " is corrupt: cannot read dataset " << name << " (HDF5)";
}

int ReadHdf5Int(hid_t loc, const std::string& name, const std::string& filename) {
  h5::Dataset ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT));
  int v = 0;
  STRATA_REQUIRE(ds.ok() && H5Dread(ds.get(), H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) >= 0)
      << filename << ": cannot read the integer " << name << " (HDF5)";
  return v;
}

// A dataset of bytes: a fixed-length string (Caffe's learned_net) or an array of uint8 (Strata's state).
std::string ReadHdf5Bytes(hid_t loc, const std::string& name, const std::string& filename) {
  h5::Dataset ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT));
  STRATA_REQUIRE(ds.ok()) << filename << ": no dataset " << name << " (HDF5)";
  h5::Datatype stored(H5Dget_type(ds.get()));
  const bool string = H5Tget_class(stored.get()) == H5T_STRING;
  STRATA_REQUIRE(!string || !H5Tis_variable_str(stored.get())) << filename << ": " << name << " is a variable-length string";
  h5::Dataspace space(H5Dget_space(ds.get()));
  const hssize_t points = H5Sget_simple_extent_npoints(space.get());
  STRATA_REQUIRE(points >= 0) << filename << ": cannot read " << name << " (HDF5)";
  std::string bytes((string ? H5Tget_size(stored.get()) : 1) * static_cast<size_t>(points), '\0');
  STRATA_REQUIRE(bytes.empty() || H5Dread(ds.get(), string ? stored.get() : H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL,
                                          H5P_DEFAULT, &bytes[0]) >= 0)
      << filename << ": cannot read " << name << " (HDF5)";
  if (string) bytes.resize(std::strlen(bytes.c_str()));
  return bytes;
}

void WriteHdf5String(hid_t loc, const std::string& name, const std::string& value, const std::string& filename) {
  h5::Datatype type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), value.size() + 1);
  H5Tset_strpad(type.get(), H5T_STR_NULLTERM);
  WriteHdf5Dataset(loc, name, type.get(), {}, value.c_str(), filename);
}

// A new HDF5 file (its id, for an h5::File).
hid_t CreateHdf5(const std::string& path) {
  h5::PropertyList fcpl(Untimed(H5P_FILE_CREATE));
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), H5P_DEFAULT);
  STRATA_REQUIRE(file >= 0) << "cannot create " << path << " (HDF5)" << ErrnoText();
  return file;
}

// The group `name` in `loc`, created if need be (its id, for a Group).
hid_t CreateGroup(hid_t loc, const std::string& name, const std::string& filename) {
  // Layer names may hold '/' (GoogLeNet's "conv1/7x7_s2"): the groups above are made as needed.
  if (H5Lexists(loc, name.c_str(), H5P_DEFAULT) > 0) return H5Gopen2(loc, name.c_str(), H5P_DEFAULT);
  h5::PropertyList lcpl(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  h5::PropertyList gcpl(Untimed(H5P_GROUP_CREATE));
  const hid_t g = H5Gcreate2(loc, name.c_str(), lcpl.get(), gcpl.get(), H5P_DEFAULT);
  STRATA_REQUIRE(g >= 0) << "cannot write " << filename << ": group " << name << " (HDF5)" << ErrnoText();
  return g;
}

uint32_t WriteCaffemodelHdf5(const NetParameter& weights, int iter, const std::string& path) {
  h5::QuietErrors quiet;
  h5::File file(CreateHdf5(path));
  bool diff = false;
  for (const LayerParameter& layer : weights.layer()) {
    for (const BlobProto& b : layer.blobs()) diff = diff || b.diff_size() > 0 || b.double_diff_size() > 0;
  }
  {
    Group data(CreateGroup(file.get(), "data", path));
    Group diffs(diff ? CreateGroup(file.get(), "diff", path) : -1);
    for (const LayerParameter& layer : weights.layer()) {
      Group g(CreateGroup(data.get(), layer.name(), path));
      for (int j = 0; j < layer.blobs_size(); ++j) WriteHdf5Blob(g.get(), std::to_string(j), layer.blobs(j), false, path);
      if (!diff) continue;
      Group d(CreateGroup(diffs.get(), layer.name(), path));
      for (int j = 0; j < layer.blobs_size(); ++j) WriteHdf5Blob(d.get(), std::to_string(j), layer.blobs(j), true, path);
    }
  }
  WriteHdf5Dataset(file.get(), kHdf5Iter, H5T_NATIVE_INT, {}, &iter, path);
  return WriteHdf5Checksum(file.get(), path);
}

// Every group under `group` is a layer (its name the path below /data), its datasets 0, 1, ... its blobs.
void ReadHdf5Layers(hid_t group, const std::string& prefix, NetParameter* weights, const std::string& filename) {
  for (const std::string& name : LinkNames(group, filename)) {
    Object obj(H5Oopen(group, name.c_str(), H5P_DEFAULT));
    if (!obj.ok() || H5Iget_type(obj.get()) != H5I_GROUP) continue;
    LayerParameter* layer = weights->add_layer();
    layer->set_name(prefix + name);
    int blobs = 0;
    for (const std::string& child : LinkNames(obj.get(), filename)) {
      Object c(H5Oopen(obj.get(), child.c_str(), H5P_DEFAULT));
      if (c.ok() && H5Iget_type(c.get()) == H5I_DATASET) ++blobs;
    }
    for (int j = 0; j < blobs; ++j) ReadHdf5Blob(obj.get(), std::to_string(j), layer->add_blobs(), filename);
    ReadHdf5Layers(obj.get(), prefix + name + "/", weights, filename);
  }
}

SnapshotFileInfo ReadCaffemodelHdf5(const std::string& filename, NetParameter* weights) {
  h5::QuietErrors quiet;
  h5::File file(H5Fopen(filename.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  STRATA_REQUIRE(file.ok()) << "cannot open " << filename << " as HDF5 (corrupt file?)";
  SnapshotFileInfo info = VerifyHdf5Checksum(file.get(), filename);
  weights->Clear();
  STRATA_REQUIRE(h5::HasLink(file.get(), "data")) << filename << ": an HDF5 caffemodel has a /data group; this has none";
  Group data(H5Gopen2(file.get(), "data", H5P_DEFAULT));
  STRATA_REQUIRE(data.ok()) << filename << ": /data is not a group";
  ReadHdf5Layers(data.get(), "", weights, filename);
  if (h5::HasLink(file.get(), kHdf5Iter)) info.iter = ReadHdf5Int(file.get(), kHdf5Iter, filename);
  return info;
}

void WriteSolverStateHdf5(SolverState* state, const std::string& path) {
  h5::QuietErrors quiet;
  h5::File file(CreateHdf5(path));
  const int iter = state->iter();
  WriteHdf5Dataset(file.get(), "iter", H5T_NATIVE_INT, {}, &iter, path);
  WriteHdf5String(file.get(), "learned_net", state->learned_net(), path);
  const int step = state->current_step();
  WriteHdf5Dataset(file.get(), "current_step", H5T_NATIVE_INT, {}, &step, path);
  {
    Group history(CreateGroup(file.get(), "history", path));
    for (int i = 0; i < state->history_size(); ++i) {
      WriteHdf5Blob(history.get(), std::to_string(i), state->history(i), false, path);
    }
  }
  // Strata's additions (data positions, random engines, the pair): the state without what Caffe's datasets hold.
  std::string extra;
  {
    google::protobuf::RepeatedPtrField<BlobProto> history;
    history.Swap(state->mutable_history());
    SolverState rest(*state);
    history.Swap(state->mutable_history());
    rest.clear_iter();
    rest.clear_learned_net();
    rest.clear_current_step();
    rest.clear_checksum();
    CHECK(rest.SerializeToString(&extra));
  }
  WriteHdf5Dataset(file.get(), kHdf5State, H5T_NATIVE_UINT8, {static_cast<hsize_t>(extra.size())}, extra.data(), path);
  WriteHdf5Checksum(file.get(), path);
}

void ReadSolverStateHdf5(const std::string& filename, SolverState* state) {
  h5::QuietErrors quiet;
  h5::File file(H5Fopen(filename.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  STRATA_REQUIRE(file.ok()) << "cannot open " << filename << " as HDF5 (corrupt file?)";
  VerifyHdf5Checksum(file.get(), filename);
  state->Clear();
  if (h5::HasLink(file.get(), kHdf5State)) {
    const std::string extra = ReadHdf5Bytes(file.get(), kHdf5State, filename);
    STRATA_REQUIRE(state->ParseFromString(extra)) << filename << " is corrupt: cannot parse " << kHdf5State;
  }
  state->set_iter(ReadHdf5Int(file.get(), "iter", filename));
  state->set_current_step(ReadHdf5Int(file.get(), "current_step", filename));
  if (h5::HasLink(file.get(), "learned_net")) state->set_learned_net(ReadHdf5Bytes(file.get(), "learned_net", filename));
  STRATA_REQUIRE(h5::HasLink(file.get(), "history")) << filename << ": an HDF5 solverstate has a history group; this has none";
  Group history(H5Gopen2(file.get(), "history", H5P_DEFAULT));
  const size_t n = LinkNames(history.get(), filename).size();
  for (size_t i = 0; i < n; ++i) ReadHdf5Blob(history.get(), std::to_string(i), state->add_history(), filename);
}

// ---- one run per prefix ----

std::mutex g_claims_mutex;
std::map<std::string, int> g_claims;  // lock file -> its descriptor, held until the process ends

// The host and process named in a lock file.
std::string Holder() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return std::string("host ") + host + ", pid " + std::to_string(::getpid());
}

// Removes PREFIX_iter_*.tmp.PID whose process PID is gone; one whose process is alive is a snapshot being written.
void RemoveStaleTemporaries(const std::string& prefix) {
  namespace fs = std::filesystem;
  const fs::path pattern(prefix + "_iter_");
  const std::string stem = pattern.filename().string();
  const fs::path dir = pattern.parent_path().empty() ? fs::path(".") : pattern.parent_path();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t tmp = name.rfind(".tmp.");
    if (name.rfind(stem, 0) != 0 || tmp == std::string::npos) continue;
    const std::string digits = name.substr(tmp + 5);
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno == EPERM) {
      LOG(WARNING) << "Left " << entry.path().string() << ": its process " << pid << " is alive";
      continue;
    }
    if (fs::remove(entry.path(), ec)) {
      LOG(INFO) << "Removed " << entry.path().string() << ", left by an interrupted snapshot (process " << pid
                << " is gone)";
    }
  }
}

}  // namespace

bool IsHdf5File(const std::string& filename) {
  char head[8] = {};
  Fd fd(::open(filename.c_str(), O_RDONLY));
  return fd.get() >= 0 && ::pread(fd.get(), head, 8, 0) == 8 && std::memcmp(head, kHdf5Signature, 8) == 0;
}

std::string CaffemodelExtension(SolverParameter::SnapshotFormat format) {
  return format == SolverParameter::HDF5 ? ".caffemodel.h5" : ".caffemodel";
}

std::string SolverstateExtension(SolverParameter::SnapshotFormat format) {
  return format == SolverParameter::HDF5 ? ".solverstate.h5" : ".solverstate";
}

uint32_t WriteCaffemodel(NetParameter* weights, int iter, const std::string& filename,
                         SolverParameter::SnapshotFormat format) {
  weights->clear_checksum();
  weights->clear_snapshot_iter();
  uint32_t crc = 0;
  WriteFileAtomically(filename, [&](const std::string& tmp) {
    if (format == SolverParameter::HDF5) {
      crc = WriteCaffemodelHdf5(*weights, iter, tmp);
    } else {
      if (iter >= 0) weights->set_snapshot_iter(iter);
      crc = WriteStreamed(weights, tmp);
    }
  });
  return crc;
}

SnapshotFileInfo ReadCaffemodel(const std::string& filename, NetParameter* weights) {
  if (IsHdf5File(filename)) return ReadCaffemodelHdf5(filename, weights);
  SnapshotFileInfo info = ReadStreamed(filename, weights);
  if (weights->has_snapshot_iter()) info.iter = weights->snapshot_iter();
  return info;
}

void WriteSolverState(SolverState* state, const std::string& filename, SolverParameter::SnapshotFormat format) {
  state->clear_checksum();
  WriteFileAtomically(filename, [&](const std::string& tmp) {
    if (format == SolverParameter::HDF5) {
      WriteSolverStateHdf5(state, tmp);
    } else {
      WriteStreamed(state, tmp);
    }
  });
}

void ReadSolverState(const std::string& filename, SolverState* state) {
  if (IsHdf5File(filename)) {
    ReadSolverStateHdf5(filename, state);
  } else {
    ReadStreamed(filename, state);
  }
}

void RecordCaffemodel(const std::string& model_file, uint32_t checksum, int iter, const std::string& state_file,
                      SolverState* state) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(state_file).parent_path();
  std::string name = fs::path(model_file).lexically_relative(dir.empty() ? fs::path(".") : dir).string();
  if (name.empty()) name = fs::path(model_file).filename().string();
  state->set_learned_net(model_file);
  state->set_learned_net_name(name);
  state->set_learned_net_checksum(checksum);
  state->set_learned_net_iter(iter);
}

std::string ReadPairedCaffemodel(const SolverState& state, const std::string& state_file, NetParameter* weights) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(state_file).parent_path();
  if (state.has_learned_net_name()) {
    const std::string model = (dir / state.learned_net_name()).string();
    STRATA_REQUIRE(FileExists(model)) << state_file << " was written with the caffemodel " << state.learned_net_name()
                                      << " beside it, and there is no " << model;
    const SnapshotFileInfo info = ReadCaffemodel(model, weights);
    if (!info.has_checksum || info.checksum != state.learned_net_checksum() || info.iter != state.learned_net_iter()) {
      std::ostringstream found;
      if (info.has_checksum) {
        found << "iteration " << info.iter << ", checksum " << Hex(info.checksum);
      } else {
        found << "without a checksum";
      }
      STRATA_FAIL() << state_file << " and " << model << " are not a pair: the solverstate was written with a "
                    << "caffemodel of iteration " << state.learned_net_iter() << ", checksum "
                    << Hex(state.learned_net_checksum()) << "; this one is " << found.str()
                    << " (a run killed between its two files, or the files of two runs): resume from a "
                    << ".solverstate and the .caffemodel written with it";
    }
    return model;
  }
  if (!state.has_learned_net() || state.learned_net().empty()) return "";
  // An older solverstate (or Caffe's) names its caffemodel by the writer's path; the file beside it wins.
  std::string model = state.learned_net();
  const std::string beside = (dir / fs::path(model).filename()).string();
  if (FileExists(beside)) model = beside;
  LOG(WARNING) << state_file << " does not record which caffemodel was written with it (an older solverstate, or "
               << "Caffe's): " << model << " is loaded unchecked";
  ReadCaffemodel(model, weights);
  return model;
}

void ClaimSnapshotPrefix(const std::string& prefix) {
  const std::string lock = prefix + ".lock";
  std::lock_guard<std::mutex> guard(g_claims_mutex);
  if (!g_claims.count(lock)) {
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    STRATA_REQUIRE(fd >= 0) << "snapshot_prefix '" << prefix << "': cannot create the lock file " << lock << ": "
                            << std::strerror(errno);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      char text[512] = {};
      const ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
      std::string holder(text, n > 0 ? static_cast<size_t>(n) : 0);
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
      ::close(fd);
      STRATA_REQUIRE(err == EWOULDBLOCK) << "snapshot_prefix '" << prefix << "': cannot lock " << lock << ": "
                                         << std::strerror(err);
      STRATA_FAIL() << "snapshot_prefix '" << prefix << "' is in use by another run ("
                    << (holder.empty() ? "it has not named itself yet" : holder) << ", holding " << lock
                    << "): two runs on one prefix overwrite each other's snapshots; wait for it to end, or give "
                    << "this run another snapshot_prefix";
    }
    const std::string me = Holder() + "\n";
    if (::ftruncate(fd, 0) == 0) {
      const ssize_t ignored = ::pwrite(fd, me.data(), me.size(), 0);
      (void)ignored;
    }
    g_claims[lock] = fd;
  }
  RemoveStaleTemporaries(prefix);
}

void RequireSnapshotFits(const std::vector<std::pair<std::string, uint64_t>>& layer_bytes,
                         SolverParameter::SnapshotFormat format) {
  if (format == SolverParameter::HDF5) return;
  // A layer's record also holds its settings and shapes: a megabyte of room for them.
  constexpr uint64_t kLimit = static_cast<uint64_t>(INT_MAX) - (1u << 20);
  for (const auto& layer : layer_bytes) {
    STRATA_REQUIRE(layer.second <= kLimit)
        << "layer '" << layer.first << "' holds " << layer.second << " bytes of parameters: a BINARYPROTO "
        << "snapshot holds at most 2 GiB per layer (protobuf's limit on one message); set snapshot_format: HDF5";
  }
}

}  // namespace strata
