// GGUF reader unit tests: small files built in memory by a tiny writer, one valid,
// then one test per malformation (truncation at every byte, bad counts, types, dims...).
// LM_TEST_LABELS: unit
#include "lm_test.h"

#include <stdint.h>
#include <unistd.h>

#include "format/gguf.h"

// ============================================================================
// Tiny GGUF writer
// ============================================================================

struct wb {
    uint8_t *p;
    size_t n, cap;
    uint64_t n_kv, n_tensors;
};

static void wb_raw(struct wb *w, const void *d, size_t n) {
    if (w->n + n > w->cap) {
        size_t nc = w->cap ? w->cap : 256;
        while (nc < w->n + n) nc *= 2;
        w->p = realloc(w->p, nc);
        if (!w->p) abort();
        w->cap = nc;
    }
    if (n) memcpy(w->p + w->n, d, n);
    w->n += n;
}
static void wb_u8(struct wb *w, uint8_t v) { wb_raw(w, &v, 1); }
static void wb_u32(struct wb *w, uint32_t v) { wb_raw(w, &v, 4); }
static void wb_u64(struct wb *w, uint64_t v) { wb_raw(w, &v, 8); }
static void wb_str(struct wb *w, const char *s) {
    wb_u64(w, strlen(s));
    wb_raw(w, s, strlen(s));
}
static void wb_begin(struct wb *w, uint32_t version) {
    memset(w, 0, sizeof *w);
    wb_raw(w, "GGUF", 4);
    wb_u32(w, version);
    wb_u64(w, 0); // n_tensors, patched in wb_finish
    wb_u64(w, 0); // n_kv
}
static void wb_key(struct wb *w, const char *key, uint32_t type) {
    wb_str(w, key);
    wb_u32(w, type);
    w->n_kv++;
}
static void kv_u32(struct wb *w, const char *k, uint32_t v) { wb_key(w, k, LM_GGUF_TYPE_UINT32); wb_u32(w, v); }
static void kv_str(struct wb *w, const char *k, const char *v) { wb_key(w, k, LM_GGUF_TYPE_STRING); wb_str(w, v); }
static void kv_scalar(struct wb *w, const char *k, uint32_t type, const void *v, size_t n) {
    wb_key(w, k, type);
    wb_raw(w, v, n);
}
static void wb_tensor(struct wb *w, const char *name, uint32_t n_dims, const uint64_t *ne,
                      uint32_t type, uint64_t off) {
    wb_str(w, name);
    wb_u32(w, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) wb_u64(w, ne[i]);
    wb_u32(w, type);
    wb_u64(w, off);
    w->n_tensors++;
}
static void wb_patch_u64(struct wb *w, size_t at, uint64_t v) { memcpy(w->p + at, &v, 8); }
// Patch counts, pad to `align`, append data_bytes bytes (i & 0xff), shrink to exact size
// so that ASan sees any read past the end.
static void wb_finish(struct wb *w, uint64_t align, size_t data_bytes) {
    wb_patch_u64(w, 8, w->n_tensors);
    wb_patch_u64(w, 16, w->n_kv);
    if (data_bytes) {
        while (w->n % align) wb_u8(w, 0);
        for (size_t i = 0; i < data_bytes; i++) wb_u8(w, (uint8_t)i);
    }
    w->p = realloc(w->p, w->n ? w->n : 1);
    w->cap = w->n;
}

static enum lm_status wb_open(struct wb *w, struct lm_gguf *g) {
    return lm_gguf_open_memory(g, w->p, w->n, "t.gguf");
}

static int msg_has(const char *needle) { return !needle || strstr(lm_error_msg(), needle); }
static const char *msg_show(const char *needle) { return needle ? needle : "(null)"; }

// Opens, expects status `want` and a message containing `needle` (may be NULL), closes.
#define EXPECT_FAIL(w, want, needle)                                                      \
    do {                                                                                  \
        struct lm_gguf g_;                                                                \
        enum lm_status st_ = wb_open((w), &g_);                                           \
        CHECKF(st_ == (want), "status %s, want %s: %s", lm_status_name(st_),              \
               lm_status_name(want), lm_error_msg());                                     \
        CHECKF(strncmp(lm_error_msg(), "gguf: t.gguf: ", 14) == 0, "msg: %s",             \
               lm_error_msg());                                                           \
        CHECKF(msg_has(needle), "msg lacks '%s': %s", msg_show(needle), lm_error_msg()); \
        CHECK(strchr(lm_error_msg(), '\n') == NULL);                                      \
        if (st_ == LM_OK) lm_gguf_close(&g_);                                             \
        CHECK(g_.kv == NULL && g_.tensors == NULL && g_.owned == NULL);                   \
        free((w)->p);                                                                     \
    } while (0)

// ============================================================================
// The valid file
// ============================================================================

