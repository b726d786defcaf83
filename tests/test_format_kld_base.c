// Reader of llama-perplexity's KL-divergence base file (include/lumen_kld_base.h): a valid
// file built in memory, then one test per malformation: truncation at every byte, trailing
// data, wrong magic, out-of-range and overflowing counts, out-of-range tokens, non-finite
// row floats, and a non-seekable stream that is cut short inside the rows.
// LM_TEST_LABELS: unit
#include "lm_test.h"

#include <stdint.h>
#include <unistd.h>

#include "lumen_kld_base.h"

struct buf {
    uint8_t *p;
    size_t n;
};

static void put(struct buf *b, const void *d, size_t n) {
    b->p = realloc(b->p, b->n + n);
    if (!b->p) abort();
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_i32(struct buf *b, int32_t v) { put(b, &v, 4); }

// A valid file: n_ctx 8 (3 scored rows per chunk), odd n_vocab 5 (one padding word).
enum { CTX = 8, VOCAB = 5, CHUNKS = 2, ROWS = CTX - 1 - CTX / 2, WORDS = 2 * ((VOCAB + 1) / 2) + 4 };

static struct buf make_valid(void) {
    struct buf b = {0};
    put(&b, "_logits_", 8);
    put_i32(&b, CTX);
    put_i32(&b, VOCAB);
    put_i32(&b, CHUNKS);
    for (int i = 0; i < CTX * CHUNKS; i++) put_i32(&b, i % VOCAB);
    for (int r = 0; r < ROWS * CHUNKS; r++) {
        uint16_t row[WORDS] = {0};
        const float d[2] = {16.f / 65535.f, -17.5f - (float)r};
        memcpy(row, d, sizeof d);
        for (int i = 0; i < VOCAB; i++) row[4 + i] = (uint16_t)(r * 1000 + i);
        put(&b, row, sizeof row);
    }
    return b;
}

static enum lm_status open_mem(struct lm_kld_base *k, const struct buf *b, size_t n) {
    FILE *f = fmemopen(b->p, n, "rb");
    if (!f) {
        // glibc refuses a zero-size buffer: use an empty temporary file instead
        f = tmpfile();
        if (!f) abort();
    }
    return lm_kld_base_open_stream(k, f, "mem.bin");
}

static int one_line(const char *msg) { return msg[0] && !strchr(msg, '\n'); }

static void expect_fail(const struct buf *b, size_t n, const char *what, const char *needle) {
    struct lm_kld_base k;
    const enum lm_status st = open_mem(&k, b, n);
    const char *msg = lm_error_msg();
    CHECKF(st == LM_ERR_FORMAT, "%s: status %s (%s)", what, lm_status_name(st), msg);
    CHECKF(one_line(msg) && strstr(msg, "mem.bin") && (!needle || strstr(msg, needle)),
           "%s: message '%s' (want '%s')", what, msg, needle ? needle : "");
    CHECK(k.f == NULL && k.tokens == NULL);
}

static void test_valid(void) {
    struct buf b = make_valid();
    struct lm_kld_base k;
    enum lm_status st = open_mem(&k, &b, b.n);
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    if (st != LM_OK) { free(b.p); return; }
    CHECK(k.n_ctx == CTX && k.n_vocab == VOCAB && k.n_chunk == CHUNKS);
    CHECK(k.n_rows == ROWS && k.row_words == WORDS);
    CHECK(k.tokens[0] == 0 && k.tokens[CTX * CHUNKS - 1] == (CTX * CHUNKS - 1) % VOCAB);
    uint16_t row[WORDS];
    int ok = 1;
    for (int r = 0; r < ROWS * CHUNKS; r++) {
        ok &= lm_kld_base_read_row(&k, row) == LM_OK;
        float scale, mn;
        lm_kld_row_params(row, &scale, &mn);
        ok &= scale == 16.f / 65535.f && mn == -17.5f - (float)r && row[4 + VOCAB - 1] == r * 1000 + VOCAB - 1;
    }
    CHECKF(ok, "rows read back");
    st = lm_kld_base_read_row(&k, row);
    CHECKF(st == LM_ERR_STATE && one_line(lm_error_msg()), "read past the last row: %s", lm_error_msg());
    lm_kld_base_close(&k);
    lm_kld_base_close(&k); // idempotent
    free(b.p);
}

static void test_truncated_everywhere(void) {
    struct buf b = make_valid();
    int bad = 0;
    for (size_t n = 0; n < b.n; n++) {
        struct lm_kld_base k;
        const enum lm_status st = open_mem(&k, &b, n);
        if (st != LM_ERR_FORMAT || !one_line(lm_error_msg())) {
            if (bad++ < 5) fprintf(stderr, "  truncated to %zu: %s %s\n", n, lm_status_name(st), lm_error_msg());
            if (st == LM_OK) lm_kld_base_close(&k);
        }
    }
    CHECKF(bad == 0, "%d truncations accepted or misreported", bad);
    expect_fail(&b, b.n - 1, "one byte short", "truncated");
    expect_fail(&b, 4, "4 bytes", "not a llama-perplexity base file");
    expect_fail(&b, 0, "empty", "empty");
    free(b.p);
}

static void test_trailing(void) {
    struct buf b = make_valid();
    put(&b, "x", 1);
    expect_fail(&b, b.n, "one byte extra", "trailing data");
    free(b.p);
}

static void test_magic(void) {
    struct buf b = make_valid();
    memcpy(b.p, "GGUF\3\0\0\0", 8);
    expect_fail(&b, b.n, "GGUF magic", "starts with 'GGUF");
    free(b.p);
}

static void set_i32(struct buf *b, size_t off, int32_t v) { memcpy(b->p + off, &v, 4); }

static void test_counts(void) {
    static const struct { size_t off; int32_t v; const char *needle; } cases[] = {
        {8, 2, "n_ctx 2 out of range"},
        {8, -8, "n_ctx -8"},
        {8, LM_KLD_MAX_CTX + 1, "n_ctx"},
        {8, INT32_MAX, "n_ctx"},
        {12, 0, "n_vocab 0"},
        {12, -5, "n_vocab -5"},
        {12, LM_KLD_MAX_VOCAB + 1, "n_vocab"},
        {16, 0, "n_chunk 0"},
        {16, -1, "n_chunk -1"},
        {16, INT32_MAX, "n_chunk 2147483647"}, // n_chunk * n_ctx overflows int32
        {16, LM_KLD_MAX_TOKENS / CTX + 1, "n_chunk"},
        {16, 3, "truncated"},       // plausible, but the file is too short for it
        {16, 1, "trailing data"},   // plausible, but the file is too long for it
        {12, 7, "truncated"},       // more words per row than the file holds
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct buf b = make_valid();
        set_i32(&b, cases[i].off, cases[i].v);
        char what[64];
        snprintf(what, sizeof what, "header word at %zu = %d", cases[i].off, cases[i].v);
        expect_fail(&b, b.n, what, cases[i].needle);
        free(b.p);
    }
}

static void test_tokens(void) {
    struct buf b = make_valid();
    set_i32(&b, 20 + 4 * 3, VOCAB); // token 3 == n_vocab
    expect_fail(&b, b.n, "token == n_vocab", "token 3 (chunk 0) is 5, outside [0, 5)");
    free(b.p);
    b = make_valid();
    set_i32(&b, 20 + 4 * (CTX + 1), -1);
    expect_fail(&b, b.n, "token -1", "(chunk 1) is -1");
    free(b.p);
}

static void test_row_floats(void) {
    const float bad[][2] = {{NAN, -1.f}, {INFINITY, -1.f}, {-1e-3f, -1.f}, {1e-3f, NAN}, {1e-3f, -INFINITY}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct buf b = make_valid();
        const size_t row1 = 20 + 4 * CTX * CHUNKS + 2 * WORDS; // second row
        memcpy(b.p + row1, bad[i], sizeof bad[i]);
        struct lm_kld_base k;
        enum lm_status st = open_mem(&k, &b, b.n);
        CHECK(st == LM_OK);
        if (st == LM_OK) {
            uint16_t row[WORDS];
            CHECK(lm_kld_base_read_row(&k, row) == LM_OK);
            st = lm_kld_base_read_row(&k, row);
            CHECKF(st == LM_ERR_FORMAT && one_line(lm_error_msg()) &&
                   strstr(lm_error_msg(), "chunk 0, row 1"), "bad row floats %zu: %s", i, lm_error_msg());
            lm_kld_base_close(&k);
        }
        free(b.p);
    }
}

// A pipe has no size to check up front: truncation shows when the rows run out.
static void test_pipe_truncated(void) {
    struct buf b = make_valid();
    int fd[2];
    if (pipe(fd) != 0) abort();
    const size_t n = b.n - 3; // the last row is cut short
    CHECK(write(fd[1], b.p, n) == (ssize_t)n);
    close(fd[1]);
    FILE *f = fdopen(fd[0], "rb");
    struct lm_kld_base k;
    enum lm_status st = lm_kld_base_open_stream(&k, f, "pipe");
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    if (st == LM_OK) {
        uint16_t row[WORDS];
        int r = 0;
        while ((st = lm_kld_base_read_row(&k, row)) == LM_OK) r++;
        CHECKF(r == ROWS * CHUNKS - 1 && st == LM_ERR_FORMAT &&
               strstr(lm_error_msg(), "truncated in chunk 1, row 2"), "rows %d: %s", r, lm_error_msg());
        lm_kld_base_close(&k);
    }
    free(b.p);
}

static void test_open_path(void) {
    struct lm_kld_base k;
    const enum lm_status st = lm_kld_base_open(&k, "/nonexistent/dir/base.bin");
    CHECKF(st == LM_ERR_IO && one_line(lm_error_msg()) && strstr(lm_error_msg(), "/nonexistent/dir/base.bin"),
           "%s", lm_error_msg());
    lm_kld_base_close(&k);
    // a real file goes through fstat's size
    char path[] = "/tmp/lumen-kld-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) abort();
    struct buf b = make_valid();
    CHECK(write(fd, b.p, b.n - 1) == (ssize_t)(b.n - 1));
    close(fd);
    CHECK(lm_kld_base_open(&k, path) == LM_ERR_FORMAT && strstr(lm_error_msg(), "truncated"));
    unlink(path);
    free(b.p);
}

int main(void) {
    test_valid();
    test_truncated_everywhere();
    test_trailing();
    test_magic();
    test_counts();
    test_tokens();
    test_row_floats();
    test_pipe_truncated();
    test_open_path();
    return lm_test_finish();
}
