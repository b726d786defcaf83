#!/usr/bin/env python3
# Writes byte-level BPE tokenizer golden data from llama.cpp (via the pinned llama-cpp-python)
# for tests/test_tokenizer_bpe.c and tests/test_tokenizer_bpe_vocabs.c:
# tests/golden/tokens_<vocab>.tsv for llama.cpp's vocabulary test files ggml-vocab-<vocab>.gguf.
#
# Usage: .venv/bin/python tools/gen_golden_bpe_tokens.py [vocab ...]
#   (default: every vocabulary in VOCABS). The .gguf and .gguf.inp files are looked up in
#   tests/data/vocab/ and models/vocab/ (tools/fetch_bpe_vocabs.py puts them there).
#
# Same format as tests/golden/tokens_gemma3.tsv, one case per line, tab-separated:
#   hex(utf-8 input)  add_bos(0/1)  special(0/1)  ids (space-separated, "" if none)
#   hex(llama_detokenize(ids, remove_special=0, unparse_special=0))
import ctypes
import os
import random
import sys

import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from gen_golden_tokens import base_strings  # noqa: E402  (the Gemma set: scripts, code, emoji...)

VOCABS = ["gpt-2", "llama-bpe", "qwen2", "starcoder", "falcon", "mpt", "gpt-4o", "gpt-oss"]
# gpt-4o: the GPT-2 vocabulary with the o200k pre-tokenizer (tools/make_gpt4o_vocab.py); its
# test input is GPT-2's
INP = {"gpt-4o": "gpt-2"}
# gpt-oss: the gpt-oss CI copies' tokenizer (tools/make_gptoss_vocab.py: o200k pre-tokenizer,
# gpt-oss's special tokens, its template); GPT-2's test input, the o200k and harmony strings
INP["gpt-oss"] = "gpt-2"
DIRS = [os.path.join(ROOT, "tests/data/vocab"), os.path.join(ROOT, "models/vocab")]


def find(name):
    for d in DIRS:
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    raise SystemExit("missing %s (run tools/fetch_bpe_vocabs.py)" % name)