// kvs of every type, arrays (incl. strings and nested), three tensors whose data ends at EOF.
static void build_valid(struct wb *w) {
    wb_begin(w, 3);
    kv_str(w, "general.architecture", "test");
    uint8_t u8 = 200; int8_t i8 = -5; uint16_t u16 = 60000; int16_t i16 = -300;
    int32_t i32 = -70000; uint64_t u64 = 5000000000ull; int64_t i64 = -5000000000ll;
    int64_t i64s = 7; float f32 = 1.5f; double f64 = 2.25, f64h = 1e300; uint8_t b = 1;
    kv_scalar(w, "t.u8", LM_GGUF_TYPE_UINT8, &u8, 1);
    kv_scalar(w, "t.i8", LM_GGUF_TYPE_INT8, &i8, 1);
    kv_scalar(w, "t.u16", LM_GGUF_TYPE_UINT16, &u16, 2);
    kv_scalar(w, "t.i16", LM_GGUF_TYPE_INT16, &i16, 2);
    kv_u32(w, "t.u32", 70000);
    kv_scalar(w, "t.i32", LM_GGUF_TYPE_INT32, &i32, 4);
    kv_scalar(w, "t.u64", LM_GGUF_TYPE_UINT64, &u64, 8);
    kv_scalar(w, "t.i64", LM_GGUF_TYPE_INT64, &i64, 8);
    kv_scalar(w, "t.i64s", LM_GGUF_TYPE_INT64, &i64s, 8);
    kv_scalar(w, "t.f32", LM_GGUF_TYPE_FLOAT32, &f32, 4);
    kv_scalar(w, "t.f64", LM_GGUF_TYPE_FLOAT64, &f64, 8);
    kv_scalar(w, "t.f64h", LM_GGUF_TYPE_FLOAT64, &f64h, 8);
    kv_scalar(w, "t.bool", LM_GGUF_TYPE_BOOL, &b, 1);
    wb_key(w, "t.strs", LM_GGUF_TYPE_ARRAY);
    wb_u32(w, LM_GGUF_TYPE_STRING); wb_u64(w, 3);
    wb_str(w, "a"); wb_str(w, "bc"); wb_str(w, "");
    wb_key(w, "t.u32arr", LM_GGUF_TYPE_ARRAY);
    wb_u32(w, LM_GGUF_TYPE_UINT32); wb_u64(w, 3);
    wb_u32(w, 1); wb_u32(w, 2); wb_u32(w, 3);
    wb_key(w, "t.nested", LM_GGUF_TYPE_ARRAY); // [[1,2],["x"],[]]
    wb_u32(w, LM_GGUF_TYPE_ARRAY); wb_u64(w, 3);
    wb_u32(w, LM_GGUF_TYPE_UINT8); wb_u64(w, 2); wb_u8(w, 1); wb_u8(w, 2);
    wb_u32(w, LM_GGUF_TYPE_STRING); wb_u64(w, 1); wb_str(w, "x");
    wb_u32(w, LM_GGUF_TYPE_ARRAY); wb_u64(w, 0);
    kv_str(w, "t.empty", "");
    // f32 {4,2}: 32 bytes @0; q4_0 {32,2}: 36 bytes @32; q8_0 {64}: 68 bytes @96 -> 164
    wb_tensor(w, "w.f32", 2, (uint64_t[]){4, 2}, LM_DTYPE_F32, 0);
    wb_tensor(w, "w.q4_0", 2, (uint64_t[]){32, 2}, LM_DTYPE_Q4_0, 32);
    wb_tensor(w, "w.q8_0", 1, (uint64_t[]){64}, LM_DTYPE_Q8_0, 96);
    wb_finish(w, 32, 164);
}

