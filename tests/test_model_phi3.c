// phi3 loading (model/phi3.c) on tiny files written here: the fused attn_qkv / ffn_up views
// give the same logits as separate q/k/v tensors of the same values, LongRoPE's long / short
// factors are chosen by n_ctx as llama.cpp's get_rope_factors does (n_ctx rounded up to 256
// against the original context), and malformed files get one clear error each.
// LM_TEST_LABELS: unit
#include "lm_test.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "format/gguf.h"
#include "model/model.h"
#include "runtime/context.h"
#include "tensor/dtype.h"

// ================================================================ a tiny GGUF writer

struct wb {
    uint8_t *p;
    size_t n, cap;
    uint64_t n_kv, n_tensors;
};

static void wb_raw(struct wb *w, const void *d, size_t n) {
    if (w->n + n > w->cap) {
        size_t nc = w->cap ? w->cap : 4096;
        while (nc < w->n + n) nc *= 2;
        if (!(w->p = realloc(w->p, nc))) abort();
        w->cap = nc;
    }
    memcpy(w->p + w->n, d, n);
    w->n += n;
}
static void wb_u32(struct wb *w, uint32_t v) { wb_raw(w, &v, 4); }
static void wb_u64(struct wb *w, uint64_t v) { wb_raw(w, &v, 8); }
static void wb_str(struct wb *w, const char *s) {
    wb_u64(w, strlen(s));
    wb_raw(w, s, strlen(s));
}
static void wb_key(struct wb *w, const char *k, uint32_t type) {
    wb_str(w, k);
    wb_u32(w, type);
    w->n_kv++;
}
static void kv_u32(struct wb *w, const char *k, uint32_t v) { wb_key(w, k, LM_GGUF_TYPE_UINT32); wb_u32(w, v); }
static void kv_f32(struct wb *w, const char *k, float v) { wb_key(w, k, LM_GGUF_TYPE_FLOAT32); wb_raw(w, &v, 4); }
static void kv_str(struct wb *w, const char *k, const char *v) { wb_key(w, k, LM_GGUF_TYPE_STRING); wb_str(w, v); }

// The tensors: name, shape (ne0 = n_in, ne1 = rows), F32 values (written F16 for matrices).
#define MAX_T 24
struct tensor {
    char name[64];
    int64_t ne0, ne1; // ne1 == 0: a vector
    float *v;
};
struct file {
    struct tensor t[MAX_T];
    int n;
};

static float *tensor_add(struct file *f, const char *name, int64_t ne0, int64_t ne1) {
    struct tensor *t = &f->t[f->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ne0 = ne0;
    t->ne1 = ne1;
    const int64_t n = ne0 * (ne1 ? ne1 : 1);
    t->v = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) // deterministic, small, not symmetric
        t->v[i] = ne1 ? (float)((int64_t)((lm_test_rng_u64() >> 40) % 2001) - 1000) * 1e-3f
                      : 1.0f + (float)((int64_t)((lm_test_rng_u64() >> 40) % 201) - 100) * 1e-3f;
    return t->v;
}

// ================================================================ the tiny phi3 model

enum { E = 64, NH = 4, NKV = 2, HD = 16, FF = 32, NV = 16 };

struct variant {
    bool separate_qkv;    // attn_q/k/v instead of attn_qkv (same values)
    bool qkv_bias;        // attn_qkv.bias
    int64_t up_rows;      // ffn_up rows (2 * FF)
    int64_t qkv_rows;     // attn_qkv rows ((NH + 2 NKV) * HD)
    int n_rot;            // rope.dimension_count
    int64_t factors_len;  // rope_factors_*.weight length (n_rot / 2); 0: none
    const char *scaling;  // rope.scaling.type or NULL
    bool router;          // blk.0.ffn_gate_inp.weight
    uint32_t orig_ctx;    // rope.scaling.original_context_length (0: absent)
};

