#!/usr/bin/env bash
# Do two builds compute the same outputs? For changes meant to keep every bit (refactors):
# bench/c/outputs_dump.c (public API only) is compiled against each tree's build/liblumen_core.a
# and run on the default model (itself as its draft) and on the random-weight family models
# of tools/make_arch_gguf.py --ci (F16 and a quant mix of llama, qwen2, qwen3 and gemma3
# shapes): logits hashes of a prefill and greedy decode through lm_decode, and the token ids
# of concurrent engine requests (greedy, seeded, lookup, draft model), at 1 and 2 threads.
# Then the scalar kernels (LUMEN_FORCE_GENERIC=1) on the default model and the quant-mix
# files, without the draft model (the scalar f16 kernels take minutes per file there);
# LUMEN_SAME_GENERIC=0 skips that pass. About 3 + 6 minutes on 2 cores.
#   bash bench/same_outputs.sh OLD_TREE NEW_TREE      (each with build/liblumen_core.a)
# Exit 0 when every output is the same; the differing lines otherwise.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -eq 2 ] || { echo "usage: $0 OLD_TREE NEW_TREE" >&2; exit 2; }
old=$(cd "$1" && pwd) && new=$(cd "$2" && pwd) || exit 2
# results per NEW tree (two comparisons may run at once); the family models are shared
cache=${LUMEN_SAME_DIR:-/tmp/lumen-same-$(id -u)}
out=$cache/$(basename "$new")
mkdir -p "$out"
py=$here/.venv/bin/python

for side in old new; do
    tree=${!side}
    lib=$tree/build/liblumen_core.a
    [ -f "$lib" ] || { echo "same_outputs: $lib is missing (build $tree first)" >&2; exit 2; }
    # the library's link needs: pthreads, libm, PCRE2 when it was found, the start-up CPU check
    cc -O2 -march=native -I"$tree/include" "$here/bench/c/outputs_dump.c" "$lib" \
        -Wl,--undefined=lm_cpu_check_at_start -lpthread -lm $(pkg-config --libs libpcre2-8 2>/dev/null) \
        -o "$out/outputs_dump.$side" || exit 2
done

models=("$here/models/gemma-3-270m-q4_k_m.gguf")
if [ ! -f "$cache/arch/manifest.txt" ]; then
    "$py" "$here/tools/make_arch_gguf.py" --ci "$cache/arch" >/dev/null || exit 2
fi
for f in "$cache"/arch/*.gguf; do models+=("$f"); done

rc=0
passes=(0)
[ "${LUMEN_SAME_GENERIC:-1}" = 1 ] && passes+=(1)
for generic in "${passes[@]}"; do
    for m in "${models[@]}"; do
        name="$(basename "$m" .gguf)$([ $generic = 1 ] && echo .generic)"
        draft=$m
        if [ $generic = 1 ]; then
            case $m in *_f16.gguf) continue ;; esac
            draft=
        fi
        ok=1
        rm -f "$out/$name.old" "$out/$name.new"
        for side in old new; do
            LUMEN_FORCE_GENERIC=$generic "$out/outputs_dump.$side" "$m" $draft >"$out/$name.$side" 2>"$out/$name.$side.err" ||
                { echo "FAILED: $side on $name: $(tail -1 "$out/$name.$side.err")"; ok=0; rc=1; }
        done
        if [ $ok = 0 ]; then
            continue
        elif cmp -s "$out/$name.old" "$out/$name.new"; then
            echo "same: $name ($(wc -l <"$out/$name.new") lines)"
        else
            echo "DIFFERENT: $name"
            diff "$out/$name.old" "$out/$name.new" | head -6 | cut -c1-200
            rc=1
        fi
    done
done
exit $rc
