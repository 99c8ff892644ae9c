// convert_mnist_data IMAGES LABELS DB
// Converts MNIST-format IDX files (gzipped or not; Fashion-MNIST too) into an LMDB of Datums in Caffe's
// layout (keys "%08d", 1 x 28 x 28 raw bytes and the label), readable by Strata's and Caffe's Data layers.
#include "strata/common.hpp"
#include "strata/data/converters.hpp"
#include "tool_main.hpp"

DEFINE_string(backend, "lmdb", "The database backend; only lmdb is supported.");

int main(int argc, char** argv) {
  return strata::RunTool(
      argc, argv,
      "converts MNIST-format IDX files to an LMDB\n"
      "usage: convert_mnist_data [flags] IMAGES LABELS DB\n"
      "  IMAGES, LABELS: IDX files (e.g. train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz])\n"
      "  DB: the LMDB directory to create (must not exist)",
      3, 3, [](int, char** args) {
        STRATA_REQUIRE(FLAGS_backend == "lmdb") << "--backend=" << FLAGS_backend << " is not supported; use lmdb";
        strata::ConvertMnist(args[1], args[2], args[3]);
      });
}
