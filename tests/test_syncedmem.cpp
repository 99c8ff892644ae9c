// SyncedMemory: nothing is allocated before the first access, the head follows the last writer, released memory
// comes back zeroed, borrowed memory is neither freed nor counted, and MemoryTracker sees every byte under the
// block's category; the version counts the accesses that may write. The device side: a CPU-only build refuses it
// outright; a GPU build moves values both ways (skipped without a GPU). bfloat16 and float16 (memory_format.hpp),
// which a GPU's device copy may hold: rounding to the nearest, ties to even, and the host's widening in place.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "strata/device.hpp"
#include "strata/memory_tracker.hpp"
#include "strata/syncedmem.hpp"

namespace strata {
namespace {

size_t Current(MemoryCategory c) { return MemoryTracker::current(c); }

uint32_t Bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

// The bfloat16 nearest to finite `v` by another route than to_bf16's: its two bfloat16 neighbours by truncation,
// measured in double (the one past the largest finite value standing for infinity at 2^128), ties to the even.
uint16_t NearestBf16(float v) {
  const uint32_t toward_zero = Bits(v) & 0xFFFF0000u;
  const uint32_t away = toward_zero + 0x10000u;  // the next magnitude up, same sign
  auto value = [](uint32_t bits) {
    if ((bits & 0x7FFFFFFFu) == 0x7F800000u) return std::copysign(std::ldexp(1.0, 128), bits >> 31 ? -1.0 : 1.0);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return static_cast<double>(f);
  };
  const double d0 = std::fabs(v - value(toward_zero)), d1 = std::fabs(value(away) - v);
  const uint32_t pick = d0 < d1 ? toward_zero : d1 < d0 ? away : ((toward_zero >> 16) & 1u) ? away : toward_zero;
  return static_cast<uint16_t>(pick >> 16);
}

TEST(Bfloat16, RoundsToTheNearestWithTiesToEven) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = any(gen);
    if (i % 4 == 0) u = (u & 0xFFFF0000u) | 0x8000u;  // exact ties
    float v;
    std::memcpy(&v, &u, sizeof v);
    if (!std::isfinite(v)) continue;
    ASSERT_EQ(to_bf16(v).bits, NearestBf16(v)) << std::hex << u;
    // Widening is exact, and rounding a bfloat16 value gives it back.
    ASSERT_EQ(to_bf16(from_bf16(to_bf16(v))).bits, to_bf16(v).bits) << std::hex << u;
  }
  EXPECT_EQ(to_bf16(1.00390625f).bits, 0x3F80u);   // 1 + 2^-8: a tie, to the even 1
  EXPECT_EQ(to_bf16(1.01171875f).bits, 0x3F82u);   // 1 + 3 * 2^-8: a tie, to the even 1 + 2^-6
  EXPECT_EQ(to_bf16(-0.0f).bits, 0x8000u);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()).bits, 0x7F80u);  // past the largest bfloat16: infinity
  EXPECT_EQ(to_bf16(-std::numeric_limits<float>::infinity()).bits, 0xFF80u);
  EXPECT_EQ(from_bf16(to_bf16(std::numeric_limits<float>::denorm_min())), 0.0f);
  // A NaN stays a NaN, whatever its payload (adding the rounding increment would carry some into infinity).
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0xFF80FFFFu}) {
    float v;
    std::memcpy(&v, &nan, sizeof v);
    EXPECT_TRUE(std::isnan(from_bf16(to_bf16(v)))) << std::hex << nan;
    EXPECT_EQ(to_bf16(v).bits >> 15, nan >> 31) << "the sign stays";
  }
}

// float16's values by their definition: sign, 5 bits of exponent biased by 15, 10 of significand; subnormals at
// exponent 0; infinity and NaN at 31. In double, exactly.
double Fp16Value(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 31) return m == 0 ? sign * std::numeric_limits<double>::infinity() : std::nan("");
  return sign * (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
}

