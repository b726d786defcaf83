// Load-time repacking of the matmul weights (every layer's q/k/v/o/gate/up/down, each
// expert's gate/up/down view, and the output head) into the row-interleaved (il) layouts of
// kernels.h, which the matmul kernels stream group by group. Experts too: their decode
// matmuls took ~1.9x as long on the file layout (Qwen3-30B-A3B shape, Q4_K/Q6_K, 1 thread).
// The GGUF mapping stays the source of truth for everything else (embedding rows are still
// read from token_embd even when the output head is tied to it). f16 weights need no copy:
// their il layout is the file's (il points into the mapping).
// A repacked weight is read only through its il copy (lm_matmul_plan: a weight with il takes
// an il path at every batch size), so the mapping's pages of it are dropped (MADV_DONTNEED on
// the page-aligned interior) as each piece is packed: RSS stays near the file size instead of
// file + copies (Llama 3.1 8B Q4_K_M: peak 4.5 GB, was 9.1 GB for a 4.9 GB file), and the
// load's peak too. The pages stay in the page cache.
// A last pass drops the merged ranges again (the pages between pieces and between a tensor's
// experts too) and marks them MADV_RANDOM, which makes each its own VMA: the kernel maps a
// whole large page-cache folio on a fault (up to 2 MB, Linux 6.18), and a read of the norm
// next door otherwise brought back ~40% of the Qwen3-MoE shape's attention weights.
// The tied head's source is token_embd, whose rows the embedding lookup still reads: those
// come back a folio at a time as tokens first appear (~1 MB per new token on the 1B Llama).
// LUMEN_NO_REPACK=1 keeps every weight in its file layout, and in memory.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/status.h"
#include "kernels/kernels.h"
#include "model/model.h"

#define LM_REPACK_THREADS 4
#define LM_REPACK_CHUNK 128 // groups per claimed piece of work

struct repack_job {
    struct lm_weight **w;
    int n;
    int64_t next_w, next_g; // next piece to claim, under the mutex
    bool release;           // drop each piece's file pages once it is packed
    uint64_t released;      // bytes dropped, under the mutex
    pthread_mutex_t mu;
};

// The whole pages inside [p, p + n): the pages at the ends may hold a neighbouring tensor
// (GGUF aligns tensors to 32 bytes), which is still read from the mapping.
void lm_model_page_interior(const void *p, size_t n, uintptr_t *a, uintptr_t *b) {
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), s = (uintptr_t)p;
    *a = (s + pg - 1) / pg * pg;
    *b = (s + n) / pg * pg;
    if (*b < *a) *b = *a;
}

// Drops the mapping's pages of [p, p + n) (read-only and file-backed: a later read would fault
// them back from the page cache or the file, never see zeros). Returns the bytes dropped.
static uint64_t release_file_pages(const void *p, size_t n) {
    uintptr_t a, b;
    lm_model_page_interior(p, n, &a, &b);
    if (b == a || madvise((void *)a, b - a, MADV_DONTNEED) != 0) return 0; // advice only
    return b - a;
}

static void *repack_worker(void *arg) {
    struct repack_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        while (j->next_w < j->n && j->next_g >= j->w[j->next_w]->n_out / LM_IL_ROWS) {
            j->next_w++;
            j->next_g = 0;
        }
        if (j->next_w >= j->n) {
            pthread_mutex_unlock(&j->mu);
            return NULL;
        }
        struct lm_weight *w = j->w[j->next_w];
        const int64_t g0 = j->next_g, n_groups = w->n_out / LM_IL_ROWS;
        const int64_t g1 = g0 + LM_REPACK_CHUNK < n_groups ? g0 + LM_REPACK_CHUNK : n_groups;
        j->next_g = g1;
        pthread_mutex_unlock(&j->mu);
        for (int64_t g = g0; g < g1; g++)
            lm_il_pack_group(w->type, (char *)w->il + (size_t)g * w->il_group_bytes,
                             (const char *)w->data + (size_t)g * LM_IL_ROWS * w->row_bytes,
                             w->row_bytes, w->n_in);
        if (j->release) { // the pages between pieces go in the last pass
            const size_t piece = (size_t)LM_IL_ROWS * w->row_bytes;
            const uint64_t r = release_file_pages((const char *)w->data + (size_t)g0 * piece,
                                                  (size_t)(g1 - g0) * piece);
            pthread_mutex_lock(&j->mu);
            j->released += r;
            pthread_mutex_unlock(&j->mu);
        }
    }
}

struct byte_range {
    uintptr_t a, b;
};

static int range_cmp(const void *x, const void *y) {
    const struct byte_range *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a;
}

