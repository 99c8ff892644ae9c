#include "strata/scale/scale_inputs.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "strata/common.hpp"

namespace strata {

namespace {
bool parse_number(const std::string& s, double* out) {
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return !s.empty() && end && *end == '\0' && std::isfinite(*out);
}
}  // namespace

void ParseLayerTimes(const std::string& text, const std::string& origin, ScaleNet* net) {
  std::map<std::string, int> index;
  for (size_t i = 0; i < net->layers.size(); ++i) index[net->layers[i]] = static_cast<int>(i);
  std::vector<char> seen(net->layers.size(), 0);
  int batch = 0;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.empty()) continue;
    const std::string where = origin + ":" + std::to_string(number) + ": ";
    if (f[0] == "batch") {
      double b = 0;
      STRATA_REQUIRE(f.size() == 2 && parse_number(f[1], &b) && b >= 1 && b <= 1e9 && b == std::floor(b))
          << where << "expected 'batch N' with N a positive whole number";
      batch = static_cast<int>(b);
      continue;
    }
    double fwd = 0, bwd = 0;
    STRATA_REQUIRE(f.size() == 3 && parse_number(f[1], &fwd) && parse_number(f[2], &bwd))
        << where << "expected 'layer forward_ms backward_ms', got '" << line << "'";
    STRATA_REQUIRE(fwd >= 0 && bwd >= 0) << where << "times cannot be negative";
    STRATA_REQUIRE(fwd <= 1e9 && bwd <= 1e9) << where << "times must be at most 1e9 ms";
    auto it = index.find(f[0]);
    STRATA_REQUIRE(it != index.end()) << where << "the net has no layer '" << f[0] << "'";
    STRATA_REQUIRE(!seen[it->second]) << where << "layer '" << f[0] << "' appears twice";
    seen[it->second] = 1;
    net->forward_s[it->second] = fwd / 1000;
    net->backward_s[it->second] = bwd / 1000;
  }
  STRATA_REQUIRE(batch > 0) << origin << ": no 'batch N' line (the batch the times were measured at)";
  for (size_t i = 0; i < seen.size(); ++i)
    STRATA_REQUIRE(seen[i]) << origin << ": no times for layer '" << net->layers[i] << "'";
  net->batch = batch;
}

void LoadLayerTimes(const std::string& path, ScaleNet* net) {
  std::ifstream in(path);
  STRATA_REQUIRE(in.good()) << "cannot read the times file '" << path << "'";
  std::stringstream text;
  text << in.rdbuf();
  ParseLayerTimes(text.str(), path, net);
}

std::string LayerTimesText(const ScaleNet& net) {
  std::string out = "# strata scale times (docs/scale.md): layer forward_ms backward_ms\nbatch " +
                    std::to_string(net.batch) + "\n";
  char line[512];
  for (size_t i = 0; i < net.layers.size(); ++i) {
    std::snprintf(line, sizeof line, "%s %.6g %.6g\n", net.layers[i].c_str(), net.forward_s[i] * 1000,
                  net.backward_s[i] * 1000);
    out += line;
  }
  return out;
}

std::vector<int> ParseNodeCounts(const std::string& spec) {
  std::vector<std::string> parts;
  std::stringstream in(spec);
  for (std::string p; std::getline(in, p, ',');) parts.push_back(p);
  STRATA_REQUIRE(!parts.empty()) << "--nodes names no node count";
  std::vector<int> out;
  auto count = [&spec](const std::string& p) {
    double v = 0;
    STRATA_REQUIRE(parse_number(p, &v) && v >= 1 && v <= (1 << 24) && v == std::floor(v))
        << "--nodes='" << spec << "': '" << p << "' is not a node count (a whole number from 1 to 2^24)";
    return static_cast<int>(v);
  };
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] != "...") {
      const int c = count(parts[i]);
      STRATA_REQUIRE(out.empty() || c > out.back()) << "--nodes='" << spec << "': node counts must increase";
      out.push_back(c);
      continue;
    }
    STRATA_REQUIRE(out.size() >= 2 && i + 1 < parts.size() && parts[i + 1] != "...")
        << "--nodes='" << spec << "': '...' needs two counts before it and one after it";
    const int end = count(parts[i + 1]);
    const double ratio = double(out.back()) / out[out.size() - 2];
    const int step = out.back() - out[out.size() - 2];
    // Geometric when the two counts before differ by a ratio (1,2,...), else arithmetic (1,3,...).
    const bool geometric = ratio >= 2 && ratio == std::floor(ratio);
    for (;;) {
      const double next = geometric ? out.back() * ratio : out.back() + step;
      if (next >= end) break;
      out.push_back(static_cast<int>(next));
      STRATA_REQUIRE(out.size() <= 4096) << "--nodes='" << spec << "' names more than 4,096 node counts";
    }
  }
  return out;
}

double SeedSpeedUp(double t_reference, int reference_batch, double t, int batch, int ranks) {
  return t_reference / t * double(batch) / reference_batch * ranks;
}

}  // namespace strata
