// strata_dump: the Strata half of the side-by-side comparison with BVLC Caffe (benchmarks/caffe/side_by_side.sh).
//
// Net mode: builds the same prototxt as caffe_dump did, loads the weights Caffe wrote, runs one forward and (unless
// --backward=false) one backward on the CPU, and compares every record of Caffe's dump (caffe_dump.cpp: every blob's
// data, every diff that Caffe's backward defines, every parameter's data and diff) with Strata's, printing one row
// per record and kind:
//   CASE  RECORD  data|diff  max|strata - caffe|  max|caffe|  relative (the ratio of the two)
// (a record that is zero in exact arithmetic, rounding noise in both, is measured against the case's largest value
// of its kind instead, and marked "~0": see Report) and one summary line, read by the driver:
//   SUMMARY CASE <worst relative of data> <worst relative of diffs> <record of the worst> <comparisons>
//
//   strata_dump --model=NET.prototxt --weights=W.caffemodel --reference=CAFFE_DUMP.pb --case_name=NAME
//               [--phase=TRAIN|TEST] [--seed=1701] [--backward=true] [--out=STRATA_DUMP.pb]
//               [--only=REC,REC] [--map=STRATA_REC=CAFFE_REC,...] [--verbose=true]
//   --only compares just these records (Strata's names); --map compares a Strata record with a differently named
//   record of Caffe's (a Strata layer checked against a Caffe net that computes the same thing another way).
//
// Model mode: compares the parameters of two .caffemodel files (after `caffe train` and `strata train`), layer by
// layer and blob by blob, with the same rows (kind "weight") and summary line:
//   strata_dump --compare_models=CAFFE.caffemodel,STRATA.caffemodel --case_name=NAME
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "strata/common.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

DEFINE_string(model, "", "The net (prototxt), the one caffe_dump ran.");
DEFINE_string(weights, "", "The .caffemodel caffe_dump wrote (--write_weights).");
DEFINE_string(reference, "", "Caffe's dump (caffe_dump --out).");
DEFINE_string(out, "", "Optionally write Strata's dump here (same format as caffe_dump's).");
DEFINE_string(case_name, "", "The case's name, for the table.");
DEFINE_string(phase, "TRAIN", "TRAIN or TEST.");
DEFINE_int64(seed, 1701, "Strata's random seed.");
DEFINE_bool(backward, true, "Run backward after forward.");
DEFINE_string(only, "", "Comma-separated records (Strata's names) to compare; default every record.");
DEFINE_string(map, "", "Comma-separated STRATA_RECORD=CAFFE_RECORD pairs: compare under another name.");
DEFINE_bool(verbose, true, "Print a row per record (else only the summary).");
DEFINE_string(compare_models, "", "CAFFE.caffemodel,STRATA.caffemodel: compare two weight files instead.");

