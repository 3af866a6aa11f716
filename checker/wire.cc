#include "checker/wire.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "checker/analysis.h"
#include "checker/counterexample.h"

namespace lockstep::checker {

// Named, not anonymous: a unity build puts other files' helpers (their own `Json`) beside these.
namespace wire_text {

using Json = nlohmann::json;

Json option_json(const sim::Option& o, Json actor) {
  return Json::array({static_cast<int>(o.kind), o.rank, o.thread, o.detail, o.time_ns, o.name, std::move(actor)});
}

sim::Option option_of(const Json& j, uint32_t actor) {
  sim::Option o;
  const int kind = j.at(0).get<int>();
  if (kind < 0 || kind > static_cast<int>(sim::ChoiceKind::START)) throw std::out_of_range("choice kind");
  o.kind = static_cast<sim::ChoiceKind>(kind);
  o.rank = j.at(1).get<int32_t>();
  o.thread = j.at(2).get<int32_t>();
  o.detail = j.at(3).get<int32_t>();
  o.time_ns = j.at(4).get<int64_t>();
  o.name = j.at(5).get<uint32_t>();
  o.actor = actor;
  return o;
}

// The sender's side: each object and actor a message names goes once into its tables, as what
// it is; the message refers to it by its place there.
class Outgoing {
 public:
  explicit Outgoing(sim::FootprintIds& ids) : ids_(ids) {}

  Json option(const sim::Option& o) { return option_json(o, actor(o.actor)); }
  Json footprint(std::span<const sim::Touch> touches) {
    Json out = Json::array();
    for (const sim::Touch& t : touches) out.push_back(Json::array({object(t.object), static_cast<int>(t.access), t.cause}));
    return out;
  }
  // (actor, step index) pairs.
  Json after(std::span<const uint32_t> pairs) {
    Json out = Json::array();
    for (size_t i = 0; i + 1 < pairs.size(); i += 2) out.push_back(Json::array({actor(pairs[i]), pairs[i + 1]}));
    return out;
  }
  void tables(Json& message) {
    message["objects"] = std::move(objects_);
    message["actors"] = std::move(actors_);
  }

 private:
  size_t object(uint32_t id) {
    const auto [it, added] = object_at_.try_emplace(id, objects_.size());
    if (added) {
      const sim::FootprintIds::Portable p = ids_.portable_object(id);
      objects_.push_back(Json::array({p.kind, p.key, p.name}));
    }
    return it->second;
  }
  size_t actor(uint32_t id) {
    const auto [it, added] = actor_at_.try_emplace(id, actors_.size());
    if (added) {
      const sim::FootprintIds::Portable p = ids_.portable_actor(id);
      actors_.push_back(Json::array({p.kind, p.key}));
    }
    return it->second;
  }

  sim::FootprintIds& ids_;
  std::map<uint32_t, size_t> object_at_, actor_at_;
  Json objects_ = Json::array();
  Json actors_ = Json::array();
};

// The receiver's side: the sender's tables as this process's ids. Throws on what is not a
// message (a json or range error), which the readers below turn into nullopt.
class Incoming {
 public:
  Incoming(const Json& message, sim::FootprintIds& ids) {
    for (const Json& o : message.at("objects")) {
      sim::FootprintIds::Portable p{o.at(0).get<uint32_t>(), o.at(1).get<uint64_t>(), o.at(2).get<std::string>()};
      if (p.kind > static_cast<uint32_t>(sim::ObjectKind::PENDING)) throw std::out_of_range("object kind");
      objects_.push_back(ids.local_object(p));
    }
    for (const Json& a : message.at("actors")) {
      const sim::FootprintIds::Portable p{a.at(0).get<uint32_t>(), a.at(1).get<uint64_t>(), {}};
      if (p.kind != sim::FootprintIds::Portable::THREAD && p.kind > 1) throw std::out_of_range("actor kind");
      actors_.push_back(ids.local_actor(p));
    }
  }

  sim::Option option(const Json& j) const { return option_of(j, actors_.at(j.at(6).get<size_t>())); }
  // Sorted by object, as footprints are.
  std::vector<sim::Touch> footprint(const Json& j) const {
    std::vector<sim::Touch> out;
    for (const Json& t : j) {
      const int access = t.at(1).get<int>();
      if (access < 1 || access > 3) throw std::out_of_range("access");
      out.push_back(sim::Touch{objects_.at(t.at(0).get<size_t>()), static_cast<sim::Access>(access), t.at(2).get<uint32_t>()});
    }
    std::sort(out.begin(), out.end(), [](const sim::Touch& a, const sim::Touch& b) { return a.object < b.object; });
    return out;
  }
  // Sorted by actor, as clocks are.
  std::vector<uint32_t> after(const Json& j) const {
    std::vector<std::pair<uint32_t, uint32_t>> pairs;
    for (const Json& p : j) pairs.emplace_back(actors_.at(p.at(0).get<size_t>()), p.at(1).get<uint32_t>());
    std::sort(pairs.begin(), pairs.end());
    std::vector<uint32_t> out;
    for (const auto& [a, i] : pairs) {
      out.push_back(a);
      out.push_back(i);
    }
    return out;
  }

