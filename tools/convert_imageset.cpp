// convert_imageset [flags] ROOTFOLDER/ LISTFILE DB
// Converts a set of images into an LMDB or LevelDB of Datums, as Caffe's tool of the same name. LISTFILE holds lines
// "subfolder1/file1.JPEG 7" (the label follows the last space); ROOTFOLDER/ is prefixed to each path as is.
#include "strata/common.hpp"
#include "strata/data/converters.hpp"
#include "backend_flag.hpp"
#include "tool_main.hpp"

DEFINE_bool(gray, false, "When true, load the images in grayscale.");
DEFINE_bool(shuffle, false, "Randomly shuffle the order of images and their labels (repeatably, see --seed).");
DEFINE_int32(resize_width, 0, "Width images are resized to (with --resize_height).");
DEFINE_int32(resize_height, 0, "Height images are resized to (with --resize_width).");
DEFINE_bool(check_size, false, "Check that all the raw images have the same size.");
DEFINE_bool(encoded, false, "When true, store the images encoded (as files), not as raw pixels.");
DEFINE_string(encode_type, "", "Encoding of the stored images ('png', 'jpg', ...); default: each file's own.");
DEFINE_uint64(seed, 1701, "Seed for --shuffle.");
DEFINE_bool(skip_unreadable, false, "Leave out images that are missing, empty or cannot be decoded, with a warning "
            "each (Caffe's behaviour); by default such an image is an error naming it.");

int main(int argc, char** argv) {
  return strata::RunTool(
      argc, argv,
      "converts a set of images to an LMDB or LevelDB of Datums\n"
      "usage: convert_imageset [flags] ROOTFOLDER/ LISTFILE DB\n"
      "  LISTFILE lines: 'path/relative/to/ROOTFOLDER.jpg label'",
      3, 3, [](int, char** args) {
        strata::ImagesetOptions options;
        options.gray = FLAGS_gray;
        options.shuffle = FLAGS_shuffle;
        options.resize_height = FLAGS_resize_height;
        options.resize_width = FLAGS_resize_width;
        options.check_size = FLAGS_check_size;
        options.encoded = FLAGS_encoded;
        options.encode_type = FLAGS_encode_type;
        options.seed = FLAGS_seed;
        options.skip_unreadable = FLAGS_skip_unreadable;
        options.backend = strata::BackendFlag();
        strata::ConvertImageset(args[1], args[2], args[3], options);
      });
}
