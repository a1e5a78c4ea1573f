#!/usr/bin/env bash
# Bounded fuzzing with cargo-fuzz (libFuzzer) on the stable toolchain: builds every target in fuzz/ once, then
# runs each for SECONDS_PER_TARGET seconds (default 20, for CI; longer by hand: `bash scripts/fuzz.sh 600`;
# `bash scripts/fuzz.sh --build-only` builds and stops, as scripts/test.sh does ahead of time; `--fetch-only` installs and downloads only),
# starting from the committed seeds (fuzz/seeds/<target>) plus whatever earlier runs left in fuzz/corpus/<target>
# (gitignored; libFuzzer adds the inputs that found new coverage there).
#
# No sanitizer (`-s none`: AddressSanitizer needs nightly; the code is `unsafe_code = "forbid"` anyway), with
# debug assertions and overflow checks (`-a`). Exits non-zero if any target crashes, panics, times out on one
# input or runs out of memory, printing the input libFuzzer saved and the command that reproduces it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${1:-20}"
if ! [[ "$seconds" =~ ^([1-9][0-9]*|--build-only|--fetch-only)$ ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET | --build-only | --fetch-only]" >&2
  exit 64
fi

targets=(loadgen_response loadgen_h2 scribe_filter flight_request)
declare -A dicts=([loadgen_response]=http [loadgen_h2]=h2 [flight_request]=http [scribe_filter]=scribe)

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install cargo-fuzz --locked --version 0.13.2
fi

cd fuzz
# --fetch-only: cargo-fuzz and every crate the build needs on disk, so a build started after it never takes
# cargo's download lock (scripts/test.sh stops its background build while the tests run).
if [ "$seconds" = --fetch-only ]; then
  cargo fetch
  exit 0
fi
echo "== cargo fuzz build (no sanitizer, debug assertions)"
cargo fuzz build -s none -a
if [ "$seconds" = --build-only ]; then
  exit 0
fi

failed=()
for target in "${targets[@]}"; do
  mkdir -p "corpus/$target" "artifacts/$target"
  before="$(ls -A "artifacts/$target")"
  echo "== fuzzing $target for ${seconds}s"
  # -timeout: seconds one input may take (flight_request allows its connection 5 s); -rss_limit_mb: the
  # whole process. -max_len: the seeds are small; 8 KiB lets inputs pass the parsers' 4 KiB line limits.
  if ! cargo fuzz run -s none -a "$target" "corpus/$target" "seeds/$target" -- \
    -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=8192 \
    -dict="dict/${dicts[$target]}.dict" -print_final_stats=1; then
    failed+=("$target")
    echo "!! $target failed; inputs libFuzzer saved:" >&2
    comm -13 <(printf '%s\n' "$before") <(ls -A "artifacts/$target") | while read -r name; do
      [ -n "$name" ] || continue
      echo "   fuzz/artifacts/$target/$name" >&2
      echo "   reproduce: (cd fuzz && cargo fuzz run -s none -a $target artifacts/$target/$name)" >&2
    done
  fi
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "== fuzzing found failures in: ${failed[*]}" >&2
  exit 1
fi
echo "== fuzzing: no failures (${seconds}s per target)"
