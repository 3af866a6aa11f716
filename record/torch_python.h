// The Python side of `lockstep record --torch` (record/lockstep_torch.py and
// record/torch_sitecustomize.py), built into the binary: `record --torch` writes them into
// DIR/python/ and puts that folder first on every rank's PYTHONPATH.
#pragma once

#include <string_view>

namespace lockstep::record {

std::string_view torch_recorder_source();       // lockstep_torch.py
std::string_view torch_sitecustomize_source();  // written as sitecustomize.py

}  // namespace lockstep::record