// The float16 nearest to finite `v` by another route than to_fp16's: a search among every finite magnitude, with
// the one past the largest (65536) standing for infinity, measured in double, ties to the even.
uint16_t NearestFp16(float v) {
  static const std::vector<double> magnitudes = [] {
    std::vector<double> m;
    for (uint32_t h = 0; h <= 0x7C00u; ++h) m.push_back(h == 0x7C00u ? 65536.0 : Fp16Value(static_cast<uint16_t>(h)));
    return m;
  }();
  const double a = std::fabs(static_cast<double>(v));
  const uint16_t sign = std::signbit(v) ? 0x8000u : 0u;
  const auto above = std::lower_bound(magnitudes.begin(), magnitudes.end(), a);
  if (above == magnitudes.end()) return sign | 0x7C00u;
  const uint16_t hi = static_cast<uint16_t>(above - magnitudes.begin());
  if (*above == a || hi == 0) return sign | hi;
  const uint16_t lo = hi - 1;
  const double d0 = a - magnitudes[lo], d1 = *above - a;
  return sign | (d0 < d1 ? lo : d1 < d0 ? hi : (lo & 1u) ? hi : lo);
}

TEST(Float16, WidensEveryValueExactly) {
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const float16 x{static_cast<uint16_t>(h)};
    const double want = Fp16Value(x.bits);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(from_fp16(x))) << std::hex << h;
      ASSERT_TRUE(std::isnan(from_fp16(to_fp16(from_fp16(x))))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(from_fp16(x)), want) << std::hex << h;
    ASSERT_EQ(std::signbit(from_fp16(x)), (h & 0x8000u) != 0) << std::hex << h;
    ASSERT_EQ(to_fp16(from_fp16(x)).bits, x.bits) << "rounding a float16 value gives it back: " << std::hex << h;
  }
}

TEST(Float16, RoundsToTheNearestWithTiesToEven) {
  std::mt19937 gen(11);
  std::uniform_int_distribution<uint32_t> any;
  std::uniform_int_distribution<uint32_t> exponent(97, 145);  // float16's range and a little past each end
  for (int i = 0; i < 300000; ++i) {
    uint32_t u = any(gen);
    if (i % 2 == 0) u = (u & 0x807FFFFFu) | (exponent(gen) << 23);
    float v;
    std::memcpy(&v, &u, sizeof v);
    if (!std::isfinite(v)) continue;
    ASSERT_EQ(to_fp16(v).bits, NearestFp16(v)) << std::hex << u << " " << v;
  }
  // Every midpoint between neighbours (exact in float: 12 significant bits), and a float either side of it.
  for (uint32_t h = 0; h < 0x7BFFu; ++h) {
    const float mid = static_cast<float>((Fp16Value(static_cast<uint16_t>(h)) + Fp16Value(h + 1)) / 2);
    ASSERT_EQ(to_fp16(mid).bits, (h & 1u) ? h + 1 : h) << "a tie goes to the even: " << std::hex << h;
    ASSERT_EQ(to_fp16(-mid).bits, 0x8000u | ((h & 1u) ? h + 1 : h)) << std::hex << h;
    ASSERT_EQ(to_fp16(std::nextafter(mid, 0.f)).bits, h) << std::hex << h;
    ASSERT_EQ(to_fp16(std::nextafter(mid, 1e9f)).bits, h + 1) << std::hex << h;
  }
  EXPECT_EQ(to_fp16(65504.f).bits, 0x7BFFu);                       // the largest finite
  EXPECT_EQ(to_fp16(65519.996f).bits, 0x7BFFu);                    // just short of the midpoint to 65536
  EXPECT_EQ(to_fp16(65520.f).bits, 0x7C00u);                       // the midpoint: to the even, infinity
  EXPECT_EQ(to_fp16(-1e30f).bits, 0xFC00u);
  EXPECT_EQ(to_fp16(std::ldexp(1.f, -24)).bits, 0x0001u);          // the least subnormal
  EXPECT_EQ(to_fp16(std::ldexp(1.f, -25)).bits, 0x0000u);          // half of it: a tie, to the even zero
  EXPECT_EQ(to_fp16(std::ldexp(1.5f, -25)).bits, 0x0001u);
  EXPECT_EQ(to_fp16(std::ldexp(1.f, -14)).bits, 0x0400u);          // the least normal
  EXPECT_EQ(to_fp16(std::numeric_limits<float>::denorm_min()).bits, 0x0000u);
  EXPECT_EQ(to_fp16(-0.f).bits, 0x8000u);
  EXPECT_EQ(to_fp16(std::numeric_limits<float>::infinity()).bits, 0x7C00u);
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0xFF80FFFFu, 0x7F802000u}) {
    float v;
    std::memcpy(&v, &nan, sizeof v);
    EXPECT_TRUE(std::isnan(from_fp16(to_fp16(v)))) << std::hex << nan;
    EXPECT_EQ(to_fp16(v).bits >> 15, nan >> 31) << "the sign stays";
  }
}

