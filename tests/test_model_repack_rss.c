// Repacked weights leave the resident set (src/model/repack.c): after load and a short
// generation, the file-mapped pages of every weight read through its il copy are not in this
// process's page tables (/proc/self/pagemap), so nothing read them again; with
// LUMEN_NO_REPACK=1 nothing is repacked or dropped and the same greedy tokens come out.
// The default model (or $LUMEN_MODEL: the test knows no model-specific numbers).
// LM_TEST_LABELS: model
#include "lm_test.h"

#include <fcntl.h>
#include <unistd.h>

#include "lumen.h"
#include "model/model.h"

// Fault-around (the kernel maps up to 64 KB of cached neighbours on a fault in a file
// mapping): a read of the tensor next door may map this many bytes at each end of a range.
#define FAULT_AROUND (64 * 1024)
// A fault maps the whole large page-cache folio it falls in (up to 2 MB, Linux 6.18).
#define FOLIO_MAX (2 * 1024 * 1024)

static int pagemap_fd = -1;

// Pages of [a, b) present in this process's page tables; -1 if pagemap cannot be read.
static int64_t present_pages(uintptr_t a, uintptr_t b) {
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    int64_t n = 0;
    uint64_t e[512];
    for (uintptr_t p = a; p < b;) {
        size_t k = (b - p) / pg < 512 ? (b - p) / pg : 512;
        if (pread(pagemap_fd, e, k * 8, (off_t)(p / pg * 8)) != (ssize_t)(k * 8)) return -1;
        for (size_t i = 0; i < k; i++) n += (e[i] >> 63) & 1;
        p += k * pg;
    }
    return n;
}

// Greedy tokens of a short prompt + n_gen steps (2 threads); the KV cache stays empty after.
static bool generate(struct lm_model *m, int32_t *out, int n_gen) {
    struct lm_context_params cp = {.n_ctx = 64, .n_threads = 2};
    struct lm_context *c = NULL;
    if (lm_context_init(&c, m, &cp) != LM_OK) return false;
    struct lm_model_hparams hp;
    lm_model_hparams(m, &hp);
    struct lm_batch_entry b[8];
    for (int i = 0; i < 8; i++) b[i] = (struct lm_batch_entry){.token = (int32_t)(1 + 97 * i) % hp.n_vocab, .pos = i, .want_logits = i == 7};
    int n = 8, pos = 8;
    bool ok = true;
    for (int s = 0; s < n_gen && ok; s++) {
        ok = lm_decode(c, b, n) == LM_OK;
        const float *l = ok ? lm_get_logits(c, 0) : NULL;
        ok = ok && l;
        if (!ok) break;
        int best = 0;
        for (int v = 1; v < hp.n_vocab; v++) if (l[v] > l[best]) best = v;
        out[s] = best;
        b[0] = (struct lm_batch_entry){.token = best, .pos = pos++, .want_logits = true};
        n = 1;
    }
    lm_context_free(c);
    return ok;
}

// Checks every weight of m with an il copy outside the mapping; returns how many it saw.
static int check_dropped(const struct lm_model *m) {
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    int n_seen = 0;
    uint64_t dropped = 0;
    const size_t n_exp = (size_t)3 * (size_t)m->hp.n_expert;
    for (int l = 0; l <= m->hp.n_layer; l++) {
        const struct lm_weight *ws[7] = {&m->output};
        size_t nw = 1;
        if (l < m->hp.n_layer) {
            const struct lm_layer *L = &m->layers[l];
            const struct lm_weight *lw[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
            memcpy(ws, lw, sizeof lw);
            nw = 7;
        }
        const size_t nx = l < m->hp.n_layer && m->layers[l].gate_exps ? n_exp : 0;
        for (size_t i = 0; i < nw + nx; i++) {
            const struct lm_weight *w = i < nw ? ws[i] : &m->layers[l].gate_exps[i - nw];
            if (!w->data || !w->il || w->il == w->data) continue;
            uintptr_t a, b;
            lm_model_page_interior(w->data, (size_t)w->n_out * w->row_bytes, &a, &b);
            dropped += b - a;
            n_seen++;
            // the tied head's token_embd: the lookup faults back the rows of the prompt's
            // and generated tokens (16 tokens here), each with its folio
            const bool embd = w->data == m->tok_embd.data;
            const int64_t all = present_pages(a, b);
            CHECKF(all >= 0, "pagemap unreadable");
            if (embd) {
                CHECKF(all <= 16 * (FOLIO_MAX / (int64_t)pg + 2), "%s: %lld pages present",
                       w->name, (long long)all);
                continue;
            }
            // only the fault-around of the neighbours' reads at the ends
            const int64_t mid = b - a > 2 * FAULT_AROUND ? present_pages(a + FAULT_AROUND, b - FAULT_AROUND) : 0;
            CHECKF(mid == 0, "%s: %lld of %lld pages read again after the repack", w->name,
                   (long long)mid, (long long)((b - a) / pg));
        }
    }
    // the repacking drops merged ranges: the pages between a tensor's experts too
    CHECKF(dropped <= m->il_released, "dropped %llu, counted %llu", (unsigned long long)dropped,
           (unsigned long long)m->il_released);
    return n_seen;
}

int main(void) {
    const char *path = lm_test_model_path();
    pagemap_fd = open("/proc/self/pagemap", O_RDONLY);
    if (pagemap_fd < 0) {
        printf("SKIP: no /proc/self/pagemap\n");
        return 0;
    }
    struct lm_model *m = NULL;
    enum lm_status st = lm_model_load(&m, path, NULL);
    if (st != LM_OK && getenv("LUMEN_ALLOW_SKIP") && strcmp(getenv("LUMEN_ALLOW_SKIP"), "1") == 0) {
        printf("SKIP: %s\n", lm_error_msg());
        return 0;
    }
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    if (st != LM_OK) return lm_test_finish();
    enum { N_GEN = 8 };
    int32_t toks[N_GEN] = {0}, toks_file[N_GEN] = {0};
    CHECK(m->il_bytes > 0 && m->il_released > 0);
    CHECKF(generate(m, toks, N_GEN), "%s", lm_error_msg());
    const int n_seen = check_dropped(m);
    CHECK(n_seen > 0);
    printf("%d weights repacked: %.1f MB of the file's pages dropped, %.1f MB of il copies\n",
           n_seen, (double)m->il_released / 1e6, (double)m->il_bytes / 1e6);
    lm_model_free(m);

    // LUMEN_NO_REPACK=1: every weight in the file layout, nothing dropped, same tokens
    setenv("LUMEN_NO_REPACK", "1", 1);
    m = NULL;
    st = lm_model_load(&m, path, NULL);
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    if (st == LM_OK) {
        CHECK(m->il_buf == NULL && m->il_released == 0);
        CHECKF(generate(m, toks_file, N_GEN), "%s", lm_error_msg());
        CHECK(check_dropped(m) == 0);
        int same = 0;
        for (int i = 0; i < N_GEN; i++) same += toks[i] == toks_file[i];
        // the il and file kernels round alike on the default model's greedy path
        CHECKF(same == N_GEN, "%d of %d greedy tokens agree", same, N_GEN);
        lm_model_free(m);
    }
    unsetenv("LUMEN_NO_REPACK");
    close(pagemap_fd);
    return lm_test_finish();
}
