// A Datum record as a Data layer reads it from LMDB: parsed, its pixels loaded (raw bytes, float_data, or an
// encoded image decoded with OpenCV) and transformed into a blob's worth of floats. The first input byte picks
// the transform_param (crop, mirror, phase, mean values, colour mode), the rest is the serialized Datum.
#include <string_view>
#include <vector>

#include "fuzz_util.hpp"
#include "strata/data/data_transformer.hpp"
#include "strata/data/datum.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t knobs = data[0];
  strata::TransformationParameter param;
  // Crops that fit, one that fits only small images, and one past INT_MAX (crop_size is a uint32).
  static const unsigned kCrops[] = {0, 1, 28, 0x80000001u};
  param.set_crop_size(kCrops[knobs & 3]);
  param.set_mirror(knobs & 4);
  for (int i = 0; i < ((knobs >> 3) & 3); ++i) param.add_mean_value(100.0f + i);  // 0 to 3 values
  param.set_scale(0.00390625f);
  param.set_force_color(knobs & 32);
  param.set_force_gray(knobs & 64);
  const strata::Phase phase = (knobs & 128) ? strata::TRAIN : strata::TEST;
  try {
    strata::Datum datum;
    if (!strata::ParseDatum(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), &datum)) return 0;
    strata::DataTransformer<float> transformer(param, phase, /*seed=*/size);
    strata::DatumPixels pixels;
    pixels.Load(datum, transformer.color_mode());
    const std::vector<int> shape = transformer.OutputShape(pixels.channels(), pixels.height(), pixels.width());
    std::vector<float> out(static_cast<size_t>(shape[0]) * shape[1] * shape[2]);
    transformer.Transform(pixels, out.data());
  } catch (const strata::Error&) {
  }
  return 0;
}