def bpe_strings():
    s = [
        # contractions in every case, glued and spaced
        "'s 't 're 've 'm 'll 'd", "'S 'T 'RE 'VE 'M 'LL 'D", "'Re 'rE 'Ve 'Ll 'lL",
        "I'm you're we've they'll she'd it's don't", "I'M YOU'RE WE'VE THEY'LL SHE'D IT'S DON'T",
        "rock'n'roll o'clock y'all ma'am", "''s '''t ' s 'x 'sa 'tt", "'", "''", "'''", " '", "' ",
        "can't've", "He said 'hello' and 'bye'", "l'amour d'été", "`quoted' \"twice\"",
        # numbers and digit runs
        "0", "01", "012", "0123", "01234", "1 2 3", "12 345 6789", "3.141592653589793",
        "1234567890123456789012345678901234567890", "9" * 64, "1e10 1E-10 0x7fff 0b1011",
        "$1,234.56", "50% off", "+1-800-555-0199", "2024-01-15T12:34:56Z", "v1.2.3-rc.4",
        "٣٤٥ ١٢", "①②③ ⅠⅡⅢ", "¹²³ ½", "३४५", "１２３４５", "x1y22z333w4444",
        # whitespace runs, newlines, leading spaces
        " a", "  a", "   a", "    a", "\ta", "\t\ta", "\na", "\n\na", " \na", "\n a", "a\n", "a \n", "a\n ",
        "a  ", "a   ", "a \t ", " \t\n\r ", "\r", "\r\n\r\n", "\n\n\n", "\n \n \n", "  \n  \n  ",
        "a\u00a0b", "a\u3000b", "a\u2003\u2003b", "a\u2028b", "a\u0085b", "a\x0bb\x0cc", "a\x1cb\x1fc",
        " " * 17 + "x", "\t" * 9 + "x", "x" + " " * 9, "\n" * 9 + "x" + "\n" * 9,
        # code
        "def foo(bar):\n    return bar + 1\n", "if (a &&b||!c) { return -1; }",
        "for (int i = 0; i < n; ++i) {\n\t\tsum += a[i] * b[i];\n\t}\n",
        "const x = () => { console.log(`hi ${name}`); };", "fn main() -> Result<(), Box<dyn Error>> {}",
        "<div class=\"a\">&nbsp;</div>", "SELECT a, b FROM t WHERE c >= 10 ORDER BY d DESC;",
        "#!/bin/sh\nset -eu\necho \"$HOME\" | tr a-z A-Z\n", "x+=1;y-=2;z*=3;w/=4;", "a==b!=c<=d>=e",
        "print('''triple''')", "$$ \\frac{a}{b} $$", "@decorator\nclass A(B, metaclass=M): pass",
        # punctuation runs, symbols, marks
        "!!!???...", "...", "—–-", "([{<>}])", "~`!@#$%^&*()_+-={}|[]\\:\";'<>?,./",
        "a.b,c;d:e!f?g", "e\u0301e\u0301", "\u0301\u0302", "a\u0308o\u0308u\u0308", "x\u20dd", "ก่ก้",
        # CJK, emoji
        "我爱北京天安门", "東京タワーへ行きました。", "서울특별시", "中文English混合123",
        "🤖 robot", "🦙🦙🦙", "👩‍💻 codes", "🇩🇪", "a😀b", "😀!", " 😀", "😀\n",
        # characters outside the common ranges
        "\U0001F9D1\u200D\U0001F52C", "\u2028\u2029", "\ufffd", "\U0010fffd", "\ue000\uf8ff", "\u0378\u0379",
        "\U0001d400\U0001d401", "𝟘𝟙𝟚", "ﬃ", "Ⅻ", "ǅ", "ᾼ",
    ]
    return [x.encode("utf-8") for x in s]


def raw_strings():
    # invalid UTF-8 as llama.cpp reads it: bad bytes become U+FFFD, overlong forms decode
    # (llama.cpp throws on sequences above U+10FFFF, so none of those are here)
    return [
        b"\xff", b"\xfe\xff", b"\xc3", b"\xc3(", b"abc\xe2\x82", b"\xe2\x82\xac", b"\x80\x80\x80",
        b"\xf0\x9f\x98", b"\xf0\x9f\x98\x80\xf0", b"a\xc0\xafb", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80",
        b"mixed \xff valid \xc3\xa9 invalid \xfe", b" \xc3 \xa9 ", b"\xe0\x80\x80x", b"a\x00b",
    ]


def special_strings(llm, vocab, n_vocab):
    out = []
    texts = []
    for tid in range(n_vocab):
        attr = llama_cpp.llama_vocab_get_attr(vocab, tid)
        if attr & (llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED):
            texts.append(llama_cpp.llama_vocab_get_text(vocab, tid))
    texts = texts[:12] + texts[-6:] if len(texts) > 18 else texts
    for t in texts:
        out += [t, b"x" + t + b"y", b" " + t + b" ", t + t, b"\n" + t + b"\nhi"]
    return out


def o200k_strings():
    # what the o200k expression splits differently: letter case runs, contractions kept on the
    # word in any case, punctuation runs that take a trailing '/', non-ASCII capitals
    s = ["HelloWorld", "helloWorld", "HTTPServer", "XMLHttpRequest", "iPhone", "McDonald's", "camelCaseWord",
         "SCREAMING_SNAKE_CASE", "snake_case_name", "Don'T WON'T i'M", "THEY'LL'VE", "I'mGoing", "x'sY'S",
         "ÉCOLE École écolE", "ÜberCool naïveTÉST", "ΑθήναΑΘΗΝΑ", "МоскваМОСКВА", "ǅungla ǲ", "ß ẞ",
         "a/b/c", "https://example.com/a/b?c=d", "!!/\n", "...//\r\n", "</div>\n", "x+=1;//c\n",
         "éÉe", "AbC1234dEf", "12345678", "ＡＢＣａｂｃ", "नमस्ते दुनिया", "ليس كذلك",
         "😀Hello 😀hello", " Hello　World", "  Mixed   Case\tTabs\n\nNew"]
    return [x.encode("utf-8") for x in s]


