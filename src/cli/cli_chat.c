// `lumen chat`: an interactive multi-turn chat. Line editing and history through libedit
// (BSD editline) when stdin is a terminal; otherwise every input line is one message
// (scripts, tests). Each turn renders the whole conversation with the chat template and
// submits it to the engine (step mode, on this thread), whose prefix cache holds the earlier
// turns' KV blocks: only the tokens after them are prefilled.
#include <errno.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef LM_HAVE_LIBEDIT
#include <histedit.h>
#endif

#include "cli.h"
#include "cli_gen.h"
#include "lumen.h"
#include "strbuf.h"

static const char *k_chat_help_head =
    "usage: lumen chat [-m MODEL] [options]\n"
    "\n"
    "  -m, --model PATH      GGUF model (default: " LM_DEFAULT_MODEL ")\n"
    "  -n, --n-predict N     cap each reply at N tokens (default 512; 0 = until the end of\n"
    "                        the model's turn or of the context)\n"
    "  -s, --system TEXT     system prompt (kept when old turns are dropped)\n"
    "      --template NAME   chat format: gemma, llama3, chatml, phi3 or granite (default: the model's)\n"
    "      --grammar FILE    every reply follows a GBNF grammar (docs/structured.md)\n"
    "      --json-schema FILE  every reply is JSON matching a JSON Schema\n"
    "      --show-reasoning  a thinking model's reasoning is shown when stdout is not a terminal\n"
    "      --reasoning-budget N  a thinking model's reasoning ends after N tokens (the end marker\n"
    "                        inserted; 0: none; default -1: no budget)\n"
    "                        too (on a terminal it is always shown, faint)\n";
// (the sampling flags between them: cli_sampling_help, --seed last)
static const char *k_chat_help_tail =
    "                        (turn i of the chat samples with seed S + i)\n"
    "  -t, --threads N       threads (default: physical cores)\n"
    "      --ctx N           context size (default: min(model's, 4096))\n"
    CLI_KV_TYPE_HELP
    "      --no-kv-reuse     re-prefill the whole conversation every turn (for comparison;\n"
    "                        by default only the tokens after the KV blocks that the\n"
    "                        prefix cache holds from earlier turns)\n"
    "      --history FILE    load and save the line history in FILE (default: memory only)\n"
    "\n"
    "Type a message and press Enter; a line ending in \\ continues on the next line.\n"
    "Replies stream as they are generated; Ctrl-C stops a reply (or clears the line).\n"
    "Commands: /stats (last reply: TTFT, tokens prefilled vs reused, tok/s), /reset (forget\n"
    "the conversation), /help, /exit (or Ctrl-D).\n"
    "When the context fills up, the oldest turns are dropped (a system prompt is kept) and\n"
    "one line says so. With stdin not a terminal, each input line is one message and the\n"
    "replies go to stdout, one after another (no prompt, no line editing).\n";

// ============================================================================
// State
// ============================================================================

static volatile sig_atomic_t g_interrupted;
static void on_sigint(int sig) {
    (void)sig;
    g_interrupted = 1;
}

struct msg {
    const char *role; // "system", "user", "assistant" (static strings)
    char *content;    // owned
};

struct reply_stats {
    bool valid;
    int32_t n_prompt, n_prefilled, n_gen, n_ctx_used;
    int32_t n_reason; // of n_gen, the thinking span's (-1: the model does not think)
    double ttft_ms, prefill_ms, gen_tps;
    const char *finish; // "stop", "length", "context", "interrupted"
};

struct chat {
    const char *path;
    struct lm_model *m;
    const struct lm_tokenizer *tok;
    struct lm_engine *e; // one request at a time, stepped from this thread
    enum lm_chat_template tmpl;
    int32_t n_ctx;
    // options
    int64_t n_predict;
    struct lm_sampler_params sp;
    bool kv_reuse, interactive, show_reasoning;
    int32_t reasoning_budget; // --reasoning-budget (-1: none)
    struct lm_grammar *grammar; // --grammar / --json-schema: each reply follows it (or NULL)
    // conversation
    struct msg *msgs;
    size_t n_msgs, cap_msgs;
    int turn_no;
    struct reply_stats last;
};

