// Set-up of the tests on tools/make_arch_gguf.py --ci's random-weight models: the generator
// into $LUMEN_ARCH_DIR, byte-patched copies the loader must refuse, and sequence 0 beside
// others in mixed prefill/decode batches. Header-only (as lm_test.h): its checks count in the
// test that includes it.
#ifndef LM_TEST_ARCH_H
#define LM_TEST_ARCH_H

#include <unistd.h>

#include "lm_test.h"
#include "lm_test_file.h"
#include "lm_test_model.h"
#include "lumen.h"

// Writes the --ci models into dir ($LUMEN_ARCH_DIR, default /tmp/lumen-arch-<uid>): 1 when
// they are there; 0 when the generator cannot run and LUMEN_ALLOW_SKIP=1 (a SKIP line printed:
// the test ends with 0); -1 after a failed check (the test ends with lm_test_finish()).
static inline int lm_test_arch_generate(char *dir, size_t n) {
    const char *d = getenv("LUMEN_ARCH_DIR");
    if (d && *d) snprintf(dir, n, "%s", d);
    else snprintf(dir, n, "/tmp/lumen-arch-%d", (int)getuid());
    const char *py = getenv("LUMEN_PYTHON");
    char pybuf[1024], cmd[2048];
    if (!py || !*py) {
        snprintf(pybuf, sizeof pybuf, "%s", lm_test_path(".venv/bin/python"));
        py = access(pybuf, X_OK) == 0 ? pybuf : "python3";
    }
    snprintf(cmd, sizeof cmd, "'%s' '%s' --ci '%s'", py, lm_test_path("tools/make_arch_gguf.py"), dir);
    if (system(cmd) == 0) return 1;
    const char *allow = getenv("LUMEN_ALLOW_SKIP");
    if (allow && !strcmp(allow, "1")) {
        printf("SKIP: cannot generate the architecture models (needs numpy + gguf)\n");
        return 0;
    }
    CHECKF(0, "generator failed: %s", cmd);
    return -1;
}

// ---------------------------------------------------------------- patched copies

// The first occurrence of s in b[0, n), or NULL
static inline unsigned char *lm_test_find(unsigned char *b, size_t n, const char *s) {
    const size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(b + i, s, k)) return b + i;
    return NULL;
}

// The value of the GGUF key `key` (after the key string and its u32 type), or NULL
static inline unsigned char *lm_test_key_value(unsigned char *b, size_t n, const char *key) {
    unsigned char *k = lm_test_find(b, n, key);
    return k ? k + strlen(key) + 4 : NULL;
}

// A copy of the model at src with one patch (patch() edits its bytes) loads with status want
// and, when refused, a message containing msg; check() (may be NULL) sees a model that loads.
static inline void lm_test_patched(const char *src, const char *what, void (*patch)(unsigned char *, size_t),
                                   enum lm_status want, const char *msg, void (*check)(struct lm_model *)) {
    size_t n = 0;
    unsigned char *b = (unsigned char *)lm_test_read_file(src, &n);
    CHECKF(b != NULL, "cannot read %s", src);
    if (!b) return;
    patch(b, n);
    char dst[1024];
    snprintf(dst, sizeof dst, "%s.bad-%d.gguf", src, (int)getpid());
    FILE *f = fopen(dst, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n);
    if (f) fclose(f);
    free(b);
    struct lm_model *m = NULL;
    const enum lm_status st = lm_model_load(&m, dst, NULL);
    CHECKF(st == want && (st == LM_OK || strstr(lm_error_msg(), msg)), "%s: got %s '%s', want %s with '%s'", what,
           lm_status_name(st), st ? lm_error_msg() : "", lm_status_name(want), msg);
    if (want == LM_OK) printf("%s: %s\n", what, st ? lm_error_msg() : "loaded");
    else printf("refused (%s): %s\n", what, st ? lm_error_msg() : "(loaded!)");
    if (m && check) check(m);
    lm_model_free(m);
    remove(dst);
}

// ---------------------------------------------------------------- mixed batches

enum { LM_TEST_MIX_SEQ = 16, LM_TEST_MIX_LEN = 64 };

// Sequence 0 (prompt[0, np)) generating gen tokens beside n_seq - 1 others (sequence s: 11 +
// olen_step * s ids from seed0 + s, prefilled in chunks of 5 while 0's go in chunks of 7, then
// decoding) gives the same logits bits and tokens as alone (ref, alone_tok:
// lm_test_greedy_alone); then every sequence is cleared.
static inline void lm_test_beside_others(struct lm_context *c, const char *path, const int32_t *prompt, int np,
                                         int gen, int n_seq, int olen_step, uint64_t seed0, const float *ref,
                                         const int32_t *alone_tok, int nv) {
    int32_t other[LM_TEST_MIX_SEQ][LM_TEST_MIX_LEN];
    int olen[LM_TEST_MIX_SEQ], pos[LM_TEST_MIX_SEQ] = {0}, last[LM_TEST_MIX_SEQ] = {0}, g0 = 0, diff = 0, steps = 0;
    if (n_seq > LM_TEST_MIX_SEQ || 11 + olen_step * (n_seq - 1) > LM_TEST_MIX_LEN) {
        CHECKF(0, "%s: %d sequences of up to %d tokens: beyond the test's buffers", path, n_seq,
               11 + olen_step * (n_seq - 1));
        return;
    }
    for (int s = 1; s < n_seq; s++) {
        olen[s] = 11 + olen_step * s;
        lm_test_ids(other[s], olen[s], seed0 + (uint64_t)s, nv);
    }
    bool done = false;
    while (!done && steps < 100) {
        struct lm_batch_entry b[7 + 5 * LM_TEST_MIX_SEQ];
        int nb = 0, want0 = -1;
        for (int s = 0; s < n_seq; s++) {
            const int len = s ? olen[s] : np;
            const int32_t *t = s ? other[s] : prompt;
            if (pos[s] < len) {
                for (int i = 0; i < (s ? 5 : 7) && pos[s] < len; i++, pos[s]++) {
                    if (s == 0 && pos[s] == len - 1) want0 = nb;
                    b[nb++] = (struct lm_batch_entry){t[pos[s]], pos[s], s, pos[s] == len - 1};
                }
            } else {
                if (s == 0) want0 = nb;
                b[nb++] = (struct lm_batch_entry){last[s], pos[s], s, true};
                pos[s]++;
            }
        }
        if (lm_decode(c, b, nb) != LM_OK) {
            CHECKF(0, "%s: mixed batch of %d: %s", path, nb, lm_error_msg());
            return;
        }
        steps++;
        for (int i = 0, k = 0; i < nb; i++) {
            if (!b[i].want_logits) continue;
            const float *l = lm_get_logits(c, k++);
            last[b[i].seq] = lm_test_argmax(l, nv);
            if (i != want0) continue;
            if (!lm_test_same(l, ref + (size_t)g0 * nv, nv) || last[0] != alone_tok[g0]) diff++;
            last[0] = alone_tok[g0];
            done = ++g0 == gen;
        }
    }
    CHECKF(done && diff == 0, "%s: sequence 0 beside %d others: %d of %d steps differ", path, n_seq - 1, diff, g0);
    printf("%s: beside %d others (%d batches): %d generated positions bit-identical\n", path, n_seq - 1, steps, g0);
    for (int s = 0; s < n_seq; s++) CHECK(lm_kv_cache_seq_rm(c, s, 0, -1) == LM_OK);
}

#endif