static struct variant good(void) {
    return (struct variant){.up_rows = 2 * FF, .qkv_rows = (NH + 2 * NKV) * HD, .n_rot = 12,
                            .factors_len = 6, .orig_ctx = 256};
}

// Writes the model to path; the same seed gives the same values whatever the variant.
static void write_phi3(const char *path, const struct variant *v) {
    lm_test_rng_state = 0x9e3779b97f4a7c15ull;
    struct file f = {.n = 0};
    tensor_add(&f, "token_embd.weight", E, NV);
    tensor_add(&f, "output_norm.weight", E, 0);
    tensor_add(&f, "output.weight", E, NV);
    if (v->factors_len) {
        float *l = tensor_add(&f, "rope_factors_long.weight", v->factors_len, 0);
        float *s = tensor_add(&f, "rope_factors_short.weight", v->factors_len, 0);
        for (int64_t i = 0; i < v->factors_len; i++) l[i] = 1.0f + 8.0f * (float)i, s[i] = 1.0f + 0.1f * (float)i;
    }
    tensor_add(&f, "blk.0.attn_norm.weight", E, 0);
    float *qkv = tensor_add(&f, "blk.0.attn_qkv.weight", E, v->qkv_rows);
    if (v->separate_qkv) { // the same rows split into three tensors
        struct tensor fused = f.t[--f.n];
        const int64_t r[3] = {NH * HD, NKV * HD, NKV * HD};
        const char *nm[3] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"};
        int64_t r0 = 0;
        const uint64_t rng = lm_test_rng_state; // the copies draw nothing
        for (int j = 0; j < 3; j++) {
            float *d = tensor_add(&f, nm[j], E, r[j]);
            memcpy(d, qkv + r0 * E, (size_t)(r[j] * E) * sizeof(float));
            r0 += r[j];
        }
        free(fused.v);
        lm_test_rng_state = rng;
    }
    if (v->qkv_bias) tensor_add(&f, "blk.0.attn_qkv.bias", v->qkv_rows, 0);
    tensor_add(&f, "blk.0.attn_output.weight", NH * HD, E);
    tensor_add(&f, "blk.0.ffn_norm.weight", E, 0);
    tensor_add(&f, "blk.0.ffn_up.weight", E, v->up_rows);
    tensor_add(&f, "blk.0.ffn_down.weight", FF, E);
    if (v->router) tensor_add(&f, "blk.0.ffn_gate_inp.weight", E, 4);

    struct wb w = {0};
    wb_raw(&w, "GGUF", 4);
    wb_u32(&w, 3);
    wb_u64(&w, 0);
    wb_u64(&w, 0);
    kv_str(&w, "general.architecture", "phi3");
    kv_u32(&w, "phi3.context_length", 4096);
    kv_u32(&w, "phi3.embedding_length", E);
    kv_u32(&w, "phi3.block_count", 1);
    kv_u32(&w, "phi3.feed_forward_length", FF);
    kv_u32(&w, "phi3.attention.head_count", NH);
    kv_u32(&w, "phi3.attention.head_count_kv", NKV);
    kv_u32(&w, "phi3.rope.dimension_count", (uint32_t)v->n_rot);
    kv_f32(&w, "phi3.attention.layer_norm_rms_epsilon", 1e-5f);
    kv_u32(&w, "phi3.attention.sliding_window", 262144);
    kv_f32(&w, "phi3.rope.scaling.attn_factor", 1.19f);
    if (v->orig_ctx) kv_u32(&w, "phi3.rope.scaling.original_context_length", v->orig_ctx);
    if (v->scaling) kv_str(&w, "phi3.rope.scaling.type", v->scaling);
    kv_str(&w, "tokenizer.ggml.model", "llama");
    wb_key(&w, "tokenizer.ggml.tokens", LM_GGUF_TYPE_ARRAY);
    wb_u32(&w, LM_GGUF_TYPE_STRING);
    wb_u64(&w, NV);
    for (int i = 0; i < NV; i++) {
        char s[16];
        snprintf(s, sizeof s, i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : "t%d", i);
        wb_str(&w, s);
    }
    uint64_t off = 0;
    for (int i = 0; i < f.n; i++) {
        const struct tensor *t = &f.t[i];
        wb_str(&w, t->name);
        wb_u32(&w, t->ne1 ? 2 : 1);
        wb_u64(&w, (uint64_t)t->ne0);
        if (t->ne1) wb_u64(&w, (uint64_t)t->ne1);
        wb_u32(&w, t->ne1 ? LM_DTYPE_F16 : LM_DTYPE_F32);
        wb_u64(&w, off);
        const uint64_t n = (uint64_t)t->ne0 * (uint64_t)(t->ne1 ? t->ne1 : 1);
        off += (n * (t->ne1 ? 2 : 4) + 31) / 32 * 32;
    }
    memcpy(w.p + 8, &(uint64_t){(uint64_t)f.n}, 8);
    memcpy(w.p + 16, &w.n_kv, 8);
    while (w.n % 32) wb_raw(&w, "", 1);
    for (int i = 0; i < f.n; i++) {
        const struct tensor *t = &f.t[i];
        const int64_t n = t->ne0 * (t->ne1 ? t->ne1 : 1);
        for (int64_t j = 0; j < n; j++) {
            if (t->ne1) wb_raw(&w, &(lm_f16){lm_f32_to_f16(t->v[j])}, 2);
            else wb_raw(&w, &t->v[j], 4);
        }
        while (w.n % 32) wb_raw(&w, "", 1);
        free(t->v);
    }
    FILE *fp = fopen(path, "wb");
    CHECKF(fp && fwrite(w.p, 1, w.n, fp) == w.n, "cannot write %s", path);
    if (fp) fclose(fp);
    free(w.p);
}

