// The breakdown's matmul-by-dtype and MoE expert tables (breakdown_tables.h).
#include "breakdown_tables.h"

#include <stdlib.h>
#include <string.h>

#include "lumen.h"
#include "lumen_prof.h"

static void collect_dtypes(struct lm_bd_tables *t) {
    struct lm_prof_matmul_agg e;
    for (int i = 0; i < lm_prof_matmul_count(); i++) {
        if (!lm_prof_matmul_get(i, &e) || e.n != 1) continue; // decode steps' shapes
        const char *name = lm_tensor_type_name(e.wtype);
        int k = 0;
        while (k < t->n_dt && strcmp(t->dt[k].dtype, name)) k++;
        if (k == t->n_dt) {
            if (t->n_dt == LM_BD_MAX_DTYPE) continue;
            snprintf(t->dt[t->n_dt++].dtype, sizeof t->dt[0].dtype, "%s", name);
        }
        t->dt[k].count += e.count;
        t->dt[k].ms += e.total_ms;
        t->dt[k].bytes += e.bytes;
    }
    for (int i = 0; i < t->n_dt; i++) // most time first
        for (int j = i + 1; j < t->n_dt; j++)
            if (t->dt[j].ms > t->dt[i].ms) { struct lm_bd_dtype x = t->dt[i]; t->dt[i] = t->dt[j]; t->dt[j] = x; }
}

static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void collect_moe(struct lm_bd_moe_phase *ph, bool decode, int n_layer, int n_expert) {
    uint64_t *tok = malloc((size_t)n_layer * (size_t)n_expert * sizeof *tok);
    bool first = true;
    for (int l = 0; l < n_layer; l++) {
        struct lm_prof_moe_layer pl;
        if (!lm_prof_moe_layer_get(decode, l, &pl) || pl.calls == 0) continue;
        ph->passes += pl.calls;
        ph->tokens += pl.tokens;
        ph->distinct += pl.distinct;
        if (first || pl.distinct_min < ph->distinct_min) ph->distinct_min = pl.distinct_min;
        if (first || pl.distinct_max > ph->distinct_max) ph->distinct_max = pl.distinct_max;
        first = false;
        for (int e = 0; e < n_expert; e++) {
            struct lm_prof_moe_expert x;
            lm_prof_moe_expert_get(decode, l, e, &x);
            ph->ms += x.ms;
            if (tok) tok[ph->pairs] = x.tokens;
            ph->pairs++;
            ph->pairs_unused += x.tokens == 0;
            if (x.tokens > ph->tokens_max) ph->tokens_max = x.tokens;
            // insert into the top list (by tokens, then time)
            int k = ph->n_top < LM_BD_TOP_EXPERTS ? ph->n_top++ : LM_BD_TOP_EXPERTS;
            while (k > 0 && (ph->top[k - 1].tokens < x.tokens ||
                             (ph->top[k - 1].tokens == x.tokens && ph->top[k - 1].ms < x.ms))) {
                if (k < LM_BD_TOP_EXPERTS) ph->top[k] = ph->top[k - 1];
                k--;
            }
            if (k < LM_BD_TOP_EXPERTS) {
                ph->top[k].layer = l;
                ph->top[k].expert = e;
                ph->top[k].tokens = x.tokens;
                ph->top[k].ms = x.ms;
            }
        }
    }
    if (tok && ph->pairs) {
        qsort(tok, ph->pairs, sizeof *tok, cmp_u64);
        ph->tokens_median = tok[ph->pairs / 2];
    }
    free(tok);
}

void lm_bd_tables_collect(struct lm_bd_tables *t, int n_layer, int n_used) {
    memset(t, 0, sizeof *t);
    collect_dtypes(t);
    t->moe_n_expert = lm_prof_moe_n_expert();
    if (t->moe_n_expert == 0) return;
    t->moe_n_layer = n_layer < LM_PROF_MAX_LAYERS ? n_layer : LM_PROF_MAX_LAYERS;
    t->moe_used = n_used;
    for (int s = 0; s < 2; s++) collect_moe(&t->moe[s], s == 1, t->moe_n_layer, t->moe_n_expert);
}

static double pct(double x, double tot) { return tot > 0 ? 100.0 * x / tot : 0.0; }

