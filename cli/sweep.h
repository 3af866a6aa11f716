// `lockstep sweep`: one scenario checked at every point of a cross product of parameter values
// (docs/cli.md, "sweep"), as a CI gate over the parallel layouts a team may run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker/explore.h"
#include "sim/loader.h"

namespace lockstep::cli {

struct Options;

// One parameter swept and its values, as written: `-D pp=2,4,8` or `-D mb=1..16`.
struct SweepAxis {
  std::string name;
  std::vector<std::string> values;  // each a -D value (an expression)
};

// "name=v1,v2,..." or "name=LO..HI" (integers, LO <= HI); nullopt and `error` when malformed
// or longer than `max_values`.
std::optional<SweepAxis> parse_sweep_axis(std::string_view text, size_t max_values, std::string& error);

struct SweepOptions {
  std::vector<SweepAxis> axes;
  std::string where;         // an expression over the axes' names: a point is kept when nonzero
  size_t max_points = 10'000;  // --max-points: bound on the points after --where
};

// The points of the cross product (the last axis varies fastest) that --where keeps, each as the
// -D overrides that make it. nullopt and `error` when --where does not compile or a value is not
// an integer where --where needs one, or when more than max_points are kept.
std::optional<std::vector<std::vector<sim::ParamOverride>>> sweep_points(const SweepOptions& sweep, std::string& error);

// Runs the sweep of options.inputs[0]: prints the matrix (and writes --json, --junit), returns
// the exit code (1 when a point has a bug, 2 when one fails to load, 3 when one is inconclusive).
int cmd_sweep(const Options& options, const SweepOptions& sweep, std::ostream& out, std::ostream& err);

// `lockstep sweep`: every -D of `options` is an axis; --where and --max-points from `options`.
int run_sweep(const Options& options, std::ostream& out, std::ostream& err);

}  // namespace lockstep::cli
