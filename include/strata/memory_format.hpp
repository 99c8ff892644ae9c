// How a blob's host memory is arranged. Every blob starts, and is read by default, in its plain row-major order.
// Layers that compute with oneDNN's blocked kernels may leave an activation (or its gradient) in oneDNN's
// channel-blocked order instead, so that the next such layer reads it without a reorder; the memory remembers its
// layout, and any plain read (cpu_data(), the device, a snapshot) converts it back in place first
// (docs/onednn.md, "Layouts kept between layers"). On the device the same idea covers the element type: a float
// blob's device memory may hold its values in bfloat16 or float16 between layers that compute in it (DeviceFormat).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "strata/common.hpp"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

namespace strata {

enum class MemoryFormat {
  kPlain,
  // nChw16c: for an (N, C, S...) blob with C a multiple of 16, element (n, c, s) lies at
  // ((n * C/16 + c/16) * S + s) * 16 + c % 16, where S is the product of the spatial axes.
  kBlocked16,
  // A rearrangement another library chose for a parameter (oneDNN's weight formats): a CustomFormat says how.
  kCustom,
};

// A permutation of a parameter's elements, with no padding: the same bytes as the plain layout, rearranged. Layers
// that compute in such an order (oneDNN's convolutions) keep their weights and weight gradients in it, so that
// neither is reordered per iteration; the solver's elementwise update and the allreduce read the memory as it is
// (docs/onednn.md, "Weights in oneDNN's layouts").
class CustomFormat {
 public:
  virtual ~CustomFormat() = default;
  // The bytes of the whole tensor (equal to the plain layout's).
  virtual size_t bytes() const = 0;
  // Rearranges between the layouts (`from` and `to` do not overlap).
  virtual void ToLayout(const void* plain, void* laid_out) const = 0;
  virtual void FromLayout(const void* laid_out, void* plain) const = 0;
  // Whether `other` puts every element where this one does.
  virtual bool Same(const CustomFormat& other) const = 0;
  // The arrangement in a few words, the same on every process that would arrange the elements alike (the
  // data-parallel engine compares ranks' layouts through it).
  virtual std::string name() const = 0;
};
using CustomFormatPtr = std::shared_ptr<const CustomFormat>;

// Whether two layouts (either may be null: plain) arrange the elements alike.
bool SameFormat(const CustomFormat* a, const CustomFormat* b);

constexpr int kChannelBlock16 = 16;

// The (N, C, S) a layout that rearranges channels was made for (the host's blocked layout, the device's
// channels-last one), and the size of one element in bytes.
struct LayoutShape {
  int num = 0, channels = 0, spatial = 0;
  int elem_size = 0;
  size_t count() const { return static_cast<size_t>(num) * channels * spatial; }
  bool operator==(const LayoutShape& o) const {
    return num == o.num && channels == o.channels && spatial == o.spatial && elem_size == o.elem_size;
  }
};

// Rearranges count() elements of `shape` between the layouts (`from` and `to` must not overlap).
void ToBlocked16(const LayoutShape& shape, const void* plain, void* blocked);
void FromBlocked16(const LayoutShape& shape, const void* blocked, void* plain);

// Whether layers may leave blobs blocked at all: on unless STRATA_BLOCKED_LAYOUTS=0. Read when a Net is built;
// tests and benchmarks set it to compare the two (a net built while it is off keeps every blob plain).
bool blocked_layouts_enabled();
void set_blocked_layouts_enabled(bool enabled);

// Whether layers may keep their parameters in a CustomFormat: on unless STRATA_PARAM_LAYOUTS=0. The data-parallel
// engine turns it off when its ranks' layouts differ (CPUs of different kinds).
bool param_layouts_enabled();
void set_param_layouts_enabled(bool enabled);

// A bfloat16 value: the upper 16 bits of a float (same exponent, 8 bits of significand).
struct bfloat16 {
  uint16_t bits;
};

// `v` rounded to the nearest bfloat16, ties to even, as oneDNN's and CUDA's conversions round; a NaN stays a
// (quiet) NaN rather than rounding into infinity. The CPU's reference and the GPU's kernels both call it.
STRATA_HOST_DEVICE inline bfloat16 to_bf16(float v) {
#ifdef __CUDA_ARCH__
  uint32_t u = __float_as_uint(v);
#else
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
#endif
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return bfloat16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  u += 0x7FFFu + ((u >> 16) & 1u);
  return bfloat16{static_cast<uint16_t>(u >> 16)};
}

STRATA_HOST_DEVICE inline float from_bf16(bfloat16 b) {
  const uint32_t u = static_cast<uint32_t>(b.bits) << 16;
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
#endif
}

// An IEEE half-precision (binary16) value: 5 bits of exponent, 10 of significand (largest finite 65504, smallest
// normal 2^-14, subnormals down to 2^-24): precision: FP16's storage, for GPUs without bfloat16.
struct float16 {
  uint16_t bits;
};

// `v` rounded to the nearest float16, ties to even, overflowing into infinity from 65520 on, gradually underflowing
// through the subnormals; a NaN stays a (quiet) NaN. The device uses its conversion instruction, which rounds alike.
STRATA_HOST_DEVICE inline float16 to_fp16(float v) {
#ifdef __CUDA_ARCH__
  return float16{__half_as_ushort(__float2half_rn(v))};
#else
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return float16{static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu))};
  if (a >= 0x477FF000u) return float16{static_cast<uint16_t>(sign | 0x7C00u)};  // 65520 and up: infinity
  if (a >= 0x38800000u) {  // a normal float16: re-bias the exponent (127 - 15), round 13 bits away
    const uint32_t r = a - 0x38000000u;
    return float16{static_cast<uint16_t>(sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13))};
  }
  const int e = static_cast<int>(a >> 23);  // below 2^-14: a count of 2^-24 units, rounded to even
  if (e < 102) return float16{sign};        // below 2^-25: zero
  const uint32_t m = (a & 0x7FFFFFu) | 0x800000u, shift = static_cast<uint32_t>(126 - e);
  const uint32_t q = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  return float16{static_cast<uint16_t>(sign | (q + (rest > half || (rest == half && (q & 1u)) ? 1u : 0u)))};