static void test_valid(void) {
    struct wb w;
    build_valid(&w);
    struct lm_gguf g;
    enum lm_status st = wb_open(&w, &g);
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    if (st != LM_OK) { free(w.p); return; }
    CHECK(g.version == 3 && g.n_kv == 18 && g.n_tensors == 3);
    CHECK(g.alignment == 32 && g.data_offset % 32 == 0 && g.data_offset + 164 == w.n);
    CHECK(!g.mapped);

    struct lm_gguf_str s;
    CHECK(lm_gguf_get_str(&g, "general.architecture", &s, true) == LM_OK);
    CHECK(lm_gguf_str_eq(s, "test") && !lm_gguf_str_eq(s, "tes") && !lm_gguf_str_eq(s, "tests"));
    CHECK(lm_gguf_get_str(&g, "t.empty", &s, true) == LM_OK && s.len == 0 && lm_gguf_str_eq(s, ""));

    uint32_t u32 = 0; int32_t i32 = 0; uint64_t u64 = 0; float f = 0; bool b = false;
    CHECK(lm_gguf_get_u32(&g, "t.u8", &u32, true) == LM_OK && u32 == 200);
    CHECK(lm_gguf_get_u32(&g, "t.u16", &u32, true) == LM_OK && u32 == 60000);
    CHECK(lm_gguf_get_u32(&g, "t.u32", &u32, true) == LM_OK && u32 == 70000);
    CHECK(lm_gguf_get_u32(&g, "t.i64s", &u32, true) == LM_OK && u32 == 7);
    CHECK(lm_gguf_get_i32(&g, "t.i8", &i32, true) == LM_OK && i32 == -5);
    CHECK(lm_gguf_get_i32(&g, "t.i16", &i32, true) == LM_OK && i32 == -300);
    CHECK(lm_gguf_get_i32(&g, "t.i32", &i32, true) == LM_OK && i32 == -70000);
    CHECK(lm_gguf_get_i32(&g, "t.u32", &i32, true) == LM_OK && i32 == 70000);
    CHECK(lm_gguf_get_u64(&g, "t.u64", &u64, true) == LM_OK && u64 == 5000000000ull);
    CHECK(lm_gguf_get_u64(&g, "t.u8", &u64, true) == LM_OK && u64 == 200);
    CHECK(lm_gguf_get_f32(&g, "t.f32", &f, true) == LM_OK && f == 1.5f);
    CHECK(lm_gguf_get_f32(&g, "t.f64", &f, true) == LM_OK && f == 2.25f);
    CHECK(lm_gguf_get_bool(&g, "t.bool", &b, true) == LM_OK && b);

    // absent, optional: LM_OK and untouched; absent, required: error naming the key
    u32 = 1234;
    CHECK(lm_gguf_get_u32(&g, "nope", &u32, false) == LM_OK && u32 == 1234);
    CHECK(lm_gguf_get_u32(&g, "nope.required", &u32, true) == LM_ERR_FORMAT);
    CHECK(strstr(lm_error_msg(), "missing required key 'nope.required'") != NULL);
    CHECK(lm_gguf_get_str(&g, "nope", &s, true) == LM_ERR_FORMAT);

    // wrong types and out-of-range values
    CHECK(lm_gguf_get_u32(&g, "general.architecture", &u32, true) == LM_ERR_FORMAT);
    CHECK(strstr(lm_error_msg(), "'general.architecture'") && strstr(lm_error_msg(), "string"));
    CHECK(lm_gguf_get_u32(&g, "t.i8", &u32, true) == LM_ERR_FORMAT);   // negative
    CHECK(strstr(lm_error_msg(), "-5") != NULL);
    CHECK(lm_gguf_get_u32(&g, "t.u64", &u32, true) == LM_ERR_FORMAT);  // > UINT32_MAX
    CHECK(lm_gguf_get_i32(&g, "t.i64", &i32, true) == LM_ERR_FORMAT);  // < INT32_MIN
    CHECK(lm_gguf_get_i32(&g, "t.u64", &i32, true) == LM_ERR_FORMAT);
    CHECK(lm_gguf_get_u64(&g, "t.i64", &u64, true) == LM_ERR_FORMAT);
    CHECK(lm_gguf_get_u32(&g, "t.f32", &u32, true) == LM_ERR_FORMAT);
    CHECK(lm_gguf_get_u32(&g, "t.bool", &u32, true) == LM_ERR_FORMAT);
    CHECK(lm_gguf_get_f32(&g, "t.u32", &f, true) == LM_ERR_FORMAT);
    CHECK(lm_gguf_get_f32(&g, "t.f64h", &f, true) == LM_ERR_FORMAT);
    CHECK(lm_gguf_get_bool(&g, "t.u8", &b, true) == LM_ERR_FORMAT);
    CHECK(lm_gguf_get_str(&g, "t.strs", &s, true) == LM_ERR_FORMAT);
    CHECK(strstr(lm_error_msg(), "array of string") != NULL);
    CHECK(f == 2.25f && u32 == 1234); // failed getters leave *out untouched

    // arrays
    uint64_t n = 0;
    const void *d = NULL;
    CHECK(lm_gguf_get_arr(&g, "t.strs", LM_GGUF_TYPE_STRING, &n, &d, true) == LM_OK && n == 3);
    if (d) {
        const struct lm_gguf_str *ss = d;
        CHECK(lm_gguf_str_eq(ss[0], "a") && lm_gguf_str_eq(ss[1], "bc") && lm_gguf_str_eq(ss[2], ""));
    }
    CHECK(lm_gguf_get_arr(&g, "t.u32arr", LM_GGUF_TYPE_UINT32, &n, &d, true) == LM_OK && n == 3);
    if (d) {
        uint32_t v[3];
        memcpy(v, d, sizeof v);
        CHECK(v[0] == 1 && v[1] == 2 && v[2] == 3);
    }
    CHECK(lm_gguf_get_arr(&g, "t.u32arr", LM_GGUF_TYPE_INT32, &n, &d, true) == LM_ERR_FORMAT);
    CHECK(lm_gguf_get_arr(&g, "t.u32", LM_GGUF_TYPE_UINT32, &n, &d, true) == LM_ERR_FORMAT);
    const struct lm_gguf_kv *kv = lm_gguf_find_kv(&g, "t.nested");
    CHECK(kv && kv->type == LM_GGUF_TYPE_ARRAY && kv->arr_type == LM_GGUF_TYPE_ARRAY &&
          kv->arr_n == 3 && kv->data == NULL);
    CHECK(lm_gguf_find_kv(&g, "t.u3") == NULL && lm_gguf_find_kv(&g, "") == NULL);

    // tensors
    const struct lm_gguf_tensor *t = lm_gguf_find_tensor(&g, "w.q4_0");
    CHECK(t && t->type == LM_DTYPE_Q4_0 && t->n_dims == 2 && t->ne[0] == 32 && t->ne[1] == 2 &&
          t->ne[2] == 1 && t->ne[3] == 1 && t->nbytes == 36 && t->offset == 32);
    if (t) CHECK((const uint8_t *)t->data == w.p + g.data_offset + 32 &&
                 ((const uint8_t *)t->data)[0] == 32);
    t = lm_gguf_find_tensor(&g, "w.q8_0");
    CHECK(t && t->nbytes == 68 && (const uint8_t *)t->data + t->nbytes == w.p + w.n);
    CHECK(lm_gguf_find_tensor(&g, "w.f3") == NULL && lm_gguf_find_tensor(&g, "nope") == NULL);

    const struct lm_gguf_tensor *out = NULL;
    CHECK(lm_gguf_expect_tensor(&g, "w.f32", 2, (int64_t[]){4, 2}, &out) == LM_OK && out &&
          out->type == LM_DTYPE_F32);
    CHECK(lm_gguf_expect_tensor(&g, "w.q8_0", 2, (int64_t[]){64, 1}, NULL) == LM_OK);
    CHECK(lm_gguf_expect_tensor(&g, "w.f32", 2, (int64_t[]){4, 3}, NULL) == LM_ERR_FORMAT);
    CHECK(strstr(lm_error_msg(), "tensor 'w.f32' has shape {4, 2}, expected {4, 3}") != NULL);
    CHECK(lm_gguf_expect_tensor(&g, "w.f32", 1, (int64_t[]){8}, NULL) == LM_ERR_FORMAT);
    CHECK(lm_gguf_expect_tensor(&g, "missing.weight", 1, (int64_t[]){8}, NULL) == LM_ERR_FORMAT);
    CHECK(strstr(lm_error_msg(), "missing.weight") != NULL);

    CHECK(strcmp(lm_gguf_type_name(LM_GGUF_TYPE_FLOAT64), "float64") == 0);
    CHECK(strcmp(lm_gguf_type_name(LM_GGUF_TYPE_COUNT), "?") == 0);

    lm_gguf_close(&g);
    CHECK(g.kv == NULL && g.owned == NULL && lm_gguf_find_kv(&g, "t.u8") == NULL);
    lm_gguf_close(&g); // double close is harmless
    free(w.p);
}

