#include "checker/report.h"

#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker/bug_class.h"
#include "checker/rank_set.h"
#include "sim/diagnostic.h"
#include "sim/utf8.h"

namespace lockstep::checker {


const char* lockstep_version() { return "0.1.0"; }

Json op_json(const sim::Scenario& scenario, const sim::OpRecord& rec, bool detailed) {
  Json op;
  op["index"] = rec.index;
  op["kind"] = std::string(sim::op_kind_name(rec.op.kind));
  if (detailed) {
    op["thread"] = rec.thread;
    if (!rec.stream.empty()) op["stream"] = rec.stream;
  }
  if (sim::is_collective(rec.op.kind) || sim::is_p2p(rec.op.kind)) {
    op["group"] = scenario.groups[rec.op.group].name;
    op["seq"] = rec.seq;
    op["size"] = rec.op.size_bytes;
    op["dtype"] = std::string(sim::dtype_name(rec.op.dtype));
  }
  if (rec.op.kind == sim::OpKind::SEND) op["to"] = rec.op.peer;
  if (rec.op.kind == sim::OpKind::RECV) op["from"] = rec.op.peer >= 0 ? Json(rec.op.peer) : Json("any");
  if (rec.op.root >= 0) op["root"] = rec.op.root;
  if (sim::has_splits(rec.op.kind)) {
    if (sim::lists_sends(rec.op.kind)) op["send_splits"] = rec.splits.get()->send;
    op["recv_splits"] = rec.splits.get()->receive;
  }
  if (rec.op.stmt && !rec.op.stmt->tag.empty()) op["tag"] = rec.op.stmt->tag;
  if (detailed) {
    if (rec.matched_peer >= 0 && rec.op.peer < 0) op["matched"] = rec.matched_peer;
    if (rec.op.kind == sim::OpKind::COMPUTE || rec.op.kind == sim::OpKind::SLEEP) op["duration_ns"] = rec.op.duration_ns;
    op["state"] = std::string(sim::kernel_state_name(rec.state));
  }
  op["source"] = rec.op.stmt ? scenario.location(rec.op.stmt->loc) : scenario.path;
  return op;
}

bool InputReport::matches_expected() const {
  if (!scenario || !result || result->error) return false;
  return result->verdict == scenario->expect.value_or(sim::Verdict::OK);
}

namespace {


Json bug_json(const sim::Scenario& scenario, const Bug& bug, size_t class_id, const std::string& counterexample) {
  Json out;
  out["kind"] = std::string(sim::verdict_name(bug.kind));
  out["class"] = class_id;
  out["summary"] = bug.summary;
  out["explanation"] = bug.explanation;
  out["choices"] = describe_choices(scenario, bug);
  Json stuck = Json::array();
  for (const sim::StuckOp& s : bug.stuck) {
    Json entry;
    entry["rank"] = s.rank;
    entry["thread"] = s.thread;
    entry["stream"] = s.op.stream;
    entry["op"] = op_json(scenario, s.op, false);
    entry["waiting_for"] = s.waiting_for;
    entry["never_issued"] = s.never_issued;
    stuck.push_back(std::move(entry));
  }
  out["stuck"] = std::move(stuck);
  out["cycle"] = bug.cycle;
  if (bug.mismatch) {
    Json m;
    m["field"] = bug.mismatch->field;
    m["group"] = scenario.groups[bug.mismatch->group].name;
    m["seq"] = bug.mismatch->seq;
    m["ops"] = Json::array({Json{{"rank", bug.mismatch->rank_a}, {"op", op_json(scenario, bug.mismatch->op_a, false)}},
                            Json{{"rank", bug.mismatch->rank_b}, {"op", op_json(scenario, bug.mismatch->op_b, false)}}});
    out["mismatch"] = std::move(m);
  }
  Json status = Json::object();
  for (size_t r = 0; r < bug.rank_status.size(); ++r) {
    if (bug.rank_status[r] != sim::RankStatus::FINISHED) status[std::to_string(r)] = std::string(sim::rank_status_name(bug.rank_status[r]));
  }
  out["unfinished_ranks"] = std::move(status);
  out["schedule"] = bug.schedule;
  out["execution"] = bug.execution;
  out["counterexample"] = counterexample.empty() ? Json(nullptr) : Json(counterexample);
  return out;
}

Json input_json(const InputReport& report) {
  Json out;
  out["input"] = report.input;
  if (report.scenario == nullptr) {
    out["scenario"] = nullptr;
    out["verdict"] = "error";
    out["errors"] = report.errors;
    out["seed"] = report.seed;
    out["version"] = lockstep_version();
    return out;
  }
  const sim::Scenario& scenario = *report.scenario;
  const CheckResult& result = *report.result;
  out["scenario"] = scenario.name;
  if (result.error) {
    out["verdict"] = "error";
    out["errors"] = Json::array({sim::format_diagnostic(*result.error, scenario.text)});
  } else {
    out["verdict"] = std::string(sim::verdict_name(result.verdict));
  }
  out["exhaustive"] = result.exhaustive;
  out["expected"] = scenario.expect ? Json(std::string(sim::verdict_name(*scenario.expect))) : Json(nullptr);
  out["matches_expected"] = report.matches_expected();
  Json stats;
  stats["executions"] = result.executions;
  stats["events"] = result.events;
  stats["seconds"] = result.seconds;
  stats["strategy"] = result.strategy;
  if (result.reduces) {  // sleep sets and the state cache (docs/semantics.md)
    stats["pruned"] = result.pruned;
    stats["sleep_blocked"] = result.sleep_blocked;
    stats["states"] = result.states;
    if (result.state_cache_full) stats["state_cache_full"] = true;
  }
  if (result.symmetry) {  // --symmetry
    Json classes = Json::array();
    for (const std::vector<int32_t>& c : result.rank_classes) classes.push_back(format_rank_set(c));
    stats["symmetry"] = Json{{"classes", std::move(classes)}};
    if (!result.symmetry_note.empty()) stats["symmetry"]["none_because"] = result.symmetry_note;
  }
  if (result.parts > 0) stats["parts"] = result.parts;  // --jobs cut the search
  if (result.timing_dependent) {
    // Which execution shows a bug, and what it says of that execution: the ranks of a
    // mismatch (its signature holds its ops' places, not the ranks), the times waited.
    stats["timing_dependent"] = Json::array({"executions", "events", "pruned", "sleep_blocked", "states", "fingerprint",
                                             "bugs[].schedule", "bugs[].choices", "bugs[].execution", "bugs[].summary",
                                             "bugs[].explanation", "bugs[].stuck", "bugs[].mismatch", "classes[].summary"});
  }
  out["stats"] = std::move(stats);
  if (!result.bound_hit.empty()) out["bound_hit"] = result.bound_hit;
  if (result.interrupted) out["interrupted"] = true;
  const std::vector<BugClass> classes = group_bugs(result.bugs);
  std::vector<size_t> class_of(result.bugs.size(), 0);
  Json class_list = Json::array();
  for (size_t c = 0; c < classes.size(); ++c) {
    for (size_t m : classes[c].members) class_of[m] = c + 1;
    Json entry;
    entry["id"] = c + 1;
    entry["kind"] = std::string(sim::verdict_name(classes[c].kind));
    entry["variants"] = classes[c].members.size();
    entry["representative"] = classes[c].representative;
    entry["members"] = classes[c].members;
    entry["summary"] = result.bugs[classes[c].representative].summary;
    class_list.push_back(std::move(entry));
  }
  Json bugs = Json::array();
  for (size_t i = 0; i < result.bugs.size(); ++i) {
    bugs.push_back(bug_json(scenario, result.bugs[i], class_of[i], i < report.counterexamples.size() ? report.counterexamples[i] : ""));
  }
  out["bugs"] = std::move(bugs);
  out["classes"] = std::move(class_list);
  out["seed"] = report.seed;
  out["version"] = lockstep_version();
  out["fingerprint"] = fmt::format("{:016x}", result.fingerprint);
  return out;
}

}  // namespace

std::string report_json(const std::vector<InputReport>& reports, bool as_array) {
  Json out;
  if (as_array) {
    out = Json::array();
    for (const InputReport& report : reports) out.push_back(input_json(report));
  } else {
    out = input_json(reports.front());
  }
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";  // a path may be any bytes
}

std::string report_text(const InputReport& report, bool quiet) {
  if (report.scenario == nullptr) {
    std::string out;
    for (const std::string& error : report.errors) out += error;
    return out;
  }
  const sim::Scenario& scenario = *report.scenario;
  const CheckResult& result = *report.result;
  if (result.error) return sim::format_diagnostic(*result.error, scenario.text);
  std::string line = fmt::format("{}: {}", report.input, sim::verdict_name(result.verdict));
  if (scenario.expect) {
    line += fmt::format(" (expected {}{})", sim::verdict_name(*scenario.expect), report.matches_expected() ? "" : ", DIFFERS");
  } else {
    line += " (no expectation)";
  }
  line += fmt::format(" [{} execution{}, {}]", result.executions, result.executions == 1 ? "" : "s",
                      result.exhaustive ? std::string("exhaustive")
                      : result.bound_hit.empty() ? fmt::format("sampled by {}, seed {}", result.strategy, report.seed)
                      : result.interrupted ? std::string("interrupted")
                                                 : "bound hit: " + result.bound_hit);
  line += '\n';
  if (quiet) return line;
  if (result.symmetry) {
    if (result.rank_classes.empty()) {
      line += "  symmetric ranks: none (" + result.symmetry_note + ")\n";
    } else {
      std::string classes;
      for (const std::vector<int32_t>& c : result.rank_classes) classes += (classes.empty() ? "" : "; ") + format_rank_set(c);
      line += "  symmetric ranks: " + classes + " (a bug shown on one rank of a class stands for the same on the others)\n";
    }
  }
  // One entry per bug class: its smallest member, with the count of the others.
  const std::vector<BugClass> classes = group_bugs(result.bugs);
  for (size_t c = 0; c < classes.size(); ++c) {
    const BugClass& bug_class = classes[c];
    const size_t i = bug_class.representative;
    const Bug& bug = result.bugs[i];
    const size_t variants = bug_class.members.size();
    const std::string count = variants > 1 ? fmt::format(", {} variants; smallest:", variants) : "";
    if (classes.size() > 1) {
      line += fmt::format("  bug {} of {}: {}{}\n", c + 1, classes.size(), sim::verdict_name(bug.kind), count);
    } else if (variants > 1) {
      line += fmt::format("  {}{}\n", sim::verdict_name(bug.kind), count);
    }
    for (const std::string& text : bug.explanation) line += "  " + text + "\n";
    for (const std::string& text : describe_choices(scenario, bug)) line += "  choice: " + text + "\n";
    if (i < report.counterexamples.size() && !report.counterexamples[i].empty()) {
      line += fmt::format("  replay: lockstep replay {} --sim\n", report.counterexamples[i]);
    }
  }
  return line;
}

std::string xml_escape(std::string_view raw) {
  const std::string text = sim::valid_utf8(raw);
  std::string out;
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      out += '?';
      continue;
    }
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

// GitHub's workflow commands: properties escape % , : and newlines; messages % and newlines.
std::string github_escape(std::string_view raw, bool property) {
  const std::string text = sim::valid_utf8(raw);
  std::string out;
  for (char c : text) {
    if (c == '%') out += "%25";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else if (property && c == ':') out += "%3A";
    else if (property && c == ',') out += "%2C";
    else out += c;
  }
  return out;
}

}  // namespace

