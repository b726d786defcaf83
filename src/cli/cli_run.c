// `lumen run`: tokenize a prompt (optionally in the model's chat format) and generate from it
// as one request on the engine (lm_engine in step mode: the server's sampling, speculative
// decoding and grammar paths), streaming the text; one stats line on stderr at the end.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_gen.h"
#include "lumen.h"
#include "lumen_prof.h"

static const char *k_run_help_head =
    "usage: lumen run [-m MODEL] (-p TEXT | -f FILE) [options]\n"
    "\n"
    "  -m, --model PATH      GGUF model (default: " LM_DEFAULT_MODEL ")\n"
    "  -p, --prompt TEXT     prompt text\n"
    "  -f, --file PATH       read the prompt from a file\n"
    "  -n, --n-predict N     tokens to generate (default 128; stops early at end of generation)\n"
    "      --chat            wrap the prompt in the model's chat turn format (a model without\n"
    "                        a chat template gets a fallback format and one warning naming it)\n"
    "      --template NAME   with --chat: gemma, llama3, chatml, phi3 or granite instead of the model's\n"
    "      --show-reasoning  with --chat and a thinking model: its reasoning is shown when stdout is\n"
    "                        not a terminal too (on a terminal it is always shown, faint)\n"
    "      --reasoning-budget N  with --chat and a thinking model: its reasoning ends after N tokens\n"
    "                        (the end marker inserted; 0: none; default -1: no budget)\n";
// (the sampling flags between them: cli_sampling_help)
static const char *k_run_help_tail =
    "  -t, --threads N       threads (default: physical cores)\n"
    "      --ctx N           context size (default: min(model's, 4096))\n"
    CLI_KV_TYPE_HELP
    "      --ignore-eos      keep generating past end-of-generation tokens\n"
    "      --no-fused-top-k  sample from the full logits row even when the sampler needs only\n"
    "                        its k best (greedy, top-k without penalties), which the LM head\n"
    "                        otherwise selects as it computes them (same tokens, slower)\n"
    "      --grammar FILE    constrain the output to a GBNF grammar (llama.cpp's format;\n"
    "                        docs/structured.md)\n"
    "      --json-schema FILE  constrain the output to JSON matching a JSON Schema\n"
    "      --lookup          speculative decoding with prompt-lookup drafts (the same text,\n"
    "                        faster when the output repeats the prompt; docs/speculative.md)\n"
    "  -md, --model-draft PATH  speculative decoding with a draft model: a smaller model of\n"
    "                        the same vocabulary drafts, the model verifies (greedy: the same\n"
    "                        text; sampling: the same distribution; docs/speculative.md)\n"
    "      --draft-max K     with --lookup or -md: drafted tokens per step at most (default 8,\n"
    "                        <= 32)\n"
    "      --draft-fixed     with -md: draft K tokens every step instead of the length the\n"
    "                        measured cost and acceptance pick (to measure acceptance)\n"
    "      --verbose         print the prompt's token count and chat format, a progress\n"
    "                        line for prefills over ~2 s (when stderr is a terminal), and\n"
    "                        where the decode steps' time went (forward, sampling, output)\n"
    "      --profile         print the profiler's summary (phases, ops, matmuls, barriers,\n"
    "                        memory) to stderr at the end\n"
    "      --trace FILE      write every profiler event as JSONL (docs/profiling.md)\n"
    "      --perfetto FILE   write a Chrome trace (open it in ui.perfetto.dev)\n"
    "\n"
    "Prints generated text to stdout as it is produced, then one stats line to stderr:\n"
    "load ms, prompt tokens and tok/s, time to first token, generated tokens and tok/s\n"
    "(with --lookup or -md also tokens drafted, accepted and the acceptance rate).\n";


struct run_opts {
    const char *model_path, *prompt, *prompt_file, *draft_path, *tmpl_name;
    const char *trace_path, *perfetto_path, *grammar_path, *schema_path;
    int64_t n_predict, n_threads, n_ctx, draft_max;
    bool chat, ignore_eos, profile, verbose, fused, lookup, draft_fixed, show_reasoning;
    int32_t reasoning_budget; // --reasoning-budget (-1: none)
    int kv_type_k, kv_type_v; // -ctk / -ctv (enum lm_kv_type)
    struct lm_sampler_params sp;
};

// ================================================================ arguments

