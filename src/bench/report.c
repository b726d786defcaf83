// The reports of a `lumen bench` run (bench.h): llama-bench's markdown table with the
// roofline notes, CSV rows, and the lumen-bench JSON document (schema version 1).
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "prompt.h"
#include "sampling.h"

// ================================================================ markdown

// RSS against what must be resident: the mapped file and the first context's KV pool.
static void print_memory(FILE *f, const struct lm_bench_model_info *mi) {
    if (!mi->rss_peak || !mi->file_bytes) return;
    const double mib = 1 << 20, need = (double)(mi->file_bytes + mi->kv_bytes);
    fprintf(f, "memory: RSS %.1f MiB after load, peak %.1f MiB | file %.1f MiB + KV %.1f MiB = "
               "%.1f MiB | peak / (file + KV) = %.3f\n",
            (double)mi->rss_load / mib, (double)mi->rss_peak / mib, (double)mi->file_bytes / mib,
            (double)mi->kv_bytes / mib, need / mib, (double)mi->rss_peak / need);
}

// The KV cache a tg test's steps read on top of the weights, once per tg length and depth,
// and the roofline with it (the GB/s and roofline columns of tg rows count both).
static void print_md_kv(FILE *f, const struct lm_bench_model_info *mi, const struct lm_bench_test *t,
                        int n_t, const struct lm_bench_bw *bw, int n_bw) {
    for (int i = 0; i < n_t; i++) {
        if (t[i].kind != LM_BENCH_TG) continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = t[j].kind == LM_BENCH_TG && t[j].n_gen == t[i].n_gen && t[j].depth == t[i].depth;
        if (seen) continue;
        const double all = (double)mi->bytes_per_token + t[i].kv_bytes;
        fprintf(f, "%s: KV read per step %.2f MB (%.0f%% of %.2f MB read)", t[i].name,
                t[i].kv_bytes / 1e6, 100 * t[i].kv_bytes / all, all / 1e6);
        for (int k = 0; k < n_bw; k++)
            fprintf(f, "%s roofline %.1f tok/s at %d thread%s", k ? "," : ";",
                    bw[k].gbps * 1e9 / all, bw[k].threads, bw[k].threads == 1 ? "" : "s");
        fputc('\n', f);
    }
}

