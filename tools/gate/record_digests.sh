#!/usr/bin/env bash
# Re-records tests/fixtures/logit_gate/digests.txt with the engine in a build directory, for a
# change that alters the CPU arithmetic on purpose (say so in the commit). The first digests were
# written by digest_old.cpp built against commit 85b4594, the engine before the device/target
# refactor:
#   g++ -std=c++20 -O2 -I<85b4594>/src tools/gate/digest_old.cpp <its static libs> -lxxhash -luring -lpthread
#   ./digest_old <85b4594 checkout> tests/fixtures/logit_gate/digests.txt
# Usage: tools/gate/record_digests.sh [build-dir]
set -euo pipefail
build=${1:-build/release}
out=$(pwd)/tests/fixtures/logit_gate/digests.txt
SLUICE_RECORD_DIGESTS="$out.new" "$build/tests/unit_tests" --gtest_filter='LogitGate.*' >/dev/null
mv "$out.new" "$out"
echo "recorded $(wc -l <"$out") digests to $out"