static void run_parse(int argc, char **argv, struct run_opts *o) {
    const char *cmd = "run";
    *o = (struct run_opts){.n_predict = 128, .fused = true, .reasoning_budget = -1, .sp = lm_sampler_params_default()};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(k_run_help_head, stdout);
            cli_sampling_help(stdout);
            fputs(k_run_help_tail, stdout);
            exit(0);
        }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) o->prompt = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) o->prompt_file = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict"))
            o->n_predict = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1 << 20);
        else if (!strcmp(a, "--chat")) o->chat = true;
        else if (!strcmp(a, "--show-reasoning")) o->show_reasoning = true;
        else if (!strcmp(a, "--reasoning-budget"))
            o->reasoning_budget = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), -1, 1 << 24);
        else if (!strcmp(a, "--template")) o->tmpl_name = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--verbose")) o->verbose = true;
        else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = true;
        else if (!strcmp(a, "--no-fused-top-k")) o->fused = false;
        else if (!strcmp(a, "--lookup")) o->lookup = true;
        else if (!strcmp(a, "--grammar")) o->grammar_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--json-schema")) o->schema_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--draft-fixed")) o->draft_fixed = true;
        else if (!strcmp(a, "-md") || !strcmp(a, "--model-draft")) o->draft_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--draft-max"))
            o->draft_max = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, LM_DRAFT_MAX_LIMIT);
        else if (!strcmp(a, "--profile")) o->profile = true;
        else if (!strcmp(a, "--trace")) o->trace_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--perfetto")) o->perfetto_path = cli_value(cmd, argc, argv, &i);
        else if (cli_sampling_flag(cmd, argc, argv, &i, &o->sp)) continue;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            o->n_threads = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 256);
        else if (!strcmp(a, "--ctx"))
            o->n_ctx = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 1 << 24);
        else if (cli_kv_type(cmd, argc, argv, &i, &o->kv_type_k, &o->kv_type_v)) continue;
        else cli_usage_error(cmd, "unknown option '%s' (try `lumen run --help`)", a);
    }
    if (!o->prompt && !o->prompt_file) cli_usage_error(cmd, "no prompt: give -p TEXT or -f FILE");
    if (o->prompt && o->prompt_file) cli_usage_error(cmd, "give either -p or -f, not both");
    if (o->draft_max && !o->lookup && !o->draft_path) cli_usage_error(cmd, "--draft-max needs --lookup or -md");
    if (o->lookup && o->draft_path) cli_usage_error(cmd, "give either --lookup or -md, not both");
    if (o->grammar_path && o->schema_path)
        cli_usage_error(cmd, "give either --grammar or --json-schema, not both");
    if (o->draft_fixed && !o->draft_path) cli_usage_error(cmd, "--draft-fixed needs -md");
    if (o->tmpl_name && lm_chat_template_from_name(o->tmpl_name) == LM_CHAT_TEMPLATE_NONE)
        cli_usage_error(cmd, "--template: unknown format '%s' (gemma, llama3, chatml, phi3 or granite)", o->tmpl_name);
    if (!o->model_path) o->model_path = cli_default_model();
}

// ================================================================ prompt, context

// The prompt's tokens (in the chat format with --chat). Returns 0, or the exit status.
static int run_tokenize(const struct run_opts *o, const struct lm_model *m, const char *prompt,
                        size_t prompt_len, int32_t **ids, size_t *n_ids, int *tmpl_out) {
    const uint64_t tp = lm_prof_phase_begin(LM_PHASE_TOKENIZE);
    char *chat_text = NULL;
    const char *text = prompt;
    size_t text_len = prompt_len;
    if (o->chat) {
        struct lm_chat_msg msg = {.role = "user", .content = prompt};
        size_t chat_len = 0;
        // the model's template (tokenizer.chat_template), else a fallback named in a warning
        const enum lm_chat_template tmpl =
            (enum lm_chat_template)cli_chat_template("run", m, o->model_path, o->tmpl_name);
        if (o->verbose) fprintf(stderr, "lumen run: chat format %s\n", lm_chat_template_name(tmpl));
        *tmpl_out = (int)tmpl;
        if (lm_chat_apply(tmpl, &msg, 1, true, &chat_text, &chat_len) != LM_OK) {
            fprintf(stderr, "lumen run: %s\n", lm_error_msg());
            return 1;
        }
        text = chat_text;
        text_len = strlen(chat_text);
    }
    const enum lm_status st = lm_tokenize(lm_model_tokenizer(m), text, text_len, true, o->chat, ids, n_ids);
    free(chat_text);
    if (st != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", lm_error_msg());
        return 1;
    }
    lm_prof_phase_end(LM_PHASE_TOKENIZE, tp, -1, (int32_t)*n_ids);
    if (*n_ids == 0) {
        fprintf(stderr, "lumen run: the prompt tokenizes to nothing (no BOS in this vocab)\n");
        return LM_EXIT_USAGE;
    }
    return 0;
}

