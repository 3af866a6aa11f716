// `check --html FILE` and `sweep --html FILE`: one self-contained HTML page for CI artifacts (docs/report-format.md,
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

// What `sweep --html FILE` draws: the matrix of a sweep, a row per point with its parameters
// and verdict, the points of each bug class together under the class's explanation.
struct SweepMatrix {
  struct Point {
    std::vector<std::string> values;  // per axis, as given
    std::string verdict;              // "ok", "deadlock", ..., "error"
    std::string detail;               // what the verdict alone does not say: a bound hit, an error
  };
  struct Class {
    std::string verdict;
    std::vector<size_t> points;  // indices into `points`, in order
    std::string explanation;     // check's report of its first point
  };
  std::string input;
  std::string where;              // --where, "" when none
  std::vector<std::string> axes;  // the swept parameters
  std::vector<Point> points;
  std::vector<Class> classes;     // in the order the matrix first meets them
};

std::string sweep_html(const SweepMatrix& matrix);

}  // namespace lockstep::checker