 private:
  std::vector<uint32_t> objects_;
  std::vector<uint32_t> actors_;
};

Json branch_json(const Donation::Branch& b, Outgoing& out) {
  Json children = Json::array();
  for (const Donation::Branch& c : b.children) children.push_back(branch_json(c, out));
  return Json{{"option", out.option(b.option)}, {"footprint", out.footprint(b.footprint)}, {"universal", b.universal},
              {"children", std::move(children)}};
}

Donation::Branch branch_of(const Json& j, const Incoming& in, int depth) {
  if (depth > 100'000) throw std::out_of_range("branch depth");
  Donation::Branch b;
  b.option = in.option(j.at("option"));
  b.footprint = in.footprint(j.at("footprint"));
  b.universal = j.at("universal").get<bool>();
  for (const Json& c : j.at("children")) b.children.push_back(branch_of(c, in, depth + 1));
  return b;
}

Json part_fields(const PartResult& p) {
  Json bugs = Json::array();
  for (const Bug& bug : p.bugs) {
    Json choices = Json::array();
    for (const sim::Option& o : bug.choices) choices.push_back(option_json(o, o.actor));
    bugs.push_back(Json{{"execution", bug.execution}, {"signature", bug.signature}, {"schedule", bug.schedule},
                        {"choices", std::move(choices)}});
  }
  Json error = nullptr;
  if (p.error) {
    error = Json{{"file", p.error->file}, {"line", p.error->loc.line}, {"col", p.error->loc.col}, {"message", p.error->message}};
  }
  return Json{{"executions", p.executions}, {"pruned", p.pruned}, {"sleep_blocked", p.sleep_blocked},
              {"states", p.states}, {"cache_full", p.cache_full}, {"events", p.events}, {"fold", p.fold},
              {"bugs", std::move(bugs)}, {"terminal_states", p.terminal_states}, {"error", std::move(error)},
              {"bound_hit", p.bound_hit}, {"interrupted", p.interrupted}, {"complete", p.complete}};
}

// Throws on what is not a part; nullopt where a bug's schedule does not lead to the bug.
std::optional<PartResult> part_fields_of(const Json& j, const sim::Scenario& scenario, const CheckOptions& options) {
  PartResult p;
  p.executions = j.at("executions").get<uint64_t>();
  p.pruned = j.at("pruned").get<uint64_t>();
  p.sleep_blocked = j.at("sleep_blocked").get<uint64_t>();
  p.states = j.at("states").get<uint64_t>();
  p.cache_full = j.at("cache_full").get<bool>();
  p.events = j.at("events").get<uint64_t>();
  p.fold = j.at("fold").get<uint64_t>();
  p.terminal_states = j.at("terminal_states").get<std::set<std::string>>();
  p.bound_hit = j.at("bound_hit").get<std::string>();
  p.interrupted = j.at("interrupted").get<bool>();
  p.complete = j.at("complete").get<bool>();
  if (const Json& e = j.at("error"); !e.is_null()) {
    p.error = sim::Diagnostic{e.at("file").get<std::string>(),
                              {e.at("line").get<uint32_t>(), e.at("col").get<uint32_t>()},
                              sim::Severity::ERROR,
                              e.at("message").get<std::string>()};
  }
  // A bug's choices replay it: their actors are not compared (each process numbers its own).
  const sim::EngineOptions engine = engine_options_for(options);
  for (const Json& b : j.at("bugs")) {
    std::vector<sim::Option> choices;
    for (const Json& o : b.at("choices")) choices.push_back(option_of(o, o.at(6).get<uint32_t>()));
    bool diverged = false;
    const sim::ExecutionResult result = replay_execution(scenario, choices, engine, diverged);
    std::optional<Bug> bug = analyze(scenario, result);
    if (diverged || !bug || bug->signature != b.at("signature").get<std::string>()) return std::nullopt;
    bug->choices = std::move(choices);
    bug->schedule = b.at("schedule").get<std::vector<uint32_t>>();
    bug->execution = b.at("execution").get<uint64_t>();
    p.bugs.push_back(std::move(*bug));
  }
  return p;
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace wire_text

std::string part_json(const PartResult& part) { return wire_text::dump(wire_text::part_fields(part)); }

std::optional<PartResult> part_of(std::string_view text, const sim::Scenario& scenario, const CheckOptions& options) {
  const wire_text::Json j = wire_text::Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  try {
    return wire_text::part_fields_of(j, scenario, options);
  } catch (const wire_text::Json::exception&) {
    return std::nullopt;
  }
}

std::string donation_json(const Donation& donation, uint64_t budget, bool cache, sim::FootprintIds& ids) {
  wire_text::Outgoing out(ids);
  wire_text::Json sleep = wire_text::Json::array();
  for (const SleepingOption& q : donation.sleep) {
    sleep.push_back(wire_text::Json{{"option", out.option(q.option)}, {"footprint", out.footprint(q.footprint)}, {"universal", q.universal}});
  }
  wire_text::Json j{{"prefix", donation.prefix}, {"node", donation.node}, {"budget", budget}, {"cache", cache}};
  j["branch"] = wire_text::branch_json(donation.branch, out);
  j["sleep"] = std::move(sleep);
  out.tables(j);
  return wire_text::dump(j);
}

std::optional<ReceivedBranch> donation_of(std::string_view text, sim::FootprintIds& ids) {
  const wire_text::Json j = wire_text::Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  try {
    const wire_text::Incoming in(j, ids);
    ReceivedBranch r;
    r.budget = j.at("budget").get<uint64_t>();
    r.cache = j.at("cache").get<bool>();
    r.donation.prefix = j.at("prefix").get<std::vector<uint32_t>>();
    r.donation.node = j.at("node").get<size_t>();
    r.donation.branch = wire_text::branch_of(j.at("branch"), in, 0);
    for (const wire_text::Json& q : j.at("sleep")) {
      r.donation.sleep.push_back(SleepingOption{in.option(q.at("option")), in.footprint(q.at("footprint")), q.at("universal").get<bool>()});
    }
    return r;
  } catch (const std::exception&) {  // json's, and out_of_range from the tables
    return std::nullopt;
  }
}

std::string branch_result_json(const PartResult& part, const std::vector<BranchMail>& mail, sim::FootprintIds& ids) {
  wire_text::Outgoing out(ids);
  // A step appears in many races of one branch (each later execution reverses races with the
  // same steps): each distinct step goes once into a table, the letters refer to it.
  std::map<std::tuple<uint64_t, int32_t, uint32_t, bool, std::vector<uint32_t>, std::vector<uint32_t>>, size_t> step_at;
  wire_text::Json steps = wire_text::Json::array();
  const auto step = [&](const BranchMail::Step& s) {
    std::vector<uint32_t> touches;
    for (const sim::Touch& t : s.footprint) {
      touches.push_back(t.object);
      touches.push_back(static_cast<uint32_t>(t.access));
      touches.push_back(t.cause);
    }
    const auto [it, added] = step_at.try_emplace({s.option.key(), s.option.detail, s.index, s.universal, std::move(touches), s.after}, steps.size());
    if (added) steps.push_back(wire_text::Json::array({out.option(s.option), out.footprint(s.footprint), s.universal, s.index, out.after(s.after)}));
    return it->second;
  };
  wire_text::Json letters = wire_text::Json::array();
  for (const BranchMail& m : mail) {
    wire_text::Json sequence = wire_text::Json::array();
    for (const BranchMail::Step& s : m.sequence) sequence.push_back(step(s));
    letters.push_back(wire_text::Json::array({static_cast<int>(m.kind), m.node, m.kind == BranchMail::Kind::OPTION ? out.option(m.option) : wire_text::Json(),
                                   std::move(sequence), m.cut_short}));
  }
  wire_text::Json j{{"part", wire_text::part_fields(part)}, {"steps", std::move(steps)}, {"mail", std::move(letters)}};
  out.tables(j);
  return wire_text::dump(j);
}

std::optional<BranchResult> branch_result_of(std::string_view text, const sim::Scenario& scenario,
                                             const CheckOptions& options, sim::FootprintIds& ids) {
  const wire_text::Json j = wire_text::Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  try {
    const wire_text::Incoming in(j, ids);
    BranchResult r;
    std::optional<PartResult> part = wire_text::part_fields_of(j.at("part"), scenario, options);
    if (!part) return std::nullopt;
    r.part = std::move(*part);
    std::vector<BranchMail::Step> steps;
    for (const wire_text::Json& s : j.at("steps")) {
      steps.push_back(BranchMail::Step{in.option(s.at(0)), in.footprint(s.at(1)), s.at(2).get<bool>(), s.at(3).get<uint32_t>(),
                                       in.after(s.at(4))});
    }
    for (const wire_text::Json& m : j.at("mail")) {
      BranchMail mail;
      const int kind = m.at(0).get<int>();
      if (kind < 0 || kind > static_cast<int>(BranchMail::Kind::DONE)) return std::nullopt;
      mail.kind = static_cast<BranchMail::Kind>(kind);
      mail.node = m.at(1).get<size_t>();
      if (mail.kind == BranchMail::Kind::OPTION) mail.option = in.option(m.at(2));
      for (const wire_text::Json& s : m.at(3)) mail.sequence.push_back(steps.at(s.get<size_t>()));
      mail.cut_short = m.at(4).get<bool>();
      r.mail.push_back(std::move(mail));
    }
    return r;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace lockstep::checker