// Every strict prefix of the valid file must fail cleanly (ASan checks the reads).
static void test_truncated_everywhere(void) {
    struct wb w;
    build_valid(&w);
    int bad = 0;
    for (size_t len = 0; len < w.n; len++) {
        uint8_t *p = malloc(len ? len : 1);
        memcpy(p, w.p, len);
        struct lm_gguf g;
        enum lm_status st = lm_gguf_open_memory(&g, len ? p : NULL, len, "t.gguf");
        if (st == LM_OK || strncmp(lm_error_msg(), "gguf: t.gguf: ", 14) != 0) {
            bad++;
            fprintf(stderr, "truncated at %zu: %s\n", len, lm_error_msg());
            if (st == LM_OK) lm_gguf_close(&g);
        }
        free(p);
    }
    CHECKF(bad == 0, "%d prefixes misbehaved", bad);
    free(w.p);
}

// ============================================================================
// Header
// ============================================================================

static void test_header(void) {
    struct wb w;
    build_valid(&w);
    w.p[0] = 'X';
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "magic");

    build_valid(&w);
    w.p[4] = 1;
    EXPECT_FAIL(&w, LM_ERR_UNSUPPORTED, "version 1");
    build_valid(&w);
    w.p[4] = 4;
    EXPECT_FAIL(&w, LM_ERR_UNSUPPORTED, "version 4");
    build_valid(&w);
    w.p[4] = 0; w.p[7] = 3;
    EXPECT_FAIL(&w, LM_ERR_UNSUPPORTED, "big-endian");

    // v2 is accepted
    build_valid(&w);
    w.p[4] = 2;
    struct lm_gguf g;
    CHECKF(wb_open(&w, &g) == LM_OK, "%s", lm_error_msg());
    lm_gguf_close(&g);
    free(w.p);

    build_valid(&w);
    wb_patch_u64(&w, 16, UINT64_MAX);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "n_kv");
    build_valid(&w);
    wb_patch_u64(&w, 16, 1000);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "n_kv 1000");
    build_valid(&w);
    wb_patch_u64(&w, 8, UINT64_MAX / 2);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "n_tensors");
    build_valid(&w);
    wb_patch_u64(&w, 8, 4); // plausible count, runs into the data
    EXPECT_FAIL(&w, LM_ERR_FORMAT, NULL);

    // empty file (no kvs, no tensors, no padding) is valid
    wb_begin(&w, 3);
    wb_finish(&w, 32, 0);
    CHECKF(wb_open(&w, &g) == LM_OK, "%s", lm_error_msg());
    CHECK(g.n_kv == 0 && g.n_tensors == 0 && lm_gguf_find_kv(&g, "x") == NULL &&
          lm_gguf_find_tensor(&g, "x") == NULL);
    lm_gguf_close(&g);
    free(w.p);

    CHECK(lm_gguf_open_memory(&g, NULL, 0, NULL) == LM_ERR_FORMAT);
    CHECK(strncmp(lm_error_msg(), "gguf: <memory>: truncated", 25) == 0);
}

