// The common frame of the small data tools: gflags and glog set up, the usage text on a wrong number of
// arguments, and every error as one "error: ..." line with exit status 1.
#pragma once

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <exception>

namespace strata {

// glog's defaults for every tool, set before the flags are parsed so that a user's flags still win: log to stderr,
// and no year in the line prefix ("I1124 21:45:08.123456 ..." as Caffe's logs read), which Caffe's
// tools/extra/parse_log.py and every script built on its format expect; glog 0.6 would write "I20261124 ...".
inline void SetLoggingDefaults() {
  FLAGS_logtostderr = true;
  FLAGS_log_year_in_prefix = false;
}

// Runs body(argv) with the flags parsed out of argv, when the positional arguments number from min_args
// to max_args. Returns the process exit status.
template <typename Body>
int RunTool(int argc, char** argv, const char* usage, int min_args, int max_args, Body body) {
  gflags::SetUsageMessage(usage);
  SetLoggingDefaults();
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  if (argc - 1 < min_args || argc - 1 > max_args) {
    std::fprintf(stderr, "%s\n", usage);
    return 1;
  }
  try {
    body(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace strata
