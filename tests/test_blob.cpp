// Blob: shapes and their checks, counts and offsets, lazy memory that grows and never shrinks, sharing, the
// whole-blob arithmetic, BlobProto in both directions (N-d shapes and Caffe's legacy num/channels/height/width), and
// the channel-blocked layout (strata/memory_format.hpp): where each element lies, and that every plain reader sees the
// plain values whatever layout a layer left the memory in.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "strata/blob.hpp"
#include "strata/memory_tracker.hpp"

namespace strata {
namespace {

template <typename Dtype>
class BlobTest : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(BlobTest, Dtypes);

// Writes v[i] into the data (or the diff) of a blob with as many elements.
template <typename Dtype>
void Fill(Blob<Dtype>* b, const std::vector<double>& v, bool diff = false) {
  ASSERT_EQ(b->count(), static_cast<int>(v.size()));
  Dtype* p = diff ? b->mutable_cpu_diff() : b->mutable_cpu_data();
  for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<Dtype>(v[i]);
}

TEST(Blob, EmptyBlobHasNoAxesAndNothingToSum) {
  Blob<float> b;
  EXPECT_EQ(b.num_axes(), 0);
  EXPECT_EQ(b.count(), 0);
  EXPECT_EQ(b.shape_string(), "(0)");
  Blob<float> zero({3, 0, 2});
  EXPECT_EQ(zero.count(), 0);
  EXPECT_EQ(zero.asum_data(), 0.f);
  EXPECT_EQ(zero.sumsq_diff(), 0.f);
}

TEST(Blob, ShapeCountsAndAxes) {
  Blob<float> b({2, 3, 4, 5});
  EXPECT_EQ(b.num_axes(), 4);
  EXPECT_EQ(b.count(), 120);
  EXPECT_EQ(b.count(1), 60);
  EXPECT_EQ(b.count(1, 3), 12);
  EXPECT_EQ(b.count(2, 2), 1);
  EXPECT_EQ(b.shape(0), 2);
  EXPECT_EQ(b.shape(-1), 5);
  EXPECT_EQ(b.shape(-4), 2);
  EXPECT_EQ(b.CanonicalAxisIndex(-3), 1);
  EXPECT_THROW(b.CanonicalAxisIndex(4), Error);
  EXPECT_THROW(b.CanonicalAxisIndex(-5), Error);
  EXPECT_EQ(b.shape_string(), "2 3 4 5 (120)");
  EXPECT_EQ(b.num(), 2);
  EXPECT_EQ(b.channels(), 3);
  EXPECT_EQ(b.height(), 4);
  EXPECT_EQ(b.width(), 5);

  // Legacy accessors read missing trailing axes as 1.
  Blob<float> fc({6, 7});
  EXPECT_EQ(fc.num(), 6);
  EXPECT_EQ(fc.channels(), 7);
  EXPECT_EQ(fc.height(), 1);
  EXPECT_EQ(fc.width(), 1);
}

TEST(Blob, BadShapesAreErrors) {
  Blob<float> b;
  EXPECT_THROW(b.Reshape(std::vector<int>{2, -1}), Error);
  EXPECT_THROW(b.Reshape(std::vector<int>{1 << 16, 1 << 16}), Error);  // more than INT_MAX elements
  EXPECT_THROW(b.Reshape(std::vector<int>(kMaxBlobAxes + 1, 1)), Error);
  b.Reshape(std::vector<int>(kMaxBlobAxes, 1));
  EXPECT_EQ(b.num_axes(), kMaxBlobAxes);
  BlobShape too_big;
  too_big.add_dim(static_cast<int64_t>(INT_MAX) + 1);
  EXPECT_THROW(b.Reshape(too_big), Error);
}

TEST(Blob, OffsetsAreRowMajor) {
  Blob<float> b({2, 3, 4, 5});
  EXPECT_EQ(b.offset(0, 0, 0, 0), 0);
  EXPECT_EQ(b.offset(0, 0, 0, 1), 1);
  EXPECT_EQ(b.offset(0, 0, 1, 0), 5);
  EXPECT_EQ(b.offset(0, 1, 0, 0), 20);
  EXPECT_EQ(b.offset(1, 2, 3, 4), 119);
  EXPECT_EQ(b.offset(std::vector<int>{1, 2, 3, 4}), 119);
  // Fewer indices than axes: the rest are 0.
  EXPECT_EQ(b.offset(std::vector<int>{1, 2}), b.offset(1, 2));
  EXPECT_EQ(b.offset(std::vector<int>{1, 2}), 100);
  // data_at reads through the same offsets.
  float* d = b.mutable_cpu_data();
  for (int i = 0; i < b.count(); ++i) d[i] = static_cast<float>(i);
  EXPECT_EQ(b.data_at(1, 0, 2, 3), 60 + 10 + 3);
  EXPECT_EQ(b.data_at({0, 2, 1, 1}), 40 + 5 + 1);
}

TEST(Blob, MemoryStartsZeroedAndGrowsButNeverShrinks) {
  Blob<float> b({4, 5});
  for (int i = 0; i < b.count(); ++i) {
    EXPECT_EQ(b.cpu_data()[i], 0.f);
    EXPECT_EQ(b.cpu_diff()[i], 0.f);
  }
  const auto data = b.data();
  const float* p = b.cpu_data();
  b.Reshape(std::vector<int>{2, 3});  // smaller: the same memory
  EXPECT_EQ(b.count(), 6);
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(b.cpu_data(), p);
  b.Reshape(std::vector<int>{20});  // back within the capacity: still the same
  EXPECT_EQ(b.data(), data);
  b.Reshape(std::vector<int>{21});  // beyond it: new memory of the new size
  EXPECT_NE(b.data(), data);
  EXPECT_EQ(b.data()->size(), 21 * sizeof(float));
  EXPECT_EQ(b.diff()->size(), 21 * sizeof(float));

  BlobShape shape;
  shape.add_dim(3);
  shape.add_dim(7);
  b.Reshape(shape);
  EXPECT_EQ(b.shape(), (std::vector<int>{3, 7}));
  Blob<float> like;
  like.ReshapeLike(b);
  EXPECT_EQ(like.shape(), b.shape());
}

TEST(Blob, ShareDataAndShareDiffAlias) {
  Blob<float> a({2, 3}), b({6});
  b.ShareData(a);
  a.mutable_cpu_data()[4] = 7.f;
  EXPECT_EQ(b.cpu_data()[4], 7.f);
  b.mutable_cpu_data()[0] = -1.f;
  EXPECT_EQ(a.cpu_data()[0], -1.f);
  // The diffs are still their own.
  a.mutable_cpu_diff()[1] = 3.f;
  EXPECT_EQ(b.cpu_diff()[1], 0.f);
  b.ShareDiff(a);
  EXPECT_EQ(b.cpu_diff()[1], 3.f);
  EXPECT_EQ(b.diff(), a.diff());
  EXPECT_EQ(b.shape(), (std::vector<int>{6}));  // sharing keeps the blob's own shape
}

TYPED_TEST(BlobTest, UpdateSubtractsTheDiff) {
  Blob<TypeParam> b({5});
  Fill(&b, {1, 2, 3, 4, 5});
  Fill(&b, {0.5, -1, 0, 4, 10}, true);
  b.Update();
  const std::vector<double> want = {0.5, 3, 3, 0, -5};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b.cpu_data()[i], static_cast<TypeParam>(want[i])) << i;
  EXPECT_EQ(b.cpu_diff()[1], TypeParam(-1)) << "Update leaves the diff alone";
}

TYPED_TEST(BlobTest, SumsAndScaling) {
  Blob<TypeParam> b({2, 2});
  Fill(&b, {1, -2, 3, -4});
  Fill(&b, {0.5, 0.25, -0.5, 2}, true);
  EXPECT_EQ(b.asum_data(), TypeParam(10));
  EXPECT_EQ(b.sumsq_data(), TypeParam(30));
  EXPECT_EQ(b.asum_diff(), TypeParam(3.25));
  EXPECT_EQ(b.sumsq_diff(), TypeParam(0.25 + 0.0625 + 0.25 + 4));
  b.scale_data(TypeParam(-0.5));
  EXPECT_EQ(b.cpu_data()[0], TypeParam(-0.5));
  EXPECT_EQ(b.cpu_data()[3], TypeParam(2));
  EXPECT_EQ(b.asum_data(), TypeParam(5));
  b.scale_diff(TypeParam(4));
  EXPECT_EQ(b.cpu_diff()[1], TypeParam(1));
  EXPECT_EQ(b.cpu_diff()[2], TypeParam(-2));
  EXPECT_EQ(b.cpu_data()[1], TypeParam(1)) << "scale_diff leaves the data alone";
}

TEST(Blob, CopyFromCopiesDataOrDiffAndReshapesOnlyWhenAllowed) {
  Blob<float> src({2, 3}), dst({2, 3}), other({3, 2});
  for (int i = 0; i < 6; ++i) {
    src.mutable_cpu_data()[i] = static_cast<float>(i);
    src.mutable_cpu_diff()[i] = static_cast<float>(10 + i);
  }
  dst.CopyFrom(src);
  EXPECT_EQ(dst.cpu_data()[5], 5.f);
  EXPECT_EQ(dst.cpu_diff()[5], 0.f);
  dst.CopyFrom(src, /*copy_diff=*/true);
  EXPECT_EQ(dst.cpu_diff()[2], 12.f);
  EXPECT_THROW(other.CopyFrom(src), Error);  // same count, other shape
  other.CopyFrom(src, false, /*reshape=*/true);
  EXPECT_EQ(other.shape(), src.shape());
  EXPECT_EQ(other.cpu_data()[4], 4.f);
}

TYPED_TEST(BlobTest, ProtoRoundTripKeepsShapeDataAndDiff) {
  Blob<TypeParam> b({2, 1, 3});
  Fill(&b, {0.1, -0.2, 0.3, 1e-3, 5, -6});
  Fill(&b, {1, 2, 3, 4, 5, 6}, true);
  BlobProto proto;
  b.ToProto(&proto, /*write_diff=*/true);
  ASSERT_EQ(proto.shape().dim_size(), 3);
  EXPECT_EQ(proto.shape().dim(2), 3);
  // float blobs write `data`, double blobs `double_data`, so neither loses precision.
  const bool is_double = sizeof(TypeParam) == sizeof(double);
  EXPECT_EQ(proto.data_size(), is_double ? 0 : 6);
  EXPECT_EQ(proto.double_data_size(), is_double ? 6 : 0);
  EXPECT_EQ(proto.diff_size() + proto.double_diff_size(), 6);

  Blob<TypeParam> c;
  c.FromProto(proto);
  EXPECT_EQ(c.shape(), b.shape());
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(c.cpu_data()[i], b.cpu_data()[i]) << i;
    EXPECT_EQ(c.cpu_diff()[i], b.cpu_diff()[i]) << i;
  }
  BlobProto without_diff;
  b.ToProto(&without_diff);
  EXPECT_EQ(without_diff.diff_size() + without_diff.double_diff_size(), 0);
}

