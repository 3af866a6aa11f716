// lockstep_json_timer FILE [REPEATS]: the trace loader against simdjson's On-Demand parser on
// one JSON Lines trace. Per repeat: the whole load (load_trace_file: reading, parsing, checking;
// then every thread's statements built), then simdjson alone walking every line's object and reading the
// fields an op line carries (no checks, nothing built). Built only where simdjson is installed
// (Debian: libsimdjson-dev); bench/json_bench.sh runs it. docs/trace-format.md gives the numbers.
#include <simdjson.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sim/trace_format.h"

namespace {

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Every line's fields, summed into a checksum so that nothing is optimised away; -1 on a parse
// error.
int64_t simdjson_walk(const simdjson::padded_string& text, size_t& lines) {
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document_stream docs;
  if (parser.iterate_many(text, 1 << 24).get(docs) != simdjson::SUCCESS) return -1;
  int64_t sum = 0;
  lines = 0;
  for (auto doc : docs) {
    simdjson::ondemand::object line;
    if (doc.get_object().get(line) != simdjson::SUCCESS) return -1;
    for (auto field : line) {
      std::string_view key;
      if (field.unescaped_key().get(key) != simdjson::SUCCESS) return -1;
      simdjson::ondemand::value value = field.value();
      simdjson::ondemand::json_type type;
      if (value.type().get(type) != simdjson::SUCCESS) return -1;
      if (type == simdjson::ondemand::json_type::number) {
        int64_t number = 0;
        if (value.get_int64().get(number) != simdjson::SUCCESS) return -1;
        sum += number;
      } else if (type == simdjson::ondemand::json_type::string) {
        std::string_view string;
        if (value.get_string().get(string) != simdjson::SUCCESS) return -1;
        sum += static_cast<int64_t>(string.size());
      } else if (type == simdjson::ondemand::json_type::array) {  // new_group's ranks
        simdjson::ondemand::array items;
        if (value.get_array().get(items) != simdjson::SUCCESS) return -1;
        for (auto item : items) {
          int64_t number = 0;
          if (item.get_int64().get(number) == simdjson::SUCCESS) sum += number;
        }
      } else if (type == simdjson::ondemand::json_type::object) {  // the header's groups, semantics
        size_t fields = 0;
        if (value.count_fields().get(fields) != simdjson::SUCCESS) return -1;
        sum += static_cast<int64_t>(fields);
      }
      sum += static_cast<int64_t>(key.size());
    }
    ++lines;
  }
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE.jsonl [REPEATS]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  lockstep::sim::LoadLimits limits;
  limits.max_file_bytes = int64_t{1} << 32;
  limits.max_ops = int64_t{1} << 40;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    const lockstep::sim::LoadResult loaded = lockstep::sim::load_trace_file(path, {}, limits);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s does not load as a trace\n", path.c_str());
      return 1;
    }
    // Statements are built from the loaded lines on first use: that is part of loading.
    size_t ops = 0;
    for (int32_t rank = 0; rank < loaded.scenario->world; ++rank) {
      for (const lockstep::sim::ThreadDef& thread : loaded.scenario->program_of(rank)) ops += thread.body().size();
    }
    const double lockstep_s = since(start);
    start = std::chrono::steady_clock::now();
    simdjson::padded_string text;
    if (simdjson::padded_string::load(path).get(text) != simdjson::SUCCESS) {
      std::fprintf(stderr, "simdjson cannot read %s\n", path.c_str());
      return 1;
    }
    size_t lines = 0;
    const int64_t sum = simdjson_walk(text, lines);
    const double simdjson_s = since(start);
    if (sum < 0) {
      std::fprintf(stderr, "simdjson cannot parse %s\n", path.c_str());
      return 1;
    }
    std::printf("load_trace_file %.3f s (%zu ops)   simdjson on-demand walk %.3f s (%zu lines)\n", lockstep_s, ops,
                simdjson_s, lines);
  }
  return 0;
}
