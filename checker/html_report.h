// `check --html FILE`: one self-contained HTML page for CI artifacts (docs/report-format.md,
// "HTML"): each input's verdict, each bug class with its explanation, choices and source lines,
// and its folded wait-for graph drawn as inline SVG. No script, no external resource.
#pragma once

#include <string>
#include <vector>

#include "checker/report.h"

namespace lockstep::checker {

std::string report_html(const std::vector<InputReport>& reports);

}  // namespace lockstep::checker
