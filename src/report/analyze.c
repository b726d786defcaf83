// `lumen analyze`: loads a lumen JSONL trace (schema docs/profiling.md) with a small
// strict JSON-object-line parser, validates every line, aggregates the events into
// report sections with exact (nearest-rank) percentiles (the text report: text.c).
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "jsonl.h"
#include "report_internal.h"

const char *const lm_r_mem_names[5] = {"weights_mapped", "kv_cache", "scratch", "rss",
                                        "rss_peak"};

static const char *const k_sec_names[LM_RS_COUNT] = {
    "type", "phase", "phase_op", "layer", "op", "barrier_phase", "barrier_op", "matmul",
    "variant", "mm_variant", "step", "step_tokens", "expert", "expert_tokens",
};

const char *lm_r_section_name(int sec) {
    return sec >= 0 && sec < LM_RS_COUNT ? k_sec_names[sec] : "?";
}

// ============================================================================
// sections: insertion-ordered string -> group map
// ============================================================================

static uint64_t hash_key(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

const struct lm_rgroup *lm_r_find(const struct lm_rsection *s, const char *key) {
    if (!s->n_slot) return NULL;
    size_t mask = s->n_slot - 1;
    for (size_t i = hash_key(key) & mask;; i = (i + 1) & mask) {
        if (!s->slot[i]) return NULL;
        if (!strcmp(s->g[s->slot[i] - 1].key, key)) return &s->g[s->slot[i] - 1];
    }
}

static bool sec_rehash(struct lm_rsection *s, size_t n_slot) {
    size_t *slot = calloc(n_slot, sizeof *slot);
    if (!slot) return false;
    for (size_t j = 0; j < s->n; j++) {
        size_t i = hash_key(s->g[j].key) & (n_slot - 1);
        while (slot[i]) i = (i + 1) & (n_slot - 1);
        slot[i] = j + 1;
    }
    free(s->slot);
    s->slot = slot;
    s->n_slot = n_slot;
    return true;
}

// Group for key (created if new); NULL on allocation failure.
static struct lm_rgroup *sec_get(struct lm_rsection *s, const char *key) {
    if (s->n_slot) {
        size_t mask = s->n_slot - 1;
        for (size_t i = hash_key(key) & mask; s->slot[i]; i = (i + 1) & mask)
            if (!strcmp(s->g[s->slot[i] - 1].key, key)) return &s->g[s->slot[i] - 1];
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct lm_rgroup *g = realloc(s->g, cap * sizeof *g);
        if (!g) return NULL;
        s->g = g;
        s->cap = cap;
    }
    if ((s->n + 1) * 2 > s->n_slot && !sec_rehash(s, s->n_slot ? s->n_slot * 2 : 32)) return NULL;
    struct lm_rgroup *g = &s->g[s->n];
    memset(g, 0, sizeof *g);
    g->key = strdup(key);
    if (!g->key) return NULL;
    size_t mask = s->n_slot - 1, i = hash_key(key) & mask;
    while (s->slot[i]) i = (i + 1) & mask;
    s->slot[i] = ++s->n;
    return g;
}

static bool grp_add(struct lm_rgroup *g, uint64_t v) {
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 16;
        uint64_t *nv = realloc(g->v, cap * sizeof *nv);
        if (!nv) return false;
        g->v = nv;
        g->cap = cap;
    }
    g->v[g->n++] = v;
    g->sum += (double)v;
    return true;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

// Nearest-rank percentile of sorted v: the smallest value with at least p% of the
// samples <= it, i.e. v[ceil(p/100 * n) - 1].
static double nearest_rank(const uint64_t *v, size_t n, double p) {
    if (!n) return 0;
    size_t r = (size_t)ceil(p / 100.0 * (double)n - 1e-9);
    if (r < 1) r = 1;
    if (r > n) r = n;
    return (double)v[r - 1];
}

static void grp_finalize(struct lm_rgroup *g, bool keep_order) {
    struct lm_prof_row *r = &g->row;
    memset(r, 0, sizeof *r);
    r->count = g->n;
    if (!g->n || !g->v) return; // count-only groups (untimed event types, variants)
    uint64_t *v = g->v;
    uint64_t *tmp = NULL;
    if (keep_order) {
        tmp = malloc(g->n * sizeof *tmp);
        if (tmp) {
            memcpy(tmp, g->v, g->n * sizeof *tmp);
            v = tmp;
        }
    }
    qsort(v, g->n, sizeof *v, cmp_u64);
    r->total = g->sum;
    r->avg = g->sum / (double)g->n;
    r->min = (double)v[0];
    r->max = (double)v[g->n - 1];
    r->p95 = nearest_rank(v, g->n, 95);
    r->p99 = nearest_rank(v, g->n, 99);
    free(tmp);
}

static int cmp_grp_total(const void *a, const void *b) {
    const struct lm_rgroup *x = *(struct lm_rgroup *const *)a, *y = *(struct lm_rgroup *const *)b;
    if (x->sum != y->sum) return x->sum < y->sum ? 1 : -1;
    if (x->n != y->n) return x->n < y->n ? 1 : -1;
    return strcmp(x->key, y->key);
}

struct lm_rgroup **lm_r_sorted(const struct lm_rsection *s, bool by_total) {
    struct lm_rgroup **a = malloc((s->n ? s->n : 1) * sizeof *a);
    if (!a) return NULL;
    for (size_t i = 0; i < s->n; i++) a[i] = &s->g[i];
    if (by_total) qsort(a, s->n, sizeof *a, cmp_grp_total);
    return a;
}

// ============================================================================
// schema validation + aggregation
// ============================================================================

struct loader {
    struct lm_prof_report *r;
    const char *path;
    size_t line;
    struct jline j;
    // tid-0 block reconstruction
    bool blk_open;
    int blk_layer, blk_phase, blk_step;
    uint64_t blk_t0, blk_t1;
};

static enum lm_status lerr(struct loader *L, enum lm_status st, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return lm_error_set(st, "%s:%zu: %s", L->path, L->line, msg);
}

// Required key of a type: 's' string, 'u' non-negative integer, 'i' integer.
static enum lm_status need(struct loader *L, const char *type, const char *key, char kind,
                           const struct jfield **out) {
    const struct jfield *f = lm_jget(&L->j, key);
    if (!f) return lerr(L, LM_ERR_FORMAT, "%s event lacks required key '%s'", type, key);
    bool ok = kind == 's' ? f->type == JV_STR
                          : f->type == JV_NUM && f->is_int && (kind == 'i' || f->i >= 0);
    if (!ok)
        return lerr(L, LM_ERR_FORMAT, "%s event: key '%s' must be %s", type, key,
                    kind == 's' ? "a string" : kind == 'u' ? "a non-negative integer"
                                                           : "an integer");
    *out = f;
    return LM_OK;
}

static int phase_index(const char *s) {
    for (int p = 0; p < LM_PHASE_COUNT; p++)
        if (!strcmp(s, lm_prof_phase_name((enum lm_prof_phase)p))) return p;
    return !strcmp(s, "-") ? LM_PHASE_COUNT : -1;
}

static int op_index(const char *s) {
    for (int o = 0; o < LM_OP_COUNT; o++)
        if (!strcmp(s, lm_prof_op_name((enum lm_prof_op)o))) return o;
    return -1;
}

static int op_group(int op) {
    if (op >= LM_OP_ATTN_NORM && op <= LM_OP_ATTN_RESIDUAL) return LM_RG_ATTN;
    if (op >= LM_OP_FFN_NORM && op <= LM_OP_FFN_RESIDUAL) return LM_RG_FFN;
    return LM_RG_OTHER;
}

#define NEED(type, key, kind, var)                                                      \
    const struct jfield *var = NULL;                                                    \
    if ((st = need(L, type, key, kind, &var))) return st

static enum lm_status add(struct loader *L, int sec, const char *key, uint64_t v) {
    struct lm_rgroup *g = sec_get(&L->r->sec[sec], key);
    if (!g || !grp_add(g, v)) return lerr(L, LM_ERR_NOMEM, "out of memory");
    return LM_OK;
}

static enum lm_status count_only(struct loader *L, int sec, const char *key) {
    struct lm_rgroup *g = sec_get(&L->r->sec[sec], key);
    if (!g) return lerr(L, LM_ERR_NOMEM, "out of memory");
    g->n++;
    return LM_OK;
}

static enum lm_status blk_close(struct loader *L) {
    if (!L->blk_open) return LM_OK;
    L->blk_open = false;
    char key[96];
    snprintf(key, sizeof key, "%s :: block_%d",
             lm_prof_phase_name((enum lm_prof_phase)L->blk_phase), L->blk_layer);
    return add(L, LM_RS_LAYER, key, L->blk_t1 - L->blk_t0);
}

// Engine step (schema version 2): latency by kind, tokens / decode / prefill / sequences.
static enum lm_status on_step(struct loader *L) {
    struct lm_prof_report *r = L->r;
    enum lm_status st;
    const char *type = "step";
    if (r->version < 2)
        return lerr(L, LM_ERR_FORMAT, "step event in a version %d trace (step events are version 2)",
                    r->version);
    NEED(type, "dur_ns", 'u', fdur);
    NEED(type, "step", 'u', fstep);
    NEED(type, "n_tokens", 'u', fnt);
    NEED(type, "n_decode", 'u', fnd);
    NEED(type, "n_prefill", 'u', fnp);
    NEED(type, "n_seqs", 'u', fns);
    (void)fstep;
    const long long nt = fnt->i, nd = fnd->i, np = fnp->i, ns = fns->i;
    // speculative drafts (optional: traces before them lack the keys)
    const struct jfield *fdr = lm_jget(&L->j, "n_draft"), *fac = lm_jget(&L->j, "n_accepted");
    long long ndr = 0, nac = 0;
    if (fdr || fac) {
        NEED(type, "n_draft", 'u', fdr2);
        NEED(type, "n_accepted", 'u', fac2);
        ndr = fdr2->i;
        nac = fac2->i;
        if (nac > ndr)
            return lerr(L, LM_ERR_FORMAT, "step event: n_accepted %lld > n_draft %lld", nac, ndr);
    }
    if (nt < 1) return lerr(L, LM_ERR_FORMAT, "step event: n_tokens %lld < 1", nt);
    if (nd + np + ndr != nt)
        return lerr(L, LM_ERR_FORMAT, "step event: n_decode %lld + n_prefill %lld + n_draft %lld != "
                    "n_tokens %lld", nd, np, ndr, nt);
    if (ns < nd + (np > 0) || ns > nt)
        return lerr(L, LM_ERR_FORMAT, "step event: n_seqs %lld outside [%lld, %lld] (one per decode "
                    "token, one or more per prefill chunk)", ns, nd + (np > 0), nt);
    const uint64_t dur = (uint64_t)fdur->i;
    if ((st = add(L, LM_RS_TYPE, type, dur))) return st;
    if ((st = add(L, LM_RS_STEP, "engine", dur))) return st;
    if ((st = add(L, LM_RS_STEP, np ? "engine with prefill" : "engine decode only", dur))) return st;
    if ((st = add(L, LM_RS_STEP_TOKENS, "tokens", (uint64_t)nt))) return st;
    if ((st = add(L, LM_RS_STEP_TOKENS, "decode", (uint64_t)nd))) return st;
    if ((st = add(L, LM_RS_STEP_TOKENS, "prefill", (uint64_t)np))) return st;
    if ((st = add(L, LM_RS_STEP_TOKENS, "seqs", (uint64_t)ns))) return st;
    if (ndr && (st = add(L, LM_RS_STEP_TOKENS, "draft", (uint64_t)ndr))) return st;
    if (ndr && (st = add(L, LM_RS_STEP_TOKENS, "accepted", (uint64_t)nac))) return st;
    r->step_tokens += (uint64_t)nt;
    r->step_decode += (uint64_t)nd;
    r->step_draft += (uint64_t)ndr;
    r->step_accepted += (uint64_t)nac;
    return LM_OK;
}

static enum lm_status on_event(struct loader *L, const char *type) {
    struct lm_prof_report *r = L->r;
    enum lm_status st;
    char key[256];
    static const char *const known[] = {"phase", "op", "barrier", "matmul", "variant", "memory",
                                        "step", "expert"};
    bool is_known = false;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) is_known |= !strcmp(type, known[i]);
    if (!is_known) return lerr(L, LM_ERR_FORMAT, "unknown event type '%s'", type);
    NEED(type, "tid", 'u', ftid);
    NEED(type, "ts_ns", 'u', fts);
    if (ftid->i >= LM_PROF_MAX_THREADS)
        return lerr(L, LM_ERR_FORMAT, "tid %lld >= %d", ftid->i, LM_PROF_MAX_THREADS);
    int tid = (int)ftid->i;
    if (!strcmp(type, "step")) return on_step(L);
    bool timed = !strcmp(type, "phase") || !strcmp(type, "op") || !strcmp(type, "barrier") ||
                 !strcmp(type, "matmul") || !strcmp(type, "expert");
    uint64_t dur = 0;
    int ph = LM_PHASE_COUNT, step = -1;
    if (timed) {
        NEED(type, "dur_ns", 'u', fdur);
        NEED(type, "phase", 's', fph);
        NEED(type, "step", 'i', fstep);
        dur = (uint64_t)fdur->i;
        ph = phase_index(fph->s);
        if (ph < 0) return lerr(L, LM_ERR_FORMAT, "%s event: unknown phase '%s'", type, fph->s);
        step = (int)fstep->i;
        if ((st = add(L, LM_RS_TYPE, type, dur))) return st;
    } else {
        if ((st = count_only(L, LM_RS_TYPE, type))) return st;
    }
    const char *phn = lm_prof_phase_name((enum lm_prof_phase)ph);
    if (!strcmp(type, "phase")) {
        if (ph == LM_PHASE_COUNT) return lerr(L, LM_ERR_FORMAT, "phase event with phase '-'");
        NEED(type, "n_tokens", 'i', fnt);
        if (fnt->i > 0) r->tokens[ph] += (uint64_t)fnt->i;
        if ((st = add(L, LM_RS_PHASE, phn, dur))) return st;
        if ((st = add(L, LM_RS_STEP, phn, dur))) return st;
        return LM_OK;
    }
    if (!strcmp(type, "expert")) { // one expert's span in a MoE op: by expert over the layers
        if (r->version < 3)
            return lerr(L, LM_ERR_FORMAT, "expert event in a version %d trace (expert events are "
                                          "version 3)", r->version);
        NEED(type, "op", 's', fop);
        NEED(type, "layer", 'i', flayer);
        NEED(type, "expert", 'u', fex);
        NEED(type, "tokens", 'u', ftok);
        const int op = op_index(fop->s);
        if (op != LM_OP_FFN_MOE_GATE_UP && op != LM_OP_FFN_MOE_DOWN)
            return lerr(L, LM_ERR_FORMAT, "expert event: op '%s' is not a MoE op", fop->s);
        if (flayer->i < 0 || flayer->i >= LM_PROF_MAX_LAYERS || fex->i >= LM_PROF_MAX_EXPERTS)
            return lerr(L, LM_ERR_FORMAT, "expert event: layer %lld or expert %lld out of range",
                        flayer->i, fex->i);
        snprintf(key, sizeof key, "expert %lld", fex->i);
        if ((st = add(L, LM_RS_EXPERT, key, dur))) return st;
        // tokens once per (layer, pass): at its gate/up span
        if (op == LM_OP_FFN_MOE_GATE_UP && (st = add(L, LM_RS_EXPERT_TOKENS, key, (uint64_t)ftok->i)))
            return st;
        return LM_OK;
    }
    if (!strcmp(type, "op") || !strcmp(type, "barrier") || !strcmp(type, "matmul")) {
        NEED(type, "op", 's', fop);
        NEED(type, "layer", 'i', flayer);
        int op = op_index(fop->s);
        if (op < 0) return lerr(L, LM_ERR_FORMAT, "%s event: unknown op '%s'", type, fop->s);
        long long layer = flayer->i;
        if (layer < -1 || layer >= LM_PROF_MAX_LAYERS)
            return lerr(L, LM_ERR_FORMAT, "%s event: layer %lld outside [-1, %d)", type, layer,
                        LM_PROF_MAX_LAYERS);
        if (layer > r->max_layer) r->max_layer = (int)layer;
        if (!strcmp(type, "matmul")) {
            NEED(type, "weight", 's', fw);
            NEED(type, "m", 'u', fm);
            NEED(type, "n", 'u', fn);
            NEED(type, "k", 'u', fk);
            NEED(type, "dtype", 's', fdt);
            NEED(type, "variant", 's', fv);
            NEED(type, "reason", 's', frs);
            NEED(type, "bytes", 'u', fb);
            NEED(type, "flops", 'u', ffl);
            (void)fw;
            snprintf(key, sizeof key, "%s m=%lld n=%lld k=%lld %s %s", fop->s, fm->i, fn->i,
                     fk->i, fdt->s, fv->s[0] ? fv->s : "-");
            if ((st = add(L, LM_RS_MATMUL, key, dur))) return st;
            struct lm_rgroup *g = sec_get(&r->sec[LM_RS_MATMUL], key);
            g->bytes += (double)fb->i;
            g->flops += (double)ffl->i;
            snprintf(key, sizeof key, "%s %s -> %s (%s)", fop->s, fdt->s,
                     fv->s[0] ? fv->s : "-", frs->s[0] ? frs->s : "-");
            return count_only(L, LM_RS_MM_VARIANT, key);
        }
        bool bar = !strcmp(type, "barrier");
        int lslot = layer < 0 ? 0 : (int)layer + 1;
        r->layer_grp[ph][lslot][bar ? LM_RG_BARRIER : op_group(op)] += (double)dur;
        if (bar) {
            r->th[tid].wait += (double)dur;
            r->th[tid].n_bar++;
            if ((st = add(L, LM_RS_BARRIER_PHASE, phn, dur))) return st;
            snprintf(key, sizeof key, "%s :: %s", phn, fop->s);
            if ((st = add(L, LM_RS_BARRIER_OP, key, dur))) return st;
        } else {
            r->th[tid].busy += (double)dur;
            snprintf(key, sizeof key, "%s :: %s", phn, fop->s);
            if ((st = add(L, LM_RS_PHASE_OP, key, dur))) return st;
            if ((st = add(L, LM_RS_OP, fop->s, dur))) return st;
        }
        // thread 0's runs of one layer = that layer's wall span (barriers included)
        if (tid == 0) {
            uint64_t t0 = (uint64_t)fts->i, t1 = t0 + dur;
            if (L->blk_open && layer == L->blk_layer && ph == L->blk_phase && step == L->blk_step) {
                if (t1 > L->blk_t1) L->blk_t1 = t1;
            } else {
                if ((st = blk_close(L))) return st;
                if (layer >= 0) {
                    L->blk_open = true;
                    L->blk_layer = (int)layer;
                    L->blk_phase = ph;
                    L->blk_step = step;
                    L->blk_t0 = t0;
                    L->blk_t1 = t1;
                }
            }
        }
        return LM_OK;
    }
    if (!strcmp(type, "variant")) {
        NEED(type, "kernel", 's', fk);
        NEED(type, "variant", 's', fv);
        NEED(type, "reason", 's', frs);
        snprintf(key, sizeof key, "%s -> %s (%s)", fk->s, fv->s, frs->s[0] ? frs->s : "-");
        return count_only(L, LM_RS_VARIANT, key);
    }
    if (!strcmp(type, "memory")) {
        r->have_mem = true;
        r->n_mem++;
        for (int i = 0; i < 5; i++) {
            NEED(type, lm_r_mem_names[i], 'u', fv);
            r->mem_last[i] = (uint64_t)fv->i;
            if (r->mem_last[i] > r->mem_peak[i]) r->mem_peak[i] = r->mem_last[i];
        }
        return LM_OK;
    }
    return lerr(L, LM_ERR_FORMAT, "unknown event type '%s'", type);
}

