// Profiler writers: the end-of-run summary table, the JSONL trace (schema in
// docs/profiling.md) and Chrome Trace Event JSON for ui.perfetto.dev.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "prof/prof_internal.h"

// ============================================================================
// formatting helpers
// ============================================================================

// Adaptive duration: "812ns", "12.3us", "1.234ms", "2.510s" (ns input).
static const char *fmt_dur(char *buf, size_t n, double ns) {
    if (ns < 1e3) snprintf(buf, n, "%.0fns", ns);
    else if (ns < 1e6) snprintf(buf, n, "%.1fus", ns / 1e3);
    else if (ns < 1e9) snprintf(buf, n, "%.3fms", ns / 1e6);
    else snprintf(buf, n, "%.3fs", ns / 1e9);
    return buf;
}

static const char *fmt_bytes(char *buf, size_t n, uint64_t b) {
    if (b >= (1ull << 30)) snprintf(buf, n, "%.2f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20)) snprintf(buf, n, "%.1f MiB", (double)b / (double)(1ull << 20));
    else if (b >= 1024) snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
    else snprintf(buf, n, "%llu B", (unsigned long long)b);
    return buf;
}

static void hist_merge(struct lm_prof_hist *dst, const struct lm_prof_hist *src) {
    for (int i = 0; i < LM_PROF_HIST_BUCKETS; i++) dst->b[i] += src->b[i];
}

// "count | total | avg | min | max | p95 | p99" columns of a stat + hist (ticks).
static void print_timing(FILE *f, const struct lm_prof_stat *st, const struct lm_prof_hist *h) {
    char b[7][32];
    double k = lm_prof_g.ns_per_tick;
    double p95 = lm_prof_hist_quantile(h, st->n, 0.95, st->min, st->max);
    double p99 = lm_prof_hist_quantile(h, st->n, 0.99, st->min, st->max);
    fprintf(f, "%8llu %10s %10s %10s %10s %10s %10s", (unsigned long long)st->n,
            fmt_dur(b[0], 32, (double)st->sum * k),
            fmt_dur(b[1], 32, st->n ? (double)st->sum * k / (double)st->n : 0),
            fmt_dur(b[2], 32, (double)st->min * k), fmt_dur(b[3], 32, (double)st->max * k),
            fmt_dur(b[4], 32, p95 * k), fmt_dur(b[5], 32, p99 * k));
}

// ============================================================================
// summary
// ============================================================================

struct op_row {
    int op;
    struct lm_prof_stat st;
    struct lm_prof_hist h;
};

static int cmp_op_row(const void *a, const void *b) {
    const struct op_row *x = a, *y = b;
    return x->st.sum < y->st.sum ? 1 : x->st.sum > y->st.sum ? -1 : x->op - y->op;
}

static void print_top_ops(FILE *f, int ph) {
    struct lm_prof_state *s = &lm_prof_g;
    static struct op_row rows[LM_OP_COUNT + 1]; // + barrier row (summary runs on one thread)
    memset(rows, 0, sizeof rows);
    uint64_t all = 0;
    for (int op = 0; op <= LM_OP_COUNT; op++) {
        rows[op].op = op;
        for (int t = 0; t < s->n_threads; t++) {
            const struct lm_prof_thread *th = &s->th[t];
            int o = op == LM_OP_COUNT ? -1 : op;
            for (int oo = 0; oo < LM_OP_COUNT; oo++) {
                if (o >= 0 && oo != o) continue;
                const struct lm_prof_stat *base = o >= 0 ? th->op : th->bar;
                const struct lm_prof_hist *hb = o >= 0 ? th->op_hist : th->bar_hist;
                for (int l = 0; l < LM_PROF_NL; l++)
                    lm_prof_stat_merge(&rows[op].st, &base[lm_prof_slot(ph, oo, l - 1)]);
                hist_merge(&rows[op].h, &hb[(size_t)ph * LM_OP_COUNT + oo]);
            }
        }
        all += rows[op].st.sum;
    }
    if (all == 0) return;
    qsort(rows, LM_OP_COUNT + 1, sizeof rows[0], cmp_op_row);
    fprintf(f, "\nops, %s (all layers, summed over threads):\n", ph < LM_PHASE_COUNT ?
            lm_prof_phase_name((enum lm_prof_phase)ph) : "no phase");
    fprintf(f, "  %-16s %8s %10s %10s %10s %10s %10s %10s %6s\n", "op", "count", "total",
            "avg", "min", "max", "p95", "p99", "share");
    for (int i = 0; i <= LM_OP_COUNT; i++) {
        if (rows[i].st.n == 0) continue;
        const char *name = rows[i].op == LM_OP_COUNT ? "(barrier wait)"
                                                     : lm_prof_op_name((enum lm_prof_op)rows[i].op);
        fprintf(f, "  %-16s ", name);
        print_timing(f, &rows[i].st, &rows[i].h);
        fprintf(f, " %5.1f%%\n", 100.0 * (double)rows[i].st.sum / (double)all);
    }
}

// Engine steps (lm_prof_step): latency of decode-only steps, steps holding prefill
// tokens and all, then tokens per step and the decode / prefill share.
static void print_steps(FILE *f) {
    const struct lm_prof_state *s = &lm_prof_g;
    const uint64_t n = s->step[0].n + s->step[1].n;
    if (n == 0) return;
    struct lm_prof_stat all = {0};
    struct lm_prof_hist all_h = {{0}};
    lm_prof_stat_merge(&all, &s->step[0]);
    lm_prof_stat_merge(&all, &s->step[1]);
    hist_merge(&all_h, &s->step_hist[0]);
    hist_merge(&all_h, &s->step_hist[1]);
    fprintf(f, "\nengine steps (span: admission + forward pass + sampling):\n  %-16s %8s %10s %10s "
               "%10s %10s %10s %10s %s\n", "step", "count", "total", "avg", "min", "max", "p95",
            "p99", "tok/s");
    static const char *const names[3] = {"decode only", "with prefill", "all"};
    const struct lm_prof_stat *st[3] = {&s->step[0], &s->step[1], &all};
    const struct lm_prof_hist *h[3] = {&s->step_hist[0], &s->step_hist[1], &all_h};
    for (int i = 0; i < 3; i++) {
        if (st[i]->n == 0) continue;
        fprintf(f, "  %-16s ", names[i]);
        print_timing(f, st[i], h[i]);
        if (i == 2 && st[i]->sum > 0)
            fprintf(f, " %.1f", (double)s->step_tokens / ((double)st[i]->sum * s->ns_per_tick * 1e-9));
        fputc('\n', f);
    }
    const uint64_t pre = s->step_tokens - s->step_decode - s->step_draft;
    fprintf(f, "  tokens: %llu in %llu steps (decode %llu = %.1f%%, prefill %llu = %.1f%%); per step "
               "avg %.1f, min %d, max %d; sequences per step avg %.1f\n",
            (unsigned long long)s->step_tokens, (unsigned long long)n,
            (unsigned long long)s->step_decode,
            s->step_tokens ? 100.0 * (double)s->step_decode / (double)s->step_tokens : 0.0,
            (unsigned long long)pre, s->step_tokens ? 100.0 * (double)pre / (double)s->step_tokens : 0.0,
            (double)s->step_tokens / (double)n, s->step_tok_min, s->step_tok_max,
            (double)s->step_seqs / (double)n);
    if (s->step_draft)
        fprintf(f, "  speculative: %llu drafts verified in %llu steps, %llu accepted (%.1f%%, %.2f per "
                   "verifying step)\n", (unsigned long long)s->step_draft,
                (unsigned long long)s->step_verify, (unsigned long long)s->step_accepted,
                100.0 * (double)s->step_accepted / (double)s->step_draft,
                (double)s->step_accepted / (double)s->step_verify);
}

void lm_prof_print_summary(FILE *f) {
    struct lm_prof_state *s = &lm_prof_g;
    if (!s->th) {
        fprintf(f, "profile: profiler is off\n");
        return;
    }
    double k = s->ns_per_tick;
    char b[4][32];
    fprintf(f, "\n=== lumen profile (%s; clock %s, %.4f ns/tick; %d threads; dropped %llu) ===\n",
            s->level == LM_PROF_TRACE ? "trace" : "summary",
            lm_prof_use_tsc_g ? "rdtsc" : "monotonic_raw", k, s->n_threads,
            (unsigned long long)lm_prof_dropped());

    // ---- phases
    fprintf(f, "phases:\n  %-16s %8s %10s %10s %10s %10s %10s %10s %s\n", "phase", "count",
            "total", "avg", "min", "max", "p95", "p99", "tok/s");
    uint64_t tokens = 0;
    for (int ph = 0; ph < LM_PHASE_COUNT; ph++) {
        const struct lm_prof_stat *st = &s->phase[ph];
        if (st->n == 0) continue;
        fprintf(f, "  %-16s ", lm_prof_phase_name((enum lm_prof_phase)ph));
        print_timing(f, st, &s->phase_hist[ph]);
        if ((ph == LM_PHASE_PREFILL || ph == LM_PHASE_DECODE) && st->sum > 0) {
            tokens += s->phase_tokens[ph];
            fprintf(f, " %.1f", (double)s->phase_tokens[ph] / ((double)st->sum * k * 1e-9));
        }
        fputc('\n', f);
    }

    print_steps(f);

    // ---- ops per phase
    for (int ph = 0; ph < LM_PROF_NPH; ph++) print_top_ops(f, ph);

    // ---- threads
    uint64_t nb0 = s->th[0].n_bar;
    fprintf(f, "\nthreads (busy = op spans, wait = barrier spans):\n  %-6s %10s %10s %7s %10s %s\n",
            "thread", "busy", "wait", "wait%", "barriers", "barriers/token");
    for (int t = 0; t < s->n_threads; t++) {
        const struct lm_prof_thread *th = &s->th[t];
        double tot = (double)(th->busy + th->wait);
        fprintf(f, "  %-6d %10s %10s %6.1f%% %10llu", t, fmt_dur(b[0], 32, (double)th->busy * k),
                fmt_dur(b[1], 32, (double)th->wait * k),
                tot > 0 ? 100.0 * (double)th->wait / tot : 0.0, (unsigned long long)th->n_bar);
        if (tokens) fprintf(f, " %.1f", (double)th->n_bar / (double)tokens);
        fputc('\n', f);
    }
    (void)nb0;

    // ---- matmuls
    if (s->n_mm_sum) {
        fprintf(f, "\nmatmul shape x variant (W (m,k) @ X (k,n); time on thread 0):\n");
        fprintf(f, "  %-10s %7s %5s %7s %-6s %-20s %7s %10s %10s %10s %8s %8s\n", "op", "m", "n",
                "k", "dtype", "variant", "count", "total", "avg", "p95", "GB/s", "GFLOP/s");
        for (int i = 0; i < s->n_mm_sum; i++) {
            const struct lm_prof_mm_sum *e = &s->mm_sum[i];
            double ns = (double)e->st.sum * k;
            double p95 = lm_prof_hist_quantile(&e->hist, e->st.n, 0.95, e->st.min, e->st.max);
            fprintf(f, "  %-10s %7lld %5lld %7lld %-6s %-20s %7llu %10s %10s %10s %8.2f %8.2f\n",
                    lm_prof_op_name((enum lm_prof_op)e->op), (long long)e->m, (long long)e->n,
                    (long long)e->k, lm_dtype_name(e->wtype), e->variant[0] ? e->variant : "-",
                    (unsigned long long)e->st.n, fmt_dur(b[0], 32, ns),
                    fmt_dur(b[1], 32, e->st.n ? ns / (double)e->st.n : 0),
                    fmt_dur(b[2], 32, p95 * k), ns > 0 ? (double)e->bytes / ns : 0.0,
                    ns > 0 ? (double)e->flops / ns : 0.0);
        }
    }

    // ---- variants
    if (s->n_var) {
        fprintf(f, "\nkernel variants:\n");
        for (int i = 0; i < s->n_var; i++)
            fprintf(f, "  %-20s -> %-20s (%s) x%llu\n", s->var[i].kernel, s->var[i].variant,
                    s->var[i].reason[0] ? s->var[i].reason : "-",
                    (unsigned long long)s->var[i].count);
    }

    // ---- memory
    if (s->have_mem) {
        static const char *const names[5] = {"weights_mapped", "kv_cache", "scratch", "rss",
                                             "rss_peak"};
        fprintf(f, "\nmemory:          %12s %12s\n", "last", "peak");
        const uint64_t *last = &s->mem_last.weights_mapped, *pk = &s->mem_peak.weights_mapped;
        for (int i = 0; i < 5; i++)
            fprintf(f, "  %-14s %12s %12s\n", names[i], fmt_bytes(b[0], 32, last[i]),
                    fmt_bytes(b[1], 32, pk[i]));
    }
}

// ============================================================================
// event collection shared by the JSONL and Perfetto writers
// ============================================================================

struct evref {
    const struct lm_prof_ev *e;
    int tid;
    int phase; // attributed phase (containment in a thread-0 phase span, else recorded)
    int step;
};

struct phase_span {
    uint64_t t0, t1;
    int phase, step;
};

static int cmp_span(const void *a, const void *b) {
    const struct phase_span *x = a, *y = b;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

static int type_rank(int type) {
    switch (type) {
    case LM_EV_STEP: return -1; // an engine step holds its phases
    case LM_EV_PHASE: return 0;
    case LM_EV_OP: return 2;
    case LM_EV_MATMUL: return 3;
    case LM_EV_EXPERT: return 3;
    case LM_EV_BARRIER: return 2;
    default: return 4;
    }
}

static int cmp_evref(const void *a, const void *b) {
    const struct evref *x = a, *y = b;
    if (x->e->t0 != y->e->t0) return x->e->t0 < y->e->t0 ? -1 : 1;
    uint64_t dx = x->e->t1 - x->e->t0, dy = y->e->t1 - y->e->t0;
    if (dx != dy) return dx > dy ? -1 : 1;
    if (x->tid != y->tid) return x->tid - y->tid;
    return type_rank(x->e->type) - type_rank(y->e->type);
}

struct collected {
    struct evref *ev;
    size_t n;
    struct phase_span *spans;
    size_t n_spans;
};

// Phase span containing t (latest start <= t whose end >= t), or NULL.
static const struct phase_span *span_at(const struct collected *c, uint64_t t) {
    size_t lo = 0, hi = c->n_spans;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->spans[mid].t0 <= t) lo = mid + 1;
        else hi = mid;
    }
    for (size_t i = lo; i-- > 0;) {
        if (c->spans[i].t1 >= t) return &c->spans[i];
        if (lo - i > 4) break; // phases do not nest deeply
    }
    return NULL;
}