template <typename T>
void CheckWidensInPlace(ElementType type) {
  for (size_t n : {size_t(0), size_t(1), size_t(1023), size_t(1024), size_t(1025), size_t(3000)}) {
    std::vector<float> want(n), memory(n + 1, -7.f);  // one float past the end must stay untouched
    std::vector<T> packed(n);
    std::mt19937 gen(static_cast<unsigned>(n));
    std::normal_distribution<float> normal(0.f, 10.f);
    for (size_t i = 0; i < n; ++i) {
      put(&packed[i], normal(gen));
      want[i] = value_of(packed[i]);
    }
    if (n) std::memcpy(memory.data(), packed.data(), n * sizeof(T));
    widen_16bit_in_place(type, memory.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(memory[i], want[i]) << element_type_name(type) << ", n " << n << ", value " << i;
    }
    EXPECT_EQ(memory[n], -7.f);
  }
}

TEST(Bfloat16, WidensInPlaceOverSeveralChunks) { CheckWidensInPlace<bfloat16>(ElementType::kBf16); }
TEST(Float16, WidensInPlaceOverSeveralChunks) { CheckWidensInPlace<float16>(ElementType::kFp16); }

// ImageLayout, the index rule of every kernel that runs in either order: channels-first is the plain row-major order,
// channels-last puts the channels innermost, and each is a one-to-one map onto the blob's places.
TEST(ChannelsLast, ImageLayoutPlacesEveryElementOnce) {
  for (bool last : {false, true}) {
    const long long N = 3, C = 5, S = 7;
    const ImageLayout o{C, S, last};
    std::vector<int> hits(N * C * S, 0);
    for (long long n = 0; n < N; ++n) {
      for (long long c = 0; c < C; ++c) {
        for (long long s = 0; s < S; ++s) {
          const long long k = o.at(n, c, s);
          ASSERT_GE(k, 0);
          ASSERT_LT(k, N * C * S);
          ++hits[k];
          EXPECT_EQ(k, last ? (n * S + s) * C + c : (n * C + c) * S + s);
          EXPECT_EQ(o.channel_of(k), c);
          EXPECT_EQ(o.pixel_of(k), s);
          EXPECT_EQ(k, o.base(n, c) + s * o.pixel_stride());
          if (c > 0) {
            EXPECT_EQ(k - o.at(n, c - 1, s), o.channel_stride());
          }
        }
      }
    }
    for (int h : hits) ASSERT_EQ(h, 1);
  }
}

template <typename T>
void CheckChannelsLastRoundTrip(const LayoutShape& shape) {
  const size_t n = shape.count();
  std::vector<T> plain(n), last(n), back(n);
  for (size_t i = 0; i < n; ++i) plain[i] = static_cast<T>(i * 2654435761u);
  ToChannelsLast(shape, plain.data(), last.data());
  const ImageLayout o{shape.channels, shape.spatial, true};
  for (int m = 0; m < shape.num; ++m) {
    for (int c = 0; c < shape.channels; ++c) {
      for (int s = 0; s < shape.spatial; ++s) {
        const size_t i = (static_cast<size_t>(m) * shape.channels + c) * shape.spatial + s;
        ASSERT_EQ(last[o.at(m, c, s)], plain[i]) << m << " " << c << " " << s;
      }
    }
  }
  FromChannelsLast(shape, last.data(), back.data());
  EXPECT_EQ(back, plain);
}

// The host's conversions, the references for the device's and the path of a host read: shapes past and short of
// the 32 x 32 tiles, one channel, one position, every element size a blob or its bfloat16 copy has.
TEST(ChannelsLast, HostConversionsFollowTheRuleBothWays) {
  for (LayoutShape s : {LayoutShape{2, 37, 65, 0}, LayoutShape{3, 64, 1, 0}, LayoutShape{1, 1, 50, 0},
                        LayoutShape{4, 3, 33, 0}, LayoutShape{0, 8, 8, 0}}) {
    s.elem_size = 2;
    CheckChannelsLastRoundTrip<uint16_t>(s);
    s.elem_size = 4;
    CheckChannelsLastRoundTrip<uint32_t>(s);
    s.elem_size = 8;
    CheckChannelsLastRoundTrip<uint64_t>(s);
  }
}