#endif
}

STRATA_HOST_DEVICE inline float from_fp16(float16 h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h.bits));
#else
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16, e = (h.bits >> 10) & 0x1Fu, m = h.bits & 0x3FFu;
  uint32_t u;
  if (e == 0x1F) {
    u = sign | 0x7F800000u | (m << 13);
  } else if (e != 0) {
    u = sign | ((e + 112u) << 23) | (m << 13);
  } else {
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24, exact
    std::memcpy(&u, &v, sizeof u);
    u |= sign;
  }
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
#endif
}

// A stored value read as the type it is computed in, and a computed value stored (rounded to 16 bits where that is
// how it is stored): so one template of a kernel, or of its host reference, serves every element type.
STRATA_HOST_DEVICE inline float value_of(float v) { return v; }
STRATA_HOST_DEVICE inline double value_of(double v) { return v; }
STRATA_HOST_DEVICE inline float value_of(bfloat16 v) { return from_bf16(v); }
STRATA_HOST_DEVICE inline float value_of(float16 v) { return from_fp16(v); }
STRATA_HOST_DEVICE inline void put(float* p, float v) { *p = v; }
STRATA_HOST_DEVICE inline void put(double* p, double v) { *p = v; }
STRATA_HOST_DEVICE inline void put(bfloat16* p, float v) { *p = to_bf16(v); }
STRATA_HOST_DEVICE inline void put(float16* p, float v) { *p = to_fp16(v); }

// How a float blob's device memory stores each value: in the blob's own type, or in one of the two 16-bit types,
// for the activations and gradients that pass between layers computing in them on the GPU (precision: BF16 or
// FP16; docs/gpu.md, "bfloat16" and "float16").
enum class ElementType { kOwn, kBf16, kFp16 };
// "float", "bfloat16", "float16": the names messages use.
const char* element_type_name(ElementType t);

// How a blob's device memory holds its values: an element type in an order. The 16-bit formats hold a float blob
// only, each value rounded into half the bytes; a plain read converts back to float.
//
// The channels-last formats hold a float blob of (N, C, S...) with the channels innermost (cuDNN's NHWC): element
// (n, c, s) at (n * S + s) * C + c. Convolutions on the GPU compute in them, and the layers around them keep them
// (docs/gpu.md, "Channels-last"); each is made for the LayoutShape the memory is asked in, and converts back with
// that shape.
enum class DeviceFormat { kPlain, kBf16, kBf16Nhwc, kNhwc, kFp16, kFp16Nhwc };

