#!/usr/bin/env python3
"""Validates JSON documents against a JSON Schema with the python-jsonschema package.

An independent check for sluice's schema-to-grammar compiler (tests/unit/guide_json_schema_test.cpp):
the test writes sentences its grammar generated, one JSON document per line, and this script
says whether each one is valid against the schema, with formats asserted.

usage: guide_schema_check.py SCHEMA.json SAMPLES.jsonl
exit status: 0 all valid, 1 some invalid (each printed), 2 bad usage or unreadable input.
"""
import json
import sys

import jsonschema


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    bad = 0
    total = 0
    with open(sys.argv[2], encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            total += 1
            doc = json.loads(line)
            errors = list(validator.iter_errors(doc))
            if errors:
                bad += 1
                print(f"line {n}: {line.strip()[:200]}: {errors[0].message[:200]}")
    print(f"{total - bad} of {total} valid")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
