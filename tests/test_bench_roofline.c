// The bench's model numbers (src/bench/roofline.h) on the default model, Gemma 3 270M Q4_K_M,
// against the figures `lumen bench` printed before they moved to src/bench: the description,
// size and parameters, the weight bytes a decode step reads per group (the tied embedding is
// the LM head, plus one row of it as the input), the layer and head parameters recomputed
// from the tensor table; and the bench's prompts (src/bench/prompt.h) on its tokenizer.
// LM_TEST_LABELS: model
#include "lm_test.h"

#include "bench/prompt.h"
#include "bench/roofline.h"
#include "lumen.h"

static bool name_is(const struct lm_tensor_info *t, const char *s) {
    return t->name_len == strlen(s) && !memcmp(t->name, s, t->name_len);
}

int main(void) {
    const char *path = lm_test_model_path();
    struct lm_model *m = NULL;
    enum lm_status st = lm_model_load(&m, path, NULL);
    if (st != LM_OK && getenv("LUMEN_ALLOW_SKIP") && strcmp(getenv("LUMEN_ALLOW_SKIP"), "1") == 0) {
        printf("SKIP: %s\n", lm_error_msg());
        return 0;
    }
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    if (st != LM_OK) return lm_test_finish();

    struct lm_bench_model_info mi;
    lm_bench_model_info(m, path, &mi);
    CHECKF(!strcmp(mi.desc, "gemma3 268M Q4_K - Medium"), "desc '%s'", mi.desc);
    CHECK(!strcmp(mi.arch, "gemma3") && mi.path == path && !strcmp(mi.head_dtype, "q8_0"));
    CHECK(mi.size_bytes == 246587904ull && mi.n_params == 268098176ull);
    CHECK(mi.n_layer == 18 && mi.n_vocab == 262144 && mi.n_ctx_train == 32768);
    CHECK(mi.load_ms == 0 && mi.ctx_init_ms == 0 && mi.kernels && mi.kernels[0]);
    // bytes per decoded token, by group (lumen bench -o json before the move)
    CHECK(mi.grp_bytes[LM_BENCH_GRP_QKV] == 12718080ull);
    CHECK(mi.grp_bytes[LM_BENCH_GRP_O] == 6635520ull);
    CHECK(mi.grp_bytes[LM_BENCH_GRP_GATE_UP] == 32440320ull);
    CHECK(mi.grp_bytes[LM_BENCH_GRP_DOWN] == 16312320ull);
    CHECK(mi.grp_bytes[LM_BENCH_GRP_HEAD] == 178257920ull);
    CHECK(mi.grp_bytes[LM_BENCH_GRP_OTHER] == 224424ull);
    uint64_t sum = 0;
    for (int g = 0; g < LM_BENCH_GRP_COUNT; g++) sum += mi.grp_bytes[g];
    CHECK(mi.bytes_per_token == sum && sum == 246588584ull);

    // the KV a decode step reads: f16 K and V of one head of 256 per layer; 15 of the 18
    // layers slide over 512 positions
    CHECK(mi.kv_cell_bytes == 1024 && mi.n_layer_swa == 15 && mi.n_swa == 512);
    CHECK(lm_bench_kv_bytes(&mi, 100) == 18ull * 100 * 1024);
    CHECK(lm_bench_kv_bytes(&mi, 4096) == (3ull * 4096 + 15ull * 512) * 1024);

    // from the tensor table: the tied head is token_embd, whose one row per token counts in
    // "other"; the layer parameters are the blk.* matrices
    struct lm_model_info info;
    lm_model_info(m, &info);
    uint64_t layer_params = 0, embd_bytes = 0, embd_row = 0, embd_params = 0, norms = 0;
    for (uint64_t i = 0; i < info.n_tensors; i++) {
        struct lm_tensor_info t;
        CHECK(lm_model_tensor(m, i, &t) == LM_OK);
        if (name_is(&t, "token_embd.weight")) {
            embd_bytes = t.n_bytes;
            embd_row = t.n_bytes / (uint64_t)t.ne[1];
            embd_params = t.n_elements;
        }
        if (t.n_dims >= 2 && t.name_len > 4 && !memcmp(t.name, "blk.", 4)) layer_params += t.n_elements;
        if (t.n_dims == 1) norms += t.n_bytes;
    }
    CHECK(mi.grp_bytes[LM_BENCH_GRP_HEAD] == embd_bytes && mi.head_params == embd_params);
    CHECK(mi.grp_bytes[LM_BENCH_GRP_OTHER] == norms + embd_row);
    CHECK(mi.layer_params == layer_params && layer_params > 0);

    // prompts: BOS then the fixed text's tokens, repeated to length
    int32_t *ids = lm_bench_tokens(m, 1000);
    CHECK(ids != NULL);
    const struct lm_tokenizer *tok = lm_model_tokenizer(m);
    if (ids) {
        CHECK(ids[0] == lm_tokenizer_bos(tok));
        int32_t *body = NULL;
        size_t n_body = 0;
        CHECK(lm_tokenize(tok, lm_bench_text, strlen(lm_bench_text), false, false, &body, &n_body) == LM_OK);
        CHECK(n_body > 100 && n_body < 999);
        bool same = true;
        for (int i = 1; i < 1000 && body; i++) same &= ids[i] == body[(size_t)(i - 1) % n_body];
        CHECK(same);
        free(body);
    }
    free(ids);
    char *text = NULL;
    size_t len = 0;
    CHECK(lm_bench_prompt_text(tok, 300, &text, &len) == LM_OK && text && strlen(text) == len);
    if (text) {
        int32_t *t_ids = NULL;
        size_t n = 0;
        CHECK(lm_tokenize(tok, text, len, true, false, &t_ids, &n) == LM_OK && n >= 300);
        free(t_ids);
    }
    free(text);
    lm_model_free(m);
    return lm_test_finish();
}