static void collected_free(struct collected *c) {
    free(c->ev);
    free(c->spans);
}

static enum lm_status collect(struct collected *c, const char *who) {
    struct lm_prof_state *s = &lm_prof_g;
    memset(c, 0, sizeof *c);
    if (!s->th || s->level != LM_PROF_TRACE)
        return lm_error_set(LM_ERR_STATE, "%s: the profiler is not in trace mode", who);
    size_t n = 0, np = 0;
    for (int t = 0; t < s->n_threads; t++) n += s->th[t].n_ev;
    const struct lm_prof_thread *t0 = &s->th[0];
    for (size_t i = 0; i < t0->n_ev; i++) np += t0->ev[i].type == LM_EV_PHASE;
    c->ev = malloc((n ? n : 1) * sizeof *c->ev);
    c->spans = malloc((np ? np : 1) * sizeof *c->spans);
    if (!c->ev || !c->spans) {
        collected_free(c);
        return lm_error_set(LM_ERR_NOMEM, "%s: out of memory for %zu events", who, n);
    }
    for (size_t i = 0; i < t0->n_ev; i++) {
        const struct lm_prof_ev *e = &t0->ev[i];
        if (e->type == LM_EV_PHASE)
            c->spans[c->n_spans++] = (struct phase_span){e->t0, e->t1, e->code, e->a};
    }
    qsort(c->spans, c->n_spans, sizeof *c->spans, cmp_span);
    for (int t = 0; t < s->n_threads; t++) {
        const struct lm_prof_thread *th = &s->th[t];
        for (size_t i = 0; i < th->n_ev; i++) {
            const struct lm_prof_ev *e = &th->ev[i];
            struct evref r = {e, t, e->phase, -1};
            if (e->type == LM_EV_PHASE) {
                r.phase = e->code;
                r.step = e->a;
            } else if (e->type == LM_EV_STEP) {
                r.step = e->a;
            } else {
                const struct phase_span *sp = span_at(c, e->t0);
                if (sp) {
                    r.phase = sp->phase;
                    r.step = sp->step;
                }
            }
            c->ev[c->n++] = r;
        }
    }
    qsort(c->ev, c->n, sizeof *c->ev, cmp_evref);
    return LM_OK;
}

