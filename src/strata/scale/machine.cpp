#include "strata/scale/machine.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "strata/common.hpp"
#include "strata/util/io.hpp"

namespace strata {

namespace {

// One key of the file: how it reads into and writes out of a MachineSpec.
struct Key {
  const char* name;
  const char* comment;
  bool rate;      // the file holds a rate (GB/s) and the spec seconds per byte
  bool may_zero;  // 0 is allowed (pcie: no GPU)
  std::function<double&(MachineSpec&)> field;
};

const std::vector<Key>& keys() {
  static const std::vector<Key> k = {
      {"alpha_us", "seconds per message between nodes, in us", false, true, [](MachineSpec& m) -> double& { return m.alpha; }},
      {"bandwidth_GBps", "a node's link, each direction", true, false, [](MachineSpec& m) -> double& { return m.beta; }},
      {"reduce_GBps", "bytes one core sums per second", true, false, [](MachineSpec& m) -> double& { return m.gamma; }},
      {"local_alpha_us", "one shared-memory flag wait inside a node", false, true,
       [](MachineSpec& m) -> double& { return m.local_alpha; }},
      {"local_copy_GBps", "bytes one core copies through shared memory", true, false,
       [](MachineSpec& m) -> double& { return m.local_copy; }},
      {"pcie_GBps", "GPU <-> host copies, each direction; 0: CPU training", true, true,
       [](MachineSpec& m) -> double& { return m.pcie; }},
      {"update_GBps", "gradient bytes one core updates per second", true, false,
       [](MachineSpec& m) -> double& { return m.update; }},
      {"wakeup_us", "a woken communication thread's wait for a core the computation holds", false, true,
       [](MachineSpec& m) -> double& { return m.wakeup; }},
  };
  return k;
}

}  // namespace

MachineSpec MachineSpec::parse(const std::string& text, const std::string& origin) {
  MachineSpec m;
  m.origin = origin;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string key, value, extra;
    if (!(fields >> key)) continue;
    STRATA_REQUIRE(static_cast<bool>(fields >> value) && !(fields >> extra))
        << origin << ":" << number << ": expected 'key value', got '" << line << "'";
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    STRATA_REQUIRE(end && *end == '\0' && std::isfinite(v) && v >= 0)
        << origin << ":" << number << ": '" << value << "' is not a non-negative number";
    if (key == "cores") {
      STRATA_REQUIRE(v >= 1 && v <= 1e6 && v == std::floor(v))
          << origin << ":" << number << ": cores must be a whole number from 1, got " << value;
      m.cores = static_cast<int>(v);
      continue;
    }
    const Key* found = nullptr;
    for (const auto& k : keys())
      if (key == k.name) found = &k;
    if (!found) {
      std::string names = "cores";
      for (const auto& k : keys()) names += std::string(", ") + k.name;
      STRATA_FAIL() << origin << ":" << number << ": unknown key '" << key << "' (known: " << names << ")";
    }
    STRATA_REQUIRE(v > 0 || found->may_zero) << origin << ":" << number << ": " << key << " must be positive";
    // Figures past these are typing errors, and would overflow the simulation's clock.
    if (found->rate)
      STRATA_REQUIRE(v == 0 || (v >= 1e-6 && v <= 1e6))
          << origin << ":" << number << ": " << key << " must be between 1e-6 and 1e6 GB/s, got " << value;
    else
      STRATA_REQUIRE(v <= 1e9) << origin << ":" << number << ": " << key << " must be at most 1e9 us, got " << value;
    double& field = found->field(m);
    if (found->rate) field = v > 0 ? 1.0 / (v * 1e9) : 0;
    else field = v * 1e-6;
  }
  return m;
}

MachineSpec MachineSpec::load(const std::string& path) {
  std::ifstream in(path);
  STRATA_REQUIRE(in.good()) << "cannot read the machine file '" << path << "'";
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

std::string MachineSpec::to_text() const {
  std::string out = "# strata scale machine file (docs/scale.md)\n";
  MachineSpec copy = *this;
  char line[200];
  for (const auto& k : keys()) {
    const double f = k.field(copy);
    const double v = k.rate ? (f > 0 ? 1.0 / f / 1e9 : 0.0) : f * 1e6;
    std::snprintf(line, sizeof line, "%-16s %.6g    # %s\n", k.name, v, k.comment);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-16s %d    # per node\n", "cores", cores);
  out += line;
  return out;
}

void MachineSpec::save(const std::string& path) const { WriteFileAtomically(path, to_text()); }

std::string MachineSpec::describe() const {
  char text[300];
  std::snprintf(text, sizeof text, "alpha %.2f us, link %.3g GB/s, sums %.3g GB/s, shared memory %.3g GB/s, ",
                alpha * 1e6, 1e-9 / beta, 1e-9 / gamma, 1e-9 / local_copy);
  std::string out = text;
  if (pcie > 0) {
    std::snprintf(text, sizeof text, "PCIe %.3g GB/s, ", 1e-9 / pcie);
    out += text;
  } else {
    out += "no GPU, ";
  }
  if (wakeup > 0) {
    std::snprintf(text, sizeof text, "wake-up %.0f us, ", wakeup * 1e6);
    out += text;
  }
  return out + std::to_string(cores) + " cores per node";
}

}  // namespace strata
