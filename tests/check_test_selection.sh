#!/usr/bin/env bash
# Checks that a build of unit_tests from a subset of the unit sources (SLUICE_UNIT_TEST_SUITES) has
# every test that the full build selects with the same ctest regex, so that a suite whose tests the
# subset missed cannot drop out of a sanitizer run unnoticed. Without a full build it says so.
# Usage: check_test_selection.sh SUBSET_BUILD FULL_BUILD REGEX
set -euo pipefail
subset=$1 full=$2 regex=$3
list() { (cd "$1" && ctest -N -R "$regex") | sed -n 's/^ *Test *#[0-9]*: //p' | sort; }
if [ ! -x "$full/tests/unit_tests" ]; then
  echo "check_test_selection: no $full/tests/unit_tests (make test builds it): selection not compared"
  exit 0
fi
expected=$(list "$full")
missing=$(comm -23 <(echo "$expected") <(list "$subset"))
if [ -n "$missing" ]; then
  echo "check_test_selection: $subset lacks these tests that $full selects with '$regex':" >&2
  echo "$missing" >&2
  exit 1
fi
echo "check_test_selection: $subset has all $(echo "$expected" | wc -l) tests that $full selects"
