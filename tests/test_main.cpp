#include <glog/logging.h>
#include <gtest/gtest.h>

#include "strata/syncedmem.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;  // warnings and errors only
  // A layer that says it overwrites a blob (keep_values false) and leaves a value unwritten gives NaNs here.
  strata::SyncedMemory::set_poison_fresh_writes(true);
  return RUN_ALL_TESTS();
}
