// compute_image_mean DB [OUT.binaryproto]
// The per-pixel mean of all records of an LMDB, written as Caffe's 1 x C x H x W BlobProto for
// transform_param.mean_file; the per-channel means (for mean_value) are printed too.
#include <cstdio>
#include <vector>

#include "strata/common.hpp"
#include "strata/data/converters.hpp"
#include "strata/util/io.hpp"
#include "backend_flag.hpp"
#include "tool_main.hpp"


int main(int argc, char** argv) {
  return strata::RunTool(
      argc, argv,
      "computes the mean image of an LMDB or LevelDB of Datums\n"
      "usage: compute_image_mean [flags] DB [OUT.binaryproto]",
      1, 2, [](int argc, char** args) {
        std::vector<double> channel_means;
        const strata::BlobProto mean = strata::ComputeImageMean(args[1], &channel_means, strata::BackendFlag());
        if (argc == 3) {
          strata::WriteProtoToBinaryFile(mean, args[2]);
          LOG(INFO) << "Wrote the 1 x " << mean.channels() << " x " << mean.height() << " x " << mean.width()
                    << " mean to '" << args[2] << "'";
        }
        for (size_t c = 0; c < channel_means.size(); ++c) {
          std::printf("mean_value channel [%zu]: %g\n", c, channel_means[c]);
        }
      });
}