// The context size: --ctx, else min(model's, 4096) grown to prompt + -n where the model allows.
static int64_t run_ctx(const struct run_opts *o, const struct lm_model *m, const struct lm_model *dm,
                       size_t n_ids) {
    const char *cmd = "run";
    const int64_t n_train = lm_model_n_ctx_train(m);
    int64_t n_ctx = o->n_ctx;
    if (n_ctx == 0) {
        n_ctx = n_train < 4096 ? n_train : 4096;
        if ((int64_t)n_ids + o->n_predict > n_ctx && (int64_t)n_ids + o->n_predict <= n_train)
            n_ctx = (int64_t)n_ids + o->n_predict;
    }
    if (n_ctx > n_train)
        cli_usage_error(cmd, "--ctx %lld exceeds the model's context length %lld", (long long)n_ctx,
                        (long long)n_train);
    if (dm && n_ctx > lm_model_n_ctx_train(dm))
        cli_usage_error(cmd, "context %lld exceeds the draft model's context length %d (give --ctx)",
                        (long long)n_ctx, lm_model_n_ctx_train(dm));
    if ((int64_t)n_ids >= n_ctx)
        cli_usage_error(cmd, "prompt is %zu tokens, context is %lld (raise --ctx)", n_ids, (long long)n_ctx);
    return n_ctx;
}

// ================================================================ generation

// The profiler's memory gauges: the mapped file, the KV blocks in use, the scratch, the RSS.
static void record_memory(const struct lm_model *m, const struct lm_context *c) {
    struct lm_model_info info;
    lm_model_info(m, &info);
    struct lm_kv_cache_stats kvs;
    lm_kv_cache_stats(c, &kvs);
    struct lm_prof_memory mem = {.weights_mapped = info.file_bytes, .kv_cache = kvs.bytes_used,
                                 .scratch = lm_context_scratch_bytes(c)};
    lm_prof_read_rss(&mem.rss, &mem.rss_peak);
    lm_prof_memory_rec(&mem);
}

// What one run needs beyond its options: the models, the prompt, the clocks.
struct run_job {
    struct lm_model *m, *dm; // dm: the draft model (-md), NULL without
    struct lm_grammar *grammar;
    const int32_t *ids;
    size_t n_ids;
    int64_t n_ctx;
    double load_ms;
    uint64_t t0; // the clock of TTFT: before tokenizing
    int tmpl;    // --chat: the chat format (enum lm_chat_template)
};

// The request: the sampling options, -n (clipped to the context: the request ends where the
// context does), the drafter and the grammar of a run that generates (-n 0 asks for one
// token and shows none: the prompt is still prefilled and timed).
static struct lm_request_params run_request(const struct run_opts *o, const struct run_job *j) {
    struct lm_request_params rp = lm_request_params_default();
    rp.sampling = o->sp;
    const int64_t room = j->n_ctx - (int64_t)j->n_ids;
    rp.max_tokens = (int32_t)(o->n_predict == 0 ? 1 : o->n_predict < room ? o->n_predict : room);
    rp.ignore_eos = o->ignore_eos;
    rp.lookup = o->lookup && !j->dm;
    rp.use_draft = j->dm != NULL;
    rp.draft_fixed = o->draft_fixed;
    rp.draft_max = (int32_t)o->draft_max;
    rp.grammar = j->grammar;
    rp.full_logits = !o->fused; // --no-fused-top-k
    return rp;
}

