// `lockstep import nccl-log`: NCCL_DEBUG=INFO logs with NCCL_DEBUG_SUBSYS=COLL (NCCL 2.18 to
// 2.28), one or many files, ranks interleaved, into a recorded schedule. Communicators map to
// ranks through their `Init COMPLETE` lines; each rank's ops keep their line order (not opCount);
// ncclGroupStart()/ncclGroupEnd() lines (NCCL_DEBUG_SUBSYS=CALL) make NCCL groups.
#pragma once

#include <string>
#include <vector>

#include "import/recorded.h"

namespace lockstep::import {

RecordedTrace import_nccl_logs(const std::vector<std::string>& paths);

}  // namespace lockstep::import