static void die_oom(void) {
    fputs("lumen chat: out of memory\n", stderr);
    exit(1);
}

static char *xstrdup(const char *s) {
    char *d = strdup(s);
    if (!d) die_oom();
    return d;
}

static void msgs_push(struct chat *ch, const char *role, char *content) {
    if (ch->n_msgs == ch->cap_msgs) {
        size_t nc = ch->cap_msgs ? 2 * ch->cap_msgs : 16;
        struct msg *nm = realloc(ch->msgs, nc * sizeof *nm);
        if (!nm) die_oom();
        ch->msgs = nm;
        ch->cap_msgs = nc;
    }
    ch->msgs[ch->n_msgs++] = (struct msg){.role = role, .content = content};
}

static void msgs_pop(struct chat *ch) {
    if (ch->n_msgs) free(ch->msgs[--ch->n_msgs].content);
}

// Removes the oldest turn after any system messages: a user message and the replies up
// to the next user message. Returns false when only the last user message is left.
static bool msgs_drop_oldest_turn(struct chat *ch) {
    size_t i = 0;
    while (i < ch->n_msgs && !strcmp(ch->msgs[i].role, "system")) i++;
    size_t j = i + 1;
    while (j < ch->n_msgs && strcmp(ch->msgs[j].role, "user")) j++;
    if (j >= ch->n_msgs) return false; // [i] is the message being answered
    for (size_t k = i; k < j; k++) free(ch->msgs[k].content);
    memmove(ch->msgs + i, ch->msgs + j, (ch->n_msgs - j) * sizeof *ch->msgs);
    ch->n_msgs -= j - i;
    return true;
}

static void chat_reset(struct chat *ch) {
    size_t i = 0; // keep the leading system messages
    while (i < ch->n_msgs && !strcmp(ch->msgs[i].role, "system")) i++;
    while (ch->n_msgs > i) msgs_pop(ch); // (the prefix cache may keep the system prompt's blocks)
    ch->last.valid = false;
}

// The conversation with the opening of a model turn, tokenized (BOS, control tokens).
// only_last: just the system messages and the last message (the least a turn needs).
static enum lm_status render(struct chat *ch, bool only_last, int32_t **ids, size_t *n_ids) {
    struct lm_chat_msg *cm = malloc((ch->n_msgs + 1) * sizeof *cm);
    if (!cm) die_oom();
    size_t n = 0;
    for (size_t i = 0; i < ch->n_msgs; i++)
        if (!only_last || i + 1 == ch->n_msgs || !strcmp(ch->msgs[i].role, "system"))
            cm[n++] = (struct lm_chat_msg){ch->msgs[i].role, ch->msgs[i].content};
    char *text = NULL;
    size_t n_text = 0;
    enum lm_status st = lm_chat_apply(ch->tmpl, cm, n, true, &text, &n_text);
    free(cm);
    if (st != LM_OK) return st;
    st = lm_tokenize(ch->tok, text, n_text, true, true, ids, n_ids);
    free(text);
    return st;
}

// ============================================================================
// One turn
// ============================================================================

// appends to the program side's string buffer (common/strbuf.h); out of memory ends lumen chat
static void sb_put(struct sbuf *b, const char *p, size_t n) {
    if (!sbuf_append(b, p, n)) die_oom();
}