TEST(Blob, FromProtoReadsLegacyFourAxisShapes) {
  BlobProto proto;
  proto.set_num(2);
  proto.set_channels(1);
  proto.set_height(2);
  proto.set_width(3);
  for (int i = 0; i < 12; ++i) proto.add_data(0.5f * i);
  Blob<float> b;
  b.FromProto(proto);
  EXPECT_EQ(b.shape(), (std::vector<int>{2, 1, 2, 3}));
  EXPECT_EQ(b.data_at(1, 0, 1, 2), 0.5f * 11);
  EXPECT_TRUE(b.ShapeEquals(proto));

  // Caffe stored inner-product weights as (1, 1, out, in): they load into an (out, in) blob unreshaped.
  BlobProto fc;
  fc.set_num(1);
  fc.set_channels(1);
  fc.set_height(2);
  fc.set_width(3);
  for (int i = 0; i < 6; ++i) fc.add_data(static_cast<float>(i));
  Blob<float> w({2, 3});
  EXPECT_TRUE(w.ShapeEquals(fc));
  w.FromProto(fc, /*reshape=*/false);
  EXPECT_EQ(w.shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(w.cpu_data()[5], 5.f);
}

TEST(Blob, FromProtoRefusesMismatches) {
  BlobProto proto;
  proto.mutable_shape()->add_dim(2);
  proto.mutable_shape()->add_dim(2);
  for (int i = 0; i < 4; ++i) proto.add_data(1.f);
  Blob<float> wrong_shape({4});
  EXPECT_FALSE(wrong_shape.ShapeEquals(proto));
  EXPECT_THROW(wrong_shape.FromProto(proto, /*reshape=*/false), Error);
  proto.add_data(1.f);  // five values for four elements
  Blob<float> b;
  EXPECT_THROW(b.FromProto(proto), Error);
}

TEST(Blob, MemoryCategoryDecidesWhereTheBytesCount) {
  const size_t param_before = MemoryTracker::current(MemoryCategory::kParameter);
  const size_t act_before = MemoryTracker::current(MemoryCategory::kActivation);
  {
    Blob<float> b({100});
    b.set_memory_category(MemoryCategory::kParameter);
    EXPECT_EQ(b.resident_bytes(), 0u) << "no memory before the first access";
    EXPECT_FALSE(b.has_data());
    b.mutable_cpu_data();
    EXPECT_TRUE(b.has_data());
    EXPECT_EQ(b.resident_bytes(), 400u);
    EXPECT_EQ(MemoryTracker::current(MemoryCategory::kParameter), param_before + 400);
    b.mutable_cpu_diff();
    EXPECT_EQ(b.resident_bytes(), 800u);
    b.set_memory_category(MemoryCategory::kActivation);
    EXPECT_EQ(MemoryTracker::current(MemoryCategory::kParameter), param_before);
    EXPECT_EQ(MemoryTracker::current(MemoryCategory::kActivation), act_before + 800);
    b.release_memory();
    EXPECT_FALSE(b.has_data());
    EXPECT_EQ(b.resident_bytes(), 0u);
    EXPECT_EQ(MemoryTracker::current(MemoryCategory::kActivation), act_before);
    b.mutable_cpu_data()[3] = 2.f;  // comes back zeroed, and counted again
    EXPECT_EQ(b.cpu_data()[2], 0.f);
    EXPECT_EQ(MemoryTracker::current(MemoryCategory::kActivation), act_before + 400);
  }
  EXPECT_EQ(MemoryTracker::current(MemoryCategory::kActivation), act_before) << "the destructor releases";
}

// nChw16c puts element (n, c, s) at ((n * C/16 + c/16) * S + s) * 16 + c % 16, as oneDNN's aBcd16b does.
TYPED_TEST(BlobTest, BlockedLayoutPutsEachElementWhereOneDnnDoes) {
  const int N = 2, C = 32, H = 3, W = 5, S = H * W;
  Blob<TypeParam> b({N, C, H, W});
  ASSERT_TRUE(b.can_block());
  TypeParam* plain = b.mutable_cpu_data();
  for (int i = 0; i < b.count(); ++i) plain[i] = static_cast<TypeParam>(i);
  EXPECT_EQ(b.data_layout(), MemoryFormat::kPlain);
  const TypeParam* blocked = b.cpu_data_in(MemoryFormat::kBlocked16);
  EXPECT_EQ(b.data_layout(), MemoryFormat::kBlocked16);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int s = 0; s < S; ++s) {
        const int at = ((n * (C / 16) + c / 16) * S + s) * 16 + c % 16;
        ASSERT_EQ(blocked[at], static_cast<TypeParam>((n * C + c) * S + s)) << n << " " << c << " " << s;
      }
  // A plain read converts back, in place; the diff has a layout of its own.
  EXPECT_EQ(b.diff_layout(), MemoryFormat::kPlain);
  const TypeParam* again = b.cpu_data();
  EXPECT_EQ(b.data_layout(), MemoryFormat::kPlain);
  for (int i = 0; i < b.count(); ++i) ASSERT_EQ(again[i], static_cast<TypeParam>(i));
}