// JSON string body (without quotes).
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static const char *phase_str(int ph) {
    return ph < LM_PHASE_COUNT ? lm_prof_phase_name((enum lm_prof_phase)ph) : "-";
}

static enum lm_status close_out(FILE *f, const char *path, const char *who) {
    bool err = ferror(f) != 0;
    if (fclose(f) != 0) err = true;
    if (err) return lm_error_set(LM_ERR_IO, "%s: %s: write failed", who, path);
    return LM_OK;
}

// ============================================================================
// JSONL
// ============================================================================

enum lm_status lm_prof_write_jsonl(const char *path) {
    static const char *who = "lm_prof_write_jsonl";
    struct collected c;
    enum lm_status st = collect(&c, who);
    if (st) return st;
    FILE *f = fopen(path, "w");
    if (!f) {
        collected_free(&c);
        return lm_error_set(LM_ERR_IO, "%s: %s: %s", who, path, strerror(errno));
    }
    struct lm_prof_state *s = &lm_prof_g;
    uint64_t dropped = lm_prof_dropped();
    fprintf(f,
            "{\"type\":\"header\",\"schema\":\"%s\",\"version\":%d,\"unit\":\"ns\","
            "\"clock\":\"%s\",\"ns_per_tick\":%.6f,\"n_threads\":%d,\"events\":%zu,"
            "\"dropped\":%llu}\n",
            LM_PROF_JSONL_SCHEMA, LM_PROF_JSONL_VERSION,
            lm_prof_use_tsc_g ? "tsc" : "monotonic_raw", s->ns_per_tick, s->n_threads, c.n,
            (unsigned long long)dropped);
    for (size_t i = 0; i < c.n; i++) {
        const struct evref *r = &c.ev[i];
        const struct lm_prof_ev *e = r->e;
        unsigned long long ts = lm_prof_ts_ns(e->t0);
        unsigned long long dur = e->t1 > e->t0 ? lm_prof_to_ns(e->t1 - e->t0) : 0;
        const char *opn = lm_prof_op_name((enum lm_prof_op)e->code);
        switch (e->type) {
        case LM_EV_PHASE:
            fprintf(f,
                    "{\"type\":\"phase\",\"tid\":%d,\"ts_ns\":%llu,\"dur_ns\":%llu,"
                    "\"phase\":\"%s\",\"step\":%d,\"n_tokens\":%d}\n",
                    r->tid, ts, dur, phase_str(e->code), e->a, e->b);
            break;
        case LM_EV_STEP:
            fprintf(f,
                    "{\"type\":\"step\",\"tid\":%d,\"ts_ns\":%llu,\"dur_ns\":%llu,\"step\":%d,"
                    "\"n_tokens\":%d,\"n_decode\":%d,\"n_prefill\":%d,\"n_seqs\":%d,"
                    "\"n_draft\":%d,\"n_accepted\":%d}\n",
                    r->tid, ts, dur, e->a, e->b, e->layer, e->b - e->layer - e->code, e->c, e->code,
                    e->pad);
            break;
        case LM_EV_OP:
        case LM_EV_BARRIER:
            fprintf(f,
                    "{\"type\":\"%s\",\"tid\":%d,\"ts_ns\":%llu,\"dur_ns\":%llu,"
                    "\"phase\":\"%s\",\"step\":%d,\"op\":\"%s\",\"layer\":%d}\n",
                    e->type == LM_EV_OP ? "op" : "barrier", r->tid, ts, dur, phase_str(r->phase),
                    r->step, opn, e->layer);
            break;
        case LM_EV_MATMUL: {
            const struct lm_prof_mm_desc *d = &s->mm_desc[e->a];
            fprintf(f,
                    "{\"type\":\"matmul\",\"tid\":%d,\"ts_ns\":%llu,\"dur_ns\":%llu,"
                    "\"phase\":\"%s\",\"step\":%d,\"op\":\"%s\",\"layer\":%d,\"weight\":",
                    r->tid, ts, dur, phase_str(r->phase), r->step, opn, e->layer);
            json_str(f, d->weight);
            fprintf(f, ",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"dtype\":", (long long)d->m,
                    (long long)d->n, (long long)d->k);
            json_str(f, lm_dtype_name(d->wtype));
            fputs(",\"variant\":", f);
            json_str(f, d->variant);
            fputs(",\"reason\":", f);
            json_str(f, d->reason);
            fprintf(f, ",\"bytes\":%llu,\"flops\":%llu}\n", (unsigned long long)d->bytes,
                    (unsigned long long)d->flops);
            break;
        }
        case LM_EV_EXPERT:
            fprintf(f,
                    "{\"type\":\"expert\",\"tid\":%d,\"ts_ns\":%llu,\"dur_ns\":%llu,"
                    "\"phase\":\"%s\",\"step\":%d,\"op\":\"%s\",\"layer\":%d,\"expert\":%d,"
                    "\"tokens\":%d}\n",
                    r->tid, ts, dur, phase_str(r->phase), r->step, opn, e->layer, e->a, e->b);
            break;
        case LM_EV_VARIANT: {
            const struct lm_prof_variant_ent *v = &s->var[e->a];
            fprintf(f, "{\"type\":\"variant\",\"tid\":%d,\"ts_ns\":%llu,\"kernel\":", r->tid, ts);
            json_str(f, v->kernel);
            fputs(",\"variant\":", f);
            json_str(f, v->variant);
            fputs(",\"reason\":", f);
            json_str(f, v->reason);
            fputs("}\n", f);
            break;
        }
        case LM_EV_MEMORY: {
            const struct lm_prof_memory *m = &s->mem[e->a].m;
            fprintf(f,
                    "{\"type\":\"memory\",\"tid\":%d,\"ts_ns\":%llu,\"weights_mapped\":%llu,"
                    "\"kv_cache\":%llu,\"scratch\":%llu,\"rss\":%llu,\"rss_peak\":%llu}\n",
                    r->tid, ts, (unsigned long long)m->weights_mapped,
                    (unsigned long long)m->kv_cache, (unsigned long long)m->scratch,
                    (unsigned long long)m->rss, (unsigned long long)m->rss_peak);
            break;
        }
        default: break;
        }
    }
    fprintf(f, "{\"type\":\"end\",\"events\":%zu,\"dropped\":%llu}\n", c.n,
            (unsigned long long)dropped);
    collected_free(&c);
    return close_out(f, path, who);
}