// The conversation, rendered and tokenized, fitted into the context: a message that does not
// fit even alone (with the system prompt) is refused before any turn is dropped for it; else
// the oldest turns are dropped until the conversation leaves room for a reply. Returns 0 with
// *ids set, 1 on a failure of the library (message printed), 2 when the message was refused;
// the message is withdrawn unless 0.
static int chat_fit(struct chat *ch, int32_t **ids, size_t *n_ids) {
    // room kept for the reply when deciding whether the conversation fits
    int64_t reserve = ch->n_predict > 0 ? ch->n_predict : 256;
    if (reserve > ch->n_ctx / 2) reserve = ch->n_ctx / 2;
    *ids = NULL;
    if (render(ch, true, ids, n_ids) != LM_OK) {
        fprintf(stderr, "lumen chat: %s\n", lm_error_msg());
        msgs_pop(ch);
        return 1;
    }
    if ((int64_t)*n_ids >= ch->n_ctx) {
        fprintf(stderr, "lumen chat: this message makes a prompt of %zu tokens; the context holds %d "
                        "(raise --ctx); not sent\n", *n_ids, ch->n_ctx);
        free(*ids);
        msgs_pop(ch);
        return 2;
    }
    int dropped = 0;
    for (;;) {
        free(*ids);
        *ids = NULL;
        if (render(ch, false, ids, n_ids) != LM_OK) {
            fprintf(stderr, "lumen chat: %s\n", lm_error_msg());
            msgs_pop(ch);
            return 1;
        }
        if ((int64_t)*n_ids + reserve <= ch->n_ctx) break;
        if (!msgs_drop_oldest_turn(ch)) break;
        dropped++;
    }
    if (dropped)
        fprintf(stderr, "lumen chat: context full (%d tokens): dropped the oldest %d turn(s); the "
                        "conversation is now %zu tokens\n", ch->n_ctx, dropped, *n_ids);
    return 0;
}

static void reply_put(void *user, const char *s, size_t n) { sb_put(user, s, n); }

// The reply's request: the options, the turn's seed (turn i samples with seed S + i), -n
// clipped to the context (where it ends the reply, the reply ends as "context").
static struct lm_request_params chat_request(struct chat *ch, size_t n_ids) {
    struct lm_request_params rp = lm_request_params_default();
    rp.sampling = ch->sp;
    rp.sampling.seed += (uint64_t)ch->turn_no++;
    const int64_t room = ch->n_ctx - (int64_t)n_ids;
    rp.max_tokens = ch->n_predict > 0 && ch->n_predict < room ? (int32_t)ch->n_predict : (int32_t)room;
    rp.grammar = ch->grammar;
    return rp;
}

static const char *finish_name(const struct chat *ch, const struct cli_gen *g) {
    switch (g->finish) {
    case LM_FINISH_EOG: return "stop";
    case LM_FINISH_LENGTH: return ch->n_predict > 0 && g->n_gen >= ch->n_predict ? "length" : "context";
    case LM_FINISH_CONTEXT: return "context";
    case LM_FINISH_CANCELLED: return "interrupted";
    default: return "error";
    }
}

