// `lumen bench`: flags -> struct lm_bench_params, one lm_bench_run on the model, its report
// on stdout. What is measured and how is src/bench/ (bench.h); this file parses and prints.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "cli_progress.h"
#include "lumen.h"
#include "lumen_prof.h"

static const char *k_bench_help =
    "usage: lumen bench [-m MODEL] [options]\n"
    "\n"
    "  -m, --model PATH    GGUF model (default: " LM_DEFAULT_MODEL ")\n"
    "  -p, --n-prompt LIST prefill tests, comma-separated token counts (default 512; 0 = none)\n"
    "  -n, --n-gen LIST    decode tests: N single-token steps after a 16-token prompt\n"
    "                      (default 128; 0 = none)\n"
    "  -d, --depth LIST    pp and tg tests after this many positions already in the cache\n"
    "                      (llama-bench's -d; filled once per depth, untimed; default 0)\n"
    "      --ttft N        time to first token: prefill N tokens + sample one (default 0 = off)\n"
    "  -r, --reps N        timed repetitions per test (default 5)\n"
    "      --warmup N      untimed runs before each test (default 1)\n"
    "  -t, --threads LIST  thread counts (default: physical cores)\n"
    "  -o, --output FMT    md (default), csv or json\n"
    "      --bw-mib N      buffer of the read-bandwidth probe in MiB (default 512; 0 = skip)\n"
    "      --breakdown     also run one profiled generation (first -p prompt, first -n\n"
    "                      tokens; 128 each if 0; after the deepest -d) at the largest\n"
    "                      thread count and report\n"
    "                      phases, prefill and decode by component, per-layer\n"
    "                      attention/FFN (decode), bottlenecks\n"
    "                      (md: after the table; json: \"breakdown\" object; csv: to stderr)\n"
    "      --progress      print each test as it runs to stderr\n"
    "  -ctk, -ctv TYPE     KV cache types of K / V: f16 (default) or q8_0 (pp/tg tests and\n"
    "                      --parallel's throughput runs)\n"
    "      --parallel LIST batched decode instead of the pp/tg tests (llama-batched-bench's\n"
    "                      job): for each N, N requests with distinct prompts of -p tokens\n"
    "                      (default 64) generate -n tokens each (default 128) on the engine;\n"
    "                      reports aggregate decode t/s, TTFT and inter-token latency\n"
    "                      percentiles, KV memory held, and the compute roof (the pp512\n"
    "                      prefill MAC rate / MACs of one decode token with the LM head)\n"
    "      --step-tokens S --parallel: the engine's token budget per step (default: N x -p,\n"
    "                      every prompt in the first step; 256 in the --arrival runs)\n"
    "      --arrival L     --parallel: per N, also a run where a prompt of L tokens arrives\n"
    "                      while the N streams decode; reports their worst inter-token gap\n"
    "                      before and during its prefill against one full-chunk step\n"
    "      --trace FILE    --parallel: one extra profiled run at the largest N and -t (its\n"
    "                      --arrival run if given): JSONL for `lumen analyze`\n"
    "      --perfetto FILE --parallel: the same run as a Perfetto trace\n"
    "      --profile       --parallel: that run's profiler summary on stderr\n"
    "      --lookup        --parallel: requests draft by prompt lookup (speculative decoding,\n"
    "                      docs/speculative.md; the prompts repeat a text, so drafts are often\n"
    "                      right); drafted / accepted tokens on stderr\n"
    "\n"
    "Sampling (the flags of `lumen run`, docs/sampling.md): the chain of the tests that sample,\n"
    "the ttft test's one token, the sample test, the --breakdown generation and the --parallel\n"
    "and --arrival requests (pp and tg sample nothing). --temp defaults to 0 (greedy) with\n"
    "--parallel and to 0.8 otherwise; json reports the chain in \"params\".\n";

static const char *k_bench_notes =
    "\n"
    "Prompts are deterministic: BOS + a fixed English text's token ids, repeated to length;\n"
    "prefill runs in chunks of 512 with logits only for the last token. Each test reports\n"
    "mean +- sd and median tok/s over the repetitions. tg rows also give the bytes read per\n"
    "token (weights, and the KV cache of every layer's window) x tok/s (GB/s) and its\n"
    "fraction of the probe's bandwidth at the same thread count (the decode roofline).\n";

// "128,512" -> l (each value in [lo, hi]); usage error otherwise.
static void parse_list(const char *cmd, const char *flag, const char *v, int lo, int hi,
                       struct lm_bench_list *l) {
    char buf[512];
    if (strlen(v) >= sizeof buf) cli_usage_error(cmd, "%s: list too long", flag);
    snprintf(buf, sizeof buf, "%s", v);
    l->n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (l->n == LM_BENCH_MAX_LIST)
            cli_usage_error(cmd, "%s: more than %d values", flag, LM_BENCH_MAX_LIST);
        l->v[l->n++] = (int)cli_int(cmd, flag, tok, lo, hi);
    }
    if (l->n == 0) cli_usage_error(cmd, "%s: empty list '%s'", flag, v);
}