// ============================================================================
// Perfetto (Chrome Trace Event Format)
// ============================================================================

enum { SL_STEP, SL_PHASE, SL_BLOCK, SL_OP, SL_BARRIER, SL_MATMUL, SL_EXPERT };

struct slice {
    uint64_t ts, end; // ns since epoch
    int kind, rank;
    int layer, phase, step;
    const struct lm_prof_ev *e;
};

static int cmp_slice(const void *a, const void *b) {
    const struct slice *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    if (x->end != y->end) return x->end > y->end ? -1 : 1;
    return x->rank - y->rank;
}

static void us(FILE *f, uint64_t ns) {
    fprintf(f, "%llu.%03llu", (unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000));
}

static void emit_slice(FILE *f, int tid, const struct slice *sl, bool clamped) {
    struct lm_prof_state *s = &lm_prof_g;
    const struct lm_prof_ev *e = sl->e;
    char name[96];
    const char *cat = "op";
    switch (sl->kind) {
    case SL_STEP:
        snprintf(name, sizeof name, "engine step");
        cat = "step";
        break;
    case SL_PHASE:
        snprintf(name, sizeof name, "%s", phase_str(sl->phase));
        cat = "phase";
        break;
    case SL_BLOCK:
        snprintf(name, sizeof name, "block_%d", sl->layer);
        cat = "block";
        break;
    case SL_OP: snprintf(name, sizeof name, "%s", lm_prof_op_name((enum lm_prof_op)e->code)); break;
    case SL_BARRIER:
        snprintf(name, sizeof name, "barrier");
        cat = "barrier";
        break;
    case SL_MATMUL:
        snprintf(name, sizeof name, "matmul %s",
                 s->mm_desc[e->a].weight[0] ? s->mm_desc[e->a].weight
                                            : lm_prof_op_name((enum lm_prof_op)e->code));
        cat = "matmul";
        break;
    case SL_EXPERT:
        snprintf(name, sizeof name, "expert %d", e->a);
        cat = "expert";
        break;
    }
    fputs(",\n{\"ph\":\"X\",\"pid\":1,\"tid\":", f);
    fprintf(f, "%d,\"ts\":", tid);
    us(f, sl->ts);
    fputs(",\"dur\":", f);
    us(f, sl->end - sl->ts);
    fputs(",\"name\":", f);
    json_str(f, name);
    fprintf(f, ",\"cat\":\"%s\",\"args\":{", cat);
    switch (sl->kind) {
    case SL_STEP:
        fprintf(f, "\"step\":%d,\"n_tokens\":%d,\"n_decode\":%d,\"n_prefill\":%d,\"n_seqs\":%d,"
                   "\"n_draft\":%d,\"n_accepted\":%d",
                e->a, e->b, e->layer, e->b - e->layer - e->code, e->c, e->code, e->pad);
        break;
    case SL_PHASE: fprintf(f, "\"step\":%d,\"n_tokens\":%d", e->a, e->b); break;
    case SL_BLOCK: fprintf(f, "\"layer\":%d,\"phase\":\"%s\"", sl->layer, phase_str(sl->phase)); break;
    case SL_OP:
        fprintf(f, "\"layer\":%d,\"phase\":\"%s\",\"step\":%d", e->layer, phase_str(sl->phase),
                sl->step);
        break;
    case SL_BARRIER:
        fprintf(f, "\"after_op\":\"%s\",\"layer\":%d",
                lm_prof_op_name((enum lm_prof_op)e->code), e->layer);
        break;
    case SL_MATMUL: {
        const struct lm_prof_mm_desc *d = &s->mm_desc[e->a];
        double ns = e->t1 > e->t0 ? (double)(e->t1 - e->t0) * s->ns_per_tick : 0;
        fprintf(f, "\"op\":\"%s\",\"layer\":%d,\"m\":%lld,\"n\":%lld,\"k\":%lld,\"dtype\":\"%s\",",
                lm_prof_op_name((enum lm_prof_op)d->op), e->layer, (long long)d->m,
                (long long)d->n, (long long)d->k, lm_dtype_name(d->wtype));
        fputs("\"variant\":", f);
        json_str(f, d->variant);
        fputs(",\"reason\":", f);
        json_str(f, d->reason);
        fprintf(f, ",\"GB/s\":%.3f,\"GFLOP/s\":%.3f", ns > 0 ? (double)d->bytes / ns : 0.0,
                ns > 0 ? (double)d->flops / ns : 0.0);
        break;
    }
    case SL_EXPERT:
        fprintf(f, "\"op\":\"%s\",\"layer\":%d,\"expert\":%d,\"tokens\":%d",
                lm_prof_op_name((enum lm_prof_op)e->code), e->layer, e->a, e->b);
        break;
    }
    if (clamped) fputs(",\"clamped\":true", f);
    fputs("}}", f);
}

