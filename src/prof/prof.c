// Profiler recorder: timer calibration, buffers, and the recording functions called
// from the forward pass (per-thread, lock-free, no allocation after lm_prof_init).
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prof/prof_internal.h"

int lm_prof_level_g = LM_PROF_OFF;
int lm_prof_use_tsc_g = 0;
volatile int lm_prof_cur_phase_g = LM_PHASE_COUNT;
struct lm_prof_state lm_prof_g;

// ============================================================================
// names
// ============================================================================

static const char *const k_op_names[LM_OP_COUNT] = {
    "embed",   "attn_norm", "qkv",        "qk_norm", "rope",          "kv_write",
    "attention", "o_proj",  "post_attn_norm", "attn_residual", "ffn_norm", "gate_up",
    "activation", "down",   "post_ffw_norm", "ffn_residual", "output_norm", "lm_head",
    "ffn_moe_router", "ffn_moe_gate_up", "ffn_moe_down", "mla_absorb", "mla_v_up",
};
static const char *const k_phase_names[LM_PHASE_COUNT] = {
    "load", "tokenize", "prefill", "decode", "sample", "detokenize", "draft",
};

const char *lm_prof_op_name(enum lm_prof_op op) {
    return (unsigned)op < LM_OP_COUNT ? k_op_names[op] : "?";
}
const char *lm_prof_phase_name(enum lm_prof_phase ph) {
    return (unsigned)ph < LM_PHASE_COUNT ? k_phase_names[ph] : "-";
}

// ============================================================================
// timer
// ============================================================================

uint64_t lm_prof_ticks_slow(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double lm_prof_ticks_to_ns(uint64_t ticks) {
    double k = lm_prof_g.ns_per_tick > 0 ? lm_prof_g.ns_per_tick : 1.0;
    return (double)ticks * k;
}

// rdtsc is usable when the TSC is invariant across P-states and C-states.
static bool tsc_invariant(void) {
#if defined(__x86_64__) || defined(__i386__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[8192];
    bool constant = false, nonstop = false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        constant = strstr(line, " constant_tsc") != NULL;
        nonstop = strstr(line, " nonstop_tsc") != NULL;
        break;
    }
    fclose(f);
    return constant && nonstop;
#else
    return false;
#endif
}

// Calibrates ns per TSC tick against CLOCK_MONOTONIC_RAW over ~20 ms.
#if defined(__x86_64__) || defined(__i386__)
// A TSC reading and the clock's time at it: the TSC read between two clock reads, retried
// (at most 100 times) until they are under 20 us apart, so a preemption between the
// two clocks on a loaded machine cannot skew the calibration (1 ms in a 20 ms window: 5%).
static void tsc_pair(uint64_t *ns, uint64_t *tsc) {
    for (int i = 0; i < 100; i++) {
        const uint64_t a = lm_prof_ticks_slow();
        *tsc = __builtin_ia32_rdtsc();
        const uint64_t b = lm_prof_ticks_slow();
        *ns = a + (b - a) / 2;
        if (b - a < 20000) return;
    }
}
#endif

static double tsc_calibrate(void) {
#if defined(__x86_64__) || defined(__i386__)
    uint64_t n0, c0, n1, c1;
    tsc_pair(&n0, &c0);
    struct timespec req = {0, 20 * 1000 * 1000};
    nanosleep(&req, NULL);
    tsc_pair(&n1, &c1);
    if (c1 <= c0 || n1 <= n0) return 0;
    return (double)(n1 - n0) / (double)(c1 - c0);
#else
    return 0;
#endif
}

// ============================================================================
// init / shutdown
// ============================================================================

static void free_state(void) {
    if (lm_prof_g.th) {
        for (int i = 0; i < lm_prof_g.n_threads; i++) {
            struct lm_prof_thread *t = &lm_prof_g.th[i];
            free(t->op);
            free(t->bar);
            free(t->op_hist);
            free(t->bar_hist);
            free(t->ev);
        }
        free(lm_prof_g.th);
    }
    free(lm_prof_g.mm_desc);
    free(lm_prof_g.mm_desc_slot);
    free(lm_prof_g.mm_sum);
    free(lm_prof_g.var);
    free(lm_prof_g.mem);
    free(lm_prof_g.moe);
    free(lm_prof_g.moe_layer);
    memset(&lm_prof_g, 0, sizeof lm_prof_g);
}

