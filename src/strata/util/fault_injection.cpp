#include "strata/util/fault_injection.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "strata/common.hpp"

namespace strata {
namespace {

struct FaultSpec {
  bool armed = false;
  FaultPoint point = FaultPoint::kForward;
  int rank = 0;
  int iter = 0;
};

FaultSpec ParseSpec() {
  FaultSpec spec;
  const char* text = std::getenv("STRATA_FAULT");
  if (!text || !*text) return spec;
  char point[32] = {0};
  int rank = 0, iter = 0;
  STRATA_REQUIRE(std::sscanf(text, "%31[a-z]:%d:%d", point, &rank, &iter) == 3)
      << "STRATA_FAULT must be POINT:RANK:ITERATION, got '" << text << "'";
  const std::string p = point;
  STRATA_REQUIRE(p == "forward" || p == "allreduce" || p == "snapshot")
      << "STRATA_FAULT: unknown point '" << p << "' (forward, allreduce or snapshot)";
  spec.point = p == "forward" ? FaultPoint::kForward : p == "allreduce" ? FaultPoint::kAllreduce : FaultPoint::kSnapshot;
  spec.rank = rank;
  spec.iter = iter;
  spec.armed = true;
  return spec;
}

}  // namespace

void MaybeInjectFault(FaultPoint point, int iter) {
  static const FaultSpec spec = ParseSpec();
  if (!spec.armed || spec.point != point || iter < spec.iter || Strata::solver_rank() != spec.rank) return;
  static const char note[] = "strata: STRATA_FAULT: killing this rank with SIGKILL\n";
  ssize_t ignored = write(STDERR_FILENO, note, sizeof(note) - 1);
  (void)ignored;
  kill(getpid(), SIGKILL);
}

}  // namespace strata
