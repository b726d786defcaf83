// Reader of llama-perplexity's KL-divergence base file (include/lumen_kld_base.h): header,
// counts and tokens validated against limits and the file's size before anything is allocated.
#include "lumen_kld_base.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

__attribute__((format(printf, 3, 4))) static enum lm_status kerr(const struct lm_kld_base *b,
                                                                 enum lm_status st,
                                                                 const char *fmt, ...) {
    char buf[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return lm_error_set(st, "kl-divergence base: %s: %s", b->path, buf);
}

// Printable copy of up to 8 magic bytes.
static const char *show_magic(char out[9], const char *m, size_t n) {
    size_t k = 0;
    if (n > 8) n = 8;
    for (size_t i = 0; i < n; i++) out[k++] = (m[i] >= 0x20 && m[i] < 0x7f) ? m[i] : '?';
    out[k] = 0;
    return out;
}

// Size of f if it is a regular file (seekable), else -1.
static int64_t stream_size(FILE *f) {
    struct stat st;
    const int fd = fileno(f);
    if (fd >= 0 && fstat(fd, &st) == 0) return S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
    // no descriptor (fmemopen): measure by seeking
    const long cur = ftell(f);
    if (cur < 0 || fseek(f, 0, SEEK_END) != 0) return -1;
    const long end = ftell(f);
    if (fseek(f, cur, SEEK_SET) != 0) return -1;
    return end;
}

void lm_kld_base_close(struct lm_kld_base *b) {
    if (!b) return;
    if (b->f) fclose(b->f);
    free(b->tokens);
    b->f = NULL;
    b->tokens = NULL;
}

enum lm_status lm_kld_base_open_stream(struct lm_kld_base *b, FILE *f, const char *name) {
    memset(b, 0, sizeof *b);
    snprintf(b->path, sizeof b->path, "%s", name ? name : "(stream)");
    b->f = f;
    enum lm_status st = LM_OK;
    const int64_t size = stream_size(f);

    char magic[8], shown[9];
    const size_t got = fread(magic, 1, sizeof magic, f);
    if (got < sizeof magic || memcmp(magic, LM_KLD_MAGIC, sizeof magic) != 0) {
        st = got == 0 ? kerr(b, LM_ERR_FORMAT, "empty file, not a llama-perplexity base file")
                      : kerr(b, LM_ERR_FORMAT,
                             "not a llama-perplexity base file (starts with '%s', want '%s')",
                             show_magic(shown, magic, got), LM_KLD_MAGIC);
        goto fail;
    }
    int32_t h[3];
    if (fread(h, sizeof h, 1, f) != 1) {
        st = kerr(b, LM_ERR_FORMAT, "truncated header (%lld bytes, want at least %d)",
                  (long long)size, LM_KLD_HEADER_BYTES);
        goto fail;
    }
    b->n_ctx = h[0];
    b->n_vocab = h[1];
    b->n_chunk = h[2];
    if (b->n_ctx < 3 || b->n_ctx > LM_KLD_MAX_CTX) {
        st = kerr(b, LM_ERR_FORMAT, "n_ctx %d out of range [3, %d]", b->n_ctx, LM_KLD_MAX_CTX);
        goto fail;
    }
    if (b->n_vocab < 1 || b->n_vocab > LM_KLD_MAX_VOCAB) {
        st = kerr(b, LM_ERR_FORMAT, "n_vocab %d out of range [1, %d]", b->n_vocab, LM_KLD_MAX_VOCAB);
        goto fail;
    }
    if (b->n_chunk < 1 || (int64_t)b->n_chunk * b->n_ctx > LM_KLD_MAX_TOKENS) {
        st = kerr(b, LM_ERR_FORMAT, "n_chunk %d out of range [1, %d] for n_ctx %d", b->n_chunk,
                  LM_KLD_MAX_TOKENS / b->n_ctx, b->n_ctx);
        goto fail;
    }
    b->n_rows = b->n_ctx - 1 - b->n_ctx / 2;
    b->row_words = LM_KLD_ROW_WORDS(b->n_vocab);
    // limits above keep this product far below 2^63: 2^27 tokens x (2^24 + 6) x 2 bytes
    const int64_t n_tok = (int64_t)b->n_chunk * b->n_ctx;
    const int64_t want = LM_KLD_HEADER_BYTES + 4 * n_tok +
                         2 * b->row_words * (int64_t)b->n_rows * (int64_t)b->n_chunk;
    if (size >= 0 && size != want) {
        st = kerr(b, LM_ERR_FORMAT,
                  "%s: %lld bytes, the header (n_ctx %d, n_vocab %d, n_chunk %d) implies %lld",
                  size < want ? "truncated" : "trailing data", (long long)size, b->n_ctx,
                  b->n_vocab, b->n_chunk, (long long)want);
        goto fail;
    }
    b->tokens = malloc((size_t)n_tok * sizeof *b->tokens);
    if (!b->tokens) {
        st = kerr(b, LM_ERR_NOMEM, "cannot allocate %lld tokens", (long long)n_tok);
        goto fail;
    }
    if (fread(b->tokens, sizeof *b->tokens, (size_t)n_tok, f) != (size_t)n_tok) {
        st = kerr(b, LM_ERR_FORMAT, "truncated: fewer than the %lld tokens the header announces",
                  (long long)n_tok);
        goto fail;
    }
    for (int64_t i = 0; i < n_tok; i++) {
        if (b->tokens[i] < 0 || b->tokens[i] >= b->n_vocab) {
            st = kerr(b, LM_ERR_FORMAT, "token %lld (chunk %lld) is %d, outside [0, %d)",
                      (long long)i, (long long)(i / b->n_ctx), b->tokens[i], b->n_vocab);
            goto fail;
        }
    }
    return LM_OK;
fail:
    lm_kld_base_close(b);
    return st;
}

enum lm_status lm_kld_base_open(struct lm_kld_base *b, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        memset(b, 0, sizeof *b);
        return lm_error_set(LM_ERR_IO, "kl-divergence base: %s: cannot open: %s", path,
                            strerror(errno));
    }
    return lm_kld_base_open_stream(b, f, path);
}

enum lm_status lm_kld_base_read_row(struct lm_kld_base *b, uint16_t *row) {
    if (!b->f) return lm_error_set(LM_ERR_STATE, "kl-divergence base: read on a closed file");
    const int64_t chunk = b->rows_read / b->n_rows, r = b->rows_read % b->n_rows;
    if (chunk >= b->n_chunk)
        return kerr(b, LM_ERR_STATE, "all %d chunks were read", b->n_chunk);
    if (fread(row, 2, (size_t)b->row_words, b->f) != (size_t)b->row_words)
        return kerr(b, LM_ERR_FORMAT, "truncated in chunk %lld, row %lld", (long long)chunk,
                    (long long)r);
    float scale, min_lp;
    lm_kld_row_params(row, &scale, &min_lp);
    if (!isfinite(scale) || scale < 0 || !isfinite(min_lp))
        return kerr(b, LM_ERR_FORMAT, "chunk %lld, row %lld: scale %g / floor %g are not finite "
                    "(scale >= 0)", (long long)chunk, (long long)r, scale, min_lp);
    b->rows_read++;
    return LM_OK;
}
