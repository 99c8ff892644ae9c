// A net as a Graphviz graph, as Caffe's draw_net.py draws one: layers are boxes (name, type, the settings that
// shape them, parameter count), blobs are ellipses (name, shape), edges run bottom -> layer -> top. Blob shapes
// and parameter counts appear where the caller knows them (from a built Net); without them the graph is drawn
// from the prototxt alone.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "strata/proto/strata.pb.h"

namespace strata {

struct NetDrawingDetails {
  std::map<std::string, std::vector<int>> blob_shapes;  // blob name -> shape
  std::map<std::string, long long> layer_params;        // layer name -> learnable values
};

// DOT text for the layers of `param` (already filtered to one phase); rankdir is LR, TB, RL or BT.
std::string NetToDot(const NetParameter& param, const NetDrawingDetails& details, const std::string& rankdir = "LR");

}  // namespace strata
