#include "strata/engine/pipeline_plan.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

#include "strata/common.hpp"

namespace strata {

PipelineGrid PipelineGrid::Of(const PipelineParameter& p, int rank, int ranks) {
  STRATA_REQUIRE(p.replicas() >= 1) << "pipeline_param.replicas must be at least 1";
  PipelineGrid l;
  l.replicas = static_cast<int>(p.replicas());
  l.stages = p.stages() > 0 ? static_cast<int>(p.stages()) : ranks / l.replicas;
  STRATA_REQUIRE(l.stages >= 1 && static_cast<long>(l.stages) * l.replicas == ranks)
      << "pipeline_param asks for " << (p.stages() > 0 ? std::to_string(p.stages()) : std::string("?")) << " stages x "
      << l.replicas << " replicas, but the job has " << ranks << " ranks (run mpirun -np stages x replicas)";
  STRATA_REQUIRE(p.cut_size() == 0 || p.cut_size() == l.stages - 1)
      << "pipeline_param names " << p.cut_size() << " cut(s) for " << l.stages << " stages: give stages - 1 = "
      << l.stages - 1 << " (the first layer of each stage after the first), or none to let the planner cut";
  l.replica = rank / l.stages;
  l.stage = l.stages - 1 - rank % l.stages;
  return l;
}

std::vector<std::string> StageCut::inputs(int s) const {
  if (s > 0) return cross[s - 1];
  // Stage 0: what its source layers produce that some compute layer reads (or that passes on), in first-use order.
  std::set<std::string> from_source;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (source[i]) from_source.insert(layers[i].top().begin(), layers[i].top().end());
  }
  std::vector<std::string> in;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (source[i]) continue;
    for (const std::string& b : layers[i].bottom()) {
      if (from_source.count(b) && std::find(in.begin(), in.end(), b) == in.end()) in.push_back(b);
    }
  }
  return in;
}

int StageCut::reversible_prefix(int s) const {
  std::vector<int> mine;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (stage_of[i] == s && !source[i]) mine.push_back(static_cast<int>(i));
  }
  if (mine.empty() || s == stages() - 1) return -1;  // the last stage computes the loss: nothing to rebuild from
  // Ordinary layers first, then Reversible blocks only (at least one).
  size_t prefix = 0;
  while (prefix < mine.size() && layers[mine[prefix]].type() != "Reversible") ++prefix;
  if (prefix == mine.size()) return -1;
  for (size_t i = prefix; i < mine.size(); ++i) {
    if (layers[mine[i]].type() != "Reversible") return -1;
  }
  // What it sends of its own making: only the last block's top (the others are rebuilt from it).
  const std::vector<std::string> in = inputs(s);
  const LayerParameter& last = layers[mine.back()];
  for (const std::string& b : cross[s]) {
    const bool passes = std::find(in.begin(), in.end(), b) != in.end();
    bool read_here = false;
    for (int i : mine) {
      for (const std::string& bottom : layers[i].bottom()) read_here = read_here || bottom == b;
    }
    if (passes && !read_here) continue;
    if (last.top_size() != 1 || last.top(0) != b) return -1;
  }
  return static_cast<int>(prefix);
}

