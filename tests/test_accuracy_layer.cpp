#include <gtest/gtest.h>

#include <string>

#include "gradient_checker.hpp"
#include "strata/layers/accuracy_layer.hpp"

namespace strata {
namespace {

LayerParameter AccuracyParam(int top_k, int axis = 1) {
  LayerParameter p;
  p.set_name("accuracy");
  p.set_type("Accuracy");
  p.mutable_accuracy_param()->set_top_k(top_k);
  p.mutable_accuracy_param()->set_axis(axis);
  return p;
}

// Four rows of three classes. "at least as high as the label" counts, the label included:
//   row 0 (0.1 0.5 0.4) label 1: 1 -> right at top-1
//   row 1 (0.3 0.2 0.5) label 0: 2 -> right from top-2
//   row 2 (0.2 0.2 0.6) label 1: 3 (a tie counts against the label) -> right only at top-3
//   row 3 (0.9 0.05 0.05) label 2: 3 -> right only at top-3
void FillRows(Blob<float>* scores, Blob<float>* labels) {
  const float s[] = {0.1f, 0.5f, 0.4f, 0.3f, 0.2f, 0.5f, 0.2f, 0.2f, 0.6f, 0.9f, 0.05f, 0.05f};
  const float l[] = {1, 0, 1, 2};
  scores->Reshape({4, 3});
  labels->Reshape({4});
  std::copy(s, s + 12, scores->mutable_cpu_data());
  std::copy(l, l + 4, labels->mutable_cpu_data());
}

TEST(AccuracyLayer, TopK) {
  const float expect[] = {0.25f, 0.5f, 1.0f};
  for (int k = 1; k <= 3; ++k) {
    Blob<float> scores, labels, acc;
    FillRows(&scores, &labels);
    AccuracyLayer<float> layer(AccuracyParam(k));
    layer.SetUp({&scores, &labels}, {&acc});
    EXPECT_EQ(acc.num_axes(), 0);
    const float loss = layer.Forward({&scores, &labels}, {&acc});
    EXPECT_EQ(loss, 0.0f);  // never a loss
    EXPECT_FLOAT_EQ(acc.cpu_data()[0], expect[k - 1]) << "top_k " << k;
  }
}

TEST(AccuracyLayer, PerClassAndIgnoreLabel) {
  Blob<float> scores, labels, acc, per_class;
  FillRows(&scores, &labels);
  AccuracyLayer<float> layer(AccuracyParam(1));
  layer.SetUp({&scores, &labels}, {&acc, &per_class});
  ASSERT_EQ(per_class.shape(), std::vector<int>{3});
  layer.Forward({&scores, &labels}, {&acc, &per_class});
  EXPECT_FLOAT_EQ(acc.cpu_data()[0], 0.25f);
  EXPECT_FLOAT_EQ(per_class.cpu_data()[0], 0.0f);  // row 1 wrong
  EXPECT_FLOAT_EQ(per_class.cpu_data()[1], 0.5f);  // row 0 right, row 2 wrong
  EXPECT_FLOAT_EQ(per_class.cpu_data()[2], 0.0f);  // row 3 wrong

  // Row 3's label ignored: 1 right of 3; class 2 no longer occurs (0).
  LayerParameter p = AccuracyParam(1);
  p.mutable_accuracy_param()->set_ignore_label(7);
  labels.mutable_cpu_data()[3] = 7;
  AccuracyLayer<float> ignoring(p);
  ignoring.SetUp({&scores, &labels}, {&acc, &per_class});
  ignoring.Forward({&scores, &labels}, {&acc, &per_class});
  EXPECT_FLOAT_EQ(acc.cpu_data()[0], 1.0f / 3);
  EXPECT_FLOAT_EQ(per_class.cpu_data()[1], 0.5f);
  EXPECT_FLOAT_EQ(per_class.cpu_data()[2], 0.0f);

  // Everything ignored: accuracy 0.
  cpu_set(4, 7.0f, labels.mutable_cpu_data());
  ignoring.Forward({&scores, &labels}, {&acc, &per_class});
  EXPECT_EQ(acc.cpu_data()[0], 0.0f);
}

// Classes along a strided axis: scores (1, 3, 2), one label per position i; and along the last axis.
TEST(AccuracyLayer, Axis) {
  Blob<double> scores({1, 3, 2}), labels({1, 2}), acc;
  const double s[] = {0.7, 0.1, 0.2, 0.3, 0.1, 0.6};  // position 0: (0.7 0.2 0.1), position 1: (0.1 0.3 0.6)
  std::copy(s, s + 6, scores.mutable_cpu_data());
  labels.mutable_cpu_data()[0] = 0;  // right
  labels.mutable_cpu_data()[1] = 1;  // wrong at top-1
  AccuracyLayer<double> layer(AccuracyParam(1, 1));
  layer.SetUp({&scores, &labels}, {&acc});
  layer.Forward({&scores, &labels}, {&acc});
  EXPECT_DOUBLE_EQ(acc.cpu_data()[0], 0.5);

  Blob<double> last({2, 3}), last_labels({2});  // rows (0.7 0.1 0.2) and (0.3 0.1 0.6) with axis -1
  std::copy(s, s + 6, last.mutable_cpu_data());
  last_labels.mutable_cpu_data()[0] = 2;  // 0.2: beaten by 0.7 -> wrong at top-1, right at top-2
  last_labels.mutable_cpu_data()[1] = 2;  // 0.6: right
  AccuracyLayer<double> top2(AccuracyParam(2, -1));
  top2.SetUp({&last, &last_labels}, {&acc});
  top2.Forward({&last, &last_labels}, {&acc});
  EXPECT_DOUBLE_EQ(acc.cpu_data()[0], 1.0);
}

TEST(AccuracyLayer, BadInputIsAnError) {
  Blob<float> scores, labels, acc;
  FillRows(&scores, &labels);
  AccuracyLayer<float> too_many(AccuracyParam(4));
  EXPECT_THROW(too_many.SetUp({&scores, &labels}, {&acc}), Error);

  Blob<float> few_labels({3});
  AccuracyLayer<float> mismatch(AccuracyParam(1));
  EXPECT_THROW(mismatch.SetUp({&scores, &few_labels}, {&acc}), Error);

  AccuracyLayer<float> layer(AccuracyParam(1));
  layer.SetUp({&scores, &labels}, {&acc});
  labels.mutable_cpu_data()[2] = 3;
  try {
    layer.Forward({&scores, &labels}, {&acc});
    ADD_FAILURE() << "label 3 of 3 classes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 3"), std::string::npos) << e.what();
    // Which layer, and which item of the batch.
    EXPECT_NE(std::string(e.what()).find("layer 'accuracy' (Accuracy): batch item 2"), std::string::npos) << e.what();
  }
}

TEST(AccuracyLayer, NoBackward) {
  Blob<float> scores, labels, acc;
  FillRows(&scores, &labels);
  AccuracyLayer<float> layer(AccuracyParam(1));
  EXPECT_FALSE(layer.AllowForceBackward(0));
  EXPECT_FALSE(layer.AllowForceBackward(1));
  layer.SetUp({&scores, &labels}, {&acc});
  layer.Forward({&scores, &labels}, {&acc});
  layer.Backward({&acc}, {false, false}, {&scores, &labels});  // nothing asked, nothing done
  EXPECT_THROW(layer.Backward({&acc}, {true, false}, {&scores, &labels}), Error);
}

}  // namespace
}  // namespace strata
