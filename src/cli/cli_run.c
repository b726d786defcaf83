// `lumen run`: tokenize a prompt (optionally in the model's chat format), prefill
// it, then sample and stream tokens; one stats line on stderr at the end. With --lookup,
// -md (a draft model) or a grammar (--grammar, --json-schema) the request runs on the engine
// (lm_engine, step mode), whose speculative decoding and grammar masks the server shares.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_progress.h"
#include "lumen.h"
#include "lumen_prof.h"

static const char *k_run_help =
    "usage: lumen run [-m MODEL] (-p TEXT | -f FILE) [options]\n"
    "\n"
    "  -m, --model PATH      GGUF model (default: " LM_DEFAULT_MODEL ")\n"
    "  -p, --prompt TEXT     prompt text\n"
    "  -f, --file PATH       read the prompt from a file\n"
    "  -n, --n-predict N     tokens to generate (default 128; stops early at end of generation)\n"
    "      --chat            wrap the prompt in the model's chat turn format (a model without\n"
    "                        a chat template gets a fallback format and one warning naming it)\n"
    "      --template NAME   with --chat: gemma, llama3 or chatml instead of the model's\n"
    "      --temp T          temperature (default 0.8; 0 = greedy)\n"
    "      --top-k K         keep the K most likely tokens (default 40; 0 = off)\n"
    "      --top-p P         nucleus sampling (default 0.95; 1 = off)\n"
    "      --min-p P         drop tokens below P x the top probability (default 0.05; 0 = off)\n"
    "      --repeat-penalty R  penalize the last 64 tokens (default 1.0 = off)\n"
    "      --seed S          RNG seed (default 0); same seed and flags give the same text\n"
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

// ================================================================ --lookup, -md: the engine

static int g_kv_type_k, g_kv_type_v; // -ctk / -ctv (enum lm_kv_type)

struct run_sink {
    const struct lm_tokenizer *tok;
    struct lm_detok dt;
    char *piece;
    size_t piece_cap;
    bool ignore_eos, done, failed;
    int64_t n_gen;
    uint64_t t_first;
};

static void run_on_event(void *user, const struct lm_event *ev) {
    struct run_sink *s = user;
    if (ev->token >= 0) {
        if (s->n_gen++ == 0) s->t_first = lm_time_ns();
        // as the plain loop: an end-of-generation token ends the text without being shown
        if (s->ignore_eos || !lm_tokenizer_is_eog(s->tok, ev->token)) {
            size_t np = 0;
            lm_detok_push(s->tok, &s->dt, ev->token, s->piece, s->piece_cap, &np);
            fwrite(s->piece, 1, np, stdout);
            fflush(stdout);
        }
    }
    if (ev->finish != LM_FINISH_NONE) {
        s->done = true;
        if (ev->finish == LM_FINISH_ERROR) {
            fprintf(stderr, "\nlumen run: %s\n", ev->error ? ev->error : "forward pass failed");
            s->failed = true;
        }
    }
}