TYPED_TEST(BlobTest, OnlyFourAxesWithChannelsInSixteensCanBlock) {
  EXPECT_TRUE(Blob<TypeParam>({1, 16, 1, 1}).can_block());
  EXPECT_FALSE(Blob<TypeParam>({1, 8, 4, 4}).can_block());
  EXPECT_FALSE(Blob<TypeParam>({2, 16, 4}).can_block());
  EXPECT_FALSE(Blob<TypeParam>({0, 16, 4, 4}).can_block());
}

// Every plain reader (the mutable accessors, a blob of another shape sharing the memory, a snapshot) sees plain
// values; overwriting (keep_values false) converts nothing; released memory starts plain again.
TYPED_TEST(BlobTest, PlainReadersSeePlainValuesWhateverTheLayout) {
  const std::vector<int> shape{2, 16, 2, 3};
  Blob<TypeParam> b(shape);
  TypeParam* d = b.mutable_cpu_diff_in(MemoryFormat::kBlocked16, false);
  EXPECT_EQ(b.diff_layout(), MemoryFormat::kBlocked16);
  for (int i = 0; i < b.count(); ++i) d[i] = static_cast<TypeParam>(i);  // blocked order
  // The same values through the plain view: element (n, c, s) is blocked index ((n + 0) * 6 + s) * 16 + c.
  const TypeParam* plain = b.cpu_diff();
  EXPECT_EQ(b.diff_layout(), MemoryFormat::kPlain);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 16; ++c)
      for (int s = 0; s < 6; ++s) ASSERT_EQ(plain[(n * 16 + c) * 6 + s], static_cast<TypeParam>((n * 6 + s) * 16 + c));

  // A flattened view sharing the memory is plain to itself, and reading it converts the memory.
  for (int i = 0; i < b.count(); ++i) b.mutable_cpu_data()[i] = static_cast<TypeParam>(i);
  b.cpu_data_in(MemoryFormat::kBlocked16);
  Blob<TypeParam> flat({2, 96});
  flat.ShareData(b);
  EXPECT_EQ(flat.data_layout(), MemoryFormat::kPlain);
  EXPECT_EQ(b.data_layout(), MemoryFormat::kBlocked16);
  for (int i = 0; i < flat.count(); ++i) ASSERT_EQ(flat.cpu_data()[i], static_cast<TypeParam>(i));
  EXPECT_EQ(b.data_layout(), MemoryFormat::kPlain);

  // A snapshot writes plain values.
  b.cpu_data_in(MemoryFormat::kBlocked16);
  BlobProto proto;
  b.ToProto(&proto);
  for (int i = 0; i < b.count(); ++i) ASSERT_EQ(static_cast<TypeParam>(
      proto.double_data_size() ? proto.double_data(i) : proto.data(i)), static_cast<TypeParam>(i));

  // keep_values false leaves the bytes as they were and only relabels them.
  TypeParam* raw = b.mutable_cpu_data_in(MemoryFormat::kBlocked16, true);
  for (int i = 0; i < b.count(); ++i) raw[i] = static_cast<TypeParam>(-i);
  TypeParam* over = b.mutable_cpu_data_in(MemoryFormat::kPlain, false);
  for (int i = 0; i < b.count(); ++i) ASSERT_EQ(over[i], static_cast<TypeParam>(-i));

  b.cpu_data_in(MemoryFormat::kBlocked16);
  b.release_memory();
  EXPECT_EQ(b.data_layout(), MemoryFormat::kPlain);
}

