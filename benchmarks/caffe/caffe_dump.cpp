// caffe_dump: the BVLC Caffe half of the side-by-side comparison (benchmarks/caffe/side_by_side.sh).
//
// Builds a net from a prototxt with a fixed seed (CPU), optionally loads weights or writes the filler-initialised
// weights as a .caffemodel, runs one forward and (unless --backward=false) one backward, and writes every blob's
// data and diff and every parameter's data and diff to --out. The dump is a serialized caffe.NetParameter whose
// layer entries are not layers but records, one per blob:
//   name "blob/<blob name>"          blobs[0]: the blob (data, and diff when some layer propagates a gradient into
//                                    it: Caffe leaves other diffs undefined, e.g. Scale uses its bottom's diff as
//                                    scratch space when the bottom needs no gradient)
//   name "param/<layer name>/<i>"    blobs[0]: the layer's i-th parameter blob (data and diff)
// strata_dump.cpp reads it through strata.proto (wire-compatible with caffe.proto) and compares.
//
//   caffe_dump --model=NET.prototxt --out=DUMP.pb [--phase=TRAIN|TEST] [--seed=1701]
//              [--weights=IN.caffemodel] [--write_weights=OUT.caffemodel] [--backward=true]
//              [--fill_gaussian=LAYER,...]
// --fill_gaussian fills the named layers' parameters from N(0, 0.5^2) before --write_weights, for a layer that has
// no filler of its own (Parameter's blob starts at zero).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <sstream>
#include <string>
#include <vector>

#include "caffe/caffe.hpp"
#include "caffe/filler.hpp"
#include "caffe/util/io.hpp"

DEFINE_string(model, "", "The net (prototxt).");
DEFINE_string(out, "", "Where to write the dump (binary NetParameter of blob records).");
DEFINE_string(phase, "TRAIN", "TRAIN or TEST.");
DEFINE_int64(seed, 1701, "Caffe's random seed (fillers, random layers).");
DEFINE_string(weights, "", "A .caffemodel to load after the fillers ran.");
DEFINE_string(write_weights, "", "Write the net's weights (after --weights, if any) here as a .caffemodel.");
DEFINE_bool(backward, true, "Run backward after forward.");
DEFINE_string(fill_gaussian, "", "Comma-separated layers whose parameters to fill from N(0, 0.5^2).");

namespace {

// Appends one record (a LayerParameter named `name` holding `blob`, data and diff) to the dump.
void AddRecord(caffe::NetParameter* dump, const std::string& name, const caffe::Blob<float>& blob, bool diff) {
  caffe::LayerParameter* rec = dump->add_layer();
  rec->set_name(name);
  rec->set_type("Record");
  blob.ToProto(rec->add_blobs(), diff);
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_logtostderr = 1;
  gflags::SetUsageMessage("caffe_dump --model=NET.prototxt --out=DUMP.pb [--phase --seed --weights --write_weights]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  CHECK(!FLAGS_model.empty() && !FLAGS_out.empty()) << "need --model and --out";
  CHECK(FLAGS_phase == "TRAIN" || FLAGS_phase == "TEST") << "--phase must be TRAIN or TEST";

  caffe::Caffe::set_mode(caffe::Caffe::CPU);
  caffe::Caffe::set_random_seed(static_cast<unsigned int>(FLAGS_seed));
  caffe::Net<float> net(FLAGS_model, FLAGS_phase == "TRAIN" ? caffe::TRAIN : caffe::TEST);
  if (!FLAGS_weights.empty()) net.CopyTrainedLayersFrom(FLAGS_weights);
  std::stringstream fill_list(FLAGS_fill_gaussian);
  for (std::string layer; std::getline(fill_list, layer, ',');) {
    caffe::FillerParameter filler_param;
    filler_param.set_std(0.5);
    caffe::GaussianFiller<float> filler(filler_param);
    for (const auto& blob : net.layer_by_name(layer)->blobs()) filler.Fill(blob.get());
  }
  if (!FLAGS_write_weights.empty()) {
    caffe::NetParameter weights;
    net.ToProto(&weights, /*write_diff=*/false);
    caffe::WriteProtoToBinaryFile(weights, FLAGS_write_weights);
  }

  float loss = 0;
  net.ClearParamDiffs();
  net.Forward(&loss);
  if (FLAGS_backward) net.Backward();
  LOG(INFO) << "net " << net.name() << ": loss " << loss;

  caffe::NetParameter dump;
  dump.set_name(net.name());
  // The blobs whose diff backward defines: those some layer propagates a gradient into.
  std::vector<bool> gets_gradient(net.blobs().size(), false);
  for (size_t l = 0; l < net.layers().size(); ++l) {
    for (size_t j = 0; j < net.bottom_ids(l).size(); ++j) {
      if (net.bottom_need_backward()[l][j]) gets_gradient[net.bottom_ids(l)[j]] = true;
    }
  }
  for (size_t i = 0; i < net.blobs().size(); ++i) {
    AddRecord(&dump, "blob/" + net.blob_names()[i], *net.blobs()[i], FLAGS_backward && gets_gradient[i]);
  }
  for (size_t l = 0; l < net.layers().size(); ++l) {
    const auto& params = net.layers()[l]->blobs();
    for (size_t j = 0; j < params.size(); ++j) {
      AddRecord(&dump, "param/" + net.layer_names()[l] + "/" + std::to_string(j), *params[j], FLAGS_backward);
    }
  }
  caffe::WriteProtoToBinaryFile(dump, FLAGS_out);
  return 0;
}
