#include "strata/memory_format.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "strata/common.hpp"
#include "strata/util/flag_parsing.hpp"

namespace strata {

namespace {

// One (n, channel block) pair per task: its 16 channels' S values each, to or from one run of S * 16.
template <typename T, bool kToBlocked>
void Rearrange(const LayoutShape& shape, const T* in, T* out) {
  constexpr int B = kChannelBlock16;
  const int N = shape.num, CB = shape.channels / B, S = shape.spatial;
  const long long tasks = static_cast<long long>(N) * CB;
#pragma omp parallel for schedule(static) if (shape.count() >= (1u << 16))
  for (long long t = 0; t < tasks; ++t) {
    const T* src = in + t * S * B;   // the same offset in both layouts: n * C * S + cb * 16 * S
    T* dst = out + t * S * B;
    for (int j = 0; j < B; ++j) {
      if (kToBlocked) {
        const T* row = src + static_cast<size_t>(j) * S;
        for (int s = 0; s < S; ++s) dst[static_cast<size_t>(s) * B + j] = row[s];
      } else {
        T* row = dst + static_cast<size_t>(j) * S;
        for (int s = 0; s < S; ++s) row[s] = src[static_cast<size_t>(s) * B + j];
      }
    }
  }
}

// Calls rearrange(T{}) with T the unsigned type of `elem_size` bytes: the layouts move bits, never values.
template <typename Fn>
void ByElementSize(int elem_size, const char* layout, Fn rearrange) {
  switch (elem_size) {
    case 2: rearrange(uint16_t{}); break;
    case 4: rearrange(uint32_t{}); break;
    case 8: rearrange(uint64_t{}); break;
    default: LOG(FATAL) << "no " << layout << " layout for elements of " << elem_size << " bytes";
  }
}

template <bool kToBlocked>
void DispatchBlocked(const LayoutShape& shape, const void* in, void* out) {
  CHECK_EQ(shape.channels % kChannelBlock16, 0) << "a blocked layout needs channels in multiples of 16";
  CHECK_NE(shape.elem_size, 2) << "no blocked layout for elements of 2 bytes";  // parameters and activations only
  ByElementSize(shape.elem_size, "blocked", [&](auto type) {
    using T = decltype(type);
    Rearrange<T, kToBlocked>(shape, static_cast<const T*>(in), static_cast<T*>(out));
  });
}

// Each image's C x S matrix transposed to S x C (kToLast) or back, in tiles that keep both sides in cache.
template <typename T, bool kToLast>
void Transpose(const LayoutShape& shape, const T* in, T* out) {
  constexpr int kTile = 32;
  const long long C = shape.channels, S = shape.spatial, image = C * S;
#pragma omp parallel for schedule(static) if (shape.count() >= (1u << 16))
  for (int n = 0; n < shape.num; ++n) {
    const T* src = in + n * image;
    T* dst = out + n * image;
    for (long long c0 = 0; c0 < C; c0 += kTile) {
      for (long long s0 = 0; s0 < S; s0 += kTile) {
        const long long c1 = std::min(C, c0 + kTile), s1 = std::min(S, s0 + kTile);
        for (long long c = c0; c < c1; ++c) {
          for (long long s = s0; s < s1; ++s) {
            if (kToLast) {
              dst[s * C + c] = src[c * S + s];
            } else {
              dst[c * S + s] = src[s * C + c];
            }
          }
        }
      }
    }
  }
}

template <bool kToLast>
void DispatchTranspose(const LayoutShape& shape, const void* in, void* out) {
  ByElementSize(shape.elem_size, "channels-last", [&](auto type) {
    using T = decltype(type);
    Transpose<T, kToLast>(shape, static_cast<const T*>(in), static_cast<T*>(out));
  });
}

int& enabled_flag() {
  static int flag = EnvSwitchOn("STRATA_BLOCKED_LAYOUTS") ? 1 : 0;
  return flag;
}

int& param_layouts_flag() {
  static int flag = EnvSwitchOn("STRATA_PARAM_LAYOUTS") ? 1 : 0;
  return flag;
}

}  // namespace

void ToBlocked16(const LayoutShape& shape, const void* plain, void* blocked) {
  DispatchBlocked<true>(shape, plain, blocked);
}

void FromBlocked16(const LayoutShape& shape, const void* blocked, void* plain) {
  DispatchBlocked<false>(shape, blocked, plain);
}

void ToChannelsLast(const LayoutShape& shape, const void* plain, void* last) {
  DispatchTranspose<true>(shape, plain, last);
}

void FromChannelsLast(const LayoutShape& shape, const void* last, void* plain) {
  DispatchTranspose<false>(shape, last, plain);
}

const char* format_name(DeviceFormat f) {
  switch (f) {
    case DeviceFormat::kPlain: return "float";
    case DeviceFormat::kBf16: return "bfloat16";
    case DeviceFormat::kBf16Nhwc: return "bfloat16 channels-last";
    case DeviceFormat::kNhwc: return "float channels-last";
    case DeviceFormat::kFp16: return "float16";
    case DeviceFormat::kFp16Nhwc: return "float16 channels-last";
  }
  return "?";
}

const char* element_type_name(ElementType t) {
  switch (t) {
    case ElementType::kOwn: return "float";
    case ElementType::kBf16: return "bfloat16";
    case ElementType::kFp16: return "float16";
  }
  return "?";
}

bool blocked_layouts_enabled() { return enabled_flag() != 0; }
void set_blocked_layouts_enabled(bool enabled) { enabled_flag() = enabled ? 1 : 0; }

bool param_layouts_enabled() { return param_layouts_flag() != 0; }
void set_param_layouts_enabled(bool enabled) { param_layouts_flag() = enabled ? 1 : 0; }

bool SameFormat(const CustomFormat* a, const CustomFormat* b) {
  if (a == b) return true;
  return a && b && a->Same(*b);
}

namespace {

template <typename T>
void widen_in_place(void* memory, size_t n) {
  // Chunk by chunk from the end: chunk [begin, end) widens into bytes from 4 * begin on, past every 16-bit value
  // before it, which are still to be read.
  constexpr size_t kChunk = 1024;
  T chunk[kChunk];
  float values[kChunk];
  char* bytes = static_cast<char*>(memory);
  for (size_t end = n; end > 0;) {
    const size_t begin = end > kChunk ? end - kChunk : 0;
    std::memcpy(chunk, bytes + begin * sizeof(T), (end - begin) * sizeof(T));
    for (size_t i = 0; i < end - begin; ++i) values[i] = value_of(chunk[i]);
    std::memcpy(bytes + begin * sizeof(float), values, (end - begin) * sizeof(float));
    end = begin;
  }
}

}  // namespace

void widen_16bit_in_place(ElementType t, void* memory, size_t n) {
  CHECK(t != ElementType::kOwn) << "widening values that are not 16-bit";
  if (t == ElementType::kBf16) return widen_in_place<bfloat16>(memory, n);
  widen_in_place<float16>(memory, n);
}

void device_copy_to_plain_in_place(DeviceFormat format, size_t n, const LayoutShape& shape, void* memory) {
  if (is_16bit(format)) widen_16bit_in_place(element_type_of(format), memory, n);
  if (!is_channels_last(format)) return;
  const size_t m = shape.count();  // the blob's values: the memory may have room for more
  CHECK_LE(m, n) << "channels-last memory made for more values than it holds";
  LayoutShape floats = shape;
  floats.elem_size = sizeof(float);
  std::unique_ptr<float, decltype(&std::free)> scratch(static_cast<float*>(std::malloc(m * sizeof(float))), &std::free);
  CHECK(scratch || m == 0) << "cannot allocate " << m * sizeof(float) << " bytes to read channels-last memory";
  FromChannelsLast(floats, memory, scratch.get());
  std::memcpy(memory, scratch.get(), m * sizeof(float));
}

}  // namespace strata
