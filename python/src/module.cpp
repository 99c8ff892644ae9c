// The strata extension module (strata._strata): Blob, Layer, Net and the process-wide settings of libstrata,
// bound as they are. The pycaffe-style conveniences over them (blobs and params as ordered dicts, forward with
// keyword inputs, forward_all) are Python, in strata/pycaffe.py; the solvers are bound in solver.cpp.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>

#include <fstream>
#include <sstream>

#include "python_layer.hpp"
#include "strata/device.hpp"
#include "strata/layer_factory.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"
#include "strata/util/net_drawing.hpp"
#include "strata/util/snapshot_files.hpp"

namespace strata::python {

void BindSolvers(py::module_& m);

namespace {

std::string ShapeString(const std::vector<py::ssize_t>& shape) {
  std::ostringstream s;
  s << "(";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << (shape.size() == 1 ? ",)" : ")");
  return s.str();
}

// The net's weights as a caffemodel in `format`, written as the tools write snapshots (atomically, with a checksum,
// of any size); no iteration is recorded.
void Save(const Net<float>& net, const std::string& file, SolverParameter::SnapshotFormat format) {
  NetParameter param;
  net.ToProto(&param, false);
  WriteCaffemodel(&param, -1, file, format);
}

// The blob's value or gradient as a NumPy array over its host memory, no copy: the plain accessors convert a
// blocked or library layout back in place first, and bring GPU memory to the host (the host copy is then the
// one in force, as with any mutable_cpu_* access). The array holds the memory block itself, as a view from
// outside: a reshape that gives the blob a larger block, or a pass that frees the blob after use
// (blob_lifetime FREE_AFTER_USE, a recompute plan), leaves the array's bytes in place (pycaffe's arrays dangle).
py::array View(Blob<float>& blob, bool diff) {
  const std::vector<py::ssize_t> shape(blob.shape().begin(), blob.shape().end());
  if (blob.count() == 0) return py::array_t<float>(shape);
  float* p = diff ? blob.mutable_cpu_diff() : blob.mutable_cpu_data();
  using Held = std::shared_ptr<SyncedMemory>;
  auto* held = new Held(diff ? blob.diff() : blob.data());
  (*held)->add_host_view();
  py::capsule base(held, [](void* h) {
    auto* memory = static_cast<Held*>(h);
    (*memory)->remove_host_view();
    delete memory;
  });
  return py::array_t<float>(shape, p, base);
}

// blob.data = array: copies values of the blob's exact shape (NumPy's own assignment, data[...] = a, broadcasts).
void Assign(Blob<float>& blob, const py::array_t<float, py::array::c_style | py::array::forcecast>& a, bool diff) {
  const std::vector<py::ssize_t> want(blob.shape().begin(), blob.shape().end());
  const std::vector<py::ssize_t> got(a.shape(), a.shape() + a.ndim());
  STRATA_REQUIRE(want == got) << "cannot assign an array of shape " << ShapeString(got) << " to ."
                              << (diff ? "diff" : "data") << " of a blob of shape " << ShapeString(want)
                              << " (reshape the blob first, or the net's input and then net.reshape())";
  if (blob.count() == 0) return;
  float* p = diff ? blob.mutable_cpu_diff() : blob.mutable_cpu_data();
  std::copy(a.data(), a.data() + blob.count(), p);
}

std::vector<int> ShapeArgs(const py::args& args) {
  std::vector<int> shape;
  if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) {
    for (const auto& d : args[0]) shape.push_back(d.cast<int>());
  } else {
    for (const auto& d : args) shape.push_back(d.cast<int>());
  }
  for (int d : shape) STRATA_REQUIRE(d >= 0) << "a blob's dimensions cannot be negative, got " << d;
  return shape;
}

// A layer's parameter blobs, as pycaffe's layer.blobs: a sequence that a Python layer may grow in setup
// (add_blob), before the net collects its parameters.
struct LayerBlobs {
  Layer<float>* layer;
  py::object owner;  // the Python layer object, kept alive (keep_alive does not apply to properties)
};

// What net.layers gives: the Python object for a Python layer, the C++ layer otherwise.
py::object LayerObject(const std::shared_ptr<Layer<float>>& layer) {
  if (auto* p = dynamic_cast<PythonLayer*>(layer.get()); p != nullptr && p->self()) return p->self();
  return py::cast(layer);
}

std::vector<std::string> Names(const Net<float>& net, const std::vector<int>& ids) {
  std::vector<std::string> names;
  for (int id : ids) names.push_back(net.blob_names()[id]);
  return names;
}

void RequireLayerIndex(const Net<float>& net, int i) {
  STRATA_REQUIRE(i >= 0 && i < net.num_layers())
      << "layer index " << i << " is out of range: net '" << net.name() << "' has " << net.num_layers() << " layers";
}

std::shared_ptr<Net<float>> MakeNet(const std::string& file, int phase, int level, const py::object& stages,
                                    const py::object& weights) {
  STRATA_REQUIRE(phase == TRAIN || phase == TEST) << "phase must be strata.TRAIN or strata.TEST, got " << phase;
  std::vector<std::string> stage_list;
  if (!stages.is_none()) stage_list = stages.cast<std::vector<std::string>>();
  auto net = std::make_shared<Net<float>>(file, static_cast<Phase>(phase), level, &stage_list);
  if (!weights.is_none()) net->CopyTrainedLayersFrom(weights.cast<std::string>());
  return net;
}

std::unique_ptr<google::protobuf::Message> NewMessage(const std::string& type) {
  const google::protobuf::Descriptor* d =
      google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(type);
  STRATA_REQUIRE(d != nullptr) << "strata.proto has no message " << type;
  return std::unique_ptr<google::protobuf::Message>(
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(d)->New());
}

py::object FieldValue(const google::protobuf::Message& msg, const google::protobuf::FieldDescriptor* f, int i);

py::dict ToDict(const google::protobuf::Message& msg) {
  py::dict out;
  const google::protobuf::Reflection* r = msg.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(msg, &fields);
  for (const auto* f : fields) {
    if (f->is_repeated()) {
      py::list values;
      for (int i = 0; i < r->FieldSize(msg, f); ++i) values.append(FieldValue(msg, f, i));
      out[py::str(f->name())] = values;
    } else {
      out[py::str(f->name())] = FieldValue(msg, f, -1);
    }
  }
  return out;
}

// Field f of msg (element i of a repeated field; -1 for a single one) as a Python value.
py::object FieldValue(const google::protobuf::Message& msg, const google::protobuf::FieldDescriptor* f, int i) {
  using FD = google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = msg.GetReflection();
  const bool rep = i >= 0;
  switch (f->cpp_type()) {
    case FD::CPPTYPE_INT32: return py::int_(rep ? r->GetRepeatedInt32(msg, f, i) : r->GetInt32(msg, f));
    case FD::CPPTYPE_INT64: return py::int_(rep ? r->GetRepeatedInt64(msg, f, i) : r->GetInt64(msg, f));
    case FD::CPPTYPE_UINT32: return py::int_(rep ? r->GetRepeatedUInt32(msg, f, i) : r->GetUInt32(msg, f));
    case FD::CPPTYPE_UINT64: return py::int_(rep ? r->GetRepeatedUInt64(msg, f, i) : r->GetUInt64(msg, f));
    case FD::CPPTYPE_FLOAT: return py::float_(rep ? r->GetRepeatedFloat(msg, f, i) : r->GetFloat(msg, f));
    case FD::CPPTYPE_DOUBLE: return py::float_(rep ? r->GetRepeatedDouble(msg, f, i) : r->GetDouble(msg, f));
    case FD::CPPTYPE_BOOL: return py::bool_(rep ? r->GetRepeatedBool(msg, f, i) : r->GetBool(msg, f));
    case FD::CPPTYPE_ENUM:
      return py::str((rep ? r->GetRepeatedEnum(msg, f, i) : r->GetEnum(msg, f))->name());
    case FD::CPPTYPE_STRING: {
      const std::string v = rep ? r->GetRepeatedString(msg, f, i) : r->GetString(msg, f);
      if (f->type() == FD::TYPE_BYTES) return py::bytes(v);
      return py::str(v);
    }
    case FD::CPPTYPE_MESSAGE: return ToDict(rep ? r->GetRepeatedMessage(msg, f, i) : r->GetMessage(msg, f));
  }
  return py::none();
}

}  // namespace

