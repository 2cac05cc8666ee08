#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (the fuzz preset: clang, ASan + UBSan), replays every
# corpus of fuzz/corpus/<target>/ (each input once: a regression fails the run), then fuzzes
# each target for a while. docs/reliability.md has the targets, the figures and the findings.
#   scripts/fuzz.sh                 replay, then 60 s per target
#   scripts/fuzz.sh 4               replay, then 4 s per target (what CI runs)
#   scripts/fuzz.sh 0               replay only
#   scripts/fuzz.sh 600 cli_args    replay, then fuzz one target (or several) for 600 s
# New inputs go to build/<dir>/corpus/<target>/ (not into the committed seeds); a crash, leak,
# timeout or out-of-memory input is written to build/<dir>/artifacts/ and fails the run.
# MME_FUZZ_BUILD_DIR picks another build folder (default build/fuzz, the preset's).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
all_targets=(hf_config megatron_args pipeline_layout cli_args hardware_json spec_file validate_csv memory_log)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")

# clang and its libFuzzer / sanitizer runtimes (Debian 12: clang 14).
scripts/setup-deps.sh --with clang libclang-rt-14-dev
build="${MME_FUZZ_BUILD_DIR:-build/fuzz}"
# Absolute paths: the cli_args target works in a sandbox folder of its own.
build="$(realpath -m "$build")"
root="$PWD"
cmake --preset fuzz -B "$build" >/dev/null
cmake --build "$build" --target mme_fuzzers

mkdir -p "$build/artifacts"
# -timeout: a single input may take 10 s under the sanitizers (a model of 2^20 layers is
# valid); -rss_limit_mb: 2 GiB, also the limit of one allocation (malloc_limit_mb follows it).
common=(-timeout=10 -rss_limit_mb=2048 -artifact_prefix="$build/artifacts/")
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

status=0
for t in "${targets[@]}"; do
  exe="$build/fuzz/fuzz_$t"
  seeds="$root/fuzz/corpus/$t"
  [[ -x $exe && -d $seeds ]] || { echo "fuzz: unknown target '$t' (${all_targets[*]})" >&2; exit 2; }
  # The targets' own logging (adapter warnings, CLI errors) goes to a discarded stderr;
  # findings come through the sanitizers' report stream, which libFuzzer keeps.
  extra=(-close_fd_mask=2)
  echo "== $t: replaying $(find "$seeds" -type f | wc -l) inputs"
  if ! "$exe" "${common[@]}" "${extra[@]}" -runs=0 "$seeds" >"$build/$t.replay.log" 2>&1; then
    echo "fuzz: $t fails on its corpus; the log is $build/$t.replay.log" >&2
    tail -40 "$build/$t.replay.log" >&2
    status=1
    continue
  fi
  [[ $seconds -gt 0 ]] || continue
  work="$build/corpus/$t"
  mkdir -p "$work"
  echo "== $t: fuzzing for $seconds s"
  if "$exe" "${common[@]}" "${extra[@]}" -dict="$root/fuzz/dict/$t.dict" -max_total_time="$seconds" \
       -print_final_stats=1 "$work" "$seeds" >"$build/$t.fuzz.log" 2>&1; then
    # The last status line: executions, coverage (cov: edges, ft: features), corpus size.
    grep -E '^#[0-9]+' "$build/$t.fuzz.log" | tail -1
    grep -E 'stat::number_of_executed_units' "$build/$t.fuzz.log" || true
  else
    echo "fuzz: $t found a problem; the log is $build/$t.fuzz.log, the input in $build/artifacts/" >&2
    grep -E 'ERROR|SUMMARY|finding|runtime error|Test unit written' "$build/$t.fuzz.log" | head -20 >&2
    status=1
  fi
done
exit $status
