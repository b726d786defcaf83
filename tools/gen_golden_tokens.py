#!/usr/bin/env python3
# Writes tokenizer golden data from llama.cpp (via the pinned llama-cpp-python) for
# tests/test_tokenizer_gemma3.c: tests/golden/tokens_gemma3.tsv and pieces_gemma3.tsv.
#
# Usage: .venv/bin/python tools/gen_golden_tokens.py [model.gguf]
#
# tokens_gemma3.tsv, one case per line, tab-separated:
#   hex(utf-8 input)  add_bos(0/1)  special(0/1)  ids (space-separated, "" if none)
#   hex(llama_detokenize(ids, remove_special=0, unparse_special=0))
# pieces_gemma3.tsv: id  special(0/1)  hex(llama_token_to_piece(id, lstrip=0, special))
import ctypes
import os
import random
import sys

import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models/gemma-3-270m-q4_k_m.gguf")


def base_strings():
    s = [
        "", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t\t\tx", "a", "A", "Hello",
        "Hello world", "Hello, world!", " Hello world", "Hello world ", "  Hello  world  ",
        "hello\nworld", "hello\n\nworld\n", "The quick brown fox jumps over the lazy dog.",
        "I can't believe it's not butter!", "It's 3:45 p.m. on 2024-01-15.",
        "e-mail: someone@example.com, url: https://example.org/a/b?c=d&e=f#g",
        "1", "12", "123", "1234", "12345", "123456789012345678901234567890", "3.14159",
        "-42", "1,000,000", "0x1F 0b1010 1e-9", "½ ¾ ⅓ ² ³",
        "café", "naïve façade", "Ångström", "über straße", "Ελληνικά γράμματα",
        "Русский текст, привет мир", "ąęśćżźół", "ÀÉÎÕÜ àéîõü", "e\u0301 (combining acute)",
        "日本語のテキストです。", "こんにちは世界", "カタカナとひらがな", "漢字",
        "中文测试，你好世界！", "繁體中文", "한국어 텍스트입니다", "안녕하세요",
        "العربية نص تجريبي", "مرحبا بالعالم", "עברית", "हिन्दी पाठ", "ภาษาไทย", "Tiếng Việt có dấu",
        "😀", "😀😃😄", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸🇯🇵🇫🇷", "❤️", "I ❤️ NY 🗽",
        "emoji at end 🎉", "🎉 emoji at start", "mixed 日本 and English 😀 text",
        "def f(x):\n    return x * 2\n", "for i in range(10):\n\tprint(i)\n",
        "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\n",
        "int main(void) {\n    printf(\"hi\\n\");\n    return 0;\n}\n",
        "#include <stdio.h>\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\n",
        "struct s { int a; char *b; };", "if (x != NULL && *x == '\\0') { x++; }",
        '{"key": "value", "n": [1, 2, 3], "nested": {"a": null, "b": true}}',
        '[{"id":1},{"id":2}]', "<html><body><p>Hi</p></body></html>",
        "SELECT * FROM users WHERE id = 42;", "$ ls -la | grep foo > out.txt",
        "a  b   c    d     e", "trailing spaces    ", "    leading spaces",
        "tabs\tbetween\twords", "\t\t\t\t", "\n\n\n\n\n", "line1\nline2\r\nline3\rline4",
        "mixed \t \n whitespace \t\n", "      ", "                                ",
        "\u00a0non-breaking\u00a0space", "zero\u200bwidth", "\ufeffBOM", "soft\u00adhyphen",
        "<start_of_turn>user\nhi<end_of_turn>", "<start_of_turn>model\n",
        "<bos>", "<eos>", "<unk>", "<pad>", "<mask>", "</s>", "<s>", "<end_of_turn>",
        "<start_of_image>", "[multimodal]", "<unused0>", "<unused6241>", "<0x41>",
        "text<bos>text", "a<eos>b<eos>", "<<bos>>", "<start_of_turn", "start_of_turn>",
        "<start_of_turn><end_of_turn>", "x</s>y", "<start_of_image>pic<end_of_image>",
        "hi\n\n\nthere", "hi\t\t\tthere", "a\n \n b",
        "▁", "▁▁", "a▁b", "<0x0A>", "\x00", "a\x00b", "\x01\x02\x1f\x7f",
        "ASCII only: !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
        "UPPERCASE lowercase MiXeD", "supercalifragilisticexpialidocious",
        "antidisestablishmentarianism", "pneumonoultramicroscopicsilicovolcanoconiosis",
        "Mr. Smith went to Washington.", "Q: What is 2+2?\nA: 4",
        "¿Dónde está la biblioteca?", "Ça va? Très bien!", "Müller's Bücher",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕄𝕒𝕥𝕙", "∀x∈ℝ: x²≥0", "→ ← ↑ ↓ ⇒ ⇔", "© ® ™ € £ ¥",
        "ℏ = h / 2π", "Σ α β γ δ", "𓀀𓀁", "\U0010ffff", "\ue000 private use",
        "a" * 100, "ab" * 50, " " * 64, "\n" * 40, "\t" * 40, "😀" * 20, "日本" * 30,
        "== heading ==", "* bullet\n* bullet\n- dash", "1. one\n2. two\n",
        "| a | b |\n|---|---|\n| 1 | 2 |", "**bold** _italic_ `code`", "```python\nprint(1)\n```",
        "https://www.google.com/search?q=tokenizer", "C:\\Windows\\System32", "/usr/bin/env python3",
        "user@host:~$ sudo apt-get install -y build-essential",
        "The year 1999 and the year 2000.", "π≈3.14159265358979323846",
        "naïve café résumé", "Zürich, Genève, Köln", "Øresund ærø", "İstanbul ığdır",
        "ß ẞ", "ﬁ ﬂ ligatures", "ｆｕｌｌｗｉｄｔｈ", "ｶﾀｶﾅ", "°C °F", "½ cup", "5' 11\"",
        "don't won't can't shouldn't", "rock 'n' roll", "\"quoted\" 'single'",
        "«guillemets» „German“ “English”", "em—dash en–dash", "ellipsis… …",
        "α\nβ\nγ", "tab\there", "CRLF\r\n\r\n", "vertical\x0btab", "form\x0cfeed",
        "The Gemma models are lightweight, state-of-the-art open models.",
        "Translate to French: Hello, how are you?", "Summarize: " + "lorem ipsum " * 5,
        "1+1=2", "x^2 + y^2 = z^2", "f(x) = 3x + 2", "a<b>c", "<>", "<", ">", "<<>>",
        "<b>bold</b>", "<table><tr><td>1</td></tr></table>", "<br/>", "&amp; &lt; &gt;",
        "Hello 世界 🌍 مرحبا שלום", "ℕ ℤ ℚ ℝ ℂ", "Ꭰ Ꭱ Ꭲ", "ᚠᚢᚦ", "ⵜⴰⵎⴰⵣⵉⵖⵜ",
        "ශ්‍රී ලංකා", "ਪੰਜਾਬੀ", "বাংলা", "தமிழ்", "తెలుగు", "ಕನ್ನಡ", "മലയാളം",
        "ქართული", "Հայերեն", "Монгол", "ئۇيغۇرچە", "ትግርኛ", "ᓀᐦᐃᔭᐍᐏᐣ",
    ]
    # invalid-ish UTF-8 is added as raw bytes below
    return [x.encode("utf-8") for x in s]