static void run_print_stats(const struct run_opts *o, const struct run_job *j, struct lm_engine *e,
                            const struct cli_gen *g, uint64_t t_submit, uint64_t t_end) {
    struct lm_engine_stats st;
    lm_engine_stats(e, &st);
    const bool spec = o->lookup || j->dm || j->grammar;
    char suffix[160] = "";
    if (spec)
        snprintf(suffix, sizeof suffix, " | drafted %llu, accepted %llu (%.1f%%)",
                 (unsigned long long)st.drafted_tokens, (unsigned long long)st.accepted_tokens,
                 st.drafted_tokens ? 100.0 * (double)st.accepted_tokens / (double)st.drafted_tokens : 0.0);
    if (j->grammar) // jump-forward: forced tokens rode along as drafts
        snprintf(suffix + strlen(suffix), sizeof suffix - strlen(suffix), " | grammar forced %llu",
                 (unsigned long long)st.forced_tokens);
    // prefill: submit to the first token (-n 0: to the end); decode: the tokens after the first
    const uint64_t t_pre = g->n_gen ? g->t_first : t_end;
    const double prefill_s = (double)(t_pre - t_submit) / 1e9;
    const double ttft_ms = g->n_gen ? (double)(g->t_first - j->t0) / 1e6 : 0.0;
    const double dec_s = g->n_gen > 1 ? (double)(t_end - g->t_first) / 1e9 : 0.0;
    char split[64] = ""; // a thinking model's answer: its span and its answer apart
    if (g->reasoning)
        snprintf(split, sizeof split, " (reasoning %lld, answer %lld)", (long long)g->n_reason,
                 (long long)(g->n_gen - g->n_reason));
    fprintf(stderr,
            "lumen: load %.1f ms | prompt %zu tok, %.1f tok/s | TTFT %.1f ms | "
            "gen %lld tok%s, %.1f tok/s | threads %d%s\n",
            j->load_ms, j->n_ids, prefill_s > 0 ? (double)j->n_ids / prefill_s : 0.0, ttft_ms,
            (long long)g->n_gen, split, dec_s > 0 ? (double)(g->n_gen - 1) / dec_s : 0.0,
            lm_context_n_threads(lm_engine_context(e)), suffix);
    if (o->verbose && g->n_gen > 1) { // per generated token after the first
        const double per = 1e3 * (double)(g->n_gen - 1);
        const double fwd = (double)(st.forward_ns - g->at_first.forward_ns);
        const double smp = (double)(st.sample_ns - g->at_first.sample_ns) - (double)g->ns_out;
        const double out = (double)g->ns_out;
        fprintf(stderr, "lumen run: decode steps: forward %.1f us/tok (%.1f tok/s), sampling %.1f us/tok, "
                "detokenize + output %.1f us/tok, other %.1f us/tok\n", fwd / per,
                fwd > 0 ? (double)(g->n_gen - 1) * 1e9 / fwd : 0.0, smp / per, out / per,
                ((double)(t_end - g->t_first) - fwd - smp - out) / per);
    }
}

// Generates the one request on an engine driven from this thread. Returns the exit status.
static int run_generate(const struct run_opts *o, const struct run_job *j) {
    struct lm_engine_params ep = {.max_running = 1, .max_waiting = 1, .step_tokens = 512,
                                  .n_ctx = (int32_t)j->n_ctx, .kv_tokens = (int32_t)j->n_ctx,
                                  .n_threads = (int32_t)o->n_threads, .no_prefix_cache = true,
                                  .draft_model = j->dm, .kv_type_k = o->kv_type_k,
                                  .kv_type_v = o->kv_type_v};
    struct lm_engine *e = NULL;
    if (lm_engine_init(&e, j->m, &ep) != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", lm_error_msg());
        return 1;
    }
    struct lm_context *c = lm_engine_context(e);
    if (lm_prof_enabled()) {
        lm_prof_record_kernels(j->m);
        record_memory(j->m, c);
    }
    if (o->verbose && (j->dm || j->grammar || o->lookup))
        fprintf(stderr, "lumen run: %s: prompt %zu tokens, context %lld, engine with %s%s%s (draft max %lld)\n",
                o->model_path, j->n_ids, (long long)j->n_ctx,
                j->dm ? "draft model " : o->lookup ? "prompt lookup" : "no drafter",
                j->dm ? o->draft_path : "", j->grammar ? ", a grammar" : "",
                (long long)(o->draft_max ? o->draft_max : j->grammar ? LM_DRAFT_MAX_LIMIT : LM_DRAFT_MAX_DEFAULT));
    else if (o->verbose)
        fprintf(stderr, "lumen run: %s: prompt %zu tokens, context %lld, %d threads\n", o->model_path,
                j->n_ids, (long long)j->n_ctx, lm_context_n_threads(c));
    struct lm_request_params rp = run_request(o, j);
    struct cli_gen g;
    uint64_t id = 0;
    int rc = 0;
    const bool ok = cli_gen_init(&g, lm_model_tokenizer(j->m));
    g.ignore_eos = o->ignore_eos;
    g.show_max = o->n_predict;
    if (ok && o->chat) cli_gen_reasoning(&g, j->m, (enum lm_chat_template)j->tmpl, o->show_reasoning);
    if (ok && o->chat) cli_gen_budget(&g, o->reasoning_budget, &rp);
    const uint64_t t_submit = lm_time_ns();
    if (!ok || lm_engine_submit(e, j->ids, (int32_t)j->n_ids, &rp, cli_gen_on_event, &g, &id) != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", ok ? lm_error_msg() : "out of memory");
        cli_gen_free(&g);
        lm_engine_free(e);
        return 1;
    }
    struct cli_progress prog;
    if (cli_gen_drive(e, id, &g, o->verbose ? &prog : NULL, (int64_t)j->n_ids, NULL) != 0) {
        fprintf(stderr, "\nlumen run: %s\n", lm_error_msg());
        rc = 1;
    } else if (g.finish == LM_FINISH_ERROR) {
        fprintf(stderr, "\nlumen run: %s\n", g.error);
        rc = 1;
    }
    cli_gen_flush(&g);
    fputc('\n', stdout);
    fflush(stdout);
    const uint64_t t_end = lm_time_ns();
    run_print_stats(o, j, e, &g, t_submit, t_end);
    if (lm_prof_enabled()) record_memory(j->m, c);
    cli_gen_free(&g);
    lm_engine_free(e);
    return rc;
}

