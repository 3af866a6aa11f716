#!/usr/bin/python3
"""Validates every scenario under scenarios/ and every example of docs/scenario-language.md
against docs/scenario.schema.json, and checks that malformed scenarios fail it.

Run with Debian's python3 (python3-jsonschema, python3-yaml): /usr/bin/python3 validate.py ROOT
"""
import json
import pathlib
import re
import sys

import jsonschema
import yaml


def as_json(value):
    """YAML -> the JSON an editor sees: keys are strings (`0:` in `ranks:` is "0")."""
    if isinstance(value, dict):
        return {str(k): as_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_json(v) for v in value]
    return value


# Scenarios the schema must reject, with what is wrong.
BAD = {
    "unknown top-level key": "scenario: t\nworld: 2\nprogam: [barrier]\n",
    "no program": "scenario: t\nworld: 2\n",
    "program and ranks": "scenario: t\nworld: 2\nprogram: [barrier]\nranks: {0-1: [barrier]}\n",
    "no world and no mesh": "scenario: t\nprogram: [barrier]\n",
    "unknown operation": "scenario: t\nworld: 2\nprogram: [allreduc: {size: 1}]\n",
    "unknown argument": "scenario: t\nworld: 2\nprogram: [allreduce: {sise: 1}]\n",
    "missing size": "scenario: t\nworld: 2\nprogram: [allreduce: {group: world}]\n",
    "bad dtype": "scenario: t\nworld: 2\nprogram: [allreduce: {size: 1, dtype: fp12}]\n",
    "bad expect": "scenario: t\nexpect: hung\nworld: 2\nprogram: [barrier]\n",
    "two statements in one item": "scenario: t\nworld: 2\nprogram: [{compute: 1ms, sleep: 1ms}]\n",
    "repeat without do": "scenario: t\nworld: 2\nprogram: [repeat: 2]\n",
    "choose with one branch": "scenario: t\nworld: 2\nprogram: [choose: {a: []}]\n",
    "bad bandwidth": "scenario: t\nworld: 2\nlink: {bandwidth: 100GBs}\nprogram: [barrier]\n",
    "bad rank set": "scenario: t\nworld: 2\nranks: {rank0: [barrier]}\n",
    "bad semantics": "scenario: t\nworld: 2\nsemantics: {p2p: lazy}\nprogram: [barrier]\n",
}


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    schema = json.loads((root / "docs" / "scenario.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    failures = []

    good = {}
    for path in sorted((root / "scenarios").rglob("*.yaml")):
        good[str(path.relative_to(root))] = path.read_text()
    doc = (root / "docs" / "scenario-language.md").read_text()
    for match in re.finditer(r"^```yaml\n(.*?)^```$", doc, re.S | re.M):
        line = doc.count("\n", 0, match.start()) + 1
        good[f"docs/scenario-language.md:{line}"] = match.group(1)
    for name, text in good.items():
        errors = list(validator.iter_errors(as_json(yaml.safe_load(text))))
        for error in errors[:3]:
            where = "/".join(str(p) for p in error.absolute_path)
            failures.append(f"{name}: {where}: {error.message[:300]}")

    for what, text in BAD.items():
        if validator.is_valid(as_json(yaml.safe_load(text))):
            failures.append(f"the schema accepts a scenario with {what}")

    for failure in failures:
        print(failure)
    print(f"schema: {len(good)} scenarios valid, {len(BAD)} malformed ones rejected"
          if not failures else f"schema: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