static char g_path[256];

// Loads variant v; returns the model or NULL (the status in *st).
static struct lm_model *load(const struct variant *v, enum lm_status *st) {
    write_phi3(g_path, v);
    struct lm_model *m = NULL;
    *st = lm_model_load(&m, g_path, NULL);
    return m;
}

// ================================================================ tests

// The logits of tokens 3, 7, 5, 9 (positions 0-3) in one batch, into out (4 * NV).
static void run_logits(struct lm_model *m, int32_t n_ctx, float *out) {
    struct lm_context *c = NULL;
    struct lm_context_params cp = {.n_ctx = n_ctx, .n_seq_max = 1, .n_batch = 8, .n_threads = 2};
    enum lm_status st = lm_context_init(&c, m, &cp);
    CHECKF(st == LM_OK, "lm_context_init: %s", lm_error_msg());
    if (st != LM_OK) return;
    const int32_t toks[4] = {3, 7, 5, 9};
    struct lm_batch_entry e[4];
    for (int i = 0; i < 4; i++) e[i] = (struct lm_batch_entry){.token = toks[i], .pos = i, .seq = 0, .want_logits = true};
    st = lm_decode(c, e, 4);
    CHECKF(st == LM_OK, "lm_decode: %s", lm_error_msg());
    for (int i = 0; st == LM_OK && i < 4; i++) memcpy(out + i * NV, lm_get_logits(c, i), NV * sizeof(float));
    lm_context_free(c);
}

