#!/usr/bin/env python3
# Writes encoder-tokenizer golden data from llama.cpp (via the pinned llama-cpp-python) for
# tests/test_tokenizer_wpm.c and tests/test_tokenizer_ugm.c: tests/golden/tokens_<vocab>.tsv
# for llama.cpp's test vocabularies ggml-vocab-bert-bge.gguf (WordPiece, "bert") and
# ggml-vocab-nomic-bert-moe.gguf (SentencePiece Unigram, "t5", XLM-RoBERTa's vocabulary).
#
# Usage: .venv/bin/python tools/gen_golden_encoder_tokens.py [vocab ...]
#   The .gguf (and .gguf.inp when llama.cpp has one) are looked up in tests/data/vocab/ and
#   models/vocab/ (tools/fetch_bpe_vocabs.py puts them there).
#
# Same format as tools/gen_golden_bpe_tokens.py, one case per line, tab-separated:
#   hex(utf-8 input)  add_special(0/1)  special(0/1)  ids  hex(llama_detokenize(ids, 0, 0))
import os
import random
import sys

import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from gen_golden_bpe_tokens import bpe_strings, find, inp_strings, long_strings, raw_strings  # noqa: E402
from gen_golden_tokens import base_strings  # noqa: E402

VOCABS = ["bert-bge", "nomic-bert-moe"]


def encoder_strings():
    s = [
        # the BERT normaliser: case, accents (NFD), CJK one per character, punctuation, controls
        "HELLO World hElLo", "ÀÁÂÃÄÅ àáâãäå ÇçÑñ", "Crème Brûlée À LA CARTE", "Straße STRASSE ß ẞ",
        "İstanbul ıi IÌ", "ΣΊΣΥΦΟΣ σίσυφος", "ǅemal ǈ ǋ", "Ⅻ ⓐ Ⓐ", "ﬁne ﬂow", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ",
        "e\u0301\u0302\u0303 a\u0327", "\u0301 leading mark", "x\u200by\u200cz\u200dw", "a\u00adb", "tab\there",
        "ctrl\x01\x02\x1f\x7fend", "nul\x00byte", "\ufeffbom", "\u2028line\u2029para", "a\u3000b\u00a0c",
        "我爱北京天安门", "中文English混合", "漢字かな交じり文", "𠀀𠀁 𪜀 𫝀 𫠠 𬺰 丽", "한국어 텍스트", "ｶﾀｶﾅ",
        "(a)[b]{c}<d>", "a-b_c.d,e;f:g!h?i", "¿Qué? ¡Sí!", "«guillemets» „quotes“ “curly” ‘single’",
        "$5 + 3 = 8 % ^ & * | ~ ` \\ /", "€100 £50 ¥30 ₹20", "© ® ™ ° ± × ÷", "→ ← ↑ ↓ ⇒ ∀ ∃ ∑ √ ∞",
        "unaffable unbelievably antidisestablishmentarianism", "supercalifragilisticexpialidocious",
        "word" * 40, "x" * 250, "🤖🦙 emoji 😀👍🏽 👨‍👩‍👧", "hello😀world", "[CLS] [SEP] [MASK] [UNK] [PAD]",
        "<s> </s> <pad> <unk> <mask>", "multiple   spaces\t\ttabs\n\nnewlines", " leading", "trailing ",
        "   ", "Ελληνικά Русский العربية עברית हिन्दी ภาษาไทย Tiếng Việt",
        "Multilingual: English, Français (éàç), Deutsch (äöüß), 日本語, 中文, 한국어, Ελληνικά, "
        "Русский, العربية, emoji 😀🎉, MiXeD CaSe, punctuation!?.,;:'\"()[]{}",
    ]
    return [x.encode("utf-8") for x in s]


def gen(name):
    path = find("ggml-vocab-%s.gguf" % name)
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)

    def detok(ids):
        import ctypes
        arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
        cap = 256 + 64 * len(ids)
        buf = ctypes.create_string_buffer(cap)
        n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, cap, False, False)
        assert n >= 0
        return buf.raw[:n]

    strs = encoder_strings() + base_strings() + bpe_strings() + raw_strings() + long_strings()
    try:
        strs += inp_strings(find("ggml-vocab-%s.gguf.inp" % name))
    except SystemExit:
        pass  # nomic-bert-moe has no .inp in llama.cpp
    rng = random.Random(2718)
    for _ in range(40):  # random mixtures of vocabulary texts, deterministic
        ids = [rng.randrange(0, n_vocab) for _ in range(rng.randrange(1, 12))]
        strs.append(b" ".join(llama_cpp.llama_vocab_get_text(vocab, i) for i in ids))
    seen, cases = set(), []
    for s in strs:
        if s in seen:
            continue
        seen.add(s)
        for add_special in (0, 1):
            for special in (0, 1):
                cases.append((s, add_special, special))
    out = os.path.join(ROOT, "tests/golden/tokens_%s.tsv" % name)
    with open(out, "w") as f:
        for s, add_special, special in cases:
            ids = llm.tokenize(s, add_bos=bool(add_special), special=bool(special))
            f.write("%s\t%d\t%d\t%s\t%s\n" % (s.hex(), add_special, special, " ".join(map(str, ids)),
                                              detok(ids).hex()))
    print("%s: wrote %d cases (%d strings) to %s" % (name, len(cases), len(seen), os.path.relpath(out, ROOT)))


def main():
    for name in sys.argv[1:] or VOCABS:
        gen(name)


if __name__ == "__main__":
    main()
