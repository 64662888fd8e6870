#!/bin/sh
# Runs every libFuzzer target for SECONDS each, starting from the seed corpus
# in tests/fuzz/corpus (copied: the checked-in seeds are not modified).
# Prints each target's execution count; exits non-zero on the first crash,
# leaving the reproducer in the work directory it names.
# Usage: tests/fuzz/run.sh BUILD_DIR SECONDS [TARGET...]
set -eu
build=$1
seconds=$2
shift 2
targets=${*:-"tar_index image_decode pipeline_text chunk_assembler stream_request stored_sample sample_fields coco_annotations media_decode"}
here=$(cd "$(dirname "$0")" && pwd)
# tar_index writes a shard and its sidecar per execution: memory-backed
# storage makes it about 10x faster than a disk-backed /tmp.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
  TMPDIR=/dev/shm
  export TMPDIR
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/stoker-fuzz.XXXXXX")
for t in $targets; do
  mkdir -p "$work/$t"
  cp "$here/corpus/$t"/* "$work/$t/"
  log="$work/$t.log"
  if ! ASAN_OPTIONS=detect_leaks=1 "$build/tests/fuzz/${t}_fuzz" -max_total_time="$seconds" -timeout=10 \
       -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/$t-" "$work/$t" \
       >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz: $t FAILED; reproducer and log in $work" >&2
    exit 1
  fi
  runs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')  # -a: a log may hold raw input bytes
  echo "fuzz: $t: $runs executions in ${seconds}s, no crash"
done
rm -rf "$work"
