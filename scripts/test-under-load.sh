#!/usr/bin/env bash
# Runs the whole suite (scripts/test.sh) beside a CPU hog, as a busy shared machine would have
# it: `stress-ng --cpu N` (N = LOAD_CPUS, default 2, one spinning worker per CPU of this 2-CPU
# machine) for as long as the suite runs. A test that passes only on a quiet machine fails here.
# Installs stress-ng when missing (Debian, as root), like test.sh installs the other test
# dependencies; prints the load seen and the suite's counts.
#
#   scripts/test-under-load.sh                    the whole suite, with 60 s of fuzzing
#   LOAD_CPUS=4 FUZZ_SECONDS=0 scripts/test-under-load.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v stress-ng >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stress-ng
  else
    echo "contend tests: missing stress-ng: install it (Debian: sudo apt-get install stress-ng) and rerun" >&2
    exit 1
  fi
fi

load_cpus="${LOAD_CPUS:-2}"
# The hog ends with this script: killed on exit, and --timeout bounds it should the kill be
# missed (the whole suite takes well under an hour).
stress-ng --cpu "$load_cpus" --timeout 3600 --quiet &
hog=$!
trap 'kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null || true' EXIT
sleep 2
kill -0 "$hog" 2>/dev/null || { echo "contend tests: stress-ng did not start" >&2; exit 1; }
printf '== beside stress-ng --cpu %s (pid %d); load average: %s\n' "$load_cpus" "$hog" "$(cut -d' ' -f1-3 /proc/loadavg)"

started=$SECONDS
status=0
scripts/test.sh || status=$?
printf '\n== under load: scripts/test.sh exited %d after %d min %d s; load average at the end: %s\n' \
  "$status" $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) "$(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