static void print_md(FILE *f, const struct lm_bench_model_info *mi, const struct lm_bench_test *t,
                     int n_t, const struct lm_bench_bw *bw, int n_bw, int bw_mib,
                     const struct lm_sampler_params *sp) {
    char chain[160];
    lm_bench_sampling_desc(sp, chain, sizeof chain);
    char size[32], params[32], backend[48];
    snprintf(size, sizeof size, "%.2f MiB", (double)mi->size_bytes / (1 << 20));
    snprintf(params, sizeof params, "%.2f M", (double)mi->n_params / 1e6);
    snprintf(backend, sizeof backend, "CPU (%s)", mi->kernels);
    fprintf(f, "| model | size | params | backend | threads | test | t/s | median t/s | "
               "ms/run | GB/s | roofline |\n");
    fprintf(f, "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int i = 0; i < n_t; i++) {
        const struct lm_bench_test *x = &t[i];
        char gb[24] = "", rf[24] = "";
        if (isfinite(x->gbps)) snprintf(gb, sizeof gb, "%.2f", x->gbps);
        if (isfinite(x->roof)) snprintf(rf, sizeof rf, "%.0f%%", 100 * x->roof);
        fprintf(f, "| %s | %s | %s | %s | %d | %s | %.2f ± %.2f | %.2f | %.3f | %s | %s |\n",
                mi->desc, size, params, backend, x->threads, x->name, x->avg_ts, x->sd_ts,
                x->med_ts, x->med_ns / 1e6, gb, rf);
    }
    fprintf(f, "\nmodel: %s | load %.1f ms + context %.1f ms | kernels %s\n", mi->path, mi->load_ms,
            mi->ctx_init_ms, mi->kernels);
    print_memory(f, mi);
    for (int i = 0; i < n_t; i++) {
        if (t[i].kind == LM_BENCH_TOKENIZE)
            fprintf(f, "tokenize: %.0f bytes -> %.0f tokens per run: %.0f tok/s, %.2f MB/s (median of %d)\n",
                    t[i].bytes, t[i].units, t[i].med_ts,
                    t[i].bytes / (t[i].med_ns * 1e-9) / 1e6, t[i].reps);
        if (t[i].kind == LM_BENCH_SAMPLE)
            fprintf(f, "sampling: %.1f us/token (%s over %d logits; median of %d x %d)\n",
                    1e6 / t[i].med_ts, chain, mi->n_vocab, t[i].reps, LM_BENCH_SAMPLES_PER_REP);
    }
    if (n_bw) {
        fprintf(f, "read bandwidth (sum over %d MiB, best of 3):", bw_mib);
        for (int i = 0; i < n_bw; i++)
            fprintf(f, "%s %d thread%s %.2f GB/s", i ? " |" : "", bw[i].threads,
                    bw[i].threads == 1 ? "" : "s", bw[i].gbps);
        fputc('\n', f);
    }
    const double mb = 1e6;
    fprintf(f, "weights read per decoded token: %.2f MB (qkv %.2f, attn_output %.2f, gate+up %.2f, "
               "down %.2f, output head %.2f [%s], other %.2f)\n",
            (double)mi->bytes_per_token / mb, (double)mi->grp_bytes[LM_BENCH_GRP_QKV] / mb,
            (double)mi->grp_bytes[LM_BENCH_GRP_O] / mb, (double)mi->grp_bytes[LM_BENCH_GRP_GATE_UP] / mb,
            (double)mi->grp_bytes[LM_BENCH_GRP_DOWN] / mb, (double)mi->grp_bytes[LM_BENCH_GRP_HEAD] / mb,
            mi->head_dtype, (double)mi->grp_bytes[LM_BENCH_GRP_OTHER] / mb);
    for (int i = 0; i < n_bw; i++)
        fprintf(f, "decode roofline at %d thread%s: %.1f tok/s (%.2f GB/s / %.2f MB)\n",
                bw[i].threads, bw[i].threads == 1 ? "" : "s",
                bw[i].gbps * 1e9 / (double)mi->bytes_per_token, bw[i].gbps,
                (double)mi->bytes_per_token / mb);
    print_md_kv(f, mi, t, n_t, bw, n_bw);
}

// ================================================================ csv

static void print_csv(FILE *f, const struct lm_bench_model_info *mi, const struct lm_bench_test *t,
                      int n_t, const struct lm_bench_bw *bw, int n_bw) {
    fprintf(f, "model,size_bytes,n_params,backend,threads,test,n_prompt,n_gen,reps,avg_ts,"
               "stddev_ts,median_ts,min_ts,max_ts,avg_ms,median_ms,gbps,roofline_frac,"
               "bytes_per_token,n_depth,kv_bytes_per_token\n");
    for (int i = 0; i < n_t; i++) {
        const struct lm_bench_test *x = &t[i];
        fprintf(f, "\"%s\",%llu,%llu,CPU %s,%d,%s,%d,%d,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,",
                mi->desc, (unsigned long long)mi->size_bytes, (unsigned long long)mi->n_params,
                mi->kernels, x->threads, x->name, x->n_prompt, x->n_gen, x->reps, x->avg_ts,
                x->sd_ts, x->med_ts, x->min_ts, x->max_ts, x->avg_ns / 1e6, x->med_ns / 1e6);
        if (isfinite(x->gbps)) fprintf(f, "%.4f", x->gbps);
        fputc(',', f);
        if (isfinite(x->roof)) fprintf(f, "%.4f", x->roof);
        fprintf(f, ",%llu,%d,%.0f\n", (unsigned long long)mi->bytes_per_token, x->depth, x->kv_bytes);
    }
    for (int i = 0; i < n_bw; i++) // bandwidth rows: gbps only
        fprintf(f, "\"%s\",%llu,%llu,CPU %s,%d,membw,0,0,3,,,,,,,,%.4f,,%llu,0,0\n", mi->desc,
                (unsigned long long)mi->size_bytes, (unsigned long long)mi->n_params,
                mi->kernels, bw[i].threads, bw[i].gbps, (unsigned long long)mi->bytes_per_token);
}

