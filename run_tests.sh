#!/usr/bin/env bash
# Runs every test (unit, Lua, golden) after installing and building like setup.sh.
# Ends with the line "N passed, N failed" and exits non-zero when anything failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
tools/bootstrap.sh

log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
ctest --test-dir build --output-on-failure --no-tests=error 2>&1 | tee "$log" || rc=$?

# ctest's summary: "75% tests passed, 1 tests failed out of 4".
summary=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
if [[ $summary =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
  failed=${BASH_REMATCH[1]}
  total=${BASH_REMATCH[2]}
  echo "$((total - failed)) passed, $failed failed"
else
  echo "0 passed, 0 failed"
  ((rc != 0)) || rc=1
fi
exit "$rc"