// ============================================================================
// Key/value section
// ============================================================================

static void test_kv(void) {
    struct wb w;

    // string value length past EOF
    wb_begin(&w, 3);
    wb_key(&w, "k.s", LM_GGUF_TYPE_STRING);
    wb_u64(&w, 1000);
    wb_raw(&w, "abcdefghijklmnopqrstuvwxyz", 26);
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "'k.s'");
    wb_begin(&w, 3);
    wb_key(&w, "k.s", LM_GGUF_TYPE_STRING);
    wb_u64(&w, UINT64_MAX);
    wb_raw(&w, "abcdefghijklmnopqrstuvwxyz", 26);
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "past end of file");

    // key length past EOF, and a huge (but present) key over the cap
    wb_begin(&w, 3);
    wb_u64(&w, UINT64_MAX - 3);
    wb_raw(&w, "abcdefghijklmnopqrstuvwxyz", 26);
    w.n_kv = 1;
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "key #0");
    {
        size_t big = (1u << 20) + 1;
        char *k = malloc(big + 1);
        memset(k, 'k', big);
        k[big] = 0;
        wb_begin(&w, 3);
        kv_u32(&w, k, 1);
        wb_finish(&w, 32, 0);
        EXPECT_FAIL(&w, LM_ERR_FORMAT, "exceeds the limit");
        free(k);
    }

    // unknown value type; unknown array element type
    wb_begin(&w, 3);
    wb_key(&w, "k.bad", 13);
    wb_u64(&w, 0);
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "key 'k.bad': unknown value type 13");
    wb_begin(&w, 3);
    wb_key(&w, "k.arr", LM_GGUF_TYPE_ARRAY);
    wb_u32(&w, 0xffffffffu); wb_u64(&w, 1); wb_u64(&w, 0);
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "key 'k.arr': unknown array element type");

    // array count * elem size overflows; array past EOF; string array count past EOF
    wb_begin(&w, 3);
    wb_key(&w, "k.arr", LM_GGUF_TYPE_ARRAY);
    wb_u32(&w, LM_GGUF_TYPE_UINT64); wb_u64(&w, (UINT64_MAX / 8) + 2); wb_u64(&w, 0);
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "overflows");
    wb_begin(&w, 3);
    wb_key(&w, "k.arr", LM_GGUF_TYPE_ARRAY);
    wb_u32(&w, LM_GGUF_TYPE_UINT32); wb_u64(&w, 5); wb_u64(&w, 0); wb_u64(&w, 0);
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "'k.arr'");
    wb_begin(&w, 3);
    wb_key(&w, "k.tok", LM_GGUF_TYPE_ARRAY);
    wb_u32(&w, LM_GGUF_TYPE_STRING); wb_u64(&w, 262144); wb_str(&w, "a");
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "'k.tok'");
    wb_begin(&w, 3);
    wb_key(&w, "k.tok", LM_GGUF_TYPE_ARRAY);
    wb_u32(&w, LM_GGUF_TYPE_STRING); wb_u64(&w, 2); wb_str(&w, "a"); wb_u64(&w, 99);
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "element 1 of key 'k.tok'");

    // nested arrays: bad inner type, inner overflow, too deep
    wb_begin(&w, 3);
    wb_key(&w, "k.n", LM_GGUF_TYPE_ARRAY);
    wb_u32(&w, LM_GGUF_TYPE_ARRAY); wb_u64(&w, 1);
    wb_u32(&w, 77); wb_u64(&w, 0);
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "'k.n'");
    wb_begin(&w, 3);
    wb_key(&w, "k.n", LM_GGUF_TYPE_ARRAY);
    wb_u32(&w, LM_GGUF_TYPE_ARRAY); wb_u64(&w, 1);
    wb_u32(&w, LM_GGUF_TYPE_INT16); wb_u64(&w, UINT64_MAX / 2 + 7);
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "'k.n'");
    wb_begin(&w, 3);
    wb_key(&w, "k.deep", LM_GGUF_TYPE_ARRAY);
    for (int i = 0; i < 100; i++) { wb_u32(&w, LM_GGUF_TYPE_ARRAY); wb_u64(&w, 1); }
    wb_u32(&w, LM_GGUF_TYPE_UINT8); wb_u64(&w, 0);
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "nested deeper");

    // duplicate keys
    wb_begin(&w, 3);
    kv_u32(&w, "a.b", 1);
    kv_u32(&w, "a.c", 1);
    kv_str(&w, "a.b", "x");
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "duplicate key 'a.b'");

    // general.alignment: wrong type, zero, not a power of two; valid 64 works
    wb_begin(&w, 3);
    kv_str(&w, "general.alignment", "32");
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "'general.alignment' has type string");
    wb_begin(&w, 3);
    {
        uint64_t a = 32;
        kv_scalar(&w, "general.alignment", LM_GGUF_TYPE_UINT64, &a, 8);
    }
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "expected uint32");
    wb_begin(&w, 3);
    kv_u32(&w, "general.alignment", 48);
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "power of two");
    wb_begin(&w, 3);
    kv_u32(&w, "general.alignment", 0);
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "power of two");

    wb_begin(&w, 3);
    kv_u32(&w, "general.alignment", 64);
    wb_tensor(&w, "a", 1, (uint64_t[]){16}, LM_DTYPE_F32, 0);
    wb_tensor(&w, "b", 1, (uint64_t[]){4}, LM_DTYPE_F32, 64);
    wb_finish(&w, 64, 80);
    struct lm_gguf g;
    CHECKF(wb_open(&w, &g) == LM_OK, "%s", lm_error_msg());
    CHECK(g.alignment == 64 && g.data_offset % 64 == 0);
    lm_gguf_close(&g);
    free(w.p);
    wb_begin(&w, 3);
    kv_u32(&w, "general.alignment", 64);
    wb_tensor(&w, "a", 1, (uint64_t[]){16}, LM_DTYPE_F32, 0);
    wb_tensor(&w, "b", 1, (uint64_t[]){4}, LM_DTYPE_F32, 32); // aligned to 32 but not 64
    wb_finish(&w, 64, 80);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "tensor 'b': offset 32 is not a multiple of the alignment 64");
}

