// libFuzzer target for the GBNF compiler, matcher and masks (src/grammar/): input up to the
// first NUL is a grammar (compiled for a synthetic vocabulary), the rest tokens to feed; at each
// step every token's mask bit must equal what accepting it says (a trap otherwise).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *words[] = {"{", "}", "\"", "\":", "a", "ab", "abc", "1", "12", ",", "[", "]", "true",
                              "null", "\xc3\xa9", "\xf0\x9f\x98\x80", "x", "(", ")", "=", "\n", "hello"};

static struct lm_tokenizer *vocab(void) {
    static struct lm_tokenizer *t;
    if (t) return t;
    static char bytes[256][8];
    const char *texts[512];
    uint32_t lens[512];
    int32_t types[512];
    int n = 0;
    texts[n] = "<unk>", types[n++] = LM_TOK_TYPE_UNKNOWN;
    texts[n] = "<s>", types[n++] = LM_TOK_TYPE_CONTROL;
    texts[n] = "</s>", types[n++] = LM_TOK_TYPE_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        texts[n] = bytes[b], types[n++] = LM_TOK_TYPE_BYTE;
    }
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) texts[n] = words[i], types[n++] = LM_TOK_TYPE_NORMAL;
    for (int i = 0; i < n; i++) lens[i] = (uint32_t)strlen(texts[i]);
    struct lm_tokenizer_desc d = {.model = "llama", .n_vocab = n, .texts = texts, .lens = lens, .types = types,
                                  .bos = 1, .eos = 2, .unk = 0, .pad = -1, .eot = -1, .eom = -1,
                                  .fim_pad = -1, .fim_rep = -1, .fim_sep = -1};
    if (lm_tokenizer_init_desc(&t, &d, "fuzz") != LM_OK) abort();
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct lm_tokenizer *t = vocab();
    const int32_t nv = lm_tokenizer_n_vocab(t);
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    struct lm_grammar_options o = lm_grammar_options_default();
    o.max_rules = 2000;
    struct lm_grammar *g;
    if (lm_grammar_compile(&g, t, (const char *)data, glen, &o) != LM_OK) {
        if (!strstr(lm_error_msg(), "gbnf")) __builtin_trap();
        return 0;
    }
    struct lm_grammar_matcher *m;
    if (lm_grammar_matcher_init(&m, g) == LM_OK) {
        uint32_t bits[(512 + 31) / 32];
        for (size_t i = glen + 1; i < size && i < glen + 1 + 64; i++) {
            lm_grammar_matcher_fill_mask(m, bits);
            for (int32_t id = 0; id < nv; id++) {
                bool ok = lm_grammar_matcher_accept(m, id);
                if (ok) lm_grammar_matcher_rollback(m, 1);
                if (ok != (bool)((bits[id >> 5] >> (id & 31)) & 1)) __builtin_trap();
            }
            int32_t next = data[i] < 200 ? 3 + data[i] : 3 + 256 + data[i] % (int)(sizeof words / sizeof *words);
            if (!lm_grammar_matcher_accept(m, next)) break;
            int32_t f[4];
            lm_grammar_matcher_forced(m, f, 4);
        }
        lm_grammar_matcher_free(m);
    }
    lm_grammar_free(g);
    return 0;
}