// A host read of device memory in each format: the device's bytes copied into the host block, then made the plain
// floats in place; channels-last made for fewer values than the block holds (a blob's memory keeps the room of
// its largest shape) puts back only those.
template <typename T>
void CheckHostRead(ElementType type) {
  const LayoutShape shape{2, 5, 6, 2};
  const size_t count = shape.count(), room = count + 9;
  std::vector<float> rounded(count);
  std::vector<T> plain16(count), last16(count);
  std::mt19937 gen(9);
  std::normal_distribution<float> normal(0.f, 3.f);
  for (size_t i = 0; i < count; ++i) {
    put(&plain16[i], normal(gen));
    rounded[i] = value_of(plain16[i]);
  }
  ToChannelsLast(shape, plain16.data(), last16.data());
  for (bool last : {false, true}) {
    const DeviceFormat f = device_format_for(type, last);
    std::vector<float> memory(room, 0.f);
    std::memcpy(memory.data(), last ? last16.data() : plain16.data(), count * sizeof(T));
    device_copy_to_plain_in_place(f, room, shape, memory.data());
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(memory[i], rounded[i]) << format_name(f) << " " << i;
  }
}

// A host read of device memory in each format: the device's bytes copied into the host block, then made the plain
// floats in place; channels-last made for fewer values than the block holds (a blob's memory keeps the room of
// its largest shape) puts back only those.
TEST(ChannelsLast, AHostReadOfDeviceBytesGivesThePlainFloats) {
  CheckHostRead<bfloat16>(ElementType::kBf16);
  CheckHostRead<float16>(ElementType::kFp16);
  const LayoutShape shape{2, 5, 6, 2};
  const size_t count = shape.count(), room = count + 9;
  std::vector<float> values(count);
  std::mt19937 gen(9);
  std::normal_distribution<float> normal(0.f, 3.f);
  for (float& v : values) v = normal(gen);
  std::vector<float> floats = values;
  device_copy_to_plain_in_place(DeviceFormat::kPlain, count, {}, floats.data());
  EXPECT_EQ(floats, values) << "float bytes are already plain";
  // Float channels-last: reordered, not widened (the values exact).
  LayoutShape shape32 = shape;
  shape32.elem_size = sizeof(float);
  std::vector<float> memory(room, 0.f);
  ToChannelsLast(shape32, values.data(), memory.data());
  device_copy_to_plain_in_place(DeviceFormat::kNhwc, room, shape, memory.data());
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(memory[i], values[i]) << "float channels-last " << i;
}

// The formats' two properties, and the one rule that names a format by them.
TEST(ChannelsLast, AFormatIsAnElementTypeInAnOrder) {
  std::vector<DeviceFormat> seen;
  for (ElementType t : {ElementType::kOwn, ElementType::kBf16, ElementType::kFp16}) {
    for (bool last : {false, true}) {
      const DeviceFormat f = device_format_for(t, last);
      EXPECT_EQ(element_type_of(f), t) << format_name(f);
      EXPECT_EQ(is_16bit(f), t != ElementType::kOwn) << format_name(f);
      EXPECT_EQ(is_channels_last(f), last) << format_name(f);
      EXPECT_EQ(std::count(seen.begin(), seen.end(), f), 0) << "one format per type and order: " << format_name(f);
      seen.push_back(f);
      const std::string name = format_name(f);
      EXPECT_EQ(name.rfind(element_type_name(t), 0), 0u) << name;
      EXPECT_EQ(name.find("channels-last") != std::string::npos, last) << name;
    }
  }
  EXPECT_STREQ(format_name(DeviceFormat::kNhwc), "float channels-last");
  EXPECT_STREQ(format_name(DeviceFormat::kFp16Nhwc), "float16 channels-last");
}

// Which convolutions gpu_options().channels_last sends channels-last, by their precision.
TEST(ChannelsLast, TheOptionNamesThePrecisionsThatComputeChannelsLast) {
  GpuOptions o;
  EXPECT_TRUE(o.channels_last_for(/*in_16bit=*/true)) << "bfloat16 and float16 by default";
  EXPECT_FALSE(o.channels_last_for(/*in_16bit=*/false)) << "float only when asked";
  o.channels_last = GpuOptions::ChannelsLast::kAll;
  EXPECT_TRUE(o.channels_last_for(true));
  EXPECT_TRUE(o.channels_last_for(false));
  o.channels_last = GpuOptions::ChannelsLast::kNone;
  EXPECT_FALSE(o.channels_last_for(true));
  EXPECT_FALSE(o.channels_last_for(false));
}