// ============================================================================
// Tensor infos
// ============================================================================

// One-tensor file: name "x.weight", given dims/type/offset, `data` bytes of data.
static void one_tensor(struct wb *w, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                       uint64_t off, size_t data) {
    wb_begin(w, 3);
    kv_str(w, "general.architecture", "test");
    wb_tensor(w, "x.weight", n_dims, ne, type, off);
    wb_finish(w, 32, data);
}

static void test_tensors(void) {
    struct wb w;
    struct lm_gguf g;

    one_tensor(&w, 2, (uint64_t[]){8, 2}, LM_DTYPE_F32, 0, 64);
    CHECKF(wb_open(&w, &g) == LM_OK, "%s", lm_error_msg());
    lm_gguf_close(&g);
    free(w.p);

    one_tensor(&w, 0, NULL, LM_DTYPE_F32, 0, 64);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "tensor 'x.weight': n_dims 0");
    one_tensor(&w, 5, (uint64_t[]){1, 1, 1, 1, 1}, LM_DTYPE_F32, 0, 64);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "n_dims 5");
    one_tensor(&w, 2, (uint64_t[]){8, 0}, LM_DTYPE_F32, 0, 64);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "tensor 'x.weight': ne[1] = 0");
    one_tensor(&w, 2, (uint64_t[]){8, UINT64_MAX}, LM_DTYPE_F32, 0, 64); // negative as int64
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "ne[1] = -1");
    one_tensor(&w, 3, (uint64_t[]){1ull << 32, 1ull << 20, 1ull << 20}, LM_DTYPE_F32, 0, 64);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "element count overflows");
    one_tensor(&w, 2, (uint64_t[]){1ull << 40, 1ull << 22}, LM_DTYPE_F64, 0, 64); // bytes overflow
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "'x.weight'");
    one_tensor(&w, 1, (uint64_t[]){8}, 4, 0, 64); // hole in the GGML ids
    EXPECT_FAIL(&w, LM_ERR_UNSUPPORTED, "tensor 'x.weight': unknown dtype id 4");
    one_tensor(&w, 1, (uint64_t[]){8}, 1000, 0, 64);
    EXPECT_FAIL(&w, LM_ERR_UNSUPPORTED, "unknown dtype id 1000, which lumen cannot run (supported: f32");
    one_tensor(&w, 1, (uint64_t[]){8}, 0x80000000u, 0, 64);
    EXPECT_FAIL(&w, LM_ERR_UNSUPPORTED, "unknown dtype id");
    one_tensor(&w, 2, (uint64_t[]){48, 2}, LM_DTYPE_Q4_0, 0, 256);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "ne[0] = 48 is not a multiple of the q4_0 block size 32");
    one_tensor(&w, 2, (uint64_t[]){384, 2}, LM_DTYPE_Q2_K, 0, 1024);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "ne[0] = 384 is not a multiple of the q2_K block size 256");
    one_tensor(&w, 2, (uint64_t[]){128, 4}, LM_DTYPE_Q3_K, 0, 1024);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "ne[0] = 128 is not a multiple of the q3_K block size 256");
    one_tensor(&w, 2, (uint64_t[]){48, 2}, LM_DTYPE_IQ4_NL, 0, 256);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "ne[0] = 48 is not a multiple of the iq4_nl block size 32");
    one_tensor(&w, 2, (uint64_t[]){288, 2}, LM_DTYPE_IQ4_XS, 0, 1024);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "ne[0] = 288 is not a multiple of the iq4_xs block size 256");
    one_tensor(&w, 1, (uint64_t[]){8}, LM_DTYPE_F32, 16, 64);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "offset 16 is not a multiple of the alignment 32");
    one_tensor(&w, 1, (uint64_t[]){8}, LM_DTYPE_F32, 1ull << 40, 64);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "tensor 'x.weight' starts past end of file");
    one_tensor(&w, 1, (uint64_t[]){8}, LM_DTYPE_F32, UINT64_MAX - 31, 64);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "starts past end of file");
    one_tensor(&w, 2, (uint64_t[]){8, 3}, LM_DTYPE_F32, 0, 95); // needs 96
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "tensor 'x.weight' extends past end of file (offset ");
    one_tensor(&w, 2, (uint64_t[]){8, 3}, LM_DTYPE_F32, 0, 0); // no data at all
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "past end of file");

    // duplicate names
    wb_begin(&w, 3);
    wb_tensor(&w, "a", 1, (uint64_t[]){8}, LM_DTYPE_F32, 0);
    wb_tensor(&w, "b", 1, (uint64_t[]){8}, LM_DTYPE_F32, 32);
    wb_tensor(&w, "a", 1, (uint64_t[]){8}, LM_DTYPE_F32, 64);
    wb_finish(&w, 32, 96);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "duplicate tensor name 'a'");

    // name length past EOF; non-printable name is sanitised in the message
    wb_begin(&w, 3);
    wb_u64(&w, 1ull << 50);
    wb_raw(&w, "0123456789012345678901234567890123456789", 40);
    w.n_tensors = 1;
    wb_finish(&w, 32, 0);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "name of tensor #0");
    wb_begin(&w, 3);
    wb_tensor(&w, "bad\nname", 0, NULL, LM_DTYPE_F32, 0);
    wb_finish(&w, 32, 32);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "bad?name");

    // expect_tensor on an unsupported dtype
    one_tensor(&w, 1, (uint64_t[]){256}, LM_DTYPE_IQ2_XXS, 0, 66);
    CHECKF(wb_open(&w, &g) == LM_OK, "%s", lm_error_msg());
    CHECK(lm_gguf_expect_tensor(&g, "x.weight", 1, (int64_t[]){256}, NULL) == LM_ERR_UNSUPPORTED);
    CHECK(strstr(lm_error_msg(), "iq2_xxs") != NULL);
    // the refusal lists what runs, from the dtype traits (one line)
    CHECKF(strstr(lm_error_msg(), "which lumen cannot run (supported: f32, f16, ") != NULL &&
               strstr(lm_error_msg(), "q4_K") && !strchr(lm_error_msg(), '\n'),
           "%s", lm_error_msg());
    lm_gguf_close(&g);
    // a GGML type lumen knows by name only (tq1_0): parsed, sized, refused by name
    free(w.p);
    one_tensor(&w, 1, (uint64_t[]){256}, LM_DTYPE_TQ1_0, 0, 54);
    CHECKF(wb_open(&w, &g) == LM_OK, "%s", lm_error_msg());
    CHECK(lm_gguf_expect_tensor(&g, "x.weight", 1, (int64_t[]){256}, NULL) == LM_ERR_UNSUPPORTED);
    CHECKF(strstr(lm_error_msg(), "has type tq1_0, which lumen cannot run") != NULL, "%s",
           lm_error_msg());
    lm_gguf_close(&g);
    free(w.p);
    // mxfp4 runs: 2 x 64 elements = 4 blocks of 17 bytes
    one_tensor(&w, 2, (uint64_t[]){64, 2}, LM_DTYPE_MXFP4, 0, 68);
    CHECKF(wb_open(&w, &g) == LM_OK, "%s", lm_error_msg());
    const struct lm_gguf_tensor *mx = lm_gguf_find_tensor(&g, "x.weight");
    CHECK(mx && mx->nbytes == 68);
    CHECKF(lm_gguf_expect_tensor(&g, "x.weight", 2, (int64_t[]){64, 2}, NULL) == LM_OK, "%s", lm_error_msg());
    lm_gguf_close(&g);
    free(w.p);
    // malformed mxfp4: rows that are not whole blocks; blocks past the end of the file
    one_tensor(&w, 2, (uint64_t[]){48, 2}, LM_DTYPE_MXFP4, 0, 64);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "tensor 'x.weight': ne[0] = 48 is not a multiple of the mxfp4 block size 32");
    one_tensor(&w, 2, (uint64_t[]){64, 2}, LM_DTYPE_MXFP4, 0, 67);
    EXPECT_FAIL(&w, LM_ERR_FORMAT, "tensor 'x.weight' extends past end of file (offset 128 + 68 > 195)");
}