inline ElementType element_type_of(DeviceFormat f) {
  if (f == DeviceFormat::kBf16 || f == DeviceFormat::kBf16Nhwc) return ElementType::kBf16;
  if (f == DeviceFormat::kFp16 || f == DeviceFormat::kFp16Nhwc) return ElementType::kFp16;
  return ElementType::kOwn;
}
// Whether a format holds 16-bit values (in either type and order), and whether its channels are innermost.
inline bool is_16bit(DeviceFormat f) { return element_type_of(f) != ElementType::kOwn; }
inline bool is_channels_last(DeviceFormat f) {
  return f == DeviceFormat::kBf16Nhwc || f == DeviceFormat::kFp16Nhwc || f == DeviceFormat::kNhwc;
}
// The format of an element type in an order.
inline DeviceFormat device_format_for(ElementType t, bool channels_last) {
  switch (t) {
    case ElementType::kBf16: return channels_last ? DeviceFormat::kBf16Nhwc : DeviceFormat::kBf16;
    case ElementType::kFp16: return channels_last ? DeviceFormat::kFp16Nhwc : DeviceFormat::kFp16;
    case ElementType::kOwn: break;
  }
  return channels_last ? DeviceFormat::kNhwc : DeviceFormat::kPlain;
}
// The name for messages: "float", "bfloat16", "bfloat16 channels-last", "float channels-last", "float16", ...
const char* format_name(DeviceFormat f);

// Where element (n, c, s) of an (N, C, S) blob lies, channels-first (the plain order) or channels-last: the one
// index rule of every kernel that runs in either (a channel's plane is base(n, c) + s * pixel_stride()), and of the
// host's conversions.
struct ImageLayout {
  long long C = 0, S = 0;
  bool channels_last = false;
  STRATA_HOST_DEVICE long long base(long long n, long long c) const {
    return channels_last ? n * S * C + c : (n * C + c) * S;
  }
  STRATA_HOST_DEVICE long long pixel_stride() const { return channels_last ? C : 1; }
  STRATA_HOST_DEVICE long long channel_stride() const { return channels_last ? 1 : S; }
  STRATA_HOST_DEVICE long long at(long long n, long long c, long long s) const {
    return base(n, c) + s * pixel_stride();
  }
  // Element k's channel, and its position s in its image.
  STRATA_HOST_DEVICE long long channel_of(long long k) const { return channels_last ? k % C : (k / S) % C; }
  STRATA_HOST_DEVICE long long pixel_of(long long k) const { return channels_last ? (k / C) % S : k % S; }
};

// Rearranges count() elements of `shape` (elem_size 2, 4 or 8) between channels-first and channels-last (`from` and
// `to` must not overlap): the host's references for the device's conversions, and its reads of such device memory.
void ToChannelsLast(const LayoutShape& shape, const void* plain, void* last);
void FromChannelsLast(const LayoutShape& shape, const void* last, void* plain);

// Widens the n 16-bit values of type `t` at the start of `memory` into n floats over the same bytes (4n of them): a
// host read of a blob whose device copy is in 16 bits copies its 2n bytes and widens them in place.
void widen_16bit_in_place(ElementType t, void* memory, size_t n);
// A host copy of n values' device bytes in `format`, turned into the plain floats in place: widened from 16 bits,
// and for channels-last the shape.count() values it was made for put back in channels-first order (n may be more: a
// blob's memory keeps the room of its largest shape). `memory` has room for the floats.
void device_copy_to_plain_in_place(DeviceFormat format, size_t n, const LayoutShape& shape, void* memory);

#ifdef STRATA_USE_CUDA
// n values of a float blob's device memory converted between two formats (`shape`: the channels-last side's, its
// elem_size ignored), from `x` into `y` (not overlapping), on the compute stream.
void gpu_reformat(size_t n, const LayoutShape& shape, DeviceFormat from, const void* x, DeviceFormat to, void* y);
#endif

}  // namespace strata