// Answers the conversation's last (user) message: fits it into the context, submits it to
// the engine (which prefills what its prefix cache lacks), streams the reply to stdout and
// appends it to the conversation. Ctrl-C cancels the request. Returns 0, or 1 on a failure
// of the library (message printed).
static int chat_turn(struct chat *ch, uint64_t t_enter) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    const int fit = chat_fit(ch, &ids, &n_ids);
    if (fit != 0) return fit == 1 ? 1 : 0;
    struct sbuf reply = {0};
    sb_put(&reply, "", 0);
    struct cli_gen g;
    if (!cli_gen_init(&g, ch->tok)) die_oom();
    g.capture = reply_put; // the answer: a thinking span is shown apart, never kept
    g.capture_user = &reply;
    cli_gen_reasoning(&g, ch->m, ch->tmpl, ch->show_reasoning);
    struct lm_request_params rp = chat_request(ch, n_ids);
    cli_gen_budget(&g, ch->reasoning_budget, &rp);
    uint64_t id = 0;
    const uint64_t t_sub = lm_time_ns();
    struct cli_progress prog;
    if (lm_engine_submit(ch->e, ids, (int32_t)n_ids, &rp, cli_gen_on_event, &g, &id) != LM_OK ||
        cli_gen_drive(ch->e, id, &g, &prog, (int64_t)n_ids, &g_interrupted) != 0) {
        fprintf(stderr, "%slumen chat: %s\n", g.n_gen ? "\n" : "", lm_error_msg());
        cli_gen_free(&g);
        free(ids);
        free(reply.p);
        msgs_pop(ch);
        return 1;
    }
    free(ids);
    const uint64_t t_end = lm_time_ns();
    cli_gen_flush(&g);
    fputc('\n', stdout);
    fflush(stdout);
    struct reply_stats rs = {.valid = true, .n_prompt = (int32_t)n_ids, .n_gen = (int32_t)g.n_gen,
                             .n_reason = g.reasoning ? (int32_t)g.n_reason : -1, .finish = finish_name(ch, &g)};
    if (g.finish == LM_FINISH_ERROR) fprintf(stderr, "lumen chat: %s\n", g.error);
    cli_gen_free(&g);
    if (!strcmp(rs.finish, "interrupted") && reply.n == 0) { // nothing shown: withdraw the message
        fputs("[stopped before the reply; message withdrawn]\n", stdout);
        fflush(stdout);
        free(reply.p);
        msgs_pop(ch);
        return 0;
    }
    if (!strcmp(rs.finish, "interrupted")) {
        fputs("[reply stopped]\n", stdout);
        fflush(stdout);
    } else if (!strcmp(rs.finish, "context")) {
        fprintf(stderr, "lumen chat: context full (%d tokens): reply cut; the oldest turns will be "
                        "dropped next turn\n", ch->n_ctx);
    }
    rs.n_prefilled = (int32_t)n_ids - g.n_cached;
    const uint64_t t_pre = g.n_gen ? g.t_first : t_end;
    rs.prefill_ms = (double)(t_pre - t_sub) / 1e6;
    rs.ttft_ms = g.n_gen ? (double)(g.t_first - t_enter) / 1e6 : 0.0;
    rs.gen_tps = g.n_gen > 1 && t_end > g.t_first
                     ? (double)(g.n_gen - 1) / ((double)(t_end - g.t_first) / 1e9) : 0.0;
    rs.n_ctx_used = (int32_t)n_ids + (g.n_gen > 0 ? (int32_t)g.n_gen - 1 : 0); // the last is not in the KV
    ch->last = rs;
    msgs_push(ch, "assistant", reply.p); // what was shown, also when stopped early
    return 0;
}

static void print_stats(const struct chat *ch) {
    const struct reply_stats *s = &ch->last;
    if (!s->valid) {
        puts("no reply yet");
        return;
    }
    char split[64] = ""; // a thinking model's reply: its span and its answer apart
    if (s->n_reason >= 0)
        snprintf(split, sizeof split, " (reasoning %d, answer %d)", s->n_reason, s->n_gen - s->n_reason);
    printf("last reply: TTFT %.1f ms | prompt %d tok: %d prefilled (%.1f tok/s), %d reused from the KV cache%s"
           " | reply %d tok%s, %.1f tok/s (%s) | context %d/%d\n",
           s->ttft_ms, s->n_prompt, s->n_prefilled,
           s->prefill_ms > 0 ? s->n_prefilled / (s->prefill_ms / 1e3) : 0.0, s->n_prompt - s->n_prefilled,
           ch->kv_reuse ? "" : " (--no-kv-reuse)", s->n_gen, split, s->gen_tps, s->finish, s->n_ctx_used, ch->n_ctx);
}

// ============================================================================
// Input: libedit on a terminal, plain lines otherwise
// ============================================================================

struct input {
#ifdef LM_HAVE_LIBEDIT
    EditLine *el;
    History *hist;
#endif
    const char *history_path;
    bool cont; // the next line continues a message (prompt "... ")
    char *buf; // getline's buffer
    size_t cap;
};

#ifdef LM_HAVE_LIBEDIT
static bool g_prompt_cont;
static char *el_prompt(EditLine *el) {
    (void)el;
    return g_prompt_cont ? "... " : "> ";
}
#endif

