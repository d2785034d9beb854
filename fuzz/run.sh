#!/usr/bin/env bash
# Build and run the libFuzzer target of the C core's scan under ASan and UBSan.
#   fuzz/run.sh [SECONDS]   (default 60; needs clang with libFuzzer: Debian's clang-14 and
#                            libclang-rt-14-dev)
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
clang="$(command -v clang-14 || command -v clang)"
out="${FUZZ_OUT:-$(mktemp -d)}"
mkdir -p "$out"
"$clang" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  fuzz_scan.c -o "$out/fuzz_scan"
mkdir -p "$out/corpus"
"$out/fuzz_scan" -max_total_time="$seconds" -max_len=4096 -detect_leaks=1 \
  -print_final_stats=1 "$out/corpus" corpus