// ================================================================ command

// The profiler's outputs (--profile, --trace, --perfetto). Returns rc, or 1 when one fails.
static int run_prof_finish(const struct run_opts *o, int rc) {
    if (!lm_prof_enabled()) return rc;
    if (o->profile) lm_prof_print_summary(stderr);
    if (o->trace_path && lm_prof_write_jsonl(o->trace_path) != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", lm_error_msg());
        rc = 1;
    }
    if (o->perfetto_path && lm_prof_write_perfetto(o->perfetto_path) != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", lm_error_msg());
        rc = 1;
    }
    lm_prof_shutdown();
    return rc;
}

// The model and the draft model (-md), with the load time. Returns 0, or the exit status.
static int run_load(const struct run_opts *o, struct run_job *j) {
    const uint64_t t_load0 = lm_time_ns();
    const uint64_t tp = lm_prof_phase_begin(LM_PHASE_LOAD);
    enum lm_status st = lm_model_load(&j->m, o->model_path, NULL);
    lm_prof_phase_end(LM_PHASE_LOAD, tp, -1, 0);
    if (st == LM_OK && o->draft_path && (st = lm_model_load(&j->dm, o->draft_path, NULL)) != LM_OK) {
        lm_model_free(j->m);
        j->m = NULL;
    }
    if (st != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", lm_error_msg());
        return st == LM_ERR_IO ? LM_EXIT_USAGE : 1;
    }
    j->load_ms = (double)(lm_time_ns() - t_load0) / 1e6;
    return 0;
}

int cmd_run(int argc, char **argv) {
    struct run_opts o;
    run_parse(argc, argv, &o);
    char *file_text = NULL;
    const char *prompt = o.prompt;
    size_t prompt_len = 0;
    if (o.prompt_file) {
        file_text = cli_read_file(o.prompt_file, &prompt_len);
        if (!file_text) cli_usage_error("run", "cannot read prompt file '%s'", o.prompt_file);
        prompt = file_text;
    } else {
        prompt_len = strlen(prompt);
    }
    // profiler: summary for --profile, full events for --trace / --perfetto
    const enum lm_prof_level level = (o.trace_path || o.perfetto_path) ? LM_PROF_TRACE
                                     : o.profile                        ? LM_PROF_SUMMARY
                                                                        : LM_PROF_OFF;
    const int nt = o.n_threads > 0 ? (int)o.n_threads : lm_cpu_physical_cores();
    if (level != LM_PROF_OFF && lm_prof_init(level, nt, 0) != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", lm_error_msg());
        free(file_text);
        return 1;
    }
    struct run_job j = {0};
    int rc = run_load(&o, &j);
    int32_t *ids = NULL;
    if (rc == 0) {
        j.grammar = cli_grammar_load("run", lm_model_tokenizer(j.m), o.grammar_path, o.schema_path);
        j.t0 = lm_time_ns();
        rc = run_tokenize(&o, j.m, prompt, prompt_len, &ids, &j.n_ids, &j.tmpl);
    }
    if (rc == 0) {
        j.ids = ids;
        j.n_ctx = run_ctx(&o, j.m, j.dm, j.n_ids);
        if (o.n_predict == 0) { // nothing to draft or constrain: the plain prefill
            lm_model_free(j.dm);
            lm_grammar_free(j.grammar);
            j.dm = NULL;
            j.grammar = NULL;
        }
        rc = run_generate(&o, &j);
    }
    rc = run_prof_finish(&o, rc);
    lm_grammar_free(j.grammar);
    free(ids);
    free(file_text);
    lm_model_free(j.dm);
    lm_model_free(j.m);
    return rc;
}