TEST(SyncedMemory, VersionCountsTheAccessesThatMayWrite) {
  SyncedMemory m(64);
  const uint64_t v0 = m.version();
  m.cpu_data();
  EXPECT_EQ(m.version(), v0);
  m.mutable_cpu_data();
  const uint64_t v1 = m.version();
  EXPECT_GT(v1, v0);
  m.cpu_data();
  EXPECT_EQ(m.version(), v1);
  m.mutable_cpu_data_as_is();
  EXPECT_GT(m.version(), v1);
  const uint64_t v2 = m.version();
  m.release();
  EXPECT_GT(m.version(), v2);
}

TEST(SyncedMemory, AllocatesLazilyAndZeroed) {
  const size_t before = Current(MemoryCategory::kWorkspace);
  SyncedMemory mem(64 * sizeof(float), MemoryCategory::kWorkspace);
  EXPECT_EQ(mem.head(), SyncedMemory::UNINITIALIZED);
  EXPECT_EQ(mem.size(), 64 * sizeof(float));
  EXPECT_EQ(mem.category(), MemoryCategory::kWorkspace);
  EXPECT_EQ(mem.resident_bytes(), 0u);
  EXPECT_EQ(mem.device_bytes(), 0u);
  EXPECT_EQ(Current(MemoryCategory::kWorkspace), before);

  const float* p = static_cast<const float*>(mem.cpu_data());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << "host memory is 64-byte aligned";
  for (int i = 0; i < 64; ++i) EXPECT_EQ(p[i], 0.f);
  EXPECT_EQ(mem.head(), SyncedMemory::HEAD_AT_CPU);
  EXPECT_EQ(mem.resident_bytes(), 64 * sizeof(float));
  EXPECT_EQ(Current(MemoryCategory::kWorkspace), before + 64 * sizeof(float));
  // Further reads and writes keep the same memory.
  EXPECT_EQ(mem.mutable_cpu_data(), p);
  EXPECT_EQ(mem.cpu_data(), p);
}

TEST(SyncedMemory, ReleaseFreesAndTheNextAccessStartsOver) {
  const size_t before = Current(MemoryCategory::kActivation);
  SyncedMemory mem(32, MemoryCategory::kActivation);
  std::memset(mem.mutable_cpu_data(), 0xab, 32);
  mem.release();
  EXPECT_EQ(mem.head(), SyncedMemory::UNINITIALIZED);
  EXPECT_EQ(mem.resident_bytes(), 0u);
  EXPECT_EQ(Current(MemoryCategory::kActivation), before);
  const unsigned char* q = static_cast<const unsigned char*>(mem.cpu_data());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q[i], 0) << "released memory comes back zeroed";
  EXPECT_EQ(Current(MemoryCategory::kActivation), before + 32);
}

// A writer of every value (keep_values false) gets its fresh memory as allocated, not zeroed; the test binaries
// fill it with NaNs (tests/test_main.cpp), so a writer that leaves a value unwritten fails its tests.
TEST(SyncedMemory, FreshMemoryForAWriterOfEveryValueIsNotZeroed) {
  SyncedMemory mem(16 * sizeof(float), MemoryCategory::kActivation);
  const float* p = static_cast<float*>(mem.mutable_cpu_data_in(MemoryFormat::kPlain, {}, /*keep_values=*/false));
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(std::isnan(p[i])) << "fresh memory for an overwriting writer, poisoned";
  mem.release();
  p = static_cast<float*>(mem.mutable_cpu_data_in(MemoryFormat::kBlocked16, {1, 16, 1, 4}, /*keep_values=*/false));
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(std::isnan(p[i])) << "in a blocked layout too";
  mem.release();
  p = static_cast<float*>(mem.mutable_cpu_data_in(MemoryFormat::kPlain, {}, /*keep_values=*/true));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(p[i], 0.f) << "a writer that keeps the values gets zeros";
}

