#include "strata/util/net_drawing.hpp"

#include <sstream>

#include "strata/common.hpp"

namespace strata {

namespace {

// A string as a DOT quoted string; its line breaks become DOT's \n.
std::string Quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '\n') {
      q += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string Join(const google::protobuf::RepeatedField<uint32_t>& v, uint32_t fallback) {
  if (v.empty()) return std::to_string(fallback);
  std::string s;
  for (int i = 0; i < v.size(); ++i) s += (i ? "x" : "") + std::to_string(v.Get(i));
  return s;
}

// The settings that shape a layer's output, one line (empty when none matter), as draw_net.py shows them.
std::string Settings(const LayerParameter& l) {
  std::ostringstream s;
  if (l.type() == "Convolution" || l.type() == "Deconvolution") {
    const ConvolutionParameter& c = l.convolution_param();
    s << "kernel " << (c.has_kernel_h() ? std::to_string(c.kernel_h()) + "x" + std::to_string(c.kernel_w())
                                        : Join(c.kernel_size(), 1))
      << ", stride " << Join(c.stride(), 1) << ", pad " << Join(c.pad(), 0) << ", " << c.num_output() << " out";
  } else if (l.type() == "Pooling") {
    const PoolingParameter& p = l.pooling_param();
    s << PoolingParameter::PoolMethod_Name(p.pool());
    if (p.global_pooling()) {
      s << ", global";
    } else {
      s << " " << p.kernel_size() << ", stride " << p.stride() << ", pad " << p.pad();
    }
  } else if (l.type() == "InnerProduct") {
    s << l.inner_product_param().num_output() << " out";
  } else if (l.type() == "Embed") {
    s << l.embed_param().input_dim() << " -> " << l.embed_param().num_output();
  }
  return s.str();
}

// draw_net.py's colours: convolutions red, pooling orange, inner products purple, the rest blue.
const char* Colour(const std::string& type) {
  if (type == "Convolution" || type == "Deconvolution") return "#FF5050";
  if (type == "Pooling") return "#FF9900";
  if (type == "InnerProduct") return "#CC33FF";
  return "#6495ED";
}

std::string ShapeText(const std::vector<int>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

}  // namespace

std::string NetToDot(const NetParameter& param, const NetDrawingDetails& details, const std::string& rankdir) {
  STRATA_REQUIRE(rankdir == "LR" || rankdir == "TB" || rankdir == "RL" || rankdir == "BT")
      << "the graph direction must be LR, TB, RL or BT, got '" << rankdir << "'";
  std::ostringstream dot;
  dot << "digraph " << Quoted(param.name().empty() ? "net" : param.name()) << " {\n"
      << "  rankdir=" << rankdir << ";\n"
      << "  node [fontname=\"Helvetica\", fontsize=10];\n";
  // Blobs are drawn once per version: a top that rewrites its bottom (in place) is a new node of the same name,
  // so the graph stays acyclic and reads in order.
  std::map<std::string, int> version;
  auto blob_node = [&](const std::string& name) { return Quoted("blob:" + name + "#" + std::to_string(version[name])); };
  auto declare_blob = [&](const std::string& name) {
    std::string label = name;
    auto shape = details.blob_shapes.find(name);
    if (shape != details.blob_shapes.end()) label += "\n" + ShapeText(shape->second);
    dot << "  " << blob_node(name) << " [shape=octagon, style=filled, fillcolor=\"#E0E0E0\", label=" << Quoted(label)
        << "];\n";
  };
  for (int i = 0; i < param.layer_size(); ++i) {
    const LayerParameter& l = param.layer(i);
    std::string label = l.name() + "\n(" + l.type() + ")";
    const std::string settings = Settings(l);
    if (!settings.empty()) label += "\n" + settings;
    auto params = details.layer_params.find(l.name());
    if (params != details.layer_params.end() && params->second > 0) {
      label += "\n" + std::to_string(params->second) + " parameters";
    }
    const std::string node = Quoted("layer:" + std::to_string(i));
    dot << "  " << node << " [shape=box, style=filled, fillcolor=" << Quoted(Colour(l.type()))
        << ", label=" << Quoted(label) << "];\n";
    for (const auto& b : l.bottom()) {
      if (!version.count(b)) declare_blob(b);  // an input no layer wrote
      dot << "  " << blob_node(b) << " -> " << node << ";\n";
    }
    for (const auto& t : l.top()) {
      if (version.count(t)) ++version[t];
      declare_blob(t);
      dot << "  " << node << " -> " << blob_node(t) << ";\n";
    }
  }
  dot << "}\n";
  return dot.str();
}

}  // namespace strata