// ================================================================ json

// The CPU's model name from /proc/cpuinfo ("unknown" without one).
static void cpu_name(char *out, size_t n) {
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ') c++;
                c[strcspn(c, "\n")] = 0;
                snprintf(out, n, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

static void print_json(FILE *f, const struct lm_bench_params *p, const struct lm_bench_result *r) {
    const struct lm_bench_model_info *mi = &r->model;
    const struct lm_bench_test *t = r->tests;
    const struct lm_bench_bw *bw = r->bw;
    const int n_t = r->n_tests, n_bw = r->n_bw, n_th = p->threads.n, n_list = p->parallel.n;
    const int *th = p->threads.v;
    char cpu[128];
    cpu_name(cpu, sizeof cpu);
    fprintf(f, "{\n  \"schema\": \"lumen-bench\",\n  \"version\": 1,\n");
    lm_bench_json_member_str(f, "  \"system\": {\"cpu\": ", cpu);
    fprintf(f, ", \"physical_cores\": %d, \"kernels\": ", lm_cpu_physical_cores());
    lm_bench_json_str(f, mi->kernels);
    lm_bench_json_member_str(f, "},\n  \"model\": {\"path\": ", mi->path);
    lm_bench_json_member_str(f, ", \"desc\": ", mi->desc);
    lm_bench_json_member_str(f, ", \"arch\": ", mi->arch);
    fprintf(f, ", \"size_bytes\": %llu, \"n_params\": %llu, \"n_layer\": %d, \"n_vocab\": %d, "
               "\"load_ms\": %.3f, \"ctx_init_ms\": %.3f,\n",
            (unsigned long long)mi->size_bytes, (unsigned long long)mi->n_params, mi->n_layer,
            mi->n_vocab, mi->load_ms, mi->ctx_init_ms);
    fprintf(f, "    \"file_bytes\": %llu, \"kv_bytes\": %llu, \"rss_load_bytes\": %llu, "
               "\"rss_peak_bytes\": %llu,\n",
            (unsigned long long)mi->file_bytes, (unsigned long long)mi->kv_bytes,
            (unsigned long long)mi->rss_load, (unsigned long long)mi->rss_peak);
    static const char *const gn[LM_BENCH_GRP_COUNT] = {"qkv", "attn_output", "ffn_gate_up",
                                                       "ffn_down", "output_head", "other"};
    fprintf(f, "    \"bytes_per_token\": %llu, \"head_dtype\": \"%s\", \"bytes_per_token_by_group\": {",
            (unsigned long long)mi->bytes_per_token, mi->head_dtype);
    for (int i = 0; i < LM_BENCH_GRP_COUNT; i++)
        fprintf(f, "%s\"%s\": %llu", i ? ", " : "", gn[i], (unsigned long long)mi->grp_bytes[i]);
    fprintf(f, "}},\n  \"params\": {\"reps\": %d, \"warmup\": %d, \"n_batch\": %d, "
               "\"tg_prompt\": %d, \"threads\": [",
            p->reps, p->warmup, LM_BENCH_N_BATCH, LM_BENCH_TG_PROMPT);
    for (int i = 0; i < n_th; i++) fprintf(f, "%s%d", i ? ", " : "", th[i]);
    fprintf(f, "], \"sampling\": "); // the chain of the tests that sample (bench.h)
    lm_bench_sampling_json(f, &p->sampling);
    fprintf(f, "},\n  \"bandwidth\": [");
    for (int i = 0; i < n_bw; i++)
        fprintf(f, "%s{\"threads\": %d, \"gbps\": %.4f, \"mib\": %d, \"best_of\": 3}",
                i ? ", " : "", bw[i].threads, bw[i].gbps, p->bw_mib);
    fprintf(f, "],\n  \"tests\": [\n");
    for (int i = 0; i < n_t; i++) {
        const struct lm_bench_test *x = &t[i];
        fprintf(f, "    {\"test\": \"%s\", \"kind\": \"%s\", \"n_threads\": %d, \"n_prompt\": %d, "
                   "\"n_gen\": %d, \"n_depth\": %d, \"reps\": %d, \"units_per_rep\": %.0f,\n     "
                   "\"avg_ts\": ",
                x->name, lm_bench_test_kind_name(x->kind), x->threads, x->n_prompt, x->n_gen,
                x->depth, x->reps, x->units);
        lm_bench_json_num(f, x->avg_ts);
        lm_bench_json_member_num(f, ", \"stddev_ts\": ", x->sd_ts);
        lm_bench_json_member_num(f, ", \"median_ts\": ", x->med_ts);
        lm_bench_json_member_num(f, ", \"min_ts\": ", x->min_ts);
        lm_bench_json_member_num(f, ", \"max_ts\": ", x->max_ts);
        fprintf(f, ", \"avg_ns\": %.0f, \"stddev_ns\": %.0f, \"median_ns\": %.0f, \"gbps\": ",
                x->avg_ns, x->sd_ns, x->med_ns);
        lm_bench_json_num(f, x->gbps);
        lm_bench_json_member_num(f, ", \"roofline_frac\": ", x->roof);
        if (x->kind == LM_BENCH_TG) fprintf(f, ", \"kv_bytes_per_token\": %.0f", x->kv_bytes);
        if (x->kind == LM_BENCH_TOKENIZE)
            fprintf(f, ", \"bytes_per_rep\": %.0f, \"median_mb_per_s\": %.4f", x->bytes,
                    x->bytes / (x->med_ns * 1e-9) / 1e6);
        if (x->kind == LM_BENCH_SAMPLE)
            fprintf(f, ", \"median_us_per_token\": %.4f", 1e6 / x->med_ts);
        fprintf(f, ",\n     \"samples_ns\": [");
        for (int k = 0; k < x->reps; k++) fprintf(f, "%s%.0f", k ? ", " : "", x->ns[k]);
        fprintf(f, "]}%s\n", i + 1 < n_t || r->n_par > 0 ? "," : "");
    }
    for (int i = 0; i < r->n_par; i++) // one parameter set per thread count
        lm_bench_parallel_print_json_tests(f, &r->par_params[i], &r->par_results[i * n_list],
                                           n_list, i + 1 < r->n_par);
    fprintf(f, "  ]");
    if (r->breakdown) {
        fprintf(f, ",\n  \"breakdown\": ");
        lm_bench_breakdown_print_json(r->breakdown, f);
    }
    fprintf(f, "\n}\n");
}

// ================================================================ the report

void lm_bench_report(const struct lm_bench_params *p, const struct lm_bench_result *r,
                     enum lm_bench_format fmt, FILE *out, FILE *err) {
    if (fmt == LM_BENCH_JSON) {
        print_json(out, p, r);
        return;
    }
    if (r->n_par > 0) { // batched runs: their tables, md and csv alike
        for (int i = 0; i < r->n_par; i++)
            lm_bench_parallel_print_md(out, &r->model, &r->par_params[i],
                                       &r->par_results[i * p->parallel.n], p->parallel.n);
        return;
    }
    if (fmt == LM_BENCH_MD) {
        print_md(out, &r->model, r->tests, r->n_tests, r->bw, r->n_bw, p->bw_mib, &p->sampling);
        if (r->breakdown) lm_bench_breakdown_print(r->breakdown, out);
    } else {
        print_csv(out, &r->model, r->tests, r->n_tests, r->bw, r->n_bw);
        if (r->breakdown) lm_bench_breakdown_print(r->breakdown, err);
    }
}