PYBIND11_MODULE(_strata, m) {
  m.doc() = "Strata's C++ objects (Net, Blob, Layer, solvers); import strata rather than this module";
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  // In python3 (not inside a tool, which has set glog up): the training log goes to stderr, as the tools'.
  if (!google::IsGoogleLoggingInitialized()) {
    FLAGS_logtostderr = true;
    google::InitGoogleLogging("strata");
  }
  RegisterPythonLayer();

  m.attr("TRAIN") = static_cast<int>(TRAIN);
  m.attr("TEST") = static_cast<int>(TEST);
  m.def("set_mode_cpu", [] { Strata::set_mode(Strata::CPU); });
  m.def("set_mode_gpu", [] {
    STRATA_REQUIRE(gpu_build()) << "set_mode_gpu: this Strata was built without CUDA";
    STRATA_REQUIRE(gpu_device_count() > 0) << "set_mode_gpu: the CUDA runtime finds no GPU";
    Strata::set_mode(Strata::GPU);
  });
  m.def("set_device", [](int device) {
    STRATA_REQUIRE(gpu_build()) << "set_device: this Strata was built without CUDA";
    select_gpu_device(device);
  });
  m.def("set_random_seed", [](uint64_t seed) { Strata::set_random_seed(seed); });
  m.def("layer_type_list", [] { return LayerRegistry<float>::LayerTypeList(); });

  py::class_<Blob<float>, std::shared_ptr<Blob<float>>>(m, "Blob")
      .def(py::init([](const py::args& args) { return std::make_shared<Blob<float>>(ShapeArgs(args)); }))
      .def_property_readonly("shape", [](const Blob<float>& b) { return py::tuple(py::cast(b.shape())); })
      .def_property_readonly("count", [](const Blob<float>& b) { return b.count(); })
      .def_property_readonly("num", &Blob<float>::num)
      .def_property_readonly("channels", &Blob<float>::channels)
      .def_property_readonly("height", &Blob<float>::height)
      .def_property_readonly("width", &Blob<float>::width)
      .def("reshape", [](Blob<float>& b, const py::args& args) { b.Reshape(ShapeArgs(args)); })
      .def_property("data", [](Blob<float>& self) { return View(self, false); },
                    [](Blob<float>& b, const py::array_t<float, py::array::c_style | py::array::forcecast>& a) {
                      Assign(b, a, false);
                    })
      .def_property("diff", [](Blob<float>& self) { return View(self, true); },
                    [](Blob<float>& b, const py::array_t<float, py::array::c_style | py::array::forcecast>& a) {
                      Assign(b, a, true);
                    });

  py::class_<LayerBlobs>(m, "LayerBlobs")
      .def("__len__", [](const LayerBlobs& v) { return v.layer->blobs().size(); })
      .def("__getitem__",
           [](const LayerBlobs& v, long i) {
             const long n = static_cast<long>(v.layer->blobs().size());
             if (i < 0) i += n;
             if (i < 0 || i >= n) throw py::index_error("layer has " + std::to_string(n) + " blobs");
             return v.layer->blobs()[i];
           })
      .def("__iter__", [](const LayerBlobs& v) { return py::iter(py::cast(v.layer->blobs())); })
      .def("add_blob", [](LayerBlobs& v, const py::args& args) {
        v.layer->blobs().push_back(std::make_shared<Blob<float>>(ShapeArgs(args)));
      });

  py::class_<Layer<float>, std::shared_ptr<Layer<float>>>(m, "CppLayer")
      .def_property_readonly("type", [](const Layer<float>& l) { return std::string(l.type()); })
      .def_property_readonly("name", [](const Layer<float>& l) { return l.layer_param().name(); })
      .def_property_readonly("phase", [](const Layer<float>& l) { return static_cast<int>(l.phase()); })
      .def_property_readonly("blobs", [](const py::object& self) { return LayerBlobs{&self.cast<Layer<float>&>(), self}; });

  py::class_<Net<float>, std::shared_ptr<Net<float>>>(m, "Net")
      .def(py::init(&MakeNet), py::arg("network_file"), py::arg("phase"), py::arg("level") = 0,
           py::arg("stages") = py::none(), py::arg("weights") = py::none())
      .def(py::init([](const std::string& file, const std::string& weights, int phase) {
             return MakeNet(file, phase, 0, py::none(), py::str(weights));
           }),
           py::arg("network_file"), py::arg("weights"), py::arg("phase"))
      .def_property_readonly("name", &Net<float>::name)
      .def_property_readonly("phase", [](const Net<float>& n) { return static_cast<int>(n.phase()); })
      .def_property_readonly("_blob_names", &Net<float>::blob_names)
      .def_property_readonly("_blobs", &Net<float>::blobs)
      .def_property_readonly("_layer_names", &Net<float>::layer_names)
      .def_property_readonly("layers", [](const Net<float>& n) {
        py::list list;
        for (const auto& l : n.layers()) list.append(LayerObject(l));
        return list;
      })
      .def_property_readonly("inputs", [](const Net<float>& n) { return Names(n, n.input_blob_ids()); })
      .def_property_readonly("outputs", [](const Net<float>& n) { return Names(n, n.output_blob_ids()); })
      .def("_top_names", [](const Net<float>& n, int i) { RequireLayerIndex(n, i); return Names(n, n.top_ids()[i]); })
      .def("_bottom_names",
           [](const Net<float>& n, int i) { RequireLayerIndex(n, i); return Names(n, n.bottom_ids()[i]); })
      .def("_forward",
           [](Net<float>& n, int start, int end) {
             RequireLayerIndex(n, start);
             RequireLayerIndex(n, end);
             return n.ForwardFromTo(start, end);
           },
           py::call_guard<py::gil_scoped_release>())
      .def("_backward",
           [](Net<float>& n, int start, int end) {
             RequireLayerIndex(n, start);
             RequireLayerIndex(n, end);
             n.BackwardFromTo(start, end);
           },
           py::call_guard<py::gil_scoped_release>())
      .def("reshape", &Net<float>::Reshape, py::call_guard<py::gil_scoped_release>())
      .def("clear_param_diffs", &Net<float>::ClearParamDiffs)
      .def("copy_from", [](Net<float>& n, const std::string& file) { n.CopyTrainedLayersFrom(file); })
      .def("share_with", [](Net<float>& n, const Net<float>& other) { n.ShareTrainedLayersWith(&other); })
      .def("save", [](const Net<float>& n, const std::string& file) { Save(n, file, SolverParameter::BINARYPROTO); })
      .def("save_hdf5", [](const Net<float>& n, const std::string& file) { Save(n, file, SolverParameter::HDF5); })
      .def("load_hdf5",
           [](Net<float>& n, const std::string& file) {
             STRATA_REQUIRE(std::ifstream(file).good()) << "load_hdf5: cannot open " << file;
             STRATA_REQUIRE(IsHdf5File(file)) << "load_hdf5: " << file << " is not an HDF5 file (copy_from reads it)";
             n.CopyTrainedLayersFrom(file);
           })
      .def("to_proto_text", [](const Net<float>& n) {
        NetParameter param;
        n.ToProto(&param, false);
        for (auto& layer : *param.mutable_layer()) layer.clear_blobs();
        std::string text;
        google::protobuf::TextFormat::PrintToString(param, &text);
        return text;
      });

  // The canonical text of a prototxt (parsed by Strata's reader, printed by protobuf): what net_spec's output is
  // compared with, and a check that a prototxt parses.
  m.def("canonical_net_text", [](const std::string& prototxt) {
    NetParameter param;
    ReadProtoFromTextString(prototxt, &param, "net_spec");
    std::string text;
    google::protobuf::TextFormat::PrintToString(param, &text);
    return text;
  });

  // strata.proto's schema for net_spec (no Python protobuf package is needed): for every message, each field's
  // kind ("message", "enum", "string", "bool", "number"), its message or enum type, whether it repeats; and every
  // enum's values by name.
  m.def("_proto_schema", [] {
    py::dict messages, enums;
    const google::protobuf::FileDescriptor* file = NetParameter::descriptor()->file();
    std::vector<const google::protobuf::Descriptor*> todo;
    for (int i = 0; i < file->message_type_count(); ++i) todo.push_back(file->message_type(i));
    auto add_enum = [&](const google::protobuf::EnumDescriptor* e) {
      py::dict values;
      for (int v = 0; v < e->value_count(); ++v) values[py::str(e->value(v)->name())] = e->value(v)->number();
      enums[py::str(e->full_name())] = values;
    };
    for (int i = 0; i < file->enum_type_count(); ++i) add_enum(file->enum_type(i));
    while (!todo.empty()) {
      const google::protobuf::Descriptor* d = todo.back();
      todo.pop_back();
      for (int i = 0; i < d->nested_type_count(); ++i) todo.push_back(d->nested_type(i));
      for (int i = 0; i < d->enum_type_count(); ++i) add_enum(d->enum_type(i));
      py::dict fields;
      for (int i = 0; i < d->field_count(); ++i) {
        const google::protobuf::FieldDescriptor* f = d->field(i);
        std::string kind = "number", type;
        if (f->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE) {
          kind = "message";
          type = f->message_type()->full_name();
        } else if (f->type() == google::protobuf::FieldDescriptor::TYPE_ENUM) {
          kind = "enum";
          type = f->enum_type()->full_name();
        } else if (f->type() == google::protobuf::FieldDescriptor::TYPE_STRING ||
                   f->type() == google::protobuf::FieldDescriptor::TYPE_BYTES) {
          kind = "string";
        } else if (f->type() == google::protobuf::FieldDescriptor::TYPE_BOOL) {
          kind = "bool";
        }
        fields[py::str(f->name())] = py::make_tuple(kind, type, f->is_repeated());
      }
      messages[py::str(d->full_name())] = fields;
    }
    return py::make_tuple(messages, enums);
  });

  // Binary protobuf messages of strata.proto to and from Python (the io helpers' BlobProto and Datum): parsed into
  // nested dicts, serialised from the text format net_spec.Message prints.
  m.def("_proto_parse", [](const std::string& type, const py::bytes& bytes) {
    std::unique_ptr<google::protobuf::Message> msg = NewMessage(type);
    ReadProtoFromBinaryString(bytes, msg.get(), type);
    return ToDict(*msg);
  });
  m.def("_proto_serialize", [](const std::string& type, const std::string& text) {
    std::unique_ptr<google::protobuf::Message> msg = NewMessage(type);
    ReadProtoFromTextString(text, msg.get(), type);
    std::string bytes;
    msg->SerializeToString(&bytes);
    return py::bytes(bytes);
  });

  // `strata draw`'s Graphviz text for a prototxt (phase -1: every layer), for strata.draw.
  m.def("_net_to_dot", [](const std::string& prototxt, const std::string& rankdir, int phase) {
    NetParameter param;
    ReadProtoFromTextString(prototxt, &param, "draw");
    if (phase >= 0) {
      param.mutable_state()->set_phase(static_cast<Phase>(phase));
      NetParameter filtered;
      Net<float>::FilterNet(param, &filtered);
      param = filtered;
    }
    return NetToDot(param, NetDrawingDetails{}, rankdir);
  });

  BindSolvers(m);
}

}  // namespace strata::python
