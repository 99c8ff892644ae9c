// Checks that an element-wise layer run in place (top == bottom) gives the same forward values and the same
// bottom gradient as the same layer run out of place. The RNG is reseeded before each forward, so stochastic
// layers (Dropout) draw the same mask in both runs.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "gradient_checker.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

inline void ExpectInPlaceMatchesOutOfPlace(const LayerParameter& param, const std::vector<int>& shape, double lo = -3,
                                           double hi = 3) {
  Blob<double> x(shape), y, dy(shape), in_place(shape);
  FillUniform(&x, lo, hi, 11);
  FillUniform(&dy, -1.0, 1.0, 12);

  auto plain = LayerRegistry<double>::CreateLayer(param);
  plain->SetUp({&x}, {&y});
  Strata::set_random_seed(5);
  plain->Forward({&x}, {&y});
  cpu_copy(dy.count(), dy.cpu_data(), y.mutable_cpu_diff());
  plain->Backward({&y}, {true}, {&x});

  auto inplace = LayerRegistry<double>::CreateLayer(param);
  in_place.CopyFrom(x);
  inplace->SetUp({&in_place}, {&in_place});
  Strata::set_random_seed(5);
  inplace->Forward({&in_place}, {&in_place});
  for (int i = 0; i < y.count(); ++i) ASSERT_EQ(in_place.cpu_data()[i], y.cpu_data()[i]) << "forward, element " << i;
  cpu_copy(dy.count(), dy.cpu_data(), in_place.mutable_cpu_diff());
  inplace->Backward({&in_place}, {true}, {&in_place});
  for (int i = 0; i < x.count(); ++i) ASSERT_EQ(in_place.cpu_diff()[i], x.cpu_diff()[i]) << "backward, element " << i;
}

}  // namespace strata