// Consumes argv[*i] (and its value) if it is one of the flags only --parallel takes.
static bool parallel_flag(const char *cmd, int argc, char **argv, int *i, struct lm_bench_parallel_opts *o) {
    const char *a = argv[*i];
    if (!strcmp(a, "--arrival")) o->arrival = (int)cli_int(cmd, a, cli_value(cmd, argc, argv, i), 1, 1 << 20);
    else if (!strcmp(a, "--step-tokens"))
        o->step_tokens = (int)cli_int(cmd, a, cli_value(cmd, argc, argv, i), 1, 8192);
    else if (!strcmp(a, "--trace")) o->trace = cli_value(cmd, argc, argv, i);
    else if (!strcmp(a, "--perfetto")) o->perfetto = cli_value(cmd, argc, argv, i);
    else if (!strcmp(a, "--profile")) o->profile = true;
    else if (!strcmp(a, "--lookup")) o->lookup = true;
    else return false;
    return true;
}

// The one-line progress of a long test (cli_progress.h), driven by the bench's live callback.
static void live_progress(void *user, const char *label, int done, int total) {
    struct cli_progress *pg = user;
    if (done == 0) cli_progress_begin(pg, label, total, "runs");
    else if (done > 0) cli_progress_update(pg, done);
    else cli_progress_end(pg);
}

int cmd_bench(int argc, char **argv) {
    const char *cmd = "bench";
    struct lm_bench_params p = lm_bench_params_default();
    enum lm_bench_format fmt = LM_BENCH_MD;
    int kv_k = 0, kv_v = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(k_bench_help, stdout);
            cli_sampling_help(stdout);
            fputs(k_bench_notes, stdout);
            return 0;
        }
        else if (parallel_flag(cmd, argc, argv, &i, &p.popt)) continue;
        else if (cli_sampling_flag(cmd, argc, argv, &i, &p.sampling)) continue;
        else if (cli_kv_type(cmd, argc, argv, &i, &kv_k, &kv_v)) {
            p.kv_type_k = (enum lm_kv_type)kv_k;
            p.kv_type_v = (enum lm_kv_type)kv_v;
        }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) p.model_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt"))
            parse_list(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1 << 20, &p.prompt);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen"))
            parse_list(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1 << 20, &p.gen);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            parse_list(cmd, a, cli_value(cmd, argc, argv, &i), 1, LM_PROF_MAX_THREADS, &p.threads);
        else if (!strcmp(a, "-d") || !strcmp(a, "--depth") || !strcmp(a, "--n-depth"))
            parse_list(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1 << 20, &p.depth);
        else if (!strcmp(a, "-r") || !strcmp(a, "--reps"))
            p.reps = (int)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 1000);
        else if (!strcmp(a, "--warmup"))
            p.warmup = (int)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, 100);
        else if (!strcmp(a, "--ttft"))
            p.ttft = (int)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1 << 20);
        else if (!strcmp(a, "--bw-mib"))
            p.bw_mib = (int)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1 << 16);
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            const char *v = cli_value(cmd, argc, argv, &i);
            if (!strcmp(v, "md")) fmt = LM_BENCH_MD;
            else if (!strcmp(v, "csv")) fmt = LM_BENCH_CSV;
            else if (!strcmp(v, "json")) fmt = LM_BENCH_JSON;
            else cli_usage_error(cmd, "%s: '%s' is not one of md, csv, json", a, v);
        } else if (!strcmp(a, "--breakdown")) p.breakdown = true;
        else if (!strcmp(a, "--progress")) p.progress = true;
        else if (!strcmp(a, "--parallel"))
            parse_list(cmd, a, cli_value(cmd, argc, argv, &i), 1, 256, &p.parallel);
        else cli_usage_error(cmd, "unknown option '%s' (try `lumen bench --help`)", a);
    }
    if (!p.model_path) p.model_path = cli_default_model();
    if (lm_bench_params_resolve(&p) != LM_OK) cli_usage_error(cmd, "%s", lm_error_msg());

    const uint64_t t_load0 = lm_time_ns();
    struct lm_model *m = NULL;
    const enum lm_status st_load = lm_model_load(&m, p.model_path, NULL);
    if (st_load != LM_OK) {
        fprintf(stderr, "lumen bench: %s\n", lm_error_msg());
        return st_load == LM_ERR_IO ? LM_EXIT_USAGE : 1;
    }
    p.load_ms = (double)(lm_time_ns() - t_load0) / 1e6;
    const int need = lm_bench_positions(&p);
    if (need > lm_model_n_ctx_train(m)) {
        const int n_ctx = lm_model_n_ctx_train(m);
        lm_model_free(m);
        cli_usage_error(cmd, "the tests need %d positions; the model's context is %d "
                             "(lower -d/-p/-n/--ttft/--arrival)", need, n_ctx);
    }
    struct cli_progress pg;
    p.log = stderr;
    p.live = live_progress;
    p.live_user = &pg;
    struct lm_bench_result r;
    int rc = 0;
    if (lm_bench_run(m, &p, &r) != LM_OK) {
        fprintf(stderr, "lumen bench: %s\n", lm_error_msg());
        rc = 1;
    } else {
        lm_bench_report(&p, &r, fmt, stdout, stderr);
        fflush(stdout);
    }
    lm_bench_result_free(&r);
    lm_model_free(m);
    return rc;
}