TEST(SyncedMemory, ReleaseLeavesTheBytesToAViewFromOutside) {
  SyncedMemory mem(16, MemoryCategory::kActivation);
  std::memset(mem.mutable_cpu_data(), 0x5a, 16);
  const void* p = mem.cpu_data();
  mem.add_host_view();  // a NumPy array over the bytes
  mem.release();
  EXPECT_EQ(mem.head(), SyncedMemory::HEAD_AT_CPU);
  ASSERT_EQ(mem.cpu_data(), p);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(static_cast<const unsigned char*>(p)[i], 0x5a);
  mem.remove_host_view();
  mem.release();
  EXPECT_EQ(mem.head(), SyncedMemory::UNINITIALIZED);
  EXPECT_EQ(mem.resident_bytes(), 0u);
}

TEST(SyncedMemory, DestructorReleasesTheCount) {
  const size_t before = Current(MemoryCategory::kOther);
  {
    SyncedMemory mem(1000);
    mem.mutable_cpu_data();
    EXPECT_EQ(Current(MemoryCategory::kOther), before + 1000);
  }
  EXPECT_EQ(Current(MemoryCategory::kOther), before);
}

TEST(SyncedMemory, BorrowedHostMemoryIsNotOwnedOrCounted) {
  const size_t before = Current(MemoryCategory::kParameter);
  std::vector<float> outside(8, 2.5f);
  {
    SyncedMemory mem(8 * sizeof(float), MemoryCategory::kParameter);
    mem.mutable_cpu_data();  // an owned block first: handing over memory must free it
    EXPECT_EQ(Current(MemoryCategory::kParameter), before + 32);
    mem.set_cpu_data(outside.data());
    EXPECT_EQ(Current(MemoryCategory::kParameter), before);
    EXPECT_EQ(mem.head(), SyncedMemory::HEAD_AT_CPU);
    EXPECT_EQ(mem.cpu_data(), outside.data());
    EXPECT_EQ(mem.resident_bytes(), 0u);
    static_cast<float*>(mem.mutable_cpu_data())[3] = -1.f;
  }
  // The block is gone; the vector it borrowed is intact (not freed) and holds the write.
  EXPECT_EQ(outside[3], -1.f);
  EXPECT_EQ(outside[4], 2.5f);
  EXPECT_EQ(Current(MemoryCategory::kParameter), before);
}

TEST(SyncedMemory, SetCategoryMovesTheBytes) {
  const size_t act = Current(MemoryCategory::kActivation), work = Current(MemoryCategory::kWorkspace);
  SyncedMemory mem(128, MemoryCategory::kActivation);
  mem.set_category(MemoryCategory::kWorkspace);  // nothing allocated yet: only the label changes
  EXPECT_EQ(Current(MemoryCategory::kWorkspace), work);
  mem.cpu_data();
  EXPECT_EQ(Current(MemoryCategory::kWorkspace), work + 128);
  mem.set_category(MemoryCategory::kActivation);
  EXPECT_EQ(mem.category(), MemoryCategory::kActivation);
  EXPECT_EQ(Current(MemoryCategory::kWorkspace), work);
  EXPECT_EQ(Current(MemoryCategory::kActivation), act + 128);
}

TEST(MemoryTracker, CategoriesAndSpacesCountApartAndPeaksReset) {
  const MemoryCategory c = MemoryCategory::kWorkspace;
  const size_t host = MemoryTracker::current(c), device = MemoryTracker::current(c, MemorySpace::kDevice);
  const size_t other = MemoryTracker::current(MemoryCategory::kParameter);
  MemoryTracker::reset_peak(c);
  EXPECT_EQ(MemoryTracker::peak(c), host);
  MemoryTracker::allocated(c, 5000);
  MemoryTracker::allocated(c, 3000);
  MemoryTracker::released(c, 5000);
  EXPECT_EQ(MemoryTracker::current(c), host + 3000);
  EXPECT_EQ(MemoryTracker::peak(c), host + 8000);
  EXPECT_EQ(MemoryTracker::current(c, MemorySpace::kDevice), device) << "host bytes are not device bytes";
  EXPECT_EQ(MemoryTracker::current(MemoryCategory::kParameter), other);
  MemoryTracker::allocated(c, 700, MemorySpace::kDevice);
  EXPECT_EQ(MemoryTracker::current(c, MemorySpace::kDevice), device + 700);
  MemoryTracker::released(c, 700, MemorySpace::kDevice);
  MemoryTracker::reset_all_peaks();
  EXPECT_EQ(MemoryTracker::peak(c), host + 3000) << "a reset peak starts from the current level";
  MemoryTracker::released(c, 3000);
  EXPECT_EQ(MemoryTracker::current(c), host);
}