// A CustomFormat for the tests: the elements in reverse order, or rotated by `shift` (a different arrangement).
class Reversed : public CustomFormat {
 public:
  Reversed(int count, size_t elem_size, int shift = 0) : count_(count), elem_(elem_size), shift_(shift) {}
  size_t bytes() const override { return count_ * elem_; }
  void ToLayout(const void* plain, void* laid) const override { Move(plain, laid, true); }
  void FromLayout(const void* laid, void* plain) const override { Move(laid, plain, false); }
  bool Same(const CustomFormat& o) const override {
    const auto* r = dynamic_cast<const Reversed*>(&o);
    return r && r->count_ == count_ && r->elem_ == elem_ && r->shift_ == shift_;
  }
  std::string name() const override { return "reversed " + std::to_string(shift_); }
  // Where plain element i lies.
  int at(int i) const { return (count_ - 1 - i + shift_) % count_; }

 private:
  void Move(const void* from, void* to, bool to_layout) const {
    const char* f = static_cast<const char*>(from);
    char* t = static_cast<char*>(to);
    for (int i = 0; i < count_; ++i) {
      const int j = at(i);
      std::memcpy(t + (to_layout ? j : i) * elem_, f + (to_layout ? i : j) * elem_, elem_);
    }
  }
  int count_;
  size_t elem_;
  int shift_;
};

