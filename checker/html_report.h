// `check --html FILE`: one self-contained HTML page for CI artifacts (docs/report-format.md,
// "HTML"): each input's verdict, each bug class with its explanation, choices and source lines,
// its folded wait-for graph, and the timeline of its last moments before the stall, each drawn
// as inline SVG. No script, no external resource.
#pragma once

#include <string>
#include <vector>

#include "checker/report.h"
#include "sim/engine.h"

namespace lockstep::checker {

// The bound on a timeline's rows (ranks in identical states share one): past it the rows of the
// ranks waited for come first, then those of the waiting ranks, and the page says how many rows
// and ranks it leaves out.
constexpr size_t MAX_TIMELINE_ROWS = 24;

// `engine`: the options the search ran under (engine_options_for), to replay each class's
// representative with every op recorded for its timeline.
std::string report_html(const std::vector<InputReport>& reports, const sim::EngineOptions& engine);

}  // namespace lockstep::checker