// Generates with one request on an engine driven from this thread; the stats line has the
// plain loop's form plus the drafting counters. Returns the exit status.
static int run_engine(struct lm_model *m, const int32_t *ids, size_t n_ids, int64_t n_ctx,
                      int64_t n_threads, int64_t n_predict, const struct lm_sampler_params *sp,
                      bool ignore_eos, bool lookup, int32_t draft_max, struct lm_model *draft,
                      bool draft_fixed, struct lm_grammar *grammar, double load_ms, uint64_t t0) {
    struct lm_engine_params ep = {.max_running = 1, .max_waiting = 1, .step_tokens = 512,
                                  .n_ctx = (int32_t)n_ctx, .kv_tokens = (int32_t)n_ctx,
                                  .n_threads = (int32_t)n_threads, .no_prefix_cache = true,
                                  .draft_model = draft, .kv_type_k = g_kv_type_k,
                                  .kv_type_v = g_kv_type_v};
    struct lm_engine *e = NULL;
    if (lm_engine_init(&e, m, &ep) != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", lm_error_msg());
        return 1;
    }
    struct lm_request_params rp = lm_request_params_default();
    rp.sampling = *sp;
    rp.max_tokens = (int32_t)n_predict;
    rp.ignore_eos = ignore_eos;
    rp.lookup = lookup && !draft;
    rp.use_draft = draft != NULL;
    rp.draft_fixed = draft_fixed;
    rp.draft_max = draft_max;
    rp.grammar = grammar;
    struct run_sink s = {.tok = lm_model_tokenizer(m), .ignore_eos = ignore_eos};
    lm_detok_init(&s.dt, false);
    s.piece_cap = lm_tokenizer_max_piece(s.tok) + 8;
    s.piece = malloc(s.piece_cap);
    int rc = 0;
    if (!s.piece || lm_engine_submit(e, ids, (int32_t)n_ids, &rp, run_on_event, &s, NULL) != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", s.piece ? lm_error_msg() : "out of memory");
        rc = 1;
    }
    uint64_t t_pre1 = 0;
    while (rc == 0 && !s.done) {
        if (lm_engine_step(e) < 0 && !s.done) {
            fprintf(stderr, "\nlumen run: %s\n", lm_error_msg());
            rc = 1;
        }
        if (!t_pre1 && s.n_gen > 0) t_pre1 = s.t_first;
    }
    if (s.failed) rc = 1;
    const size_t np = s.piece ? lm_detok_flush(&s.dt, s.piece, s.piece_cap) : 0;
    fwrite(s.piece, 1, np, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    const uint64_t t_end = lm_time_ns();
    struct lm_engine_stats st;
    lm_engine_stats(e, &st);
    char forced[64] = "";
    if (grammar) // jump-forward: forced tokens rode along as drafts
        snprintf(forced, sizeof forced, " | grammar forced %llu", (unsigned long long)st.forced_tokens);
    // prefill rate: the prompt over the time to the first token (the engine's prefill steps)
    const double ttft_ms = s.n_gen ? (double)(s.t_first - t0) / 1e6 : 0.0;
    const double dec_s = s.n_gen > 1 ? (double)(t_end - s.t_first) / 1e9 : 0.0;
    fprintf(stderr,
            "lumen: load %.1f ms | prompt %zu tok, %.1f tok/s | TTFT %.1f ms | "
            "gen %lld tok, %.1f tok/s | threads %d | drafted %llu, accepted %llu (%.1f%%)%s\n",
            load_ms, n_ids, ttft_ms > 0 ? (double)n_ids / (ttft_ms / 1e3) : 0.0, ttft_ms,
            (long long)s.n_gen, dec_s > 0 ? (double)(s.n_gen - 1) / dec_s : 0.0,
            lm_context_n_threads(lm_engine_context(e)), (unsigned long long)st.drafted_tokens,
            (unsigned long long)st.accepted_tokens,
            st.drafted_tokens ? 100.0 * (double)st.accepted_tokens / (double)st.drafted_tokens : 0.0,
            forced);
    free(s.piece);
    lm_engine_free(e);
    return rc;
}

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

int cmd_run(int argc, char **argv) {
    const char *cmd = "run";
    const char *model_path = NULL, *prompt = NULL, *prompt_file = NULL, *draft_path = NULL;
    int64_t n_predict = 128, n_threads = 0, n_ctx = 0;
    bool chat = false, ignore_eos = false, profile = false, verbose = false, fused = true;
    bool lookup = false, draft_fixed = false;
    int64_t draft_max = 0;
    const char *trace_path = NULL, *perfetto_path = NULL, *tmpl_name = NULL;
    const char *grammar_path = NULL, *schema_path = NULL;
    struct lm_sampler_params sp = lm_sampler_params_default();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(k_run_help, stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) prompt = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) prompt_file = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict"))
            n_predict = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1 << 20);
        else if (!strcmp(a, "--chat")) chat = true;
        else if (!strcmp(a, "--template")) tmpl_name = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--verbose")) verbose = true;
        else if (!strcmp(a, "--ignore-eos")) ignore_eos = true;
        else if (!strcmp(a, "--no-fused-top-k")) fused = false;
        else if (!strcmp(a, "--lookup")) lookup = true;
        else if (!strcmp(a, "--grammar")) grammar_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--json-schema")) schema_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--draft-fixed")) draft_fixed = true;
        else if (!strcmp(a, "-md") || !strcmp(a, "--model-draft")) draft_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--draft-max"))
            draft_max = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, LM_DRAFT_MAX_LIMIT);
        else if (!strcmp(a, "--profile")) profile = true;
        else if (!strcmp(a, "--trace")) trace_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--perfetto")) perfetto_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--temp"))
            sp.temperature = (float)cli_float(cmd, a, cli_value(cmd, argc, argv, &i), 0, 100);
        else if (!strcmp(a, "--top-k"))
            sp.top_k = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1 << 30);
        else if (!strcmp(a, "--top-p"))
            sp.top_p = (float)cli_float(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1);
        else if (!strcmp(a, "--min-p"))
            sp.min_p = (float)cli_float(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1);
        else if (!strcmp(a, "--repeat-penalty"))
            sp.repeat_penalty = (float)cli_float(cmd, a, cli_value(cmd, argc, argv, &i), 0.01, 100);
        else if (!strcmp(a, "--seed"))
            sp.seed = (uint64_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, INT64_MAX);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            n_threads = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 256);
        else if (!strcmp(a, "--ctx"))
            n_ctx = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 1 << 24);
        else if (cli_kv_type(cmd, argc, argv, &i, &g_kv_type_k, &g_kv_type_v)) continue;
        else cli_usage_error(cmd, "unknown option '%s' (try `lumen run --help`)", a);
    }
    if (!prompt && !prompt_file) cli_usage_error(cmd, "no prompt: give -p TEXT or -f FILE");
    if (prompt && prompt_file) cli_usage_error(cmd, "give either -p or -f, not both");
    if (draft_max && !lookup && !draft_path) cli_usage_error(cmd, "--draft-max needs --lookup or -md");
    if (lookup && draft_path) cli_usage_error(cmd, "give either --lookup or -md, not both");
    if (grammar_path && schema_path) cli_usage_error(cmd, "give either --grammar or --json-schema, not both");
    if (draft_fixed && !draft_path) cli_usage_error(cmd, "--draft-fixed needs -md");
    if (tmpl_name && lm_chat_template_from_name(tmpl_name) == LM_CHAT_TEMPLATE_NONE)
        cli_usage_error(cmd, "--template: unknown format '%s' (gemma, llama3 or chatml)", tmpl_name);
    char *file_text = NULL;
    size_t prompt_len = 0;
    if (prompt_file) {
        file_text = cli_read_file(prompt_file, &prompt_len);
        if (!file_text) cli_usage_error(cmd, "cannot read prompt file '%s'", prompt_file);
        prompt = file_text;
    } else {
        prompt_len = strlen(prompt);
    }
    if (!model_path) model_path = cli_default_model();

    // profiler: summary for --profile, full events for --trace / --perfetto
    const enum lm_prof_level level = (trace_path || perfetto_path) ? LM_PROF_TRACE
                                     : profile                      ? LM_PROF_SUMMARY
                                                                    : LM_PROF_OFF;
    if (level != LM_PROF_OFF) {
        const int nt = n_threads > 0 ? (int)n_threads : lm_cpu_physical_cores();
        if (lm_prof_init(level, nt, 0) != LM_OK) {
            fprintf(stderr, "lumen run: %s\n", lm_error_msg());
            return 1;
        }
    }

    const uint64_t t_load0 = lm_time_ns();
    uint64_t tp = lm_prof_phase_begin(LM_PHASE_LOAD);
    struct lm_model *m = NULL;
    enum lm_status st = lm_model_load(&m, model_path, NULL);
    lm_prof_phase_end(LM_PHASE_LOAD, tp, -1, 0);
    if (st != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", lm_error_msg());
        free(file_text);
        return st == LM_ERR_IO ? LM_EXIT_USAGE : 1;
    }
    struct lm_model *dm = NULL; // the draft model (-md)
    if (draft_path && (st = lm_model_load(&dm, draft_path, NULL)) != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", lm_error_msg());
        free(file_text);
        lm_model_free(m);
        return st == LM_ERR_IO ? LM_EXIT_USAGE : 1;
    }
    const double load_ms = (double)(lm_time_ns() - t_load0) / 1e6;
    const struct lm_tokenizer *tok = lm_model_tokenizer(m);
    struct lm_grammar *grammar = cli_grammar_load(cmd, tok, grammar_path, schema_path);

    // ---- tokenize (the clock for TTFT starts here)
    const uint64_t t0 = lm_time_ns();
    tp = lm_prof_phase_begin(LM_PHASE_TOKENIZE);
    char *chat_text = NULL;
    const char *text = prompt;
    size_t text_len = prompt_len;
    if (chat) {
        struct lm_chat_msg msg = {.role = "user", .content = prompt};
        size_t chat_len = 0;
        // the model's template (tokenizer.chat_template), else a fallback named in a warning
        const enum lm_chat_template tmpl =
            (enum lm_chat_template)cli_chat_template(cmd, m, model_path, tmpl_name);
        if (verbose) fprintf(stderr, "lumen run: chat format %s\n", lm_chat_template_name(tmpl));
        st = lm_chat_apply(tmpl, &msg, 1, true, &chat_text, &chat_len);
        if (st != LM_OK) {
            fprintf(stderr, "lumen run: %s\n", lm_error_msg());
            return 1;
        }
        text = chat_text;
        text_len = strlen(chat_text);
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    st = lm_tokenize(tok, text, text_len, true, chat, &ids, &n_ids);
    if (st != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", lm_error_msg());
        return 1;
    }
    lm_prof_phase_end(LM_PHASE_TOKENIZE, tp, -1, (int32_t)n_ids);
    if (n_ids == 0) {
        fprintf(stderr, "lumen run: the prompt tokenizes to nothing (no BOS in this vocab)\n");
        return LM_EXIT_USAGE;
    }
    if (n_ctx == 0) {
        n_ctx = lm_model_n_ctx_train(m) < 4096 ? lm_model_n_ctx_train(m) : 4096;
        if ((int64_t)n_ids + n_predict > n_ctx && (int64_t)n_ids + n_predict <= lm_model_n_ctx_train(m))
            n_ctx = (int64_t)n_ids + n_predict;
    }
    if (n_ctx > lm_model_n_ctx_train(m))
        cli_usage_error(cmd, "--ctx %lld exceeds the model's context length %d", (long long)n_ctx,
                        lm_model_n_ctx_train(m));
    if (dm && n_ctx > lm_model_n_ctx_train(dm))
        cli_usage_error(cmd, "context %lld exceeds the draft model's context length %d (give --ctx)",
                        (long long)n_ctx, lm_model_n_ctx_train(dm));
    if ((int64_t)n_ids >= n_ctx)
        cli_usage_error(cmd, "prompt is %zu tokens, context is %lld (raise --ctx)", n_ids,
                        (long long)n_ctx);

    if ((lookup || dm || grammar) && n_predict > 0) {
        if (verbose)
            fprintf(stderr, "lumen run: %s: prompt %zu tokens, context %lld, engine with %s%s%s "
                    "(draft max %lld)\n", model_path, n_ids, (long long)n_ctx,
                    dm ? "draft model " : lookup ? "prompt lookup" : "no drafter", dm ? draft_path : "",
                    grammar ? ", a grammar" : "",
                    (long long)(draft_max ? draft_max : grammar ? LM_DRAFT_MAX_LIMIT : LM_DRAFT_MAX_DEFAULT));
        int rc = run_engine(m, ids, n_ids, n_ctx, n_threads, n_predict, &sp, ignore_eos, lookup,
                            (int32_t)draft_max, dm, draft_fixed, grammar, load_ms, t0);
        lm_grammar_free(grammar);
        if (lm_prof_enabled()) {
            if (profile) lm_prof_print_summary(stderr);
            if (trace_path && lm_prof_write_jsonl(trace_path) != LM_OK) rc = 1;
            if (perfetto_path && lm_prof_write_perfetto(perfetto_path) != LM_OK) rc = 1;
            if (rc) fprintf(stderr, "lumen run: %s\n", lm_error_msg());
            lm_prof_shutdown();
        }
        free(ids);
        free(chat_text);
        free(file_text);
        lm_model_free(dm);
        lm_model_free(m);
        return rc;
    }
    lm_model_free(dm); // -n 0: nothing to draft
    lm_grammar_free(grammar);
    struct lm_context_params cp = {.n_ctx = (int32_t)n_ctx, .n_seq_max = 1, .n_batch = 512,
                                   .n_threads = (int32_t)n_threads, .kv_type_k = g_kv_type_k,
                                   .kv_type_v = g_kv_type_v};
    struct lm_context *c = NULL;
    if ((st = lm_context_init(&c, m, &cp)) != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", lm_error_msg());
        return 1;
    }
    if (lm_prof_enabled()) {
        lm_prof_record_kernels(m);
        record_memory(m, c);
    }
    struct lm_sampler *smp = NULL;
    if ((st = lm_sampler_init(&smp, &sp, lm_model_n_vocab(m))) != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", lm_error_msg());
        return 1;
    }
    for (size_t i = 0; i < n_ids; i++) lm_sampler_accept(smp, ids[i]);
    // the LM head selects the candidates the sampler draws from, when that is all it needs
    const int32_t top_need = fused ? lm_sampler_top_k_need(smp) : 0;
    if (top_need > 0 && (st = lm_context_set_top_k(c, top_need)) != LM_OK) {
        fprintf(stderr, "lumen run: %s\n", lm_error_msg());
        return 1;
    }

    // ---- prefill in chunks of n_batch; logits only for the last prompt token
    struct lm_batch_entry *batch = malloc(512 * sizeof *batch);
    if (verbose)
        fprintf(stderr, "lumen run: %s: prompt %zu tokens, context %lld, %d threads\n", model_path, n_ids,
                (long long)n_ctx, lm_context_n_threads(c));
    struct cli_progress prog;
    cli_progress_begin(&prog, "prefill", (int64_t)n_ids, "tok");
    prog.enabled = prog.enabled && verbose;
    const uint64_t t_prefill0 = lm_time_ns();
    for (size_t off = 0; off < n_ids; off += 512) {
        const size_t nb = n_ids - off < 512 ? n_ids - off : 512;
        for (size_t j = 0; j < nb; j++)
            batch[j] = (struct lm_batch_entry){.token = ids[off + j], .pos = (int32_t)(off + j),
                                               .seq = 0, .want_logits = off + j == n_ids - 1};
        tp = lm_prof_phase_begin(LM_PHASE_PREFILL);
        if ((st = lm_decode(c, batch, (int32_t)nb)) != LM_OK) {
            fprintf(stderr, "lumen run: %s\n", lm_error_msg());
            return 1;
        }
        lm_prof_phase_end(LM_PHASE_PREFILL, tp, -1, (int32_t)nb);
        cli_progress_update(&prog, (int64_t)(off + nb));
    }
    cli_progress_end(&prog);
    const uint64_t t_prefill1 = lm_time_ns();

    // ---- generate
    struct lm_detok dt;
    lm_detok_init(&dt, false);
    const size_t piece_cap = lm_tokenizer_max_piece(tok) + 8;
    char *piece = malloc(piece_cap);
    int64_t n_gen = 0;
    uint64_t t_first = 0, t_dec0 = 0;
    // --verbose: where the decode steps' time goes (after the first token): forward passes,
    // sampling, detokenization + writing the text
    uint64_t ns_fwd = 0, ns_sample = 0, ns_out = 0, t_mark = 0;
    int32_t pos = (int32_t)n_ids;
    while (n_gen < n_predict) {
        if (n_gen > 0) t_mark = lm_time_ns();
        tp = lm_prof_phase_begin(LM_PHASE_SAMPLE);
        const struct lm_token_logit *top = NULL;
        const int32_t n_top = top_need > 0 ? lm_get_top_k(c, 0, &top) : 0;
        const int32_t id = n_top > 0 ? lm_sampler_sample_top_k(smp, top, n_top)
                                     : lm_sampler_sample(smp, lm_get_logits(c, 0));
        lm_sampler_accept(smp, id);
        lm_prof_phase_end(LM_PHASE_SAMPLE, tp, (int32_t)n_gen, 1);
        const uint64_t t_sampled = lm_time_ns();
        if (n_gen == 0) t_first = t_dec0 = t_sampled;
        else ns_sample += t_sampled - t_mark;
        n_gen++;
        if (!ignore_eos && lm_tokenizer_is_eog(tok, id)) break;
        size_t np = 0;
        tp = lm_prof_phase_begin(LM_PHASE_DETOKENIZE);
        lm_detok_push(tok, &dt, id, piece, piece_cap, &np);
        fwrite(piece, 1, np, stdout);
        fflush(stdout);
        lm_prof_phase_end(LM_PHASE_DETOKENIZE, tp, (int32_t)n_gen - 1, 1);
        t_mark = lm_time_ns();
        ns_out += t_mark - t_sampled;
        if (n_gen == n_predict) break;
        if (pos >= n_ctx) break;
        struct lm_batch_entry e = {.token = id, .pos = pos++, .seq = 0, .want_logits = true};
        tp = lm_prof_phase_begin(LM_PHASE_DECODE);
        if ((st = lm_decode(c, &e, 1)) != LM_OK) {
            fprintf(stderr, "\nlumen run: %s\n", lm_error_msg());
            return 1;
        }
        lm_prof_phase_end(LM_PHASE_DECODE, tp, (int32_t)n_gen - 1, 1);
        ns_fwd += lm_time_ns() - t_mark;
    }
    size_t np = lm_detok_flush(&dt, piece, piece_cap);
    fwrite(piece, 1, np, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    const uint64_t t_end = lm_time_ns();
    const double prefill_s = (double)(t_prefill1 - t_prefill0) / 1e9;
    const double ttft_ms = n_gen ? (double)(t_first - t0) / 1e6 : 0.0;
    // decode rate counts the tokens produced after the first (each needed one forward)
    const double dec_s = n_gen > 1 ? (double)(t_end - t_dec0) / 1e9 : 0.0;
    fprintf(stderr,
            "lumen: load %.1f ms | prompt %zu tok, %.1f tok/s | TTFT %.1f ms | "
            "gen %lld tok, %.1f tok/s | threads %d\n",
            load_ms, n_ids, prefill_s > 0 ? (double)n_ids / prefill_s : 0.0, ttft_ms,
            (long long)n_gen, dec_s > 0 ? (double)(n_gen - 1) / dec_s : 0.0, lm_context_n_threads(c));
    if (verbose && n_gen > 1) { // per generated token after the first
        const double per = 1e3 * (double)(n_gen - 1);
        fprintf(stderr, "lumen run: decode steps: forward %.1f us/tok (%.1f tok/s), sampling %.1f us/tok, "
                "detokenize + output %.1f us/tok, other %.1f us/tok\n", (double)ns_fwd / per,
                ns_fwd ? (double)(n_gen - 1) * 1e9 / (double)ns_fwd : 0.0, (double)ns_sample / per,
                (double)ns_out / per, (double)(t_end - t_dec0 - ns_fwd - ns_sample - ns_out) / per);
    }
    int rc = 0;
    if (lm_prof_enabled()) {
        record_memory(m, c);
        if (profile) lm_prof_print_summary(stderr);
        if (trace_path && lm_prof_write_jsonl(trace_path) != LM_OK) {
            fprintf(stderr, "lumen run: %s\n", lm_error_msg());
            rc = 1;
        }
        if (perfetto_path && lm_prof_write_perfetto(perfetto_path) != LM_OK) {
            fprintf(stderr, "lumen run: %s\n", lm_error_msg());
            rc = 1;
        }
        lm_prof_shutdown();
    }
    free(batch);
    free(piece);
    free(ids);
    free(chat_text);
    free(file_text);
    lm_sampler_free(smp);
    lm_context_free(c);
    lm_model_free(m);
    return rc;
}