def harmony_strings():
    # harmony turns as gpt-oss's template renders them, special tokens glued to text
    s = ["<|start|>system<|message|>You are ChatGPT.\nReasoning: medium\n\n# Valid channels: analysis, "
         "commentary, final.<|end|><|start|>user<|message|>Hi!<|end|><|start|>assistant",
         "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hello.<|return|>",
         "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
         "{\"city\":\"Paris\"}<|call|>", "<|startoftext|><|endoftext|><|endofprompt|><|reserved_200013|>",
         "x<|return|>y<|call|>z<|end|>", "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"]
    return [x.encode("utf-8") for x in s]


def long_strings():
    para = ("Large language models are trained on vast amounts of text. They predict the next "
            "token given the previous ones. Über-naïve façades, 日本語, 한국어, and emoji 😀👍🏽 "
            "don't stop it; numbers like 1234567 and 3.14159 are split into digits.\n\n")
    code = ("def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
            "    return a\n\nprint([fib(i) for i in range(20)])\n")
    return [(para * 6).encode(), (code * 8).encode(), ("word " * 600).encode(), (" " * 300).encode(),
            ("a" * 3000).encode(), ("\n" * 200 + "x").encode()]


def inp_strings(path):
    data = open(path, "rb").read()
    parts = data.split(b"\n__ggml_vocab_test__\n")
    return [p for p in parts[:-1]] if parts and parts[-1] == b"" else parts


def gen(name):
    path = find("ggml-vocab-%s.gguf" % name)
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)

    def detok(ids):
        arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
        cap = 256 + 64 * len(ids)
        buf = ctypes.create_string_buffer(cap)
        n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, cap, False, False)
        assert n >= 0
        return buf.raw[:n]

    def piece(tid):
        buf = ctypes.create_string_buffer(512)
        n = llama_cpp.llama_token_to_piece(vocab, tid, buf, 512, 0, False)
        assert 0 <= n <= 512
        return buf.raw[:n]

    strs = base_strings() + bpe_strings() + raw_strings() + special_strings(llm, vocab, n_vocab) + long_strings()
    strs += o200k_strings() if name in ("gpt-4o", "gpt-oss") else []
    strs += harmony_strings() if name == "gpt-oss" else []
    strs += inp_strings(find("ggml-vocab-%s.gguf.inp" % INP.get(name, name)))
    rng = random.Random(4321)
    for _ in range(40):  # random mixtures of vocabulary pieces, deterministic
        ids = [rng.randrange(0, n_vocab) for _ in range(rng.randrange(1, 12))]
        strs.append(b"".join(piece(i) for i in ids))
    seen = set()
    cases = []
    for s in strs:
        if s in seen:
            continue
        seen.add(s)
        for add_bos in (0, 1):
            for special in (0, 1):
                cases.append((s, add_bos, special))
    out = os.path.join(ROOT, "tests/golden/tokens_%s.tsv" % name)
    with open(out, "w") as f:
        for s, add_bos, special in cases:
            ids = llm.tokenize(s, add_bos=bool(add_bos), special=bool(special))
            f.write("%s\t%d\t%d\t%s\t%s\n" % (s.hex(), add_bos, special, " ".join(map(str, ids)), detok(ids).hex()))
    print("%s: wrote %d cases (%d strings) to %s" % (name, len(cases), len(seen), os.path.relpath(out, ROOT)))


def main():
    for name in sys.argv[1:] or VOCABS:
        gen(name)


if __name__ == "__main__":
    main()
