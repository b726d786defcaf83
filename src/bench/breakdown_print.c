// The text and JSON reports of `lumen bench --breakdown` (breakdown.h): phases, prefill and
// decode by component, per-layer attention vs FFN, matmul shapes, the findings.
#include <string.h>

#include "breakdown_internal.h"
#include "json.h"
#include "sampling.h"

// ================================================================ text report

static const char *k_rule = "======================================================================";
static const char *k_dash = "----------------------------------------------------------------------";

// ord = component indices, largest prefill (pre) or decode time first
static void comp_order(const struct lm_bench_breakdown *b, bool pre, int *ord) {
    for (int i = 0; i < b->n_comp; i++) ord[i] = i;
    for (int i = 0; i < b->n_comp; i++)
        for (int j = i + 1; j < b->n_comp; j++) {
            const struct bd_comp *x = &b->comp[ord[j]], *y = &b->comp[ord[i]];
            if ((pre ? x->pre_ms : x->ms) > (pre ? y->pre_ms : y->ms)) { int t = ord[i]; ord[i] = ord[j]; ord[j] = t; }
        }
}

void lm_bench_breakdown_print(const struct lm_bench_breakdown *b, FILE *f) {
    const struct lm_bench_model_info *mi = b->mi;
    fprintf(f, "\n%s\nlumen Inference Breakdown Benchmark\n%s\n", k_rule, k_rule);
    fprintf(f, "Device: CPU, %d thread%s, kernels %s\n", b->n_threads, b->n_threads == 1 ? "" : "s",
            mi->kernels);
    fprintf(f, "Model: %s (%s), %d layers, %.1f MB weights read per decoded token\n", mi->desc,
            mi->path, mi->n_layer, (double)mi->bytes_per_token / 1e6);
    char chain[160] = "default sampler, seed 0"; // the text before the sampling flags
    if (!lm_bench_sampling_is_default(&b->sampling))
        lm_bench_sampling_desc(&b->sampling, chain, sizeof chain);
    fprintf(f, "Prompt: %d tokens of a fixed English text (%d tokenized); generated %d tokens "
               "(%s, EOS ignored)\n",
            b->n_prompt, b->n_tok_text, b->n_gen, chain);
    if (b->depth > 0)
        fprintf(f, "Depth: %d positions in the cache before the prompt (filled unprofiled); decode "
                   "read %.1f MB of KV cache per step\n", b->depth, b->kv_tok / 1e6);
    fprintf(f, "Profiler: SUMMARY; op times are means over the %d pool threads\n", b->n_threads);
    fprintf(f, "Output: %s%s\n", b->output, strlen(b->output) >= sizeof b->output - 3 ? "..." : "");

    // ---- phases, largest first
    fprintf(f, "\n%s\nTIMING BREAKDOWN\n%s\n", k_rule, k_rule);
    fprintf(f, "%-30s %10s %8s %10s %8s\n%s\n", "Operation", "Total (ms)", "Count", "Avg (ms)", "%", k_dash);
    int order[BD_NPH];
    for (int i = 0; i < BD_NPH; i++) order[i] = i;
    for (int i = 0; i < BD_NPH; i++)
        for (int j = i + 1; j < BD_NPH; j++)
            if (b->ph_ms[order[j]] > b->ph_ms[order[i]]) { int t = order[i]; order[i] = order[j]; order[j] = t; }
    for (int k = 0; k < BD_NPH; k++) {
        const int i = order[k];
        fprintf(f, "%-30s %10.1f %8d %10.3f %7.1f%%\n", lm_bd_ph_label[i], b->ph_ms[i], b->ph_count[i],
                b->ph_count[i] ? b->ph_ms[i] / b->ph_count[i] : 0.0, bd_pct(b->ph_ms[i], b->total_ms));
    }
    fprintf(f, "%s\n%-30s %10.1f\n%s\n", k_dash, "TOTAL", b->total_ms, k_rule);
    fprintf(f, "\nDerived Metrics:\n");
    fprintf(f, "  Total time: %.1f ms\n", b->total_ms);
    fprintf(f, "  Prefill: %d tokens, %.1f tok/s\n", b->n_prompt, b->pre_ts);
    fprintf(f, "  Time to first token (tokenize + prefill + sample): %.1f ms\n", b->ttft_ms);
    fprintf(f, "  Decode steps: %d\n  Avg decode latency: %.3f ms/token\n  Decode throughput: %.2f tok/s\n",
            b->ph_count[BD_DECODE], b->dec_ms_tok, b->dec_ts);
    fprintf(f, "  Achieved weight bandwidth: %.2f GB/s", b->ach_gbps);
    if (b->bw_gbps > 0) fprintf(f, " = %.0f%% of %.2f GB/s measured\n", 100 * b->roof_frac, b->bw_gbps);
    else fputc('\n', f);

    // ---- prefill (the time to first token, less tokenize and sample) by component
    if (b->have_pre_ops) {
        const double pre = b->ph_ms[BD_PREFILL];
        fprintf(f, "\n%s\nPREFILL BY COMPONENT (%d prompt tokens; the time to first token less "
                   "tokenize and sample)\n%s\n",
                k_rule, b->n_prompt, k_rule);
        fprintf(f, "%-38s %10s %7s\n%s\n", "Component", "Time (ms)", "%", k_dash);
        int ord[BD_MAX_COMP];
        comp_order(b, true, ord);
        for (int k = 0; k < b->n_comp; k++)
            fprintf(f, "%-38s %10.2f %6.1f%%\n", b->comp[ord[k]].name, b->comp[ord[k]].pre_ms,
                    bd_pct(b->comp[ord[k]].pre_ms, pre));
        fprintf(f, "%-38s %10.2f %6.1f%%\n", "barrier waits", b->pre_bar_ms, bd_pct(b->pre_bar_ms, pre));
        fprintf(f, "%-38s %10.2f %6.1f%%\n%s\n", "other (outside recorded ops)", b->pre_other_ms,
                bd_pct(b->pre_other_ms, pre), k_dash);
        fprintf(f, "%-38s %10.2f %6.1f%%\n", "prefill (wall)", pre, 100.0);
    }

    const double dec = b->ph_ms[BD_DECODE];
    const int steps = b->ph_count[BD_DECODE];
    if (b->have_ops) {
        // ---- per layer
        fprintf(f, "\n%s\nPER-LAYER BREAKDOWN (decode; compute + barrier waits after each op)\n%s\n",
                k_rule, k_rule);
        fprintf(f, "%-8s %12s %10s %7s %12s %10s %7s\n%s\n", "Layer", "Attn (ms)", "Avg (ms)", "%",
                "FFN (ms)", "Avg (ms)", "%", k_dash);
        double ta = 0, tf = 0;
        for (int l = 0; l < b->n_layer; l++) {
            ta += b->l_attn[l];
            tf += b->l_ffn[l];
            fprintf(f, "%-8d %12.2f %10.4f %6.1f%% %12.2f %10.4f %6.1f%%\n", l, b->l_attn[l],
                    steps ? b->l_attn[l] / steps : 0, bd_pct(b->l_attn[l], dec), b->l_ffn[l],
                    steps ? b->l_ffn[l] / steps : 0, bd_pct(b->l_ffn[l], dec));
        }
        fprintf(f, "%s\n%-8s %12.2f %10.4f %6.1f%% %12.2f %10.4f %6.1f%%\n", k_dash, "all", ta,
                steps ? ta / steps : 0, bd_pct(ta, dec), tf, steps ? tf / steps : 0, bd_pct(tf, dec));

        // ---- components
        fprintf(f, "\n%s\nAGGREGATED BY COMPONENT (decode, %d steps)\n%s\n", k_rule, steps, k_rule);
        fprintf(f, "%-38s %10s %7s %9s %8s %7s\n%s\n", "Component", "Time (ms)", "%", "ms/token",
                "GB/s", "% BW", k_dash);
        int ord[BD_MAX_COMP];
        comp_order(b, false, ord);
        for (int k = 0; k < b->n_comp; k++) {
            const struct bd_comp *c = &b->comp[ord[k]];
            fprintf(f, "%-38s %10.2f %6.1f%% %9.4f", c->name, c->ms, bd_pct(c->ms, dec),
                    steps ? c->ms / steps : 0);
            if (c->bytes && c->ms > 0) {
                const double g = (double)c->bytes * steps / (c->ms * 1e6);
                fprintf(f, " %8.2f", g);
                if (b->bw_gbps > 0) fprintf(f, " %6.0f%%", 100 * g / b->bw_gbps);
            }
            fputc('\n', f);
        }
        fprintf(f, "%-38s %10.2f %6.1f%% %9.4f\n", "barrier waits", b->bar_ms, bd_pct(b->bar_ms, dec),
                steps ? b->bar_ms / steps : 0);
        fprintf(f, "%-38s %10.2f %6.1f%% %9.4f\n%s\n", "other (outside recorded ops)", b->other_ms,
                bd_pct(b->other_ms, dec), steps ? b->other_ms / steps : 0, k_dash);
        fprintf(f, "%-38s %10.2f %6.1f%% %9.4f\n", "decode forward (wall)", dec, 100.0,
                steps ? dec / steps : 0);
    } else if (!steps) {
        fprintf(f, "\nper-op times: no decode step ran (the per-op breakdown covers decode; "
                   "generate 2 or more tokens)\n");
    } else {
        fprintf(f, "\nper-op times: none recorded (the forward pass of this build does not call "
                   "lm_prof_op)\nbarrier waits (thread pool): %.2f ms = %.1f%% of decode\n",
                b->bar_ms, bd_pct(b->bar_ms, dec));
    }
    lm_bd_tables_print(&b->tables, dec, b->ph_ms[BD_PREFILL], f);
    if (b->n_mm) {
        fprintf(f, "\n%s\nMATMUL SHAPES (W (m,k) @ X (k,n); time on thread 0)\n%s\n", k_rule, k_rule);
        fprintf(f, "%-10s %7s %5s %7s %-6s %-28s %7s %10s %8s\n%s\n", "op", "m", "n", "k", "dtype",
                "variant", "count", "total ms", "GB/s", k_dash);
        for (int i = 0; i < b->n_mm; i++) {
            const struct bd_mm *x = &b->mm[i];
            fprintf(f, "%-10s %7lld %5lld %7lld %-6s %-28s %7llu %10.2f %8.2f\n", x->op,
                    (long long)x->m, (long long)x->n, (long long)x->k, x->dtype, x->variant,
                    (unsigned long long)x->count, x->ms, x->gbps);
        }
    }

    fprintf(f, "\n%s\nBOTTLENECK ANALYSIS\n%s\n\n", k_rule, k_rule);
    for (int i = 0; i < b->n_find; i++) fprintf(f, "  %s\n", b->find[i]);
    fprintf(f, "\n  Suggestions:\n");
    for (int i = 0; i < b->n_sugg; i++) fprintf(f, "    - %s\n", b->sugg[i]);
}