namespace {

// Names of the layers inside a Reversible block (its sub-networks), which a cut cannot fall between.
void InnerNames(const LayerParameter& l, std::map<std::string, std::string>* inner) {
  if (!l.has_reversible_param()) return;
  const ReversibleParameter& r = l.reversible_param();
  for (const auto& s : r.f()) (*inner)[s.name()] = l.name();
  for (const auto& s : r.g()) (*inner)[s.name()] = l.name();
  for (const auto& step : r.step()) {
    for (const auto& s : step.layer()) (*inner)[s.name()] = l.name();
  }
}

// Fills source and cross from layers and stage_of, checking that every bottom has an earlier producer.
void FinishCut(StageCut* cut, int stages) {
  const size_t n = cut->layers.size();
  cut->source.assign(n, false);
  cut->cross.assign(static_cast<size_t>(stages - 1), {});
  std::map<std::string, int> producer;  // blob -> stage of the layer that wrote its current version
  std::vector<bool> has_compute(static_cast<size_t>(stages), false);
  for (size_t i = 0; i < n; ++i) {
    const LayerParameter& l = cut->layers[i];
    const int s = cut->stage_of[i];
    cut->source[i] = s == 0 && l.bottom_size() == 0;
    if (!cut->source[i]) has_compute[static_cast<size_t>(s)] = true;
    for (const std::string& b : l.bottom()) {
      auto it = producer.find(b);
      STRATA_REQUIRE(it != producer.end())
          << "layer '" << l.name() << "' reads blob '" << b << "', which no earlier layer produces";
      for (int t = it->second; t < s; ++t) {
        auto& c = cut->cross[static_cast<size_t>(t)];
        if (std::find(c.begin(), c.end(), b) == c.end()) c.push_back(b);
      }
    }
    for (const std::string& t : l.top()) producer[t] = s;
  }
  for (int s = 0; s < stages; ++s) {
    STRATA_REQUIRE(has_compute[static_cast<size_t>(s)])
        << "pipeline stage " << s << " of " << stages << " holds no layer to compute"
        << (s == 0 ? " (only data layers): cut after the first layer that reads them" : "");
  }
}

}  // namespace

StageCut CutNet(const NetParameter& net, const std::vector<std::string>& cuts) {
  const int stages = static_cast<int>(cuts.size()) + 1;
  STRATA_REQUIRE(net.layer_size() >= stages)
      << "net '" << net.name() << "' has " << net.layer_size() << " layers, fewer than the " << stages
      << " pipeline stages asked for";
  std::map<std::string, int> index;
  std::map<std::string, std::string> inner;
  for (int i = 0; i < net.layer_size(); ++i) {
    index.emplace(net.layer(i).name(), i);
    InnerNames(net.layer(i), &inner);
  }
  std::vector<int> first{0};
  for (const std::string& name : cuts) {
    auto it = index.find(name);
    if (it == index.end()) {
      auto in = inner.find(name);
      STRATA_REQUIRE(in == inner.end())
          << "pipeline cut '" << name << "' is a layer inside the Reversible block '" << in->second
          << "': a block runs whole in one stage; cut before or after '" << in->second << "'";
      STRATA_FAIL() << "pipeline cut '" << name << "': net '" << net.name() << "' has no layer of that name";
    }
    STRATA_REQUIRE(it->second > first.back())
        << "pipeline cut '" << name << "' does not come after the previous cut in net order (cuts name the first "
        << "layer of stages 1, 2, ... in order)";
    first.push_back(it->second);
  }
  StageCut cut;
  cut.layers.assign(net.layer().begin(), net.layer().end());
  cut.stage_of.resize(cut.layers.size());
  for (int s = 0; s < stages; ++s) {
    const int end = s + 1 < stages ? first[static_cast<size_t>(s) + 1] : net.layer_size();
    for (int i = first[static_cast<size_t>(s)]; i < end; ++i) cut.stage_of[static_cast<size_t>(i)] = s;
  }
  FinishCut(&cut, stages);
  return cut;
}

StageCut CutLike(const NetParameter& net, const StageCut& train) {
  std::map<std::string, int> stage_of_name;
  for (size_t i = 0; i < train.layers.size(); ++i) stage_of_name[train.layers[i].name()] = train.stage_of[i];
  StageCut cut;
  cut.layers.assign(net.layer().begin(), net.layer().end());
  std::map<std::string, int> producer;
  int current = 0;
  for (const LayerParameter& l : cut.layers) {
    int s = 0;
    auto named = stage_of_name.find(l.name());
    if (named != stage_of_name.end()) {
      s = named->second;
    } else {
      for (const std::string& b : l.bottom()) {
        auto p = producer.find(b);
        if (p != producer.end()) s = std::max(s, p->second);
      }
    }
    s = std::max(s, current);
    current = s;
    cut.stage_of.push_back(s);
    for (const std::string& t : l.top()) producer[t] = s;
  }
  FinishCut(&cut, train.stages());
  return cut;
}

