// The model introspection of the public API (include/lumen.h: lm_model_info, lm_model_hparams,
// lm_model_layer_info, lm_model_tensor, lm_tensor_type_name, lm_tokenizer_kind) on the default
// model, Gemma 3 270M Q4_K_M: what `lumen info` prints, and the range checks.
// LM_TEST_LABELS: model
#include "lm_test.h"

#include "lumen.h"

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

    struct lm_model_info info;
    lm_model_info(m, &info);
    CHECK(info.name_len == 12 && !memcmp(info.name, "Gemma 3 270m", 12));
    CHECK(!strcmp(info.arch, "gemma3") && info.gguf_version == 3);
    CHECK(info.n_tensors == 236 && info.n_metadata == 33 && info.alignment == 32);
    CHECK(info.file_type == 15); // llama.cpp's Q4_K_M
    CHECK(info.file_bytes > 246587904ull && info.load_ns > 0);
    CHECK(info.kernels && info.kernels[0] && info.kernels_reason && info.kernels_reason[0]);

    struct lm_model_hparams hp;
    lm_model_hparams(m, &hp);
    CHECK(hp.n_vocab == 262144 && hp.n_embd == 640 && hp.n_layer == 18 && hp.n_ff == 2048);
    CHECK(hp.n_head == 4 && hp.n_head_kv == 1 && hp.head_dim_k == 256 && hp.head_dim_v == 256);
    CHECK(hp.n_ctx_train == 32768 && hp.rms_eps > 0 && hp.rms_eps < 1e-5f);
    CHECK(hp.rope_neox && hp.n_rot == 256 && hp.rope_base == 1e6f && hp.rope_base_swa == 1e4f);
    CHECK(hp.rope_scale == 1.0f && !hp.rope_llama3);
    CHECK(hp.n_swa == 512 && hp.swa_period == 6 && hp.final_softcap == 0);
    CHECK(hp.tied_output && !hp.output_bias);

    // every 6th layer global; q/k norms and post norms everywhere, no biases
    int n_global = 0, n_qk = 0, n_post = 0, n_bias = 0;
    for (int l = 0; l < hp.n_layer; l++) {
        struct lm_model_layer_info li;
        CHECK(lm_model_layer_info(m, l, &li) == LM_OK);
        n_global += !li.sliding;
        CHECK(li.sliding == (l % 6 != 5));
        n_qk += li.qk_norm;
        n_post += li.post_norms;
        n_bias += li.qkv_bias;
    }
    CHECK(n_global == 3 && n_qk == 18 && n_post == 18 && n_bias == 0);
    struct lm_model_layer_info li = {.sliding = true};
    CHECK(lm_model_layer_info(m, 18, &li) == LM_ERR_ARG && strstr(lm_error_msg(), "layer 18"));
    CHECK(lm_model_layer_info(m, -1, &li) == LM_ERR_ARG && li.sliding); // unchanged

    // the tensor table: totals as `lumen info` prints them
    uint64_t bytes = 0, params = 0, by_type[LM_TENSOR_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < info.n_tensors; i++) {
        struct lm_tensor_info t;
        CHECK(lm_model_tensor(m, i, &t) == LM_OK);
        CHECK(t.type >= 0 && t.type < LM_TENSOR_TYPE_COUNT && t.n_dims >= 1 && t.n_dims <= 4);
        uint64_t ne = 1;
        for (int d = 0; d < 4; d++) ne *= (uint64_t)t.ne[d];
        CHECK(ne == t.n_elements);
        bytes += t.n_bytes;
        params += t.n_elements;
        by_type[t.type] += t.n_bytes;
    }
    CHECK(bytes == 246587904ull && params == 268098176ull);
    CHECK(by_type[8] == 179824640ull && !strcmp(lm_tensor_type_name(8), "q8_0"));
    CHECK(by_type[12] == 13271040ull && !strcmp(lm_tensor_type_name(12), "q4_K"));
    CHECK(!strcmp(lm_tensor_type_name(-1), "?") && !strcmp(lm_tensor_type_name(LM_TENSOR_TYPE_COUNT), "?"));
    struct lm_tensor_info t0;
    CHECK(lm_model_tensor(m, 0, &t0) == LM_OK);
    struct lm_tensor_info t = t0;
    CHECK(lm_model_tensor(m, info.n_tensors, &t) == LM_ERR_ARG && t.name == t0.name);

    CHECK(lm_tokenizer_kind(lm_model_tokenizer(m)) == LM_TOKENIZER_SPM);
    lm_model_free(m);
    return lm_test_finish();
}