// Batch invariance: token by token, and beside another sequence's tokens in the same steps,
// position i's logits are run_logits' bits.
static void test_batch_invariance(struct lm_model *m, const float *one_batch) {
    struct lm_context *c = NULL;
    struct lm_context_params cp = {.n_ctx = 64, .n_seq_max = 2, .n_batch = 8, .n_threads = 2};
    enum lm_status st = lm_context_init(&c, m, &cp);
    CHECKF(st == LM_OK, "lm_context_init: %s", lm_error_msg());
    if (st != LM_OK) return;
    const int32_t toks[4] = {3, 7, 5, 9};
    for (int i = 0, p1 = 0; i < 4; i++) { // sequence 1 joins every other step
        struct lm_batch_entry e[2] = {{.token = toks[i], .pos = i, .seq = 0, .want_logits = true},
                                      {.token = toks[3 - i], .pos = p1, .seq = 1, .want_logits = true}};
        p1 += i % 2;
        CHECKF(lm_decode(c, e, i % 2 ? 2 : 1) == LM_OK, "lm_decode: %s", lm_error_msg());
        const float *l = lm_get_logits(c, 0);
        CHECKF(l && memcmp(l, one_batch + i * NV, NV * sizeof(float)) == 0,
               "position %d: token by token differs from one batch", i);
    }
    lm_context_free(c);
}

static void test_fused_views(void) {
    enum lm_status st;
    struct variant v = good();
    struct lm_model *m = load(&v, &st);
    CHECKF(st == LM_OK, "load: %s", lm_error_msg());
    if (!m) return;
    const struct lm_layer *L = &m->layers[0];
    CHECK(L->wq.n_out == NH * HD && L->wk.n_out == NKV * HD && L->wv.n_out == NKV * HD);
    CHECK((const char *)L->wk.data == (const char *)L->wq.data + NH * HD * L->wq.row_bytes);
    CHECK((const char *)L->wv.data == (const char *)L->wk.data + NKV * HD * L->wk.row_bytes);
    CHECK(L->gate.n_out == FF && L->up.n_out == FF && L->gate.n_in == E);
    CHECK((const char *)L->up.data == (const char *)L->gate.data + FF * L->gate.row_bytes);
    CHECK(m->hp.n_rot == 12 && m->hp.head_dim_k == HD && m->hp.n_swa == 0);
    CHECK(fabsf(m->hp.rope_mscale - 1.19f) == 0.0f && m->n_ctx_orig == 256);
    CHECK(m->rope_long && m->rope_short && !m->rope_freqs);
    struct lm_model_hparams hi;
    lm_model_hparams(m, &hi);
    CHECK(hi.rope_longrope && hi.rope_orig_ctx == 256 && hi.rope_attn_factor == 1.19f &&
          hi.rope_neox && hi.n_rot == 12 && !hi.rope_llama3);
    float fused[4 * NV], sep[4 * NV];
    memset(fused, 0, sizeof fused);
    memset(sep, 1, sizeof sep);
    run_logits(m, 64, fused);
    test_batch_invariance(m, fused);
    lm_model_free(m);
    v.separate_qkv = true;
    m = load(&v, &st);
    CHECKF(st == LM_OK, "load (separate q/k/v): %s", lm_error_msg());
    if (!m) return;
    run_logits(m, 64, sep);
    lm_model_free(m);
    CHECKF(memcmp(fused, sep, sizeof fused) == 0, "fused attn_qkv and separate q/k/v differ");
    float sum = 0;
    for (int i = 0; i < 4 * NV; i++) sum += fabsf(fused[i]);
    CHECK(sum > 0 && isfinite(sum));
    // a fused bias loads as three views
    v = good();
    v.qkv_bias = true;
    m = load(&v, &st);
    CHECKF(st == LM_OK, "load (qkv bias): %s", lm_error_msg());
    if (m) {
        CHECK(m->layers[0].bk.data == (const float *)m->layers[0].bq.data + NH * HD);
        CHECK(m->layers[0].bv.n_in == NKV * HD);
        lm_model_free(m);
    }
}