void lm_prof_shutdown(void) {
    lm_prof_level_g = LM_PROF_OFF;
    lm_prof_cur_phase_g = LM_PHASE_COUNT;
    free_state();
}

enum lm_status lm_prof_init(enum lm_prof_level level, int n_threads, size_t max_events) {
    lm_prof_shutdown();
    if (level == LM_PROF_OFF) return LM_OK;
    if (level != LM_PROF_SUMMARY && level != LM_PROF_TRACE)
        return lm_error_set(LM_ERR_ARG, "lm_prof_init: level %d is not off/summary/trace",
                            (int)level);
    if (n_threads < 1 || n_threads > LM_PROF_MAX_THREADS)
        return lm_error_set(LM_ERR_ARG, "lm_prof_init: n_threads %d outside [1, %d]",
                            n_threads, LM_PROF_MAX_THREADS);
    if (max_events == 0) max_events = (size_t)1 << 20;
    if (max_events > ((size_t)1 << 28))
        return lm_error_set(LM_ERR_ARG, "lm_prof_init: max_events %zu > %zu", max_events,
                            (size_t)1 << 28);

    lm_prof_use_tsc_g = 0;
    double k = 1.0;
    if (tsc_invariant()) {
        double c = tsc_calibrate();
        if (c > 0) {
            k = c;
            lm_prof_use_tsc_g = 1;
        }
    }
    struct lm_prof_state *s = &lm_prof_g;
    s->ns_per_tick = k;
    s->level = level;
    s->n_threads = n_threads;
    // calloc of large blocks maps zero pages lazily: only touched entries cost RSS.
    s->th = aligned_alloc(64, sizeof(struct lm_prof_thread) * (size_t)n_threads);
    if (!s->th) goto nomem;
    memset(s->th, 0, sizeof(struct lm_prof_thread) * (size_t)n_threads);
    size_t n_stat = (size_t)LM_PROF_NPH * LM_OP_COUNT * LM_PROF_NL;
    size_t n_hist = (size_t)LM_PROF_NPH * LM_OP_COUNT;
    for (int i = 0; i < n_threads; i++) {
        struct lm_prof_thread *t = &s->th[i];
        t->op = calloc(n_stat, sizeof *t->op);
        t->bar = calloc(n_stat, sizeof *t->bar);
        t->op_hist = calloc(n_hist, sizeof *t->op_hist);
        t->bar_hist = calloc(n_hist, sizeof *t->bar_hist);
        if (!t->op || !t->bar || !t->op_hist || !t->bar_hist) goto nomem;
        if (level == LM_PROF_TRACE) {
            t->ev = malloc(max_events * sizeof *t->ev);
            if (!t->ev) goto nomem;
            t->cap_ev = max_events;
        }
    }
    s->mm_desc = calloc(LM_PROF_MM_DESC_CAP, sizeof *s->mm_desc);
    s->mm_desc_slot = calloc(LM_PROF_MM_DESC_CAP * 2, sizeof *s->mm_desc_slot);
    s->mm_sum = calloc(LM_PROF_MM_SUM_CAP, sizeof *s->mm_sum);
    s->var = calloc(LM_PROF_VARIANT_CAP, sizeof *s->var);
    s->mem = calloc(LM_PROF_MEM_CAP, sizeof *s->mem);
    // ~3 MB of address space, touched only by the layers and experts a MoE model has
    s->moe = calloc((size_t)LM_PROF_MOE_SLOTS * LM_PROF_MAX_LAYERS * LM_PROF_MAX_EXPERTS, sizeof *s->moe);
    s->moe_layer = calloc((size_t)LM_PROF_MOE_SLOTS * LM_PROF_MAX_LAYERS, sizeof *s->moe_layer);
    if (!s->mm_desc || !s->mm_desc_slot || !s->mm_sum || !s->var || !s->mem || !s->moe ||
        !s->moe_layer)
        goto nomem;
    s->epoch = lm_prof_ticks();
    lm_prof_level_g = level;
    return LM_OK;
nomem:
    free_state();
    return lm_error_set(LM_ERR_NOMEM, "lm_prof_init: out of memory for %d threads x %zu events",
                        n_threads, max_events);
}