std::vector<double> CrossingBytes(const NetParameter& net, const std::map<std::string, double>& blob_bytes) {
  const int n = net.layer_size();
  // Each version of a blob (its writer p, its last reader r) crosses the cuts before layers p + 1 .. r: added up
  // as differences. A blob's versions cover disjoint ranges, so none counts twice.
  std::vector<double> step(static_cast<size_t>(n) + 2, 0);
  std::map<std::string, std::pair<int, int>> version;  // blob -> (writer, last reader so far)
  auto close = [&](const std::string& blob, std::pair<int, int> v) {
    const auto it = blob_bytes.find(blob);
    if (v.second <= v.first || it == blob_bytes.end()) return;
    step[static_cast<size_t>(v.first) + 1] += it->second;
    step[static_cast<size_t>(v.second) + 1] -= it->second;
  };
  for (int i = 0; i < n; ++i) {
    for (const std::string& b : net.layer(i).bottom()) {
      auto it = version.find(b);
      if (it != version.end()) it->second.second = i;
    }
    for (const std::string& t : net.layer(i).top()) {
      auto it = version.find(t);
      if (it != version.end()) close(t, it->second);
      version[t] = {i, i};
    }
  }
  for (const auto& v : version) close(v.first, v.second);
  std::vector<double> bytes(static_cast<size_t>(n) + 1, 0);
  double sum = 0;
  for (size_t c = 0; c < bytes.size(); ++c) bytes[c] = sum += step[c];
  return bytes;
}

std::vector<std::string> PlanCuts(const NetParameter& net, const std::vector<double>& time,
                                  const std::vector<double>& memory, int stages, const CutCosts& links) {
  const int n = net.layer_size();
  STRATA_REQUIRE(static_cast<int>(time.size()) == n && static_cast<int>(memory.size()) == n)
      << "PlanCuts: " << time.size() << " times and " << memory.size() << " sizes for " << n << " layers";
  const bool sends = !links.bytes.empty();
  STRATA_REQUIRE(!sends || (static_cast<int>(links.bytes.size()) == n + 1 &&
                            static_cast<int>(links.ms_per_byte.size()) == stages - 1))
      << "PlanCuts: " << links.bytes.size() << " cut sizes and " << links.ms_per_byte.size() << " links for " << n
      << " layers and " << stages << " stages";
  int lead = 0;  // the leading data layers stay in stage 0
  while (lead < n && net.layer(lead).bottom_size() == 0) ++lead;
  STRATA_REQUIRE(n - lead >= stages) << "net '" << net.name() << "' has " << n - lead << " layers to compute, fewer "
                                     << "than the " << stages << " pipeline stages asked for";
  // A stage's load: the larger of its share of the time and its share of the memory.
  auto prefix_of = [n](const std::vector<double>& v) {
    std::vector<double> prefix(static_cast<size_t>(n) + 1, 0);
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) prefix[i + 1] = prefix[i] + std::max(0.0, v[i]);
    return prefix;
  };
  const std::vector<double> t = prefix_of(time), m = prefix_of(memory);
  const double total_t = t.back() > 0 ? t.back() : 1, total_m = m.back() > 0 ? m.back() : 1;
  // The s-th cut before layer c: what each stage beside it spends sending and receiving, both ways.
  auto link = [&](int s, int c) {
    return sends ? 2 * links.bytes[static_cast<size_t>(c)] * links.ms_per_byte[static_cast<size_t>(s)] : 0.0;
  };
  // Stage s holding layers [a, b): its time (with its cuts' sends) and memory shares, the larger.
  auto span = [&](int s, int a, int b) {
    const double sent = (s > 0 ? link(s - 1, a) : 0) + (s < stages - 1 ? link(s, b) : 0);
    return std::max((t[static_cast<size_t>(b)] - t[static_cast<size_t>(a)] + sent) / total_t,
                    (m[static_cast<size_t>(b)] - m[static_cast<size_t>(a)]) / total_m);
  };
  // best[s][e]: the smallest possible largest load when layers [0, e) form stages 0..s; from[s][e] its last cut.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(static_cast<size_t>(stages),
                                        std::vector<double>(static_cast<size_t>(n) + 1, inf));
  std::vector<std::vector<int>> from(static_cast<size_t>(stages), std::vector<int>(static_cast<size_t>(n) + 1, -1));
  for (int e = lead + 1; e <= n; ++e) best[0][static_cast<size_t>(e)] = span(0, 0, e);
  for (int s = 1; s < stages; ++s) {
    for (int e = lead + s + 1; e <= n; ++e) {
      for (int c = lead + s; c < e; ++c) {
        const double v = std::max(best[static_cast<size_t>(s) - 1][static_cast<size_t>(c)], span(s, c, e));
        if (v < best[static_cast<size_t>(s)][static_cast<size_t>(e)]) {
          best[static_cast<size_t>(s)][static_cast<size_t>(e)] = v;
          from[static_cast<size_t>(s)][static_cast<size_t>(e)] = c;
        }
      }
    }
  }
  std::vector<std::string> cuts(static_cast<size_t>(stages) - 1);
  int e = n;
  for (int s = stages - 1; s >= 1; --s) {
    e = from[static_cast<size_t>(s)][static_cast<size_t>(e)];
    cuts[static_cast<size_t>(s) - 1] = net.layer(e).name();
  }
  return cuts;
}