// Many tensors and a 262144-entry token array: checks the indices, and that it is fast.
static void test_large(void) {
    struct wb w;
    wb_begin(&w, 3);
    wb_key(&w, "tokenizer.ggml.tokens", LM_GGUF_TYPE_ARRAY);
    wb_u32(&w, LM_GGUF_TYPE_STRING);
    wb_u64(&w, 262144);
    char buf[64];
    for (int i = 0; i < 262144; i++) {
        snprintf(buf, sizeof buf, "tok%d", i);
        wb_str(&w, buf);
    }
    for (int i = 0; i < 5000; i++) {
        snprintf(buf, sizeof buf, "blk.%d.w", i);
        wb_tensor(&w, buf, 1, (uint64_t[]){8}, LM_DTYPE_F32, (uint64_t)i * 32);
    }
    wb_finish(&w, 32, 5000 * 32);
    struct lm_gguf g;
    CHECKF(wb_open(&w, &g) == LM_OK, "%s", lm_error_msg());
    uint64_t n = 0;
    const void *d = NULL;
    CHECK(lm_gguf_get_arr(&g, "tokenizer.ggml.tokens", LM_GGUF_TYPE_STRING, &n, &d, true) == LM_OK);
    CHECK(n == 262144 && d && lm_gguf_str_eq(((const struct lm_gguf_str *)d)[262143], "tok262143"));
    int found = 0;
    for (int i = 0; i < 5000; i++) {
        snprintf(buf, sizeof buf, "blk.%d.w", i);
        const struct lm_gguf_tensor *t = lm_gguf_find_tensor(&g, buf);
        found += t && t->offset == (uint64_t)i * 32;
    }
    CHECK(found == 5000);
    lm_gguf_close(&g);
    free(w.p);
}