uint64_t lm_prof_dropped(void) {
    uint64_t d = lm_prof_g.dropped_main;
    for (int i = 0; i < lm_prof_g.n_threads; i++) d += lm_prof_g.th[i].dropped;
    return d;
}

// ============================================================================
// recording
// ============================================================================

static inline struct lm_prof_ev *ev_push(struct lm_prof_thread *t) {
    if (t->n_ev >= t->cap_ev) {
        t->dropped++;
        return NULL;
    }
    return &t->ev[t->n_ev++];
}

uint64_t lm_prof_phase_begin(enum lm_prof_phase ph) {
    if (!lm_prof_on()) return 0;
    if ((unsigned)ph < LM_PHASE_COUNT) lm_prof_cur_phase_g = (int)ph;
    return lm_prof_ticks();
}

void lm_prof_phase_rec(enum lm_prof_phase ph, uint64_t t0, uint64_t t1, int32_t step,
                       int32_t n_tokens) {
    struct lm_prof_state *s = &lm_prof_g;
    if (!s->th || (unsigned)ph >= LM_PHASE_COUNT) return;
    uint64_t d = t1 > t0 ? t1 - t0 : 0;
    lm_prof_stat_add(&s->phase[ph], d);
    s->phase_hist[ph].b[lm_prof_hist_index(d)]++;
    if (n_tokens > 0) s->phase_tokens[ph] += (uint64_t)n_tokens;
    if (lm_prof_cur_phase_g == (int)ph) lm_prof_cur_phase_g = LM_PHASE_COUNT;
    if (s->level == LM_PROF_TRACE) {
        struct lm_prof_ev *e = ev_push(&s->th[0]);
        if (e) *e = (struct lm_prof_ev){.t0 = t0, .t1 = t1, .a = step, .b = n_tokens,
                                        .layer = -1, .type = LM_EV_PHASE, .code = (uint8_t)ph,
                                        .phase = (uint8_t)ph};
    }
}

void lm_prof_step_rec(const struct lm_prof_step *st, uint64_t t0, uint64_t t1) {
    struct lm_prof_state *s = &lm_prof_g;
    if (!s->th || !st || st->n_tokens < 1) return;
    const int32_t n_dec = st->n_decode < 0 ? 0 : st->n_decode > st->n_tokens ? st->n_tokens : st->n_decode;
    int32_t n_dr = st->n_draft < 0 ? 0 : st->n_draft > 255 ? 255 : st->n_draft;
    if (n_dr > st->n_tokens - n_dec) n_dr = st->n_tokens - n_dec;
    const int32_t n_acc = st->n_accepted < 0 ? 0 : st->n_accepted > n_dr ? n_dr : st->n_accepted;
    const int kind = n_dec + n_dr < st->n_tokens; // 1: holds prefill tokens
    const uint64_t d = t1 > t0 ? t1 - t0 : 0;
    lm_prof_stat_add(&s->step[kind], d);
    s->step_hist[kind].b[lm_prof_hist_index(d)]++;
    if (s->step[0].n + s->step[1].n == 1 || st->n_tokens < s->step_tok_min) s->step_tok_min = st->n_tokens;
    if (st->n_tokens > s->step_tok_max) s->step_tok_max = st->n_tokens;
    s->step_tokens += (uint64_t)st->n_tokens;
    s->step_decode += (uint64_t)n_dec;
    s->step_seqs += (uint64_t)(st->n_seqs > 0 ? st->n_seqs : 0);
    s->step_draft += (uint64_t)n_dr;
    s->step_accepted += (uint64_t)n_acc;
    s->step_verify += n_dr > 0;
    if (s->level == LM_PROF_TRACE) {
        // n_decode <= max_running <= 4096 and n_seqs <= 4096 (lm_engine_init's limits)
        struct lm_prof_ev *e = ev_push(&s->th[0]);
        if (e) *e = (struct lm_prof_ev){.t0 = t0, .t1 = t1, .a = st->step, .b = st->n_tokens,
                                        .layer = (int16_t)(n_dec > INT16_MAX ? INT16_MAX : n_dec),
                                        .type = LM_EV_STEP, .phase = (uint8_t)lm_prof_cur_phase_g,
                                        .code = (uint8_t)n_dr, .pad = (uint8_t)n_acc,
                                        .c = (uint16_t)(st->n_seqs < 0 ? 0 : st->n_seqs > UINT16_MAX
                                                        ? UINT16_MAX : st->n_seqs)};
    }
}