// Slices of one thread: its events plus synthesized block_N spans (runs of ops and
// barriers of one layer within one phase span).
static size_t thread_slices(const struct collected *c, int tid, struct slice *out) {
    size_t n = 0;
    struct slice blk = {0};
    bool in_blk = false;
    for (size_t i = 0; i < c->n; i++) {
        const struct evref *r = &c->ev[i];
        if (r->tid != tid) continue;
        const struct lm_prof_ev *e = r->e;
        if (e->type == LM_EV_VARIANT || e->type == LM_EV_MEMORY) continue;
        uint64_t ts = lm_prof_ts_ns(e->t0), end = lm_prof_ts_ns(e->t1);
        if (end < ts) end = ts;
        int kind = e->type == LM_EV_STEP ? SL_STEP : e->type == LM_EV_PHASE ? SL_PHASE
                 : e->type == LM_EV_OP ? SL_OP
                 : e->type == LM_EV_BARRIER ? SL_BARRIER
                 : e->type == LM_EV_EXPERT ? SL_EXPERT : SL_MATMUL;
        out[n++] = (struct slice){ts, end, kind, type_rank(e->type), e->layer, r->phase,
                                  r->step, e};
        if (kind != SL_OP && kind != SL_BARRIER) continue;
        bool same = in_blk && e->layer >= 0 && e->layer == blk.layer && r->phase == blk.phase &&
                    r->step == blk.step;
        if (same) {
            if (end > blk.end) blk.end = end;
            continue;
        }
        if (in_blk) out[n++] = blk;
        in_blk = e->layer >= 0;
        if (in_blk)
            blk = (struct slice){ts, end, SL_BLOCK, 1, e->layer, r->phase, r->step, NULL};
    }
    if (in_blk) out[n++] = blk;
    return n;
}

