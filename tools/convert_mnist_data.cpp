// convert_mnist_data IMAGES LABELS DB
// Converts MNIST-format IDX files (gzipped or not; Fashion-MNIST too) into an LMDB or LevelDB of Datums in Caffe's
// layout (keys "%08d", 1 x 28 x 28 raw bytes and the label), readable by Strata's and Caffe's Data layers.
#include "strata/common.hpp"
#include "strata/data/converters.hpp"
#include "backend_flag.hpp"
#include "tool_main.hpp"


int main(int argc, char** argv) {
  return strata::RunTool(
      argc, argv,
      "converts MNIST-format IDX files to an LMDB or LevelDB\n"
      "usage: convert_mnist_data [flags] IMAGES LABELS DB\n"
      "  IMAGES, LABELS: IDX files (e.g. train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz])\n"
      "  DB: the database directory to create (must not exist)",
      3, 3, [](int, char** args) {
        strata::ConvertMnist(args[1], args[2], args[3], strata::BackendFlag());
      });
}
