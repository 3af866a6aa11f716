// libFuzzer target: the importers (Flight Recorder JSON and pickle dumps, NCCL logs, pipeline
// CSVs); what one input must satisfy is in import_fuzz_one.h.
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/import_fuzz_one.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string problem = lockstep::import::fuzz::import_fuzz_one(data, size);
  if (!problem.empty()) {
    std::fprintf(stderr, "import_fuzz: %s\n", problem.c_str());
    std::abort();
  }
  return 0;
}