enum lm_status lm_prof_write_perfetto(const char *path) {
    static const char *who = "lm_prof_write_perfetto";
    struct collected c;
    enum lm_status st = collect(&c, who);
    if (st) return st;
    struct lm_prof_state *s = &lm_prof_g;
    // worst case: every op/barrier starts a block -> 2 slices per event
    struct slice *sl = malloc((2 * c.n + 1) * sizeof *sl);
    uint64_t *stack = malloc((2 * c.n + 1) * sizeof *stack);
    FILE *f = sl && stack ? fopen(path, "w") : NULL;
    if (!f) {
        st = sl && stack ? lm_error_set(LM_ERR_IO, "%s: %s: %s", who, path, strerror(errno))
                         : lm_error_set(LM_ERR_NOMEM, "%s: out of memory", who);
        free(sl);
        free(stack);
        collected_free(&c);
        return st;
    }
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"schema\":\"lumen-perfetto\","
               "\"version\":1,\"dropped\":%llu},\n\"traceEvents\":[\n",
            (unsigned long long)lm_prof_dropped());
    fputs("{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"lumen\"}}", f);
    for (int t = 0; t < s->n_threads; t++) {
        fprintf(f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\","
                   "\"args\":{\"name\":\"%s %d\"}}", t, t == 0 ? "main/ith" : "worker/ith", t);
        fprintf(f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_sort_index\","
                   "\"args\":{\"sort_index\":%d}}", t, t);
    }
    for (int t = 0; t < s->n_threads; t++) {
        size_t n = thread_slices(&c, t, sl);
        qsort(sl, n, sizeof *sl, cmp_slice);
        // Enforce strict nesting (a child that overruns its parent by clock skew is
        // clamped and flagged) so the viewer shows phase > block_N > op stacks.
        size_t depth = 0;
        for (size_t i = 0; i < n; i++) {
            while (depth && stack[depth - 1] <= sl[i].ts && !(stack[depth - 1] == sl[i].ts &&
                                                             sl[i].end == sl[i].ts))
                depth--;
            bool clamped = false;
            if (depth && sl[i].end > stack[depth - 1]) {
                sl[i].end = stack[depth - 1];
                clamped = true;
            }
            stack[depth++] = sl[i].end;
            emit_slice(f, t, &sl[i], clamped);
        }
    }
    // instants (variant selections) and counters (memory)
    for (size_t i = 0; i < c.n; i++) {
        const struct lm_prof_ev *e = c.ev[i].e;
        if (e->type == LM_EV_VARIANT) {
            const struct lm_prof_variant_ent *v = &s->var[e->a];
            fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":%d,\"ts\":", c.ev[i].tid);
            us(f, lm_prof_ts_ns(e->t0));
            fputs(",\"name\":\"variant\",\"cat\":\"variant\",\"args\":{\"kernel\":", f);
            json_str(f, v->kernel);
            fputs(",\"variant\":", f);
            json_str(f, v->variant);
            fputs(",\"reason\":", f);
            json_str(f, v->reason);
            fputs("}}", f);
        } else if (e->type == LM_EV_STEP) { // tokens of each step as a counter track
            fputs(",\n{\"ph\":\"C\",\"pid\":1,\"name\":\"step tokens\",\"ts\":", f);
            us(f, lm_prof_ts_ns(e->t0));
            fprintf(f, ",\"args\":{\"decode\":%d,\"prefill\":%d}}", e->layer, e->b - e->layer);
        } else if (e->type == LM_EV_MEMORY) {
            const struct lm_prof_memory *m = &s->mem[e->a].m;
            fputs(",\n{\"ph\":\"C\",\"pid\":1,\"name\":\"memory MiB\",\"ts\":", f);
            us(f, lm_prof_ts_ns(e->t0));
            fprintf(f, ",\"args\":{\"weights\":%.2f,\"kv_cache\":%.2f,\"scratch\":%.2f,\"rss\":%.2f}}",
                    (double)m->weights_mapped / 1048576.0, (double)m->kv_cache / 1048576.0,
                    (double)m->scratch / 1048576.0, (double)m->rss / 1048576.0);
        }
    }
    fputs("\n]}\n", f);
    free(sl);
    free(stack);
    collected_free(&c);
    return close_out(f, path, who);
}
