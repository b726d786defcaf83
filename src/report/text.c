// The text report of `lumen analyze` (lm_prof_report_print): the loaded report's sections as
// tables of count, total, mean, min, max and percentiles, per phase, op, layer and step.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

const char *lm_r_fmt_ms(char *buf, size_t n, double ns) {
    snprintf(buf, n, "%.4fms", ns / 1e6);
    return buf;
}

static void print_row(FILE *f, const char *indent, const char *key, const struct lm_prof_row *r) {
    fprintf(f, "%s%s: count=%llu | total=%.3fms | avg=%.4fms | min=%.4fms | max=%.4fms | "
               "p95=%.4fms | p99=%.4fms\n",
            indent, key, (unsigned long long)r->count, r->total / 1e6, r->avg / 1e6, r->min / 1e6,
            r->max / 1e6, r->p95 / 1e6, r->p99 / 1e6);
}

static void print_section(FILE *f, const struct lm_prof_report *r, int sec, const char *title,
                          bool by_total, size_t limit) {
    const struct lm_rsection *s = &r->sec[sec];
    fprintf(f, "\n%s:\n", title);
    if (!s->n) {
        fprintf(f, "  no samples\n");
        return;
    }
    struct lm_rgroup **a = lm_r_sorted(s, by_total);
    if (!a) return;
    for (size_t i = 0; i < s->n && i < limit; i++) print_row(f, "  ", a[i]->key, &a[i]->row);
    if (s->n > limit) fprintf(f, "  ... %zu more\n", s->n - limit);
    free(a);
}

// Engine steps: latency (all, decode only, with prefill), then tokens per step and the
// decode / prefill shares of the tokens and of the step time.
static void print_steps(FILE *f, const struct lm_prof_report *r) {
    fprintf(f, "\nEngine steps (one per lm_engine_step with a batch; span = admission + forward "
               "pass + sampling):\n");
    const struct lm_rgroup *all = lm_r_find(&r->sec[LM_RS_STEP], "engine");
    if (!all || !all->n) {
        fprintf(f, "  no samples\n");
        return;
    }
    static const char *const kinds[3][2] = {{"engine", "all"}, {"engine decode only", "decode only"},
                                            {"engine with prefill", "with prefill"}};
    double t_kind[3] = {0};
    for (int i = 0; i < 3; i++) {
        const struct lm_rgroup *g = lm_r_find(&r->sec[LM_RS_STEP], kinds[i][0]);
        if (!g) continue;
        t_kind[i] = g->sum;
        print_row(f, "  ", kinds[i][1], &g->row);
    }
    static const char *const counts[6][2] = {{"tokens", "tokens per step"},
                                             {"decode", "decode tokens per step"},
                                             {"prefill", "prefill tokens per step"},
                                             {"seqs", "sequences per step"},
                                             {"draft", "drafted tokens per verifying step"},
                                             {"accepted", "accepted drafts per verifying step"}};
    for (int i = 0; i < 6; i++) {
        const struct lm_rgroup *g = lm_r_find(&r->sec[LM_RS_STEP_TOKENS], counts[i][0]);
        if (!g) continue;
        const struct lm_prof_row *w = &g->row;
        fprintf(f, "  %s: count=%llu | total=%.0f | avg=%.2f | min=%.0f | max=%.0f | p95=%.0f | "
                   "p99=%.0f\n", counts[i][1], (unsigned long long)w->count, w->total, w->avg,
                w->min, w->max, w->p95, w->p99);
    }
    const uint64_t pre = r->step_tokens - r->step_decode - r->step_draft;
    const double tt = r->step_tokens ? (double)r->step_tokens : 1.0;
    char drafts[64] = "";
    if (r->step_draft)
        snprintf(drafts, sizeof drafts, " + drafts %llu (%.1f%%)", (unsigned long long)r->step_draft,
                 100.0 * (double)r->step_draft / tt);
    fprintf(f, "  tokens: %llu = decode %llu (%.1f%%) + prefill %llu (%.1f%%)%s; step time: decode "
               "only %.1f%%, with prefill %.1f%%; %.2f tok/s over step time\n",
            (unsigned long long)r->step_tokens, (unsigned long long)r->step_decode,
            100.0 * (double)r->step_decode / tt, (unsigned long long)pre, 100.0 * (double)pre / tt,
            drafts,
            t_kind[0] > 0 ? 100.0 * t_kind[1] / t_kind[0] : 0.0,
            t_kind[0] > 0 ? 100.0 * t_kind[2] / t_kind[0] : 0.0,
            t_kind[0] > 0 ? (double)r->step_tokens / (t_kind[0] * 1e-9) : 0.0);
    if (r->step_draft)
        fprintf(f, "  speculative: %llu drafted tokens, %llu accepted (%.1f%%)\n",
                (unsigned long long)r->step_draft, (unsigned long long)r->step_accepted,
                100.0 * (double)r->step_accepted / (double)r->step_draft);
}

static int cmp_layer_key(const void *a, const void *b) {
    const struct lm_rgroup *x = *(struct lm_rgroup *const *)a, *y = *(struct lm_rgroup *const *)b;
    const char *bx = strstr(x->key, "block_"), *by = strstr(y->key, "block_");
    int c = strncmp(x->key, y->key, (size_t)(bx - x->key) < (size_t)(by - y->key)
                                         ? (size_t)(bx - x->key) : (size_t)(by - y->key));
    if (c) return c;
    return atoi(bx + 6) - atoi(by + 6);
}