static void test_file(void) {
    struct lm_gguf g;
    CHECK(lm_gguf_open(&g, "/nonexistent/x.gguf") == LM_ERR_IO);
    CHECK(strncmp(lm_error_msg(), "gguf: /nonexistent/x.gguf: ", 27) == 0);
    CHECK(lm_gguf_open(&g, "/") == LM_ERR_IO);

    char path[] = "/tmp/lm_test_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    FILE *f = fopen(path, "wb");
    CHECK(lm_gguf_open(&g, path) == LM_ERR_FORMAT); // empty
    struct wb w;
    build_valid(&w);
    fwrite(w.p, 1, w.n, f);
    fclose(f);
    enum lm_status st = lm_gguf_open(&g, path);
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    if (st == LM_OK) {
        CHECK(g.mapped && g.size == w.n && strcmp(g.path, path) == 0);
        const struct lm_gguf_tensor *t = lm_gguf_find_tensor(&g, "w.q8_0");
        CHECK(t && memcmp(t->data, w.p + (w.n - 68), 68) == 0);
        lm_gguf_close(&g);
    }
    // seed for the fuzzer, when asked
    const char *seed = getenv("LUMEN_GGUF_SEED_OUT");
    if (seed && (f = fopen(seed, "wb"))) {
        fwrite(w.p, 1, w.n, f);
        fclose(f);
    }
    unlink(path);
    free(w.p);
}

int main(void) {
    test_valid();
    test_truncated_everywhere();
    test_header();
    test_kv();
    test_tensors();
    test_large();
    test_file();
    return lm_test_finish();
}