// Reads one line (without its newline). Returns 1 with *line set, 0 at end of input,
// -1 when Ctrl-C interrupted the read (the line is discarded).
static int input_line(struct chat *ch, struct input *in, const char **line) {
    g_interrupted = 0;
#ifdef LM_HAVE_LIBEDIT
    if (in->el) {
        g_prompt_cont = in->cont;
        int count = 0;
        const char *l = el_gets(in->el, &count);
        if (!l) {
            if (count < 0 && (g_interrupted || errno == EINTR)) return -1;
            return 0;
        }
        size_t n = strlen(l);
        if (n > in->cap || !in->buf) {
            char *nb = realloc(in->buf, n + 1);
            if (!nb) die_oom();
            in->buf = nb;
            in->cap = n + 1;
        }
        memcpy(in->buf, l, n + 1);
        if (n && in->buf[n - 1] == '\n') in->buf[--n] = 0;
        *line = in->buf;
        return 1;
    }
#endif
    if (ch->interactive) {
        fputs(in->cont ? "... " : "> ", stdout);
        fflush(stdout);
    }
    errno = 0;
    ssize_t n = getline(&in->buf, &in->cap, stdin);
    if (n < 0) {
        if (g_interrupted || errno == EINTR) {
            clearerr(stdin);
            return -1;
        }
        return 0;
    }
    if (n && in->buf[n - 1] == '\n') in->buf[--n] = 0;
    if (n && in->buf[n - 1] == '\r') in->buf[--n] = 0;
    *line = in->buf;
    return 1;
}

static void input_history_add(struct input *in, const char *msg) {
#ifdef LM_HAVE_LIBEDIT
    if (in->hist && *msg) {
        HistEvent ev;
        history(in->hist, &ev, H_ENTER, msg);
    }
#else
    (void)in;
    (void)msg;
#endif
}

static void input_open(struct chat *ch, struct input *in, const char *argv0) {
    (void)argv0;
#ifdef LM_HAVE_LIBEDIT
    if (ch->interactive) {
        // libedit decodes keystrokes with the locale's multibyte functions: without the
        // user's LC_CTYPE (UTF-8) it drops every non-ASCII character typed
        setlocale(LC_CTYPE, "");
        in->el = el_init(argv0, stdin, stdout, stderr);
        in->hist = history_init();
        if (in->el && in->hist) {
            HistEvent ev;
            history(in->hist, &ev, H_SETSIZE, 1000);
            history(in->hist, &ev, H_SETUNIQUE, 1);
            if (in->history_path) history(in->hist, &ev, H_LOAD, in->history_path); // absent: fine
            el_set(in->el, EL_EDITOR, "emacs");
            el_set(in->el, EL_PROMPT, el_prompt);
            el_set(in->el, EL_HIST, history, in->hist);
            el_source(in->el, NULL); // the user's ~/.editrc, as other editline programs
        } else {
            if (in->el) el_end(in->el);
            if (in->hist) history_end(in->hist);
            in->el = NULL;
            in->hist = NULL;
        }
    }
#endif
}

static void input_close(struct input *in) {
#ifdef LM_HAVE_LIBEDIT
    if (in->hist) {
        HistEvent ev;
        if (in->history_path && history(in->hist, &ev, H_SAVE, in->history_path) < 0)
            fprintf(stderr, "lumen chat: cannot save the history to '%s'\n", in->history_path);
        history_end(in->hist);
    }
    if (in->el) el_end(in->el);
#endif
    free(in->buf);
}

// ============================================================================
// Command
// ============================================================================

static const char *k_commands =
    "/stats  last reply: TTFT, prompt tokens prefilled vs reused from the KV cache, tok/s\n"
    "/reset  forget the conversation (a system prompt stays)\n"
    "/exit   leave (also /quit, or Ctrl-D)\n"
    "Ctrl-C stops a reply; a line ending in \\ continues on the next line.\n";

// The options of lumen chat, parsed.
struct chat_opts {
    const char *model_path, *system, *tmpl_name, *history_path, *grammar_path, *schema_path;
    int64_t n_predict, n_threads, n_ctx;
    int kv_type_k, kv_type_v;
    bool kv_reuse, show_reasoning;
    int32_t reasoning_budget;
    struct lm_sampler_params sp;
};

