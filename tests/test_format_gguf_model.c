// GGUF reader on the real default model (Gemma 3 270M Q4_K_M): header counts,
// a few keys, the 262144-token vocabulary and the shapes/dtypes of known tensors.
// LM_TEST_LABELS: model
#include "lm_test.h"

#include "format/gguf.h"

int main(void) {
    const char *path = lm_test_model_path();
    struct lm_gguf g;
    enum lm_status st = lm_gguf_open(&g, path);
    if (st != LM_OK && getenv("LUMEN_ALLOW_SKIP") && strcmp(getenv("LUMEN_ALLOW_SKIP"), "1") == 0) {
        printf("SKIP: %s\n", lm_error_msg());
        return 0;
    }
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    if (st != LM_OK) return lm_test_finish();

    CHECK(g.version == 3);
    CHECK(g.n_tensors == 236);
    CHECK(g.n_kv == 33);
    CHECK(g.mapped && g.alignment == 32 && g.data_offset % 32 == 0);

    struct lm_gguf_str arch = {0, NULL};
    CHECK(lm_gguf_get_str(&g, "general.architecture", &arch, true) == LM_OK);
    CHECK(lm_gguf_str_eq(arch, "gemma3"));
    uint32_t n_embd = 0, n_layer = 0;
    CHECK(lm_gguf_get_u32(&g, "gemma3.embedding_length", &n_embd, true) == LM_OK && n_embd == 640);
    CHECK(lm_gguf_get_u32(&g, "gemma3.block_count", &n_layer, true) == LM_OK && n_layer == 18);
    float eps = 0;
    CHECK(lm_gguf_get_f32(&g, "gemma3.attention.layer_norm_rms_epsilon", &eps, true) == LM_OK &&
          eps > 0 && eps < 1e-3f);

    uint64_t n = 0;
    const void *d = NULL;
    CHECK(lm_gguf_get_arr(&g, "tokenizer.ggml.tokens", LM_GGUF_TYPE_STRING, &n, &d, true) == LM_OK);
    CHECK(n == 262144 && d != NULL);
    CHECK(lm_gguf_get_arr(&g, "tokenizer.ggml.scores", LM_GGUF_TYPE_FLOAT32, &n, &d, true) == LM_OK &&
          n == 262144);

    const struct lm_gguf_tensor *t = NULL;
    CHECKF(lm_gguf_expect_tensor(&g, "token_embd.weight", 2, (int64_t[]){640, 262144}, &t) == LM_OK,
           "%s", lm_error_msg());
    CHECK(t && t->type == LM_DTYPE_Q8_0);
    t = NULL;
    CHECKF(lm_gguf_expect_tensor(&g, "blk.0.ffn_down.weight", 2, (int64_t[]){2048, 640}, &t) == LM_OK,
           "%s", lm_error_msg());
    CHECK(t && t->type == LM_DTYPE_Q6_K);
    CHECK(t && t->nbytes == (uint64_t)2048 / 256 * 210 * 640);

    // every tensor lies inside the file and is found through the index
    int ok = 0;
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const struct lm_gguf_tensor *ti = &g.tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.data);
        ok += lm_gguf_find_tensor(&g, name) == ti &&
              (const uint8_t *)ti->data + ti->nbytes <= g.base + g.size;
    }
    CHECK(ok == 236);

    lm_gguf_close(&g);
    return lm_test_finish();
}