static inline void rec_span(int ith, int op, int layer, uint64_t t0, uint64_t t1, bool bar) {
    struct lm_prof_state *s = &lm_prof_g;
    if ((unsigned)ith >= (unsigned)s->n_threads || (unsigned)op >= LM_OP_COUNT) return;
    struct lm_prof_thread *t = &s->th[ith];
    int ph = lm_prof_cur_phase_g;
    uint64_t d = t1 > t0 ? t1 - t0 : 0;
    size_t slot = lm_prof_slot(ph, op, layer);
    struct lm_prof_hist *h = (bar ? t->bar_hist : t->op_hist) + (size_t)ph * LM_OP_COUNT + op;
    lm_prof_stat_add((bar ? t->bar : t->op) + slot, d);
    h->b[lm_prof_hist_index(d)]++;
    if (bar) {
        t->wait += d;
        t->n_bar++;
    } else {
        t->busy += d;
    }
    if (s->level == LM_PROF_TRACE) {
        struct lm_prof_ev *e = ev_push(t);
        if (e) *e = (struct lm_prof_ev){.t0 = t0, .t1 = t1, .a = -1, .b = 0,
                                        .layer = (int16_t)(layer < 0 ? -1 : layer),
                                        .type = bar ? LM_EV_BARRIER : LM_EV_OP,
                                        .code = (uint8_t)op, .phase = (uint8_t)ph};
    }
}

void lm_prof_op_rec(int ith, enum lm_prof_op op, int layer, uint64_t t0, uint64_t t1) {
    rec_span(ith, (int)op, layer, t0, t1, false);
}

void lm_prof_barrier_rec(int ith, enum lm_prof_op after_op, int layer, uint64_t t0,
                         uint64_t t1) {
    rec_span(ith, (int)after_op, layer, t0, t1, true);
}

// ---- main-thread tables