StageNets MakeStageNets(const NetParameter& net, const StageCut& cut, int s,
                        const std::map<std::string, std::vector<int>>& shapes) {
  StageNets out;
  // A stage's nets keep the whole net's own settings (its precision: without it a BF16 stage computed in float).
  const auto settings = [&net](NetParameter* stage, const std::string& name) {
    stage->set_name(name);
    *stage->mutable_state() = net.state();
    if (net.has_precision()) stage->set_precision(net.precision());
    stage->set_debug_info(net.debug_info());
  };
  const std::string stage_name = net.name() + ".stage" + std::to_string(s);
  settings(&out.compute, stage_name);
  // Stages after the first need the gradient of what they receive, whether or not their layers have parameters.
  out.compute.set_force_backward(s > 0 || net.force_backward());
  const std::vector<std::string> in = cut.inputs(s);
  if (!in.empty()) {
    LayerParameter* input = out.compute.add_layer();
    input->set_name(stage_name + ".input");
    input->set_type("Input");
    for (const std::string& b : in) {
      auto it = shapes.find(b);
      STRATA_REQUIRE(it != shapes.end()) << "pipeline stage " << s << ": no shape known for blob '" << b << "'";
      input->add_top(b);
      BlobShape* shape = input->mutable_input_param()->add_shape();
      for (int d : it->second) shape->add_dim(d);
    }
  }
  if (s == 0) settings(&out.source, net.name() + ".source");
  std::set<std::string> read_here;
  for (size_t i = 0; i < cut.layers.size(); ++i) {
    if (cut.stage_of[i] != s) continue;
    if (cut.source[i]) {
      *out.source.add_layer() = cut.layers[i];
      continue;
    }
    *out.compute.add_layer() = cut.layers[i];
    read_here.insert(cut.layers[i].bottom().begin(), cut.layers[i].bottom().end());
  }
  if (s + 1 < cut.stages()) {
    for (const std::string& b : cut.cross[static_cast<size_t>(s)]) {
      if (!read_here.count(b)) {
        out.send_blobs.push_back(b);
        continue;
      }
      // Read here and sent on: a Split sums the two gradients.
      LayerParameter* split = out.compute.add_layer();
      split->set_name(stage_name + ".send." + b);
      split->set_type("Split");
      split->add_bottom(b);
      split->add_top(b + "@send");
      out.send_blobs.push_back(b + "@send");
    }
    for (const std::string& b : out.send_blobs) out.compute.add_external_gradient(b);
  }
  return out;
}

}  // namespace strata