std::string report_junit(const std::vector<InputReport>& reports, bool check_expect) {
  size_t failures = 0;
  std::string cases;
  for (const InputReport& report : reports) {
    const std::string name = report.scenario ? report.scenario->name : report.input;
    std::string failure;
    if (report.failed_to_load()) {
      failure = fmt::format("<failure message=\"bad input\">{}</failure>", xml_escape(report_text(report, true)));
    } else {
      const CheckResult& result = *report.result;
      const bool failed = check_expect ? !report.matches_expected() : result.verdict != sim::Verdict::OK;
      if (failed) {
        std::string text = report_text(report, false);
        failure = fmt::format("<failure message=\"{}\">{}</failure>", xml_escape(std::string(sim::verdict_name(result.verdict))),
                              xml_escape(text));
      }
    }
    if (!failure.empty()) ++failures;
    cases += fmt::format("    <testcase classname=\"{}\" name=\"{}\">{}</testcase>\n", xml_escape(report.input), xml_escape(name),
                         failure);
  }
  return fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"lockstep\" tests=\"{}\" "
                     "failures=\"{}\">\n{}  </testsuite>\n</testsuites>\n",
                     reports.size(), failures, cases);
}

std::string report_github(const std::vector<InputReport>& reports) {
  std::string out;
  for (const InputReport& report : reports) {
    if (!report.scenario || !report.result) continue;
    const sim::Scenario& scenario = *report.scenario;
    for (const Bug& bug : report.result->bugs) {
      std::vector<const sim::OpRecord*> ops;
      for (const sim::StuckOp& s : bug.stuck) ops.push_back(&s.op);
      if (bug.mismatch) {
        ops.push_back(&bug.mismatch->op_a);
        ops.push_back(&bug.mismatch->op_b);
      }
      std::set<std::pair<uint32_t, uint32_t>> seen;
      for (const sim::OpRecord* op : ops) {
        if (!op->op.stmt || !seen.insert({op->op.stmt->loc.line, op->op.stmt->loc.col}).second) continue;
        out += fmt::format("::error file={},line={},col={},title={}::{}\n", github_escape(scenario.path, true),
                           op->op.stmt->loc.line, op->op.stmt->loc.col,
                           github_escape(fmt::format("lockstep {}", sim::verdict_name(bug.kind)), true),
                           github_escape(bug.summary, false));
      }
    }
  }
  return out;
}

}  // namespace lockstep::checker