// ================================================================ JSON

void lm_bench_breakdown_print_json(const struct lm_bench_breakdown *b, FILE *f) {
    static const char *const keys[BD_NPH] = {"tokenize", "prefill", "sample", "decode", "detokenize"};
    fprintf(f, "{\n    \"n_threads\": %d, \"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, "
               "\"kv_bytes_per_token\": %.0f, \"total_ms\": %.4f, \"ttft_ms\": %.4f,\n    \"phases\": {",
            b->n_threads, b->n_prompt, b->n_gen, b->depth, b->kv_tok, b->total_ms, b->ttft_ms);
    for (int i = 0; i < BD_NPH; i++)
        fprintf(f, "%s\"%s\": {\"ms\": %.4f, \"count\": %d, \"pct\": %.3f}", i ? ", " : "", keys[i],
                b->ph_ms[i], b->ph_count[i], bd_pct(b->ph_ms[i], b->total_ms));
    fprintf(f, "},\n    \"decode_tok_per_s\": %.4f, \"prefill_tok_per_s\": %.4f, "
               "\"achieved_gbps\": %.4f, \"bandwidth_gbps\": %.4f, \"roofline_frac\": %.4f,\n",
            b->dec_ts, b->pre_ts, b->ach_gbps, b->bw_gbps, b->roof_frac);
    fprintf(f, "    \"per_op_recorded\": %s, \"barrier_ms\": %.4f, \"barriers\": %llu, "
               "\"other_ms\": %.4f,\n    \"layers\": [",
            b->have_ops ? "true" : "false", b->bar_ms, (unsigned long long)b->n_barriers, b->other_ms);
    for (int l = 0; b->have_ops && l < b->n_layer; l++)
        fprintf(f, "%s{\"layer\": %d, \"attn_ms\": %.4f, \"ffn_ms\": %.4f}", l ? ", " : "", l,
                b->l_attn[l], b->l_ffn[l]);
    fprintf(f, "],\n    \"components\": [");
    for (int i = 0; i < b->n_comp; i++) {
        fprintf(f, "%s{\"name\": ", i ? ", " : "");
        lm_bench_json_str(f, b->comp[i].name);
        fprintf(f, ", \"ms\": %.4f, \"bytes_per_token\": %llu}", b->comp[i].ms,
                (unsigned long long)b->comp[i].bytes);
    }
    fprintf(f, "],\n    \"prefill_per_op_recorded\": %s, \"prefill_barrier_ms\": %.4f, "
               "\"prefill_other_ms\": %.4f,\n    \"prefill_components\": [",
            b->have_pre_ops ? "true" : "false", b->pre_bar_ms, b->pre_other_ms);
    for (int i = 0; i < b->n_comp; i++) {
        fprintf(f, "%s{\"name\": ", i ? ", " : "");
        lm_bench_json_str(f, b->comp[i].name);
        fprintf(f, ", \"ms\": %.4f}", b->comp[i].pre_ms);
    }
    fprintf(f, "],\n    \"matmuls\": [");
    for (int i = 0; i < b->n_mm; i++) {
        const struct bd_mm *x = &b->mm[i];
        fprintf(f, "%s{\"op\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"dtype\": \"%s\", "
                   "\"variant\": ",
                i ? ", " : "", x->op, (long long)x->m, (long long)x->n, (long long)x->k, x->dtype);
        lm_bench_json_str(f, x->variant);
        fprintf(f, ", \"count\": %llu, \"ms\": %.4f, \"gbps\": %.4f}", (unsigned long long)x->count,
                x->ms, x->gbps);
    }
    fputc(']', f);
    lm_bd_tables_print_json(&b->tables, f);
    lm_bench_json_member_str(f, ",\n    \"primary\": ", b->primary);
    fprintf(f, ",\n    \"findings\": [");
    for (int i = 0; i < b->n_find; i++) {
        fprintf(f, "%s\n      ", i ? "," : "");
        lm_bench_json_str(f, b->find[i]);
    }
    fprintf(f, "],\n    \"suggestions\": [");
    for (int i = 0; i < b->n_sugg; i++) {
        fprintf(f, "%s\n      ", i ? "," : "");
        lm_bench_json_str(f, b->sugg[i]);
    }
    fprintf(f, "]\n  }");
}
