// LM_TEST_LABELS: model
// Byte-level BPE on llama.cpp's larger test vocabularies (models/vocab/, written by
// tools/fetch_bpe_vocabs.py from llama-cpp-python's sdist): llama-bpe (Llama 3), qwen2,
// starcoder, falcon, mpt against llama.cpp golden ids (tools/gen_golden_bpe_tokens.py),
// their special tokens, end-of-generation set, chat templates, and encode throughput.
#include "format/gguf.h"
#include "tok_golden.h"

static struct lm_tokenizer *load_vocab(const char *name, struct lm_gguf *g) {
    char rel[256];
    snprintf(rel, sizeof rel, "models/vocab/ggml-vocab-%s.gguf", name);
    const char *path = lm_test_path(rel);
    struct lm_tokenizer *t = NULL;
    CHECKF(lm_gguf_open(g, path) == LM_OK, "%s", lm_error_msg());
    double t0 = tg_now_ms();
    enum lm_status st = lm_tokenizer_load(&t, g);
    CHECKF(st == LM_OK, "%s: %s", name, lm_error_msg());
    if (t) printf("%s: load %.1f ms (%d tokens, %d special)\n", name, tg_now_ms() - t0, t->n_vocab, t->n_special);
    return t;
}

static int32_t id_of(const struct lm_tokenizer *t, const char *s) { return lm_tokenizer_find(t, s, strlen(s)); }

static void test_llama3(const struct lm_tokenizer *t) {
    CHECK(t->kind == LM_TOK_KIND_BPE && t->add_bos && !t->add_eos);
    CHECK(lm_tokenizer_bos(t) == 128000 && lm_tokenizer_eos(t) == 128001);
    int32_t eot = id_of(t, "<|eot_id|>");
    CHECK(eot == 128009 && lm_tokenizer_is_eog(t, eot) && lm_tokenizer_is_eog(t, 128001));
    CHECK(!lm_tokenizer_is_eog(t, 128000) && !lm_tokenizer_is_eog(t, id_of(t, "<|start_header_id|>")));
    CHECK(lm_chat_template_detect(t, "llama", NULL) == LM_CHAT_TEMPLATE_LLAMA3);
    struct lm_chat_msg msgs[] = {{"system", " Be brief. "}, {"user", "Hi!"}};
    char *p;
    size_t n;
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_LLAMA3, msgs, 2, true, &p, &n) == LM_OK);
    int32_t *ids;
    size_t n_ids;
    CHECK(lm_tokenize(t, p, n, true, true, &ids, &n_ids) == LM_OK);
    // llama.cpp: <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>...
    const int32_t want[] = {128000, 128006, 9125, 128007, 271, 3513, 10015, 13, 128009, 128006, 882, 128007,
                            271, 13347, 0, 128009, 128006, 78191, 128007, 271};
    CHECKF(n_ids == sizeof want / sizeof want[0] && memcmp(ids, want, sizeof want) == 0, "llama3 chat prompt ids");
    if (n_ids != sizeof want / sizeof want[0] || memcmp(ids, want, sizeof want) != 0) tg_show_ids("lumen", ids, n_ids);
    free(ids);
    free(p);
}

static void test_qwen2(const struct lm_tokenizer *t, const struct lm_gguf *g) {
    CHECK(t->kind == LM_TOK_KIND_BPE && !t->add_bos && !t->add_eos && !t->clean_spaces);
    int32_t im_end = id_of(t, "<|im_end|>"), im_start = id_of(t, "<|im_start|>");
    CHECK(im_end == 151645 && im_start == 151644);
    CHECK(lm_tokenizer_is_eog(t, im_end) && lm_tokenizer_is_eog(t, 151643) && !lm_tokenizer_is_eog(t, im_start));
    struct lm_gguf_str tmpl;
    CHECK(lm_gguf_get_str(g, "tokenizer.chat_template", &tmpl, true) == LM_OK);
    char *text = malloc(tmpl.len + 1);
    memcpy(text, tmpl.data, tmpl.len);
    text[tmpl.len] = 0;
    CHECK(lm_chat_template_detect(t, "qwen2", text) == LM_CHAT_TEMPLATE_CHATML);
    CHECK(lm_chat_template_detect(t, "qwen2", NULL) == LM_CHAT_TEMPLATE_CHATML);
    free(text);
    struct lm_chat_msg msgs[] = {{"user", "Hello"}};
    char *p;
    size_t n;
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_CHATML, msgs, 1, true, &p, &n) == LM_OK);
    int32_t *ids;
    size_t n_ids;
    CHECK(lm_tokenize(t, p, n, true, true, &ids, &n_ids) == LM_OK);
    // <|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n (no BOS for qwen2)
    const int32_t want[] = {151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198};
    CHECKF(n_ids == sizeof want / sizeof want[0] && memcmp(ids, want, sizeof want) == 0, "chatml prompt ids");
    if (n_ids != sizeof want / sizeof want[0] || memcmp(ids, want, sizeof want) != 0) tg_show_ids("lumen", ids, n_ids);
    free(ids);
    free(p);
}

int main(void) {
    static const char *const names[] = {"llama-bpe", "qwen2", "starcoder", "falcon", "mpt"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "models/vocab/ggml-vocab-%s.gguf", names[i]);
        if (!tg_file_exists(lm_test_path(rel))) {
            if (getenv("LUMEN_ALLOW_SKIP")) {
                printf("SKIP: %s not found (python3 tools/fetch_bpe_vocabs.py)\n", rel);
                continue;
            }
            CHECKF(0, "%s not found: run python3 tools/fetch_bpe_vocabs.py", rel);
            continue;
        }
        struct lm_gguf g;
        struct lm_tokenizer *t = load_vocab(names[i], &g);
        if (!t) continue;
        snprintf(rel, sizeof rel, "tests/golden/tokens_%s.tsv", names[i]);
        tg_check_golden(t, rel, names[i]);
        if (i == 0) test_llama3(t);
        if (i == 1) test_qwen2(t, &g);
        if (i <= 1) tg_bench(t, names[i]);
        lm_gguf_close(&g);
        lm_tokenizer_free(t);
    }
    return lm_test_finish();
}