static void chat_parse(int argc, char **argv, struct chat_opts *o) {
    const char *cmd = "chat";
    *o = (struct chat_opts){.n_predict = 512, .kv_reuse = true, .reasoning_budget = -1,
                            .sp = lm_sampler_params_default()};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(k_chat_help_head, stdout);
            cli_sampling_help(stdout);
            fputs(k_chat_help_tail, stdout);
            exit(0);
        }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-s") || !strcmp(a, "--system")) o->system = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--template")) o->tmpl_name = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--history")) o->history_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--grammar")) o->grammar_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--json-schema")) o->schema_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict"))
            o->n_predict = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1 << 24);
        else if (!strcmp(a, "--no-kv-reuse")) o->kv_reuse = false;
        else if (!strcmp(a, "--show-reasoning")) o->show_reasoning = true;
        else if (!strcmp(a, "--reasoning-budget"))
            o->reasoning_budget = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), -1, 1 << 24);
        else if (cli_sampling_flag(cmd, argc, argv, &i, &o->sp)) {
            if (o->sp.seed > (uint64_t)(INT64_MAX / 2)) // room for the turn number
                cli_usage_error(cmd, "%s: %llu is out of range [0, %lld]", a,
                                (unsigned long long)o->sp.seed, (long long)(INT64_MAX / 2));
        }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            o->n_threads = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 256);
        else if (!strcmp(a, "--ctx"))
            o->n_ctx = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 16, 1 << 24);
        else if (cli_kv_type(cmd, argc, argv, &i, &o->kv_type_k, &o->kv_type_v)) continue;
        else cli_usage_error(cmd, "unknown option '%s' (try `lumen chat --help`)", a);
    }
    if (o->tmpl_name && lm_chat_template_from_name(o->tmpl_name) == LM_CHAT_TEMPLATE_NONE)
        cli_usage_error(cmd, "--template: unknown format '%s' (gemma, llama3, chatml, phi3 or granite)", o->tmpl_name);
    if (o->grammar_path && o->schema_path)
        cli_usage_error(cmd, "give either --grammar or --json-schema, not both");
    if (!o->model_path) o->model_path = cli_default_model();
}

// The model, the grammar, the chat format and the engine. Returns 0, or the exit status.
static int chat_open(struct chat *ch, const struct chat_opts *o) {
    const char *cmd = "chat";
    *ch = (struct chat){.path = o->model_path, .n_predict = o->n_predict, .sp = o->sp,
                        .kv_reuse = o->kv_reuse, .interactive = isatty(STDIN_FILENO),
                        .show_reasoning = o->show_reasoning, .reasoning_budget = o->reasoning_budget};
    enum lm_status st = lm_model_load(&ch->m, o->model_path, NULL);
    if (st != LM_OK) {
        fprintf(stderr, "lumen chat: %s\n", lm_error_msg());
        return st == LM_ERR_IO ? LM_EXIT_USAGE : 1;
    }
    ch->tok = lm_model_tokenizer(ch->m);
    ch->grammar = cli_grammar_load(cmd, ch->tok, o->grammar_path, o->schema_path);
    const int32_t n_train = lm_model_n_ctx_train(ch->m);
    int64_t n_ctx = o->n_ctx ? o->n_ctx : n_train < 4096 ? n_train : 4096;
    if (n_ctx > n_train) {
        lm_model_free(ch->m);
        cli_usage_error(cmd, "--ctx %lld exceeds the model's context length %d", (long long)n_ctx, n_train);
    }
    ch->tmpl = (enum lm_chat_template)cli_chat_template(cmd, ch->m, o->model_path, o->tmpl_name);
    ch->n_ctx = (int32_t)n_ctx;
    // the KV pool holds the conversation; the prefix cache keeps the earlier turns' blocks
    // (--no-kv-reuse: none, every turn is prefilled whole)
    struct lm_engine_params ep = {.max_running = 1, .max_waiting = 1, .step_tokens = 512,
                                  .n_ctx = ch->n_ctx, .kv_tokens = ch->n_ctx,
                                  .n_threads = (int32_t)o->n_threads, .no_prefix_cache = !o->kv_reuse,
                                  .kv_type_k = o->kv_type_k, .kv_type_v = o->kv_type_v};
    if (lm_engine_init(&ch->e, ch->m, &ep) != LM_OK) {
        fprintf(stderr, "lumen chat: %s\n", lm_error_msg());
        lm_grammar_free(ch->grammar);
        lm_model_free(ch->m);
        return 1;
    }
    if (o->system) msgs_push(ch, "system", xstrdup(o->system));
    return 0;
}