TEST(SyncedMemoryDeathTest, DeviceAccessInACpuOnlyBuildStops) {
  if (gpu_build()) GTEST_SKIP() << "this build has the GPU backend";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  SyncedMemory mem(16);
  EXPECT_DEATH(mem.gpu_data(), "no GPU support");
  EXPECT_DEATH(mem.mutable_gpu_data(), "no GPU support");
  EXPECT_DEATH(mem.mutable_gpu_data_in(DeviceFormat::kPlain, /*keep_values=*/false), "no GPU support");
}

TEST(SyncedMemory, HostAndDeviceCopiesFollowTheHead) {
  if (!gpu_build()) GTEST_SKIP() << "this build has no GPU support";
  if (gpu_device_count() == 0) GTEST_SKIP() << "no GPU on this machine";
  if (selected_gpu_device() < 0) select_gpu_device(-1);
  const size_t device_before = MemoryTracker::current(MemoryCategory::kOther, MemorySpace::kDevice);
  SyncedMemory mem(4 * sizeof(float));
  float* host = static_cast<float*>(mem.mutable_cpu_data());
  for (int i = 0; i < 4; ++i) host[i] = 1.5f * i;
  // Reading on the device copies up and leaves both sides valid.
  const void* dev = mem.gpu_data();
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(mem.head(), SyncedMemory::SYNCED);
  EXPECT_EQ(mem.device_bytes(), 4 * sizeof(float));
  EXPECT_EQ(MemoryTracker::current(MemoryCategory::kOther, MemorySpace::kDevice), device_before + 16);
  EXPECT_EQ(mem.cpu_data(), host) << "a synced read changes nothing";
  EXPECT_EQ(mem.head(), SyncedMemory::SYNCED);
  // Writing on the device moves the head there; the next host read copies back.
  mem.mutable_gpu_data();
  EXPECT_EQ(mem.head(), SyncedMemory::HEAD_AT_GPU);
  host[2] = -7.f;  // a stale host write: the device copy is the truth now
  const float* back = static_cast<const float*>(mem.cpu_data());
  EXPECT_EQ(mem.head(), SyncedMemory::SYNCED);
  EXPECT_EQ(back[2], 3.f);
  EXPECT_EQ(back[3], 4.5f);
  // A block first touched on the device starts zeroed there.
  SyncedMemory fresh(8);
  fresh.mutable_gpu_data();
  EXPECT_EQ(fresh.head(), SyncedMemory::HEAD_AT_GPU);
  EXPECT_EQ(fresh.resident_bytes(), 0u);
  const unsigned char* z = static_cast<const unsigned char*>(fresh.cpu_data());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(z[i], 0);
  // One its writer overwrites whole is allocated in the format asked for, not zeroed (poisoned in the tests).
  SyncedMemory overwritten(8 * sizeof(float));
  overwritten.mutable_gpu_data_in(DeviceFormat::kBf16, /*keep_values=*/false);
  EXPECT_EQ(overwritten.device_bytes(), 8 * sizeof(float) / 2) << "in bfloat16 directly";
  const float* w = static_cast<const float*>(overwritten.cpu_data());
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(std::isnan(w[i]));
  // Released in either bfloat16 order (blob lifetimes free such values), memory reads back as zeros in float.
  for (const DeviceFormat f : {DeviceFormat::kBf16, DeviceFormat::kBf16Nhwc}) {
    const LayoutShape shape{2, 2, 2, static_cast<int>(sizeof(bfloat16))};
    overwritten.mutable_gpu_data_in(f, /*keep_values=*/false, f == DeviceFormat::kBf16Nhwc ? shape : LayoutShape{});
    EXPECT_EQ(overwritten.device_format(), f);
    overwritten.release();
    EXPECT_EQ(overwritten.device_format(), DeviceFormat::kPlain);
    EXPECT_EQ(overwritten.device_bytes(), 0u);
    overwritten.gpu_data_in(f, f == DeviceFormat::kBf16Nhwc ? shape : LayoutShape{});
    w = static_cast<const float*>(overwritten.cpu_data());
    for (int i = 0; i < 8; ++i) EXPECT_EQ(w[i], 0.f) << i;
  }
  mem.release();
  EXPECT_EQ(mem.device_bytes(), 0u);
}

}  // namespace
}  // namespace strata