void lm_prof_report_print(const struct lm_prof_report *r, FILE *f) {
    fprintf(f, "\n=== Analyzing %s ===\n", r->path);
    fprintf(f, "Total events: %llu (threads: %d, clock: %s, dropped: %llu)\n",
            (unsigned long long)r->n_events, r->n_threads, r->clock[0] ? r->clock : "?",
            (unsigned long long)r->dropped);
    fprintf(f, "Percentiles are exact, nearest-rank (p95 = v[ceil(0.95 n)] of the sorted samples).\n");

    // event types: timed ones with rows, others "no samples"
    const struct lm_rsection *ts = &r->sec[LM_RS_TYPE];
    fprintf(f, "\nEvent type summary:\n");
    struct lm_rgroup **a = lm_r_sorted(ts, false);
    if (a) {
        // by count desc
        for (size_t i = 0; i < ts->n; i++)
            for (size_t j = i + 1; j < ts->n; j++)
                if (a[j]->n > a[i]->n) {
                    struct lm_rgroup *t = a[i];
                    a[i] = a[j];
                    a[j] = t;
                }
        for (size_t i = 0; i < ts->n; i++) {
            char k[96];
            snprintf(k, sizeof k, "%s (count=%zu)", a[i]->key, a[i]->n);
            if (a[i]->v) print_row(f, "  ", k, &a[i]->row);
            else fprintf(f, "  %s: no samples\n", k);
        }
        free(a);
    }

    fprintf(f, "\nBy phase:\n");
    for (int p = 0; p < LM_PHASE_COUNT; p++) {
        const char *pn = lm_prof_phase_name((enum lm_prof_phase)p);
        const struct lm_rgroup *g = lm_r_find(&r->sec[LM_RS_PHASE], pn);
        if (!g) continue;
        print_row(f, "  ", pn, &g->row);
        if ((p == LM_PHASE_PREFILL || p == LM_PHASE_DECODE) && g->sum > 0 && r->tokens[p])
            fprintf(f, "    %s: %llu tokens, %.2f tok/s\n", pn, (unsigned long long)r->tokens[p],
                    (double)r->tokens[p] / (g->sum * 1e-9));
    }
    if (!r->sec[LM_RS_PHASE].n) fprintf(f, "  no samples\n");

    print_steps(f, r);

    print_section(f, r, LM_RS_PHASE_OP, "By phase/op (per-thread spans, all layers)", true, 64);

    // per-layer, ordered by phase then layer
    fprintf(f, "\nPer-layer totals (block_N = thread 0's span over the layer's ops and barriers):\n");
    const struct lm_rsection *ls = &r->sec[LM_RS_LAYER];
    if (!ls->n) fprintf(f, "  no samples\n");
    a = lm_r_sorted(ls, false);
    if (a) {
        qsort(a, ls->n, sizeof *a, cmp_layer_key);
        for (size_t i = 0; i < ls->n; i++) print_row(f, "  ", a[i]->key, &a[i]->row);
        free(a);
    }

    print_section(f, r, LM_RS_OP, "Op aggregate (all phases, layers and threads)", true, 64);

    // matmul shape x variant with throughput
    const struct lm_rsection *ms = &r->sec[LM_RS_MATMUL];
    fprintf(f, "\nMatmul shape x variant (W (m,k) @ X (k,n); thread-0 time):\n");
    if (!ms->n) fprintf(f, "  no samples\n");
    a = lm_r_sorted(ms, true);
    if (a) {
        for (size_t i = 0; i < ms->n; i++) {
            print_row(f, "  ", a[i]->key, &a[i]->row);
            fprintf(f, "    bytes=%.0f flops=%.0f | %.2f GB/s | %.2f GFLOP/s\n", a[i]->bytes,
                    a[i]->flops, a[i]->sum > 0 ? a[i]->bytes / a[i]->sum : 0.0,
                    a[i]->sum > 0 ? a[i]->flops / a[i]->sum : 0.0);
        }
        free(a);
    }

    print_section(f, r, LM_RS_BARRIER_PHASE, "Barrier wait by phase", true, 64);
    print_section(f, r, LM_RS_BARRIER_OP, "Barrier wait by phase/op (barrier after op)", true, 64);

    fprintf(f, "\nThreads (busy = op spans, wait = barrier spans):\n");
    uint64_t tokens = r->tokens[LM_PHASE_PREFILL] + r->tokens[LM_PHASE_DECODE];
    for (int t = 0; t < r->n_threads; t++) {
        const struct lm_rthread *th = &r->th[t];
        double tot = th->busy + th->wait;
        fprintf(f, "  thread %d: busy=%.3fms | wait=%.3fms | wait_share=%.1f%% | barriers=%llu",
                t, th->busy / 1e6, th->wait / 1e6, tot > 0 ? 100.0 * th->wait / tot : 0.0,
                (unsigned long long)th->n_bar);
        if (tokens) fprintf(f, " | barriers/token=%.1f", (double)th->n_bar / (double)tokens);
        fputc('\n', f);
    }

    fprintf(f, "\nVariant selection (kernel -> variant (reason)):\n");
    const int vs[2] = {LM_RS_VARIANT, LM_RS_MM_VARIANT};
    bool any = false;
    for (int k = 0; k < 2; k++) {
        const struct lm_rsection *s = &r->sec[vs[k]];
        for (size_t i = 0; i < s->n; i++) {
            fprintf(f, "  %s%s: count=%zu\n", k ? "matmul " : "", s->g[i].key, s->g[i].n);
            any = true;
        }
    }
    if (!any) fprintf(f, "  no samples\n");

    fprintf(f, "\nMemory (%llu records):\n", (unsigned long long)r->n_mem);
    if (!r->have_mem) fprintf(f, "  no samples\n");
    else
        for (int i = 0; i < 5; i++)
            fprintf(f, "  %s: last=%.2fMiB | peak=%.2fMiB\n", lm_r_mem_names[i],
                    (double)r->mem_last[i] / 1048576.0, (double)r->mem_peak[i] / 1048576.0);
}