void lm_bd_tables_print(const struct lm_bd_tables *t, double dec_ms, double pre_ms, FILE *f) {
    static const char *rule = "======================================================================";
    static const char *dash = "----------------------------------------------------------------------";
    if (t->n_dt) {
        fprintf(f, "\n%s\nDECODE MATMULS BY WEIGHT DTYPE (n = 1 shapes, time on thread 0)\n%s\n", rule, rule);
        fprintf(f, "%-10s %9s %10s %8s %9s\n%s\n", "dtype", "count", "ms", "% dec", "GB/s", dash);
        for (int i = 0; i < t->n_dt; i++)
            fprintf(f, "%-10s %9llu %10.2f %7.1f%% %9.2f\n", t->dt[i].dtype,
                    (unsigned long long)t->dt[i].count, t->dt[i].ms, pct(t->dt[i].ms, dec_ms),
                    t->dt[i].ms > 0 ? (double)t->dt[i].bytes / (t->dt[i].ms * 1e6) : 0.0);
    }
    if (!t->moe_n_expert) return;
    fprintf(f, "\n%s\nEXPERTS (MoE: %d experts per layer, %d used per token; matmul time on thread 0)\n%s\n",
            rule, t->moe_n_expert, t->moe_used, rule);
    fprintf(f, "%-8s %8s %8s %22s %10s %7s %16s\n%s\n", "phase", "passes", "tokens",
            "experts/pass avg(min..max)", "expert ms", "% ph", "unused (l,e) pairs", dash);
    for (int s = 0; s < 2; s++) {
        const struct lm_bd_moe_phase *p = &t->moe[s];
        if (!p->passes) continue;
        char d[40];
        snprintf(d, sizeof d, "%.1f (%d..%d)", (double)p->distinct / (double)p->passes, p->distinct_min,
                 p->distinct_max);
        fprintf(f, "%-8s %8llu %8llu %22s %10.2f %6.1f%% %8llu of %llu\n", s ? "decode" : "prefill",
                (unsigned long long)p->passes, (unsigned long long)p->tokens, d, p->ms,
                pct(p->ms, s ? dec_ms : pre_ms), (unsigned long long)p->pairs_unused,
                (unsigned long long)p->pairs);
    }
    for (int s = 0; s < 2; s++) {
        const struct lm_bd_moe_phase *p = &t->moe[s];
        if (!p->passes) continue;
        fprintf(f, "%s tokens per (layer, expert): max %llu, median %llu; top:", s ? "decode" : "prefill",
                (unsigned long long)p->tokens_max, (unsigned long long)p->tokens_median);
        for (int i = 0; i < p->n_top; i++)
            fprintf(f, "%s L%d/E%d %llu tok %.2f ms", i ? "," : "", p->top[i].layer, p->top[i].expert,
                    (unsigned long long)p->top[i].tokens, p->top[i].ms);
        fputc('\n', f);
    }
}

void lm_bd_tables_print_json(const struct lm_bd_tables *t, FILE *f) {
    fprintf(f, ",\n    \"matmul_by_dtype\": [");
    for (int i = 0; i < t->n_dt; i++)
        fprintf(f, "%s{\"dtype\": \"%s\", \"count\": %llu, \"ms\": %.4f, \"bytes\": %llu}", i ? ", " : "",
                t->dt[i].dtype, (unsigned long long)t->dt[i].count, t->dt[i].ms,
                (unsigned long long)t->dt[i].bytes);
    fprintf(f, "],\n    \"moe\": ");
    if (!t->moe_n_expert) {
        fputs("null", f);
        return;
    }
    fprintf(f, "{\"n_expert\": %d, \"n_expert_used\": %d", t->moe_n_expert, t->moe_used);
    for (int s = 0; s < 2; s++) {
        const struct lm_bd_moe_phase *p = &t->moe[s];
        fprintf(f, ", \"%s\": {\"passes\": %llu, \"tokens\": %llu, \"experts_touched\": %llu, "
                   "\"experts_touched_min\": %d, \"experts_touched_max\": %d, \"expert_ms\": %.4f, "
                   "\"pairs\": %llu, \"pairs_unused\": %llu, \"tokens_max\": %llu, "
                   "\"tokens_median\": %llu, \"top\": [",
                s ? "decode" : "prefill", (unsigned long long)p->passes, (unsigned long long)p->tokens,
                (unsigned long long)p->distinct, p->distinct_min, p->distinct_max, p->ms,
                (unsigned long long)p->pairs, (unsigned long long)p->pairs_unused,
                (unsigned long long)p->tokens_max, (unsigned long long)p->tokens_median);
        for (int i = 0; i < p->n_top; i++)
            fprintf(f, "%s{\"layer\": %d, \"expert\": %d, \"tokens\": %llu, \"ms\": %.4f}", i ? ", " : "",
                    p->top[i].layer, p->top[i].expert, (unsigned long long)p->top[i].tokens, p->top[i].ms);
        fputs("]}", f);
    }
    fputc('}', f);
}
