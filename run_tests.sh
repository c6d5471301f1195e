#!/usr/bin/env bash
# Runs every test (unit, Lua, golden) after installing and building like setup.sh.
# Ends with the line "N passed, N failed" and exits non-zero when anything failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
tools/bootstrap.sh

log=$(mktemp)
junit=$(mktemp)
trap 'rm -f "$log" "$junit"' EXIT
rc=0
# The JUnit report keeps each target's whole output (passed ones too), which holds its counts.
ctest --test-dir build --output-on-failure --no-tests=error --output-junit "$junit" \
  --test-output-size-passed 16777216 --test-output-size-failed 16777216 2>&1 | tee "$log" || rc=$?

# The last line counts individual tests: doctest's test cases, then the Lua tests and the golden
# scripts (each runner ends with "N passed, N failed"). A target that failed without its counts
# (a crash) counts as one failure.
python3 - "$junit" <<'PY' || rc=1
import re, sys, xml.etree.ElementTree as ET
passed = failed = 0
for case in ET.parse(sys.argv[1]).iter("testcase"):
    out = case.findtext("system-out") or ""
    counts = re.findall(r"test cases:\s*\d+\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed", out) or \
             re.findall(r"^(\d+) passed, (\d+) failed$", out, re.M)
    ok = case.get("status") == "run" and case.find("failure") is None
    p, f = map(int, counts[-1]) if counts else (0, 0)
    passed += p
    failed += f if (ok or f > 0) else f + 1
print(f"{passed} passed, {failed} failed")
sys.exit(0 if failed == 0 else 1)
PY
exit "$rc"