// A parameter in a layer's CustomFormat: plain readers see plain values; the gradient and a solver's history are
// brought into the value's layout; sums, scales, clearing and Update work there without converting back; a
// snapshot writes plain values; another CustomFormat converts through the plain one.
TYPED_TEST(BlobTest, ParametersInACustomLayoutConvertOnlyWhereRead) {
  Blob<TypeParam> w({3, 4});
  const int n = w.count();
  auto rev = std::make_shared<Reversed>(n, sizeof(TypeParam));
  for (int i = 0; i < n; ++i) w.mutable_cpu_data()[i] = static_cast<TypeParam>(i + 1);
  for (int i = 0; i < n; ++i) w.mutable_cpu_diff()[i] = static_cast<TypeParam>(10 * (i + 1));
  const TypeParam* laid = w.cpu_data_as(rev);
  ASSERT_TRUE(w.data_custom_layout());
  for (int i = 0; i < n; ++i) ASSERT_EQ(laid[rev->at(i)], static_cast<TypeParam>(i + 1));
  // Only the value moved; Update brings the gradient along and subtracts in the value's layout.
  Blob<TypeParam> history({3, 4});
  for (int i = 0; i < n; ++i) history.mutable_cpu_data()[i] = static_cast<TypeParam>(100 * (i + 1));
  w.AlignWithData(history);
  EXPECT_TRUE(history.data_custom_layout());
  for (int i = 0; i < n; ++i) ASSERT_EQ(history.cpu_data_as_is()[rev->at(i)], static_cast<TypeParam>(100 * (i + 1)));
  EXPECT_EQ(w.sumsq_diff(), static_cast<TypeParam>(100 * 650));  // 100 x (1 + 4 + ... + 144)
  w.scale_diff(TypeParam(0.5));
  w.Update();
  EXPECT_TRUE(w.data_custom_layout());
  const TypeParam* as_is = w.cpu_data_as_is();
  for (int i = 0; i < n; ++i) ASSERT_EQ(as_is[rev->at(i)], static_cast<TypeParam>(i + 1 - 5 * (i + 1)));
  // A snapshot writes plain values (and leaves the memory plain: the next layer pass converts it again).
  BlobProto proto;
  w.ToProto(&proto, true);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(static_cast<TypeParam>(proto.double_data_size() ? proto.double_data(i) : proto.data(i)),
              static_cast<TypeParam>(-4 * (i + 1)));
    ASSERT_EQ(static_cast<TypeParam>(proto.double_diff_size() ? proto.double_diff(i) : proto.diff(i)),
              static_cast<TypeParam>(5 * (i + 1)));
  }
  EXPECT_FALSE(w.data_custom_layout());
  // Clearing keeps the layout; another arrangement converts through plain.
  TypeParam* g = w.mutable_cpu_diff_as(rev);
  g[rev->at(0)] = 7;
  w.clear_diff();
  EXPECT_EQ(w.diff()->layout(), MemoryFormat::kCustom);
  auto rotated = std::make_shared<Reversed>(n, sizeof(TypeParam), 5);
  const TypeParam* r = w.cpu_data_as(rotated);
  for (int i = 0; i < n; ++i) ASSERT_EQ(r[rotated->at(i)], static_cast<TypeParam>(-4 * (i + 1)));
  for (int i = 0; i < n; ++i) ASSERT_EQ(w.cpu_diff()[i], TypeParam(0));
  // Overwritten whole, nothing is converted: the bytes are relabelled.
  TypeParam* fresh = w.mutable_cpu_data_as(rev, false);
  for (int i = 0; i < n; ++i) fresh[i] = static_cast<TypeParam>(i);
  for (int i = 0; i < n; ++i) ASSERT_EQ(w.cpu_data()[i], static_cast<TypeParam>(n - 1 - i));
}

}  // namespace
}  // namespace strata
