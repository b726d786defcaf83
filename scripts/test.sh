#!/usr/bin/env bash
# Runs every test: set-up's install steps (scripts/setup.sh --no-run), the Release build
# (build/) and an AddressSanitizer + UBSan build (build-asan/), each with its CTest suite,
# the Release suite again on the scalar kernels (LUMEN_FORCE_GENERIC=1), and the tests
# labelled `threads` under ThreadSanitizer (build-tsan/).
#   bash scripts/test.sh [extra ctest args, e.g. -L unit or -R gguf]
# Env: LUMEN_JOBS (parallelism, default 2)
#      LUMEN_SLOW=1 (also run the tests labelled `slow`, e.g. the server soak; CI leaves them out)
#      LUMEN_ASAN_LABEL_EXCLUDE (regex of CTest labels also left out of the ASan pass, e.g. browser)
#      LUMEN_SKIP_ASAN=1 (Release pass only; for quick local runs, never in CI)
#      LUMEN_SKIP_GENERIC=1 (no LUMEN_FORCE_GENERIC=1 pass; for quick local runs, never in CI)
#      LUMEN_SKIP_TSAN=1 (no ThreadSanitizer pass over the `threads` label; local runs only)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

T0=$(date +%s)
JOBS=${LUMEN_JOBS:-2}
failed=()

say() { printf '[test] %s\n' "$*"; }
elapsed() { echo "$(($(date +%s) - T0))s"; }

# ---------------------------------------------------------------- set-up (fast if done)
if ! bash scripts/setup.sh --no-run; then
    say "FAILED: scripts/setup.sh --no-run ($(elapsed))"
    exit 1
fi
say "set-up done ($(elapsed))"

# ---------------------------------------------------------------- builds
build() { # dir, cmake args...  (TARGETS="a b": only those targets, e.g. what one pass runs)
    local dir=$1 t=()
    shift
    for x in ${TARGETS:-}; do t+=(--target "$x"); done
    say "configure + build $dir/ ($*)${TARGETS:+ targets: $TARGETS}"
    local t0
    t0=$(date +%s)
    cmake -S . -B "$dir" "$@" >/dev/null || return 1
    cmake --build "$dir" -j "$JOBS" "${t[@]}" || return 1
    say "built $dir/ in $(($(date +%s) - t0))s"
}

# labels left out of every pass: slow unless LUMEN_SLOW=1, plus $EXCLUDE (a regex) if set
SLOW_EXCLUDE=slow
if [ "${LUMEN_SLOW:-0}" = 1 ]; then SLOW_EXCLUDE=; fi
run_ctest() { # name, dir, extra args...
    local name=$1 dir=$2
    shift 2
    local t ex="$SLOW_EXCLUDE" lab=()
    if [ -n "${EXCLUDE:-}" ]; then ex="${ex:+$ex|}$EXCLUDE"; fi
    if [ -n "$ex" ]; then lab=(-LE "$ex"); fi # one -LE: ctest keeps only the last
    t=$(date +%s)
    say "ctest $dir/ ($name${ex:+; labels left out: $ex})"
    if ctest --test-dir "$dir" --output-on-failure -j "$JOBS" "${lab[@]}" "$@"; then
        say "$name: passed in $(($(date +%s) - t))s"
    else
        say "$name: FAILED after $(($(date +%s) - t))s"
        failed+=("$name tests")
    fi
}

if build build -DCMAKE_BUILD_TYPE=Release -DLUMEN_NATIVE=ON; then
    run_ctest release build "$@"
    # the same binaries on the scalar kernels (LUMEN_FORCE_GENERIC=1): every SIMD kernel's
    # generic twin must carry the model end to end too. Only the tests whose results depend on
    # the table the process picks run again: those labelled `model`. Left out: the unit tests
    # (the kernel tests already run every table, generic included, in one process; the others
    # use no kernel), the tests labelled `tables` (they compare every table in one process
    # themselves), and the server, command-line and engine-scheduling tests (label server, cli,
    # engine: logic over logits that test_runtime_tables shows are the same bits on both sets).
    if [ "${LUMEN_SKIP_GENERIC:-0}" = 1 ]; then
        say "LUMEN_SKIP_GENERIC=1: skipping the generic-kernel pass"
    else
        EXCLUDE='server|cli|engine|tables' LUMEN_FORCE_GENERIC=1 LUMEN_TEST_QUICK=1 \
            run_ctest generic build -L model "$@"
    fi
else
    failed+=("release build")
fi

if [ "${LUMEN_SKIP_ASAN:-0}" = 1 ]; then
    say "LUMEN_SKIP_ASAN=1: skipping the sanitizer pass"
else
    # -O1 keeps the model tests tolerable under ASan; asserts stay on (no -DNDEBUG).
    if build build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
        -DLUMEN_SANITIZE=ON -DLUMEN_NATIVE=ON; then
        # model tests do less work under the sanitizers (fewer positions; see each test)
        export LUMEN_TEST_QUICK=1
        export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
        export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
        # the server suite under ASan leaves out test_spec.py and test_structured_corpus.py
        # (~40% of its ASan time): generation-heavy end-to-end checks of engine logic that
        # test_runtime_spec*, test_runtime_grammar and test_server_structured run under ASan
        LUMEN_SERVER_IGNORE="test_spec.py test_structured_corpus.py" \
            EXCLUDE="${LUMEN_ASAN_LABEL_EXCLUDE:-}" run_ctest asan build-asan "$@"
    else
        failed+=("asan build")
    fi
fi

if [ "${LUMEN_SKIP_TSAN:-0}" = 1 ]; then
    say "LUMEN_SKIP_TSAN=1: skipping the thread-sanitizer pass"
else
    # threaded code (thread pool, the engine's thread boundary) under ThreadSanitizer
    # only what this pass runs: lumen (the server tests) and the tests labelled threads
    tsan_targets="lumen $(grep -l 'LM_TEST_LABELS:.*threads' tests/test_*.c tests/*/test_*.c 2>/dev/null |
        xargs -r -n1 basename | sed 's/\.c$//' | tr '\n' ' ')"
    if TARGETS=$tsan_targets build build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
        -DLUMEN_TSAN=ON -DLUMEN_NATIVE=ON; then
        TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 LUMEN_TEST_QUICK=1 \
            run_ctest tsan build-tsan -L threads "$@"
        # lumen serve's own threads (the front door, HTTP threads, drain and signals) under
        # TSan: the connection and shutdown tests (~3 min; the whole suite would take ~15)
        TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 LUMEN_TEST_QUICK=1 \
            LUMEN_SERVER_TESTS="test_conns.py test_shutdown.py" run_ctest tsan-server build-tsan -R '^test_server$' "$@"
    else
        failed+=("tsan build")
    fi
fi

# ---------------------------------------------------------------- summary
if ((${#failed[@]})); then
    say "FAILED: ${failed[*]} (total $(elapsed))"
    exit 1
fi
say "all passed (total $(elapsed))"
