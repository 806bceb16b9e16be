#!/usr/bin/env bash
# Runs the whole test suite: unit, integration (in-process daemons) and system tests (real
# binaries on 127.0.0.1). Builds the binaries once first; the system tests start them.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
cargo build --workspace --bins
cargo test --workspace --no-fail-fast -- --test-threads="${SPINDLE_TEST_THREADS:-4}"
