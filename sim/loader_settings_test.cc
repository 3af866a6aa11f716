// The scenario loader: semantics and link settings.
#include "sim/loader.h"

#include <doctest/doctest.h>

#include "sim/loader_testing.h"

namespace lockstep::sim {
namespace {

using namespace loader_testing;

TEST_CASE("loader: semantics settings") {
  const LoadResult result = load(with_program(
      "  - barrier\n",
      "semantics:\n  p2p: eager\n  eager_limit: 64KiB\n  p2p_comm: pair\n  comm_concurrency: 1\n"
      "  launch_order_implicit: true\n  timeout: 30s\n"));
  const Semantics& semantics = loaded(result).semantics;
  CHECK(semantics.p2p == P2pMode::EAGER);
  CHECK(semantics.eager_limit_bytes == 65536);
  CHECK(semantics.p2p_comm == P2pComm::PAIR);
  CHECK(semantics.comm_concurrency == 1);
  CHECK(semantics.launch_order_implicit);
  CHECK(semantics.timeout_ns == 30'000'000'000);

  const Semantics defaults = loaded(load(with_program("  - barrier\n"))).semantics;
  CHECK(defaults.p2p == P2pMode::RENDEZVOUS);
  CHECK(defaults.timeout_ns == 600'000'000'000);
  CHECK(defaults.comm_concurrency == 0);
}

TEST_CASE("loader: semantics errors") {
  CHECK(
      problems(
          with_program("  - barrier\n",
                       "semantics: {p2p: rendevous, p2p_comm: lazy, timeout: 0, eager_limt: 1, "
                       "launch_order_implicit: yes, comm_concurrency: -1, link: {}}\n")) ==
      std::vector<std::string>{
          "3:18: error: invalid value 'rendevous' for 'p2p' (did you mean 'rendezvous'?); valid "
          "values: eager, rendezvous",
          "3:39: error: invalid value 'lazy' for 'p2p_comm'; valid values: group, pair",
          "3:54: error: timeout must be positive, got 0",
          "3:57: error: unknown key 'eager_limt' in semantics (did you mean 'eager_limit'?); valid "
          "keys: algorithm, comm_concurrency, eager_limit, launch_order_implicit, p2p, p2p_comm, "
          "timeout",
          "3:95: error: invalid value 'yes' for 'launch_order_implicit'; valid values: false, true",
          "3:118: error: comm_concurrency must not be negative, got -1",
          "3:122: error: 'link' is a top-level key, not a semantics setting"});
}

TEST_CASE("loader: link settings per scenario and per group - the allreduce algorithm") {
  const Scenario s = loaded(load(R"y(scenario: t
mesh: {tp: 2, dp: 2}
link:
  latency: 2us
  bandwidth: 50GB/s
  tp: {bandwidth: 400Gbps}
  dp: {latency: 10us, bandwidth: 1.5 GiB/s}
semantics: {algorithm: tree}
program:
  - barrier
)y"));
  CHECK(s.link.latency_ns == 2'000);
  CHECK(s.link.bandwidth_bytes_per_s == 50e9);
  REQUIRE(s.group_link.size() == 3);
  CHECK_FALSE(s.group_link[0].has_value());
  REQUIRE(s.group_link[1].has_value());
  CHECK(s.group_link[1]->latency_ns == 2'000);
  CHECK(s.group_link[1]->bandwidth_bytes_per_s == 50e9);
  REQUIRE(s.group_link[2].has_value());
  CHECK(s.group_link[2]->latency_ns == 10'000);
  CHECK(s.group_link[2]->bandwidth_bytes_per_s == 1.5 * 1024 * 1024 * 1024);
  CHECK(s.semantics.allreduce_algorithm == Algorithm::TREE);
  const Scenario d = loaded(load(with_program("  - barrier\n")));
  CHECK(d.group_link.size() == 1);
  CHECK(d.link.latency_ns == 5'000);
  CHECK(d.semantics.allreduce_algorithm == Algorithm::RING);
}

}  // namespace
}  // namespace lockstep::sim
