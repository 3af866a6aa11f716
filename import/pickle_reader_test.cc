#include "import/pickle_reader.h"

#include <doctest/doctest.h>

namespace lockstep::import {

TEST_CASE("pickle reader: the protocol 2-5 subset of a Flight Recorder dump, memo references included") {
  // {'version': '2.4', 'entries': [{'state': 'started', 'sizes': [[1024, 2]], 'pg': ('0', 'default_pg'),
  //   'p2p': False, 'ok': True, 'none': None, 'big': 70000, 'neg': -5, 'x': 1.5}], 'again': <memo of '2.4'>}
  const std::string data(
      "\x80\x04\x95\xa6\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x07\x76\x65\x72\x73\x69\x6f\x6e\x94"
      "\x8c\x03\x32\x2e\x34\x94\x8c\x07\x65\x6e\x74\x72\x69\x65\x73\x94\x5d\x94\x7d\x94\x28\x8c\x05\x73"
      "\x74\x61\x74\x65\x94\x8c\x07\x73\x74\x61\x72\x74\x65\x64\x94\x8c\x05\x73\x69\x7a\x65\x73\x94\x5d"
      "\x94\x5d\x94\x28\x4d\x00\x04\x4b\x02\x65\x61\x8c\x02\x70\x67\x94\x8c\x01\x30\x94\x8c\x0a\x64\x65"
      "\x66\x61\x75\x6c\x74\x5f\x70\x67\x94\x86\x94\x8c\x03\x70\x32\x70\x94\x89\x8c\x02\x6f\x6b\x94\x88"
      "\x8c\x04\x6e\x6f\x6e\x65\x94\x4e\x8c\x03\x62\x69\x67\x94\x4a\x70\x11\x01\x00\x8c\x03\x6e\x65\x67"
      "\x94\x4a\xfb\xff\xff\xff\x8c\x01\x78\x94\x47\x3f\xf8\x00\x00\x00\x00\x00\x00\x75\x61\x8c\x05\x61"
      "\x67\x61\x69\x6e\x94\x68\x02\x75\x2e",
      177);
  const PickleResult result = read_pickle(data);
  INFO(result.error);
  REQUIRE(result.value);
  const PickleValue& root = *result.value;
  CHECK(root.type == PickleValue::Type::DICT);
  CHECK(root.get("version")->text == "2.4");
  CHECK(root.get("again")->text == "2.4");
  const PickleValue& entry = *root.get("entries")->items.at(0);
  CHECK(entry.get("state")->text == "started");
  CHECK(entry.get("sizes")->items.at(0)->items.at(0)->integer == 1024);
  CHECK(entry.get("sizes")->items.at(0)->items.at(1)->integer == 2);
  CHECK(entry.get("pg")->type == PickleValue::Type::TUPLE);
  CHECK(entry.get("pg")->items.at(1)->text == "default_pg");
  CHECK(entry.get("p2p")->type == PickleValue::Type::BOOL);
  CHECK_FALSE(entry.get("p2p")->boolean);
  CHECK(entry.get("ok")->boolean);
  CHECK(entry.get("none")->type == PickleValue::Type::NONE);
  CHECK(entry.get("big")->integer == 70000);
  CHECK(entry.get("neg")->integer == -5);
  CHECK(entry.get("x")->number == 1.5);
}

TEST_CASE("pickle reader: refuses code, old protocols and truncation with the byte offset") {
  CHECK(read_pickle(std::string("\x80\x02\x63os\nsystem\n", 12)).error ==
        "byte 2: pickle opcode GLOBAL (0x63) is not supported: a Flight Recorder dump holds only dicts, lists, tuples, "
        "strings, numbers, booleans and None");
  CHECK(read_pickle(std::string("\x80\x02}R.", 5)).error.find("byte 3: pickle opcode REDUCE") == 0);
  CHECK(read_pickle(std::string("\x80\x01}.", 4)).error == "byte 0: pickle protocol 1 is not supported (2 to 5 are)");
  CHECK(read_pickle(std::string("\x80\x02X\x10\x00\x00\x00" "abc", 10)).error == "byte 7: the pickle ends inside a value (truncated?)");
  CHECK(read_pickle(std::string("\x80\x02}", 3)).error == "byte 3: the pickle ends before its STOP opcode (truncated?)");
  CHECK(read_pickle(std::string("\x80\x02h\x05.", 5)).error == "byte 2: memo entry 5 was never stored");
  const PickleResult long1 = read_pickle(std::string("\x80\x02\x8a\x01\xfb.", 6));
  REQUIRE(long1.value);
  CHECK(long1.value->integer == -5);
}

TEST_CASE("pickle reader: the values' memory is bounded relative to the input, and the error names the bound") {
  // 2 MiB of EMPTY_DICT opcodes: a value each, far more memory than the input.
  std::string dicts = "\x80\x02";
  dicts.append(size_t{2} << 20, '}');
  dicts += '.';
  const PickleResult refused = read_pickle(dicts, pickle_memory_bound(dicts.size()));
  CHECK_FALSE(refused.value);
  INFO(refused.error);
  CHECK(refused.error.find(": its values need more than 192 MiB of memory, the bound for a pickle of 2097155 bytes") !=
        std::string::npos);
  CHECK(pickle_memory_bound(1) == (uint64_t{64} << 20) + 64);
  CHECK(pickle_memory_bound(uint64_t{16} << 30) == PICKLE_MEMORY_TOTAL_BYTES);
  // None, booleans and small integers are shared: a list of 10^6 of each costs a slot apiece.
  std::string many = "\x80\x02](";
  for (int i = 0; i < 1'000'000; ++i) many += i % 3 == 0 ? "N" : i % 3 == 1 ? "\x88" : "K\x07";
  many += "e.";
  const PickleResult shared = read_pickle(many, pickle_memory_bound(many.size()));
  INFO(shared.error);
  REQUIRE(shared.value);
  REQUIRE(shared.value->items.size() == 1'000'000);
  CHECK(shared.value->items[0].get() == shared.value->items[3].get());
  CHECK(shared.value->items[2]->integer == 7);
}

}  // namespace lockstep::import