namespace {

using strata::BlobProto;
using strata::NetParameter;

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size() && !s.empty()) {
    const size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The values of a BlobProto's data or diff (float or double storage), and its shape as text.
std::vector<double> Values(const BlobProto& b, bool diff) {
  std::vector<double> v;
  if (diff) {
    for (float x : b.diff()) v.push_back(x);
    for (double x : b.double_diff()) v.push_back(x);
  } else {
    for (float x : b.data()) v.push_back(x);
    for (double x : b.double_data()) v.push_back(x);
  }
  return v;
}

std::string ShapeOf(const BlobProto& b) {
  std::string s;
  if (b.has_shape()) {
    for (auto d : b.shape().dim()) s += (s.empty() ? "" : "x") + std::to_string(d);
  } else {  // the legacy 4-D fields
    s = std::to_string(b.num()) + "x" + std::to_string(b.channels()) + "x" + std::to_string(b.height()) + "x" +
        std::to_string(b.width());
  }
  return s.empty() ? "scalar" : s;
}

// One comparison: a record's data, diff or weights, Strata's values against Caffe's.
struct Comparison {
  std::string record, kind;
  bool same_size = true;
  size_t strata_size = 0, caffe_size = 0;
  double max_abs_diff = 0;  // max |strata - caffe| (inf: NaN on one side only)
  double max_ref = 0;       // max |caffe|
};

Comparison Compare(const std::string& record, const std::string& kind, const std::vector<double>& strata_v,
                   const std::vector<double>& caffe_v) {
  Comparison c;
  c.record = record;
  c.kind = kind;
  c.strata_size = strata_v.size();
  c.caffe_size = caffe_v.size();
  c.same_size = strata_v.size() == caffe_v.size();
  if (!c.same_size) return c;
  for (size_t i = 0; i < caffe_v.size(); ++i) {
    if (std::isnan(strata_v[i]) != std::isnan(caffe_v[i])) {
      c.max_abs_diff = std::numeric_limits<double>::infinity();
    } else if (!std::isnan(caffe_v[i])) {
      c.max_abs_diff = std::max(c.max_abs_diff, std::fabs(strata_v[i] - caffe_v[i]));
      c.max_ref = std::max(c.max_ref, std::fabs(caffe_v[i]));
    }
  }
  return c;
}

// Prints a row per comparison and the summary line. The relative difference is max|strata - caffe| / max|caffe|
// per record, except for a record that is zero in exact arithmetic and only rounding noise in both frameworks
// (max|caffe| below 1e-5 of the largest value of its kind in the case, e.g. the gradient of a bias that MVN's
// mean subtraction cancels): that one is measured against the case's largest value of its kind, and marked "~0".
void Report(const std::string& case_name, const std::vector<Comparison>& all) {
  constexpr double kNoiseLevel = 1e-5;
  std::map<std::string, double> largest;  // kind -> the largest |caffe| of that kind in the case
  for (const auto& c : all) largest[c.kind] = std::max(largest[c.kind], c.max_ref);
  double worst_data = 0, worst_diff = 0, worst = -1;
  bool any_diff = false;
  std::string worst_record = "-";
  for (const auto& c : all) {
    double rel;
    std::string note;
    if (!c.same_size) {
      rel = std::numeric_limits<double>::infinity();
      std::printf("%-22s %-40s %-6s size mismatch: strata %zu values, caffe %zu\n", case_name.c_str(),
                  c.record.c_str(), c.kind.c_str(), c.strata_size, c.caffe_size);
    } else {
      double denominator = c.max_ref;
      if (c.max_ref < kNoiseLevel * largest[c.kind] && c.max_abs_diff > 0) {
        denominator = largest[c.kind];
        note = c.max_ref == 0 ? "  Caffe's are all zero (relative to the case's largest " + c.kind + ")"
                              : "  ~0 (cancellation: relative to the case's largest " + c.kind + ")";
      }
      rel = c.max_abs_diff == 0 ? 0 : c.max_abs_diff / std::max(denominator, 1e-30);
      if (rel > 1e-5) note += "  <-- above 1e-5";
      if (FLAGS_verbose) {
        std::printf("%-22s %-40s %-6s %11.3e %11.3e %11.3e%s\n", case_name.c_str(), c.record.c_str(),
                    c.kind.c_str(), c.max_abs_diff, c.max_ref, rel, note.c_str());
      }
    }
    if (c.kind == "diff") {
      any_diff = true;
      worst_diff = std::max(worst_diff, rel);
    } else {
      worst_data = std::max(worst_data, rel);
    }
    if (rel > worst) {
      worst = rel;
      worst_record = c.record + ":" + c.kind;
    }
  }
  char diff_text[32] = "-";
  if (any_diff) std::snprintf(diff_text, sizeof(diff_text), "%.3e", worst_diff);
  std::printf("SUMMARY %s %.3e %s %s %zu\n", case_name.c_str(), worst_data, diff_text,
              worst > 0 ? worst_record.c_str() : "-", all.size());
}

// The records of a dump by name.
std::map<std::string, const BlobProto*> Records(const NetParameter& dump) {
  std::map<std::string, const BlobProto*> out;
  for (const auto& rec : dump.layer()) {
    if (rec.blobs_size() == 1) out[rec.name()] = &rec.blobs(0);
  }
  return out;
}

void AddRecord(NetParameter* dump, const std::string& name, const strata::Blob<float>& blob) {
  auto* rec = dump->add_layer();
  rec->set_name(name);
  rec->set_type("Record");
  blob.ToProto(rec->add_blobs(), /*write_diff=*/true);
}

int CompareNet() {
  STRATA_REQUIRE(!FLAGS_model.empty() && !FLAGS_reference.empty()) << "net mode needs --model and --reference";
  STRATA_REQUIRE(FLAGS_phase == "TRAIN" || FLAGS_phase == "TEST") << "--phase must be TRAIN or TEST";
  strata::Strata::set_mode(strata::Strata::CPU);
  strata::Strata::set_random_seed(static_cast<uint64_t>(FLAGS_seed));
  strata::Net<float> net(FLAGS_model, FLAGS_phase == "TRAIN" ? strata::TRAIN : strata::TEST);
  // A net without parameters takes no weights (Strata refuses a weights file that sets nothing; Caffe ignores it).
  if (!FLAGS_weights.empty() && !net.learnable_params().empty()) {
    const std::vector<std::string> left = net.CopyTrainedLayersFrom(FLAGS_weights);
    for (const auto& name : left) LOG(WARNING) << "no weights for layer " << name;
  }
  float loss = 0;
  net.ClearParamDiffs();
  net.Forward(&loss);
  if (FLAGS_backward) net.Backward();
  LOG(INFO) << "net " << net.name() << ": loss " << loss;

  NetParameter mine;
  mine.set_name(net.name());
  for (size_t i = 0; i < net.blobs().size(); ++i) AddRecord(&mine, "blob/" + net.blob_names()[i], *net.blobs()[i]);
  for (size_t l = 0; l < net.layers().size(); ++l) {
    const auto& params = net.layers()[l]->blobs();
    for (size_t j = 0; j < params.size(); ++j) {
      AddRecord(&mine, "param/" + net.layer_names()[l] + "/" + std::to_string(j), *params[j]);
    }
  }
  if (!FLAGS_out.empty()) strata::WriteProtoToBinaryFile(mine, FLAGS_out);

  NetParameter reference;
  strata::ReadProtoFromBinaryFile(FLAGS_reference, &reference);
  const auto caffe_records = Records(reference);
  const auto strata_records = Records(mine);
  std::map<std::string, std::string> rename;  // Strata's record name -> Caffe's
  for (const auto& pair : SplitCommas(FLAGS_map)) {
    const size_t eq = pair.find('=');
    STRATA_REQUIRE(eq != std::string::npos) << "--map wants STRATA_RECORD=CAFFE_RECORD, got " << pair;
    rename[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  std::vector<std::string> names = SplitCommas(FLAGS_only);
  if (names.empty()) {
    for (const auto& r : strata_records) names.push_back(r.first);
    for (const auto& r : caffe_records) {
      if (!strata_records.count(r.first)) std::printf("%-22s %-40s only in Caffe's net\n", FLAGS_case_name.c_str(),
                                                      r.first.c_str());
    }
  }
  std::vector<Comparison> comparisons;
  for (const auto& name : names) {
    const std::string caffe_name = rename.count(name) ? rename[name] : name;
    const auto s = strata_records.find(name);
    const auto c = caffe_records.find(caffe_name);
    STRATA_REQUIRE(s != strata_records.end() || FLAGS_only.empty()) << "Strata's net has no record " << name;
    if (c == caffe_records.end()) {
      std::printf("%-22s %-40s only in Strata's net\n", FLAGS_case_name.c_str(), name.c_str());
      continue;
    }
    const std::string shown = caffe_name == name ? name : name + "~" + caffe_name;
    if (ShapeOf(*s->second) != ShapeOf(*c->second)) {
      std::printf("%-22s %-40s shape mismatch: strata %s, caffe %s\n", FLAGS_case_name.c_str(), shown.c_str(),
                  ShapeOf(*s->second).c_str(), ShapeOf(*c->second).c_str());
      Comparison bad;
      bad.record = shown;
      bad.kind = "data";
      bad.max_abs_diff = std::numeric_limits<double>::infinity();
      comparisons.push_back(bad);
      continue;
    }
    comparisons.push_back(Compare(shown, "data", Values(*s->second, false), Values(*c->second, false)));
    // Caffe's dump holds a diff only where backward defines one (caffe_dump.cpp).
    const std::vector<double> caffe_diff = Values(*c->second, true);
    if (FLAGS_backward && !caffe_diff.empty()) {
      std::vector<double> strata_diff = Values(*s->second, true);
      if (strata_diff.empty()) strata_diff.assign(caffe_diff.size(), 0.0);  // never touched: zeros, as in memory
      comparisons.push_back(Compare(shown, "diff", strata_diff, caffe_diff));
    }
  }
  Report(FLAGS_case_name, comparisons);
  return 0;
}

int CompareModels() {
  const std::vector<std::string> files = SplitCommas(FLAGS_compare_models);
  STRATA_REQUIRE(files.size() == 2) << "--compare_models wants CAFFE.caffemodel,STRATA.caffemodel";
  NetParameter caffe_model, strata_model;
  strata::ReadNetParamsFromBinaryFile(files[0], &caffe_model);
  strata::ReadNetParamsFromBinaryFile(files[1], &strata_model);
  std::map<std::string, const strata::LayerParameter*> strata_layers;
  for (const auto& l : strata_model.layer()) strata_layers[l.name()] = &l;
  std::vector<Comparison> comparisons;
  for (const auto& cl : caffe_model.layer()) {
    if (cl.blobs_size() == 0) continue;
    const auto it = strata_layers.find(cl.name());
    STRATA_REQUIRE(it != strata_layers.end() && it->second->blobs_size() == cl.blobs_size())
        << "layer " << cl.name() << ": Strata's snapshot has no such layer or another number of blobs";
    for (int j = 0; j < cl.blobs_size(); ++j) {
      const std::string name = "param/" + cl.name() + "/" + std::to_string(j);
      comparisons.push_back(Compare(name, "weight", Values(it->second->blobs(j), false), Values(cl.blobs(j), false)));
    }
  }
  Report(FLAGS_case_name, comparisons);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_logtostderr = 1;
  gflags::SetUsageMessage("strata_dump --model=NET --weights=W --reference=CAFFE_DUMP --case_name=NAME | "
                          "--compare_models=A,B --case_name=NAME (see the header of strata_dump.cpp)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  try {
    return FLAGS_compare_models.empty() ? CompareNet() : CompareModels();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
