// LM_TEST_LABELS: model
// Token masks at real vocabularies (Gemma 3's 262,144 tokens, Qwen2's BPE): along documents of
// several grammars every token's mask bit equals what accepting it says (brute force), an
// emoji split into byte-fallback tokens included.
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "format/gguf.h"
#include "grammar/grammar.h"
#include "lm_test.h"
#include "lm_test_file.h"
#include "tokenizer/tokenizer.h"

static bool bit(const uint32_t *b, int32_t id) { return (b[id >> 5] >> (id & 31)) & 1; }

static void brute(struct lm_grammar_matcher *m, int32_t nv, uint32_t *bits, const char *where) {
    lm_grammar_matcher_fill_mask(m, bits);
    int bad = 0, allowed = 0;
    for (int32_t id = 0; id < nv; id++) {
        bool ok = lm_grammar_matcher_accept(m, id);
        if (ok) lm_grammar_matcher_rollback(m, 1), allowed++;
        if (ok != bit(bits, id) && bad++ < 3) fprintf(stderr, "%s: token %d mask %d accept %d\n", where, id, bit(bits, id), ok);
    }
    CHECKF(bad == 0, "%s: %d of %d tokens differ (%d allowed)", where, bad, nv, allowed);
}

int main(void) {
    struct lm_gguf gg;
    struct lm_tokenizer *t = NULL;
    if (lm_gguf_open(&gg, lm_test_path("models/gemma-3-270m-q4_k_m.gguf")) != LM_OK || lm_tokenizer_load(&t, &gg) != LM_OK) {
        fprintf(stderr, "skipped: %s\n", lm_error_msg());
        CHECK(0);
        return lm_test_finish();
    }
    const int32_t nv = t->n_vocab;
    uint32_t *bits = malloc(((size_t)nv + 31) / 32 * 4);
    size_t jl;
    char *json = lm_test_read_file(lm_test_path("tests/data/gbnf/json.gbnf"), &jl);
    struct lm_grammar *g = NULL;
    CHECKF(json && lm_grammar_compile(&g, t, json, jl, NULL) == LM_OK, "%s", lm_error_msg());
    if (g) {
        const char *doc = "{\"name\": \"Zoë \\\"Z\\\"\", \"n\": [12.5, -3], \"ok\": true}";
        int32_t *ids;
        size_t n;
        CHECK(lm_tokenize(t, doc, strlen(doc), false, false, &ids, &n) == LM_OK);
        struct lm_grammar_matcher *m;
        CHECK(lm_grammar_matcher_init(&m, g) == LM_OK);
        for (size_t i = 0; i < n; i++) {
            char where[64];
            snprintf(where, sizeof where, "json.gbnf after %zu tokens", i);
            if (i % 3 == 0 || i + 1 == n) brute(m, nv, bits, where);
            else lm_grammar_matcher_fill_mask(m, bits);
            CHECKF(bit(bits, ids[i]), "token %zu (%d) of the document not allowed", i, ids[i]);
            CHECK(lm_grammar_matcher_accept(m, ids[i]));
        }
        lm_grammar_matcher_fill_mask(m, bits);
        CHECK(lm_grammar_matcher_can_end(m) && bit(bits, lm_tokenizer_eos(t)));
        for (int32_t id = 0; id < nv; id++) // control tokens other than end of generation never
            if ((t->attr[id] & LM_TOK_ATTR_CONTROL) && !lm_tokenizer_is_eog(t, id) && bit(bits, id)) { CHECKF(0, "control %d allowed", id); break; }
        brute(m, nv, bits, "json.gbnf at the end");
        lm_grammar_matcher_free(m);
        free(ids);
        // an emoji as byte-fallback tokens inside a string
        CHECK(lm_grammar_matcher_init(&m, g) == LM_OK);
        int32_t *pre;
        CHECK(lm_tokenize(t, "{\"e\": \"", 7, false, false, &pre, &n) == LM_OK);
        for (size_t i = 0; i < n; i++) CHECK(lm_grammar_matcher_accept(m, pre[i]));
        free(pre);
        const uint8_t emoji[4] = {0xF0, 0x9F, 0xA6, 0x84};
        for (int i = 0; i < 4; i++) {
            int32_t bt = t->byte_tok[emoji[i]];
            CHECK(bt >= 0);
            if (bt < 0) break;
            if (i == 1 || i == 3) brute(m, nv, bits, "inside a split emoji");
            else lm_grammar_matcher_fill_mask(m, bits);
            CHECK(bit(bits, bt) && lm_grammar_matcher_accept(m, bt));
        }
        lm_grammar_matcher_fill_mask(m, bits);
        CHECK(bit(bits, t->byte_tok['"']) && !bit(bits, t->byte_tok[0x80]));
        lm_grammar_matcher_free(m);
    }
    size_t ll;
    char *list = lm_test_read_file(lm_test_path("tests/data/gbnf/list.gbnf"), &ll);
    struct lm_grammar *gl = NULL;
    CHECKF(list && lm_grammar_compile(&gl, t, list, ll, NULL) == LM_OK, "%s", lm_error_msg());
    if (gl) {
        struct lm_grammar_matcher *m;
        CHECK(lm_grammar_matcher_init(&m, gl) == LM_OK);
        int32_t *ids;
        size_t n;
        const char *text = "- milk\n- eggs\n";
        CHECK(lm_tokenize(t, text, strlen(text), false, false, &ids, &n) == LM_OK);
        for (size_t i = 0; i < n; i++) {
            if (i == 1) brute(m, nv, bits, "list.gbnf");
            CHECK(lm_grammar_matcher_accept(m, ids[i]));
        }
        brute(m, nv, bits, "list.gbnf at a line end");
        free(ids);
        lm_grammar_matcher_free(m);
    }
    // a schema-style grammar: fixed keys, nested object, arrays of strings
    size_t pl;
    char *person = lm_test_read_file(lm_test_path("tests/data/gbnf/person_schema.gbnf"), &pl);
    struct lm_grammar *gp = NULL;
    CHECKF(person && lm_grammar_compile(&gp, t, person, pl, NULL) == LM_OK, "%s", lm_error_msg());
    if (gp) {
        const char *doc = "{\"name\": \"José\", \"age\": 41, \"tags\": [\"a\", \"b c\"], \"address\": {\"street\": \"Main 5\", \"city\": \"Cork\"}}";
        int32_t *ids;
        size_t n;
        CHECK(lm_tokenize(t, doc, strlen(doc), false, false, &ids, &n) == LM_OK);
        struct lm_grammar_matcher *m;
        CHECK(lm_grammar_matcher_init(&m, gp) == LM_OK);
        for (size_t i = 0; i < n; i++) {
            char where[64];
            snprintf(where, sizeof where, "person_schema.gbnf after %zu tokens", i);
            if (i % 4 == 1) brute(m, nv, bits, where);
            CHECK(lm_grammar_matcher_accept(m, ids[i]));
        }
        CHECK(lm_grammar_matcher_is_done(m) == false && lm_grammar_matcher_can_end(m));
        free(ids);
        lm_grammar_matcher_free(m);
    }
    // a byte-level BPE vocabulary (Qwen2, 151,936 tokens): pieces decoded from their byte alphabet
    struct lm_gguf gq;
    struct lm_tokenizer *tq = NULL;
    if (json && lm_gguf_open(&gq, lm_test_path("models/vocab/ggml-vocab-qwen2.gguf")) == LM_OK) {
        CHECKF(lm_tokenizer_load(&tq, &gq) == LM_OK, "%s", lm_error_msg());
        struct lm_grammar *g2 = NULL;
        if (tq) CHECKF(lm_grammar_compile(&g2, tq, json, jl, NULL) == LM_OK, "%s", lm_error_msg());
        if (g2) {
            const int32_t nq = tq->n_vocab;
            uint32_t *bq = malloc(((size_t)nq + 31) / 32 * 4);
            const char *doc = "{\"k\": [\"naïve café\", 3.25, {\"x\": null}], \"s\": \"\\u00e9 \\n\"}";
            int32_t *ids;
            size_t n;
            CHECK(lm_tokenize(tq, doc, strlen(doc), false, false, &ids, &n) == LM_OK);
            struct lm_grammar_matcher *m;
            CHECK(lm_grammar_matcher_init(&m, g2) == LM_OK);
            for (size_t i = 0; i < n; i++) {
                if (i % 5 == 2) brute(m, nq, bq, "json.gbnf, Qwen2 vocabulary");
                CHECK(lm_grammar_matcher_accept(m, ids[i]));
            }
            brute(m, nq, bq, "json.gbnf, Qwen2 vocabulary, at the end");
            CHECK(lm_grammar_matcher_can_end(m));
            lm_grammar_matcher_free(m);
            free(ids), free(bq);
            lm_grammar_free(g2);
        }
        lm_tokenizer_free(tq);
        lm_gguf_close(&gq);
    }
    lm_grammar_free(g), lm_grammar_free(gl), lm_grammar_free(gp);
    free(json), free(list), free(bits), free(person);
    lm_tokenizer_free(t);
    lm_gguf_close(&gg);
    return lm_test_finish();
}