// ============================================================================
// loading
// ============================================================================

void lm_prof_report_free(struct lm_prof_report *r) {
    if (!r) return;
    for (int s = 0; s < LM_RS_COUNT; s++) {
        for (size_t i = 0; i < r->sec[s].n; i++) {
            free(r->sec[s].g[i].key);
            free(r->sec[s].g[i].v);
        }
        free(r->sec[s].g);
        free(r->sec[s].slot);
    }
    free(r->path);
    free(r->steps);
    free(r);
}

enum lm_status lm_prof_report_load(const char *path, struct lm_prof_report **out) {
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return lm_error_set(LM_ERR_IO, "%s: %s", path, strerror(errno));
    struct lm_prof_report *r = calloc(1, sizeof *r);
    struct loader L = {.r = r, .path = path};
    if (!r || !(r->path = strdup(path))) {
        fclose(f);
        free(r);
        return lm_error_set(LM_ERR_NOMEM, "%s: out of memory", path);
    }
    r->max_layer = -1;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    enum lm_status st = LM_OK;
    bool header = false, end = false;
    uint64_t end_events = 0;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        L.line++;
        if (len == 0 || line[len - 1] != '\n') {
            st = lerr(&L, LM_ERR_FORMAT, "truncated: last line has no newline");
            break;
        }
        line[--len] = 0;
        if (len && line[len - 1] == '\r') line[--len] = 0;
        if (strlen(line) != (size_t)len) {
            st = lerr(&L, LM_ERR_FORMAT, "NUL byte in line");
            break;
        }
        size_t k = 0;
        while (line[k] == ' ' || line[k] == '\t' || line[k] == '\r') k++;
        if (line[k] == 0) continue; // blank lines are allowed
        if (end) {
            st = lerr(&L, LM_ERR_FORMAT, "data after the end record");
            break;
        }
        if (!lm_jline_parse(&L.j, line, (size_t)len)) {
            st = lerr(&L, LM_ERR_FORMAT, "bad JSON: %s", L.j.err);
            break;
        }
        const struct jfield *ft = lm_jget(&L.j, "type");
        if (!ft || ft->type != JV_STR) {
            st = lerr(&L, LM_ERR_FORMAT, "object lacks a string \"type\"");
            break;
        }
        const char *type = ft->s;
        if (!header) {
            if (strcmp(type, "header")) {
                st = lerr(&L, LM_ERR_FORMAT, "first record is '%s', expected the header", type);
                break;
            }
            const struct jfield *fs = lm_jget(&L.j, "schema"), *fv = lm_jget(&L.j, "version");
            if (!fs || fs->type != JV_STR || strcmp(fs->s, LM_PROF_JSONL_SCHEMA)) {
                st = lerr(&L, LM_ERR_FORMAT, "header: schema is not \"%s\"", LM_PROF_JSONL_SCHEMA);
                break;
            }
            if (!fv || fv->type != JV_NUM || !fv->is_int) {
                st = lerr(&L, LM_ERR_FORMAT, "header: version must be an integer");
                break;
            }
            if (fv->i < LM_PROF_JSONL_VERSION_MIN || fv->i > LM_PROF_JSONL_VERSION) {
                st = lerr(&L, LM_ERR_UNSUPPORTED, "unsupported trace version %lld (this lumen "
                          "reads %d to %d)", fv->i, LM_PROF_JSONL_VERSION_MIN, LM_PROF_JSONL_VERSION);
                break;
            }
            r->version = (int)fv->i;
            const struct jfield *fn = lm_jget(&L.j, "n_threads"), *fd = lm_jget(&L.j, "dropped"),
                                *fc = lm_jget(&L.j, "clock");
            if (!fn || fn->type != JV_NUM || !fn->is_int || fn->i < 1 || fn->i > LM_PROF_MAX_THREADS) {
                st = lerr(&L, LM_ERR_FORMAT, "header: n_threads must be an integer in [1, %d]",
                          LM_PROF_MAX_THREADS);
                break;
            }
            r->n_threads = (int)fn->i;
            if (fd && fd->type == JV_NUM && fd->is_int && fd->i > 0) r->dropped = (uint64_t)fd->i;
            if (fc && fc->type == JV_STR) snprintf(r->clock, sizeof r->clock, "%s", fc->s);
            header = true;
            continue;
        }
        if (!strcmp(type, "header")) {
            st = lerr(&L, LM_ERR_FORMAT, "second header record");
            break;
        }
        if (!strcmp(type, "end")) {
            const struct jfield *fe = lm_jget(&L.j, "events");
            if (!fe || fe->type != JV_NUM || !fe->is_int || fe->i < 0) {
                st = lerr(&L, LM_ERR_FORMAT, "end record lacks an integer 'events'");
                break;
            }
            end_events = (uint64_t)fe->i;
            end = true;
            continue;
        }
        r->n_events++;
        if ((st = on_event(&L, type))) break;
        const struct jfield *ftid = lm_jget(&L.j, "tid");
        if (ftid->i >= r->n_threads) {
            st = lerr(&L, LM_ERR_FORMAT, "tid %lld >= header n_threads %d", ftid->i, r->n_threads);
            break;
        }
    }
    if (!st && ferror(f)) st = lm_error_set(LM_ERR_IO, "%s: read error", path);
    if (!st && !header) st = lm_error_set(LM_ERR_FORMAT, "%s:%zu: empty file (no header record)", path, L.line);
    if (!st && !end)
        st = lm_error_set(LM_ERR_FORMAT, "%s:%zu: truncated: no end record after %llu events", path,
                          L.line, (unsigned long long)r->n_events);
    if (!st && end_events != r->n_events)
        st = lm_error_set(LM_ERR_FORMAT, "%s:%zu: truncated or edited: end record says %llu events, file has %llu",
                          path, L.line, (unsigned long long)end_events, (unsigned long long)r->n_events);
    if (!st) st = blk_close(&L);
    free(line);
    free(L.j.buf);
    fclose(f);
    if (st) {
        lm_prof_report_free(r);
        return st;
    }
    // decode step series for the chart (file order = time order)
    const struct lm_rgroup *g = lm_r_find(&r->sec[LM_RS_STEP], "decode");
    if (g && g->n) {
        r->steps = malloc(g->n * sizeof *r->steps);
        if (r->steps) {
            for (size_t i = 0; i < g->n; i++) r->steps[i] = (double)g->v[i];
            r->n_steps = r->cap_steps = g->n;
        }
    }
    for (int s = 0; s < LM_RS_COUNT; s++)
        for (size_t i = 0; i < r->sec[s].n; i++) grp_finalize(&r->sec[s].g[i], s == LM_RS_STEP);
    *out = r;
    return LM_OK;
}

bool lm_prof_report_row(const struct lm_prof_report *r, const char *section, const char *key,
                        struct lm_prof_row *out) {
    for (int s = 0; s < LM_RS_COUNT; s++) {
        if (strcmp(section, k_sec_names[s])) continue;
        const struct lm_rgroup *g = lm_r_find(&r->sec[s], key);
        if (!g) return false;
        *out = g->row;
        out->count = g->n;
        return true;
    }
    return false;
}