def raw_strings():
    return [
        b"\xff", b"\xfe\xff", b"\xc3", b"\xc3(", b"abc\xe2\x82", b"\xe2\x82\xac", b"\x80\x80\x80",
        b"\xf0\x9f\x98", b"\xf0\x9f\x98\x80\xf0", b"a\xc0\xafb", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80",
        b"mixed \xff valid \xc3\xa9 invalid \xfe",
    ]


def long_strings():
    para = ("Large language models are trained on vast amounts of text. They predict the next "
            "token given the previous ones. Tokenizers split text into pieces: words, sub-words, "
            "bytes. SentencePiece treats the input as a raw stream and represents spaces with "
            "a special marker. Über-naïve façades, 日本語, 한국어, and emoji 😀👍🏽 are all "
            "handled by byte fallback when a piece is missing from the vocabulary.\n\n")
    code = ("def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
            "    return a\n\nprint([fib(i) for i in range(20)])\n")
    return [(para * 12).encode(), (code * 20).encode(), ("word " * 1500).encode(),
            ("<start_of_turn>user\n" + para * 3 + "<end_of_turn>\n<start_of_turn>model\n").encode()]


def main():
    llm = llama_cpp.Llama(model_path=MODEL, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)

    def detok(ids):
        arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
        cap = 64 + 64 * len(ids)
        buf = ctypes.create_string_buffer(cap)
        n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, cap, False, False)
        assert n >= 0
        return buf.raw[:n]

    def piece(tid, special):
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(vocab, tid, buf, 256, 0, special)
        assert 0 <= n <= 256
        return buf.raw[:n]

    strs = base_strings() + raw_strings() + long_strings()
    # a few random mixtures of vocabulary pieces, deterministic
    rng = random.Random(1234)
    for _ in range(40):
        ids = [rng.randrange(494, n_vocab) for _ in range(rng.randrange(1, 12))]
        strs.append(b"".join(piece(i, False) for i in ids))
    seen = set()
    cases = []
    for s in strs:
        if s in seen:
            continue
        seen.add(s)
        for add_bos in (0, 1):
            for special in (0, 1):
                cases.append((s, add_bos, special))

    tok_path = os.path.join(ROOT, "tests/golden/tokens_gemma3.tsv")
    os.makedirs(os.path.dirname(tok_path), exist_ok=True)
    with open(tok_path, "w") as f:
        for s, add_bos, special in cases:
            ids = llm.tokenize(s, add_bos=bool(add_bos), special=bool(special))
            f.write("%s\t%d\t%d\t%s\t%s\n" % (s.hex(), add_bos, special,
                                              " ".join(map(str, ids)), detok(ids).hex()))

    ids = list(range(0, 600)) + [106, 212, 255999, 256000, 256001, 262143, 262144 - 2]
    ids += sorted(rng.sample(range(600, n_vocab), 400))
    ids = sorted(set(ids))
    piece_path = os.path.join(ROOT, "tests/golden/pieces_gemma3.tsv")
    with open(piece_path, "w") as f:
        for tid in ids:
            for special in (0, 1):
                f.write("%d\t%d\t%s\n" % (tid, special, piece(tid, bool(special)).hex()))
    print("wrote %d token cases (%d strings), %d pieces" % (len(cases), len(seen), 2 * len(ids)))


if __name__ == "__main__":
    main()