// llama.cpp: n_ctx_seq = GGML_PAD(n_ctx, 256) (one sequence); long iff n_ctx_seq > orig.
static void test_rope_factors_choice(void) {
    enum lm_status st;
    struct variant v = good();
    v.orig_ctx = 4000; // not a multiple of 256: 3841..4096 all round to 4096 > 4000
    struct lm_model *m = load(&v, &st);
    CHECKF(st == LM_OK, "load: %s", lm_error_msg());
    if (!m) return;
    CHECK(lm_model_rope_factors(m, 1) == m->rope_short);
    CHECK(lm_model_rope_factors(m, 3840) == m->rope_short);
    CHECK(lm_model_rope_factors(m, 3841) == m->rope_long);
    m->n_ctx_orig = 4096;
    CHECK(lm_model_rope_factors(m, 4096) == m->rope_short);
    CHECK(lm_model_rope_factors(m, 4097) == m->rope_long);
    m->n_ctx_orig = 256;
    // a context picks them at init; the logits differ between the two choices
    struct lm_context *c = NULL;
    struct lm_context_params cp = {.n_ctx = 256, .n_seq_max = 1, .n_batch = 8, .n_threads = 1};
    CHECK(lm_context_init(&c, m, &cp) == LM_OK && c->rope_freqs == m->rope_short &&
          c->rope_mscale == m->hp.rope_mscale);
    lm_context_free(c);
    cp.n_ctx = 257;
    CHECK(lm_context_init(&c, m, &cp) == LM_OK && c->rope_freqs == m->rope_long);
    lm_context_free(c);
    float a[4 * NV], b[4 * NV];
    run_logits(m, 256, a);
    run_logits(m, 300, b);
    CHECK(memcmp(a, b, sizeof a) != 0);
    lm_model_free(m);
}

static void expect_fail(const struct variant *v, enum lm_status want, const char *needle) {
    enum lm_status st;
    struct lm_model *m = load(v, &st);
    CHECKF(st == want && !m, "status %s, want %s: %s", lm_status_name(st), lm_status_name(want),
           lm_error_msg());
    CHECKF(strstr(lm_error_msg(), needle) != NULL, "message lacks '%s': %s", needle, lm_error_msg());
    CHECKF(strstr(lm_error_msg(), g_path) != NULL, "message lacks the path: %s", lm_error_msg());
    if (m) lm_model_free(m);
}

static void test_malformed(void) {
    struct variant v = good();
    v.up_rows = FF; // an unfused ffn_up
    expect_fail(&v, LM_ERR_FORMAT, "blk.0.ffn_up.weight' has shape [64, 32], expected [64, 64]");
    v = good();
    v.qkv_rows -= HD;
    expect_fail(&v, LM_ERR_FORMAT, "blk.0.attn_qkv.weight' has shape [64, 112], expected [64, 128]");
    v = good();
    v.factors_len = 5;
    expect_fail(&v, LM_ERR_FORMAT, "rope_factors_long.weight' has shape [5], expected [6]");
    v = good();
    v.n_rot = 18;
    v.factors_len = 9;
    expect_fail(&v, LM_ERR_FORMAT, "rope.dimension_count 18");
    v.n_rot = 7;
    v.factors_len = 3;
    expect_fail(&v, LM_ERR_FORMAT, "rope.dimension_count 7");
    v = good();
    v.scaling = "yarn";
    expect_fail(&v, LM_ERR_UNSUPPORTED, "rope scaling type 'yarn'");
    v = good();
    v.router = true;
    expect_fail(&v, LM_ERR_UNSUPPORTED, "blk.0.ffn_gate_inp.weight");
    // no factor tensors, no original length: loads, no factors whatever the context
    v = good();
    v.factors_len = 0;
    v.orig_ctx = 0;
    enum lm_status st;
    struct lm_model *m = load(&v, &st);
    CHECKF(st == LM_OK, "load: %s", lm_error_msg());
    if (m) {
        CHECK(m->n_ctx_orig == 4096 && !lm_model_rope_factors(m, 4097) && !lm_model_rope_factors(m, 8));
        lm_model_free(m);
    }
}

int main(void) {
    snprintf(g_path, sizeof g_path, "/tmp/lumen-test-phi3-%d.gguf", (int)getpid());
    test_fused_views();
    test_rope_factors_choice();
    test_malformed();
    unlink(g_path);
    return lm_test_finish();
}