static void chat_close(struct chat *ch) {
    while (ch->n_msgs) msgs_pop(ch);
    free(ch->msgs);
    lm_engine_free(ch->e);
    lm_grammar_free(ch->grammar);
    lm_model_free(ch->m);
}

// A line starting with '/': runs the command. Returns false for /exit.
static bool chat_command(struct chat *ch, const char *text) {
    char word[32];
    size_t k = 0;
    while (text[k] && text[k] != ' ' && text[k] != '\n' && k + 1 < sizeof word) { word[k] = text[k]; k++; }
    word[k] = 0;
    if (!strcmp(word, "/exit") || !strcmp(word, "/quit")) return false;
    else if (!strcmp(word, "/stats")) print_stats(ch);
    else if (!strcmp(word, "/reset")) {
        chat_reset(ch);
        puts("(conversation cleared)");
    } else if (!strcmp(word, "/help")) fputs(k_commands, stdout);
    else printf("unknown command '%s' (/help lists them)\n", word);
    fflush(stdout);
    return true;
}

// Reads messages and answers them until the end of input or /exit. Returns the exit status.
static int chat_loop(struct chat *ch, struct input *in) {
    int rc = 0;
    struct sbuf msg = {0};
    for (;;) {
        const char *line = NULL;
        const int r = input_line(ch, in, &line);
        if (r == 0) { // Ctrl-D / end of input
            if (ch->interactive) fputc('\n', stdout);
            break;
        }
        if (r < 0) { // Ctrl-C at the prompt: drop the line (and a message being continued)
            fputs("^C\n", stdout);
            fflush(stdout);
            in->cont = false;
            msg.n = 0;
            continue;
        }
        const uint64_t t_enter = lm_time_ns();
        size_t n = strlen(line);
        const bool more = n > 0 && line[n - 1] == '\\';
        if (more) n--;
        sb_put(&msg, line, n);
        if (more) {
            sb_put(&msg, "\n", 1);
            in->cont = true;
            continue;
        }
        in->cont = false;
        const char *text = msg.p;
        while (*text == ' ' || *text == '\t') text++;
        if (!*text) { msg.n = 0; continue; }
        input_history_add(in, msg.p);
        if (text[0] == '/') {
            msg.n = 0;
            if (!chat_command(ch, text)) break;
            continue;
        }
        msgs_push(ch, "user", xstrdup(msg.p));
        msg.n = 0;
        g_interrupted = 0;
        if (chat_turn(ch, t_enter) != 0) { rc = 1; break; }
    }
    free(msg.p);
    return rc;
}

int cmd_chat(int argc, char **argv) {
    struct chat_opts o;
    chat_parse(argc, argv, &o);
    struct chat ch;
    const int rc_open = chat_open(&ch, &o);
    if (rc_open != 0) return rc_open;
    // Ctrl-C: a flag the reply's step loop checks every step (no SA_RESTART, so a blocking
    // read returns EINTR and the prompt clears its line). Non-interactive runs keep the default.
    struct sigaction sa_old, sa = {0};
    if (ch.interactive) {
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &sa_old);
    }
    struct input in = {.history_path = o.history_path};
    input_open(&ch, &in, argv[0]);
    if (ch.interactive)
        fprintf(stderr, "lumen chat: %s, %s turns, context %d, replies up to %lld tokens; /help for "
                        "commands, Ctrl-D or /exit to leave\n",
                o.model_path, lm_chat_template_name(ch.tmpl), ch.n_ctx, (long long)o.n_predict);
    const int rc = chat_loop(&ch, &in);
    if (ch.interactive) sigaction(SIGINT, &sa_old, NULL);
    input_close(&in);
    chat_close(&ch);
    return rc;
}