static void copy_str(char *dst, const char *src) {
    if (!src) src = "";
    size_t n = strnlen(src, LM_PROF_STR - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
}

static uint64_t hash_str(uint64_t h, const char *s) {
    for (; s && *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h * 0x9e3779b97f4a7c15ull;
}

static uint64_t hash_mm(const struct lm_prof_matmul *mm) {
    uint64_t h = 0xcbf29ce484222325ull;
    int64_t v[6] = {mm->op, mm->layer, mm->m, mm->n, mm->k, mm->wtype};
    for (int i = 0; i < 6; i++) h = (h ^ (uint64_t)v[i]) * 0x100000001b3ull;
    h = hash_str(h, mm->weight);
    h = hash_str(h, mm->variant);
    return hash_str(h, mm->reason) ^ mm->bytes;
}

static bool str_eq(const char *fixed, const char *s) {
    if (!s) s = "";
    return strncmp(fixed, s, LM_PROF_STR - 1) == 0;
}

static bool mm_desc_eq(const struct lm_prof_mm_desc *d, const struct lm_prof_matmul *mm) {
    return d->op == (int)mm->op && d->layer == mm->layer && d->m == mm->m && d->n == mm->n &&
           d->k == mm->k && d->wtype == (int)mm->wtype && d->bytes == mm->bytes &&
           str_eq(d->weight, mm->weight) && str_eq(d->variant, mm->variant) &&
           str_eq(d->reason, mm->reason);
}

static int mm_sum_find(const struct lm_prof_mm_desc *d) {
    struct lm_prof_state *s = &lm_prof_g;
    for (int i = 0; i < s->n_mm_sum; i++) {
        struct lm_prof_mm_sum *e = &s->mm_sum[i];
        if (e->op == d->op && e->wtype == d->wtype && e->m == d->m && e->n == d->n &&
            e->k == d->k && !strcmp(e->variant, d->variant))
            return i;
    }
    if (s->n_mm_sum >= LM_PROF_MM_SUM_CAP) return -1;
    struct lm_prof_mm_sum *e = &s->mm_sum[s->n_mm_sum];
    e->op = d->op;
    e->wtype = d->wtype;
    e->m = d->m;
    e->n = d->n;
    e->k = d->k;
    memcpy(e->variant, d->variant, LM_PROF_STR);
    memcpy(e->reason, d->reason, LM_PROF_STR);
    return s->n_mm_sum++;
}

// Descriptor index for mm (inserted if new), -1 when the table is full.
static int mm_desc_find(const struct lm_prof_matmul *mm) {
    struct lm_prof_state *s = &lm_prof_g;
    uint64_t h = hash_mm(mm);
    unsigned mask = LM_PROF_MM_DESC_CAP * 2 - 1;
    for (unsigned i = (unsigned)h & mask;; i = (i + 1) & mask) {
        int slot = s->mm_desc_slot[i];
        if (slot == 0) {
            if (s->n_mm_desc >= LM_PROF_MM_DESC_CAP) return -1;
            int idx = s->n_mm_desc;
            struct lm_prof_mm_desc *d = &s->mm_desc[idx];
            d->op = (int)mm->op;
            d->layer = mm->layer;
            d->wtype = (int)mm->wtype;
            d->m = mm->m;
            d->n = mm->n;
            d->k = mm->k;
            d->bytes = mm->bytes;
            d->flops = mm->flops;
            d->hash = h;
            copy_str(d->weight, mm->weight);
            copy_str(d->variant, mm->variant);
            copy_str(d->reason, mm->reason);
            d->sum = mm_sum_find(d);
            s->n_mm_desc++;
            s->mm_desc_slot[i] = idx + 1;
            return idx;
        }
        struct lm_prof_mm_desc *d = &s->mm_desc[slot - 1];
        if (d->hash == h && mm_desc_eq(d, mm)) return slot - 1;
    }
}

void lm_prof_matmul_shape_rec(const struct lm_prof_matmul *mm, uint64_t t0, uint64_t t1) {
    struct lm_prof_state *s = &lm_prof_g;
    if (!s->th || !mm || (unsigned)mm->op >= LM_OP_COUNT) return;
    int di = mm_desc_find(mm);
    if (di < 0) {
        s->dropped_main++;
        return;
    }
    uint64_t d = t1 > t0 ? t1 - t0 : 0;
    int si = s->mm_desc[di].sum;
    if (si >= 0) {
        struct lm_prof_mm_sum *e = &s->mm_sum[si];
        lm_prof_stat_add(&e->st, d);
        e->hist.b[lm_prof_hist_index(d)]++;
        e->bytes += mm->bytes;
        e->flops += mm->flops;
    } else {
        s->dropped_main++;
    }
    if (s->level == LM_PROF_TRACE) {
        struct lm_prof_ev *e = ev_push(&s->th[0]);
        if (e) *e = (struct lm_prof_ev){.t0 = t0, .t1 = t1, .a = di, .b = 0,
                                        .layer = (int16_t)(mm->layer < 0 ? -1 : mm->layer),
                                        .type = LM_EV_MATMUL, .code = (uint8_t)mm->op,
                                        .phase = (uint8_t)lm_prof_cur_phase_g};
    }
}

void lm_prof_variant_rec(const char *kernel, const char *variant, const char *reason) {
    struct lm_prof_state *s = &lm_prof_g;
    if (!s->th) return;
    int idx = -1;
    for (int i = 0; i < s->n_var; i++) {
        if (str_eq(s->var[i].kernel, kernel) && str_eq(s->var[i].variant, variant) &&
            str_eq(s->var[i].reason, reason)) {
            idx = i;
            break;
        }
    }
    if (idx < 0) {
        if (s->n_var >= LM_PROF_VARIANT_CAP) {
            s->dropped_main++;
            return;
        }
        idx = s->n_var++;
        copy_str(s->var[idx].kernel, kernel);
        copy_str(s->var[idx].variant, variant);
        copy_str(s->var[idx].reason, reason);
    }
    s->var[idx].count++;
    if (s->level == LM_PROF_TRACE) {
        uint64_t t = lm_prof_ticks();
        struct lm_prof_ev *e = ev_push(&s->th[0]);
        if (e) *e = (struct lm_prof_ev){.t0 = t, .t1 = t, .a = idx, .layer = -1,
                                        .type = LM_EV_VARIANT,
                                        .phase = (uint8_t)lm_prof_cur_phase_g};
    }
}

void lm_prof_memory_rec(const struct lm_prof_memory *mem) {
    struct lm_prof_state *s = &lm_prof_g;
    if (!s->th || !mem) return;
    s->mem_last = *mem;
    s->have_mem = true;
    uint64_t *pk = &s->mem_peak.weights_mapped;
    const uint64_t *v = &mem->weights_mapped;
    for (int i = 0; i < 5; i++)
        if (v[i] > pk[i]) pk[i] = v[i];
    if (s->level != LM_PROF_TRACE) return;
    if (s->n_mem >= LM_PROF_MEM_CAP) {
        s->dropped_main++;
        return;
    }
    uint64_t t = lm_prof_ticks();
    s->mem[s->n_mem] = (struct lm_prof_mem_ent){.t = t, .m = *mem};
    struct lm_prof_ev *e = ev_push(&s->th[0]);
    if (e) *e = (struct lm_prof_ev){.t0 = t, .t1 = t, .a = s->n_mem, .layer = -1,
                                    .type = LM_EV_MEMORY, .phase = (uint8_t)lm_prof_cur_phase_g};
    s->n_mem++;
}

void lm_prof_read_rss(uint64_t *rss, uint64_t *rss_peak) {
    *rss = *rss_peak = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) *rss = kb * 1024ull;
        else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) *rss_peak = kb * 1024ull;
    }
    fclose(f);
}