// The last pass over the n repacked weights' file ranges (r, scratch): sorted, merged where
// they touch, each merged range's page interior dropped and set apart. Returns bytes dropped.
static uint64_t seal_file_ranges(struct lm_weight **w, int n, struct byte_range *r) {
    for (int i = 0; i < n; i++)
        r[i] = (struct byte_range){(uintptr_t)w[i]->data,
                                   (uintptr_t)w[i]->data + (size_t)w[i]->n_out * w[i]->row_bytes};
    qsort(r, (size_t)n, sizeof *r, range_cmp);
    uint64_t dropped = 0;
    for (int i = 0; i < n;) {
        struct byte_range u = r[i++];
        for (; i < n && r[i].a <= u.b; i++)
            if (r[i].b > u.b) u.b = r[i].b;
        uintptr_t a, b;
        lm_model_page_interior((const void *)u.a, u.b - u.a, &a, &b);
        if (b == a || madvise((void *)a, b - a, MADV_DONTNEED) != 0) continue;
        madvise((void *)a, b - a, MADV_RANDOM); // advice: without it only the shield is lost
        dropped += b - a;
    }
    return dropped;
}

enum lm_status lm_model_repack_il(struct lm_model *m) {
    const char *env = getenv("LUMEN_NO_REPACK");
    if (env && env[0] && strcmp(env, "0") != 0) return LM_OK;
    const struct lm_kernels *k = lm_kernels_best(); // the table contexts compute with
    struct repack_job j = {.n = 0};
    const size_t n_exp_w = (size_t)3 * (size_t)m->hp.n_expert; // per layer
    const size_t max_w = (size_t)m->hp.n_layer * (8 + n_exp_w) + 1;
    j.w = calloc(max_w, sizeof *j.w);
    if (!j.w) return lm_error_set(LM_ERR_NOMEM, "model: out of memory (repack)");
    // only a file mapping: MADV_DONTNEED on a caller's buffer (lm_gguf_open_memory) would zero it
    j.release = m->gguf.mapped;
    uint64_t total = 0;
    for (int l = 0; l <= m->hp.n_layer; l++) {
        struct lm_weight *ws[8] = {&m->output};
        size_t nw = 1;
        if (l < m->hp.n_layer) { // wq_a: MLA's q low-rank input (deepseek2), usually absent
            struct lm_layer *L = &m->layers[l];
            struct lm_weight *lw[8] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down, &L->wq_a};
            memcpy(ws, lw, sizeof lw);
            nw = 8;
        }
        // the experts' views after the layer's named weights (none on the head's turn)
        const size_t nx = l < m->hp.n_layer && m->layers[l].gate_exps ? n_exp_w : 0;
        for (size_t i = 0; i < nw + nx; i++) {
            struct lm_weight *w = i < nw ? ws[i] : &m->layers[l].gate_exps[i - nw];
            if (!w->data || !lm_il_supported(w->type, w->n_out, w->n_in) || !k->il_gemm[w->type])
                continue;
            w->il_group_bytes = lm_il_group_bytes(w->type, w->n_in);
            if (lm_il_in_place(w->type, w->row_bytes, w->n_in)) { // f16: the mapping is the layout
                w->il = w->data;
                continue;
            }
            total += (uint64_t)w->il_group_bytes * (uint64_t)(w->n_out / LM_IL_ROWS);
            j.w[j.n++] = w;
        }
    }
    if (j.n == 0) {
        free(j.w);
        return LM_OK;
    }
    void *buf = NULL;
    // (MADV_HUGEPAGE on this buffer made loads ~1 s slower for a 1.1B model: fresh huge
    // pages are expensive to fault in on VMs, and decode did not get faster)
    if (posix_memalign(&buf, 64, (size_t)total) != 0) {
        free(j.w); // the weights keep il == NULL: file layout
        return lm_error_set(LM_ERR_NOMEM, "model: %s: out of memory repacking %llu bytes of weights",
                            m->path, (unsigned long long)total);
    }
    uint64_t off = 0;
    for (int i = 0; i < j.n; i++) {
        j.w[i]->il = (char *)buf + off;
        off += (uint64_t)j.w[i]->il_group_bytes * (uint64_t)(j.w[i]->n_out / LM_IL_ROWS);
    }
    pthread_mutex_init(&j.mu, NULL);
    pthread_t th[LM_REPACK_THREADS];
    int n_th = 0;
    for (; n_th < LM_REPACK_THREADS - 1; n_th++)
        if (pthread_create(&th[n_th], NULL, repack_worker, &j) != 0) break;
    repack_worker(&j);
    for (int t = 0; t < n_th; t++) pthread_join(th[t], NULL);
    pthread_mutex_destroy(&j.mu);
    // the per-weight drops (j.released) keep the peak down; the last pass sets the rest
    if (j.release) {
        struct byte_range *r = malloc((size_t)j.n * sizeof *r);
        m->il_released = r ? seal_file_ranges(j.w, j.n, r) : j.released;
        free(r);
    }
    free(j.w);
    m->il_buf = buf;
    m->il_bytes = total;
    return LM_OK;
}