// ============================================================================
// histogram / stat helpers
// ============================================================================

void lm_prof_hist_bounds(int i, double *lo, double *hi) {
    if (i < 8) {
        *lo = i;
        *hi = i + 1;
        return;
    }
    int b = i / 8 + 2, sub = i % 8;
    *lo = (double)(8 + sub) * (double)(1ull << (b - 3));
    *hi = (double)(9 + sub) * (double)(1ull << (b - 3));
}

double lm_prof_hist_quantile(const struct lm_prof_hist *h, uint64_t n, double q,
                             uint64_t min, uint64_t max) {
    if (n == 0) return 0;
    uint64_t rank = (uint64_t)(q * (double)n + 0.999999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    uint64_t cum = 0;
    for (int i = 0; i < LM_PROF_HIST_BUCKETS; i++) {
        cum += h->b[i];
        if (cum >= rank) {
            double lo, hi;
            lm_prof_hist_bounds(i, &lo, &hi);
            double v = i < 8 ? lo : 0.5 * (lo + hi);
            if (v < (double)min) v = (double)min;
            if (v > (double)max) v = (double)max;
            return v;
        }
    }
    return (double)max;
}

void lm_prof_stat_merge(struct lm_prof_stat *dst, const struct lm_prof_stat *src) {
    if (src->n == 0) return;
    if (dst->n == 0 || src->min < dst->min) dst->min = src->min;
    if (src->max > dst->max) dst->max = src->max;
    dst->n += src->n;
    dst->sum += src->sum;
}

// ---- experts of MoE layers (pool thread 0)

static int moe_slot(void) { return lm_prof_cur_phase_g == LM_PHASE_DECODE; }

void lm_prof_moe_route_rec(int layer, int n_expert, const int32_t *off, int64_t n_tokens) {
    struct lm_prof_state *s = &lm_prof_g;
    if (!s->moe || layer < 0 || layer >= LM_PROF_MAX_LAYERS || n_expert < 1) return;
    const int nx = n_expert < LM_PROF_MAX_EXPERTS ? n_expert : LM_PROF_MAX_EXPERTS;
    if (nx < n_expert) s->dropped_main++;
    if (nx > s->moe_n_expert) s->moe_n_expert = nx;
    if (layer + 1 > s->moe_n_layer) s->moe_n_layer = layer + 1;
    const int slot = moe_slot();
    int32_t distinct = 0;
    for (int e = 0; e < nx; e++) {
        const int32_t cnt = off[e + 1] - off[e];
        if (cnt == 0) continue;
        struct lm_prof_moe_cell *c = &s->moe[lm_prof_moe_slot(slot, layer, e)];
        c->tokens += (uint64_t)cnt;
        c->calls++;
        distinct++;
    }
    struct lm_prof_moe_layer_agg *l = &s->moe_layer[(size_t)slot * LM_PROF_MAX_LAYERS + (size_t)layer];
    if (l->calls == 0 || distinct < l->distinct_min) l->distinct_min = distinct;
    if (distinct > l->distinct_max) l->distinct_max = distinct;
    l->calls++;
    l->tokens += (uint64_t)n_tokens;
    l->distinct += (uint64_t)distinct;
}

void lm_prof_expert_rec(enum lm_prof_op op, int layer, int expert, int32_t n_tokens, uint64_t t0,
                        uint64_t t1) {
    struct lm_prof_state *s = &lm_prof_g;
    if (!s->moe || layer < 0 || layer >= LM_PROF_MAX_LAYERS || expert < 0 ||
        expert >= LM_PROF_MAX_EXPERTS || (unsigned)op >= LM_OP_COUNT)
        return;
    s->moe[lm_prof_moe_slot(moe_slot(), layer, expert)].ticks += t1 > t0 ? t1 - t0 : 0;
    if (s->level == LM_PROF_TRACE) {
        struct lm_prof_ev *e = ev_push(&s->th[0]);
        if (e) *e = (struct lm_prof_ev){.t0 = t0, .t1 = t1, .a = expert, .b = n_tokens,
                                        .layer = (int16_t)layer, .type = LM_EV_EXPERT,
                                        .code = (uint8_t)op, .phase = (uint8_t)lm_prof_cur_phase_g};
    }
}

// ============================================================================
// queries on the SUMMARY aggregates
// ============================================================================

double lm_prof_query_ms(enum lm_prof_phase ph, enum lm_prof_op op, int layer, bool barrier,
                        uint64_t *count) {
    const struct lm_prof_state *s = &lm_prof_g;
    if (!s->th || s->n_threads < 1 || (unsigned)op >= LM_OP_COUNT || (unsigned)ph >= LM_PHASE_COUNT ||
        layer < -1 || layer >= LM_PROF_MAX_LAYERS)
        return 0.0;
    const size_t slot = lm_prof_slot(ph, op, layer);
    double sum = 0;
    for (int t = 0; t < s->n_threads; t++) {
        const struct lm_prof_stat *st = (barrier ? s->th[t].bar : s->th[t].op) + slot;
        sum += (double)st->sum;
        if (t == 0 && count) *count += st->n;
    }
    return sum / s->n_threads * s->ns_per_tick / 1e6;
}

int lm_prof_matmul_count(void) { return lm_prof_g.mm_sum ? lm_prof_g.n_mm_sum : 0; }

bool lm_prof_matmul_get(int i, struct lm_prof_matmul_agg *out) {
    const struct lm_prof_state *s = &lm_prof_g;
    if (!s->mm_sum || i < 0 || i >= s->n_mm_sum) return false;
    const struct lm_prof_mm_sum *e = &s->mm_sum[i];
    *out = (struct lm_prof_matmul_agg){
        .op = (enum lm_prof_op)e->op, .wtype = e->wtype, .m = e->m, .n = e->n,
        .k = e->k, .variant = e->variant, .count = e->st.n,
        .total_ms = (double)e->st.sum * s->ns_per_tick / 1e6, .bytes = e->bytes};
    return true;
}

int lm_prof_moe_n_expert(void) { return lm_prof_g.moe ? lm_prof_g.moe_n_expert : 0; }

bool lm_prof_moe_expert_get(bool decode, int layer, int expert, struct lm_prof_moe_expert *out) {
    const struct lm_prof_state *s = &lm_prof_g;
    memset(out, 0, sizeof *out);
    if (!s->moe || layer < 0 || layer >= s->moe_n_layer || expert < 0 || expert >= s->moe_n_expert)
        return false;
    const struct lm_prof_moe_cell *c = &s->moe[lm_prof_moe_slot(decode, layer, expert)];
    *out = (struct lm_prof_moe_expert){.tokens = c->tokens, .calls = c->calls,
                                       .ms = (double)c->ticks * s->ns_per_tick / 1e6};
    return true;
}

bool lm_prof_moe_layer_get(bool decode, int layer, struct lm_prof_moe_layer *out) {
    const struct lm_prof_state *s = &lm_prof_g;
    memset(out, 0, sizeof *out);
    if (!s->moe_layer || layer < 0 || layer >= s->moe_n_layer) return false;
    const struct lm_prof_moe_layer_agg *l = &s->moe_layer[(size_t)decode * LM_PROF_MAX_LAYERS + (size_t)layer];
    *out = (struct lm_prof_moe_layer){.calls = l->calls, .tokens = l->tokens, .distinct = l->distinct,
                                      .distinct_min = l->distinct_min, .distinct_max = l->distinct_max};
    return true;
}
