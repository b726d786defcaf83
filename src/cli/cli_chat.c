// `lumen chat`: an interactive multi-turn chat. Line editing and history through libedit
// (BSD editline) when stdin is a terminal; otherwise every input line is one message
// (scripts, tests). One KV sequence holds the conversation: each turn renders the whole
// conversation with the chat template, keeps the longest common prefix with what the KV
// holds and prefills only the rest.
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
#include "cli_progress.h"
#include "lumen.h"

static const char *k_chat_help =
    "usage: lumen chat [-m MODEL] [options]\n"
    "\n"
    "  -m, --model PATH      GGUF model (default: " LM_DEFAULT_MODEL ")\n"
    "  -n, --n-predict N     cap each reply at N tokens (default 512; 0 = until the end of\n"
    "                        the model's turn or of the context)\n"
    "  -s, --system TEXT     system prompt (kept when old turns are dropped)\n"
    "      --template NAME   chat format: gemma, llama3 or chatml (default: the model's)\n"
    "      --grammar FILE    every reply follows a GBNF grammar (docs/structured.md)\n"
    "      --json-schema FILE  every reply is JSON matching a JSON Schema\n"
    "      --temp T          temperature (default 0.8; 0 = greedy)\n"
    "      --top-k K         (default 40)   --top-p P (default 0.95)   --min-p P (default 0.05)\n"
    "      --repeat-penalty R  penalize the last 64 tokens (default 1.0 = off)\n"
    "      --seed S          RNG seed (default 0; turn i samples with seed S + i)\n"
    "  -t, --threads N       threads (default: physical cores)\n"
    "      --ctx N           context size (default: min(model's, 4096))\n"
    CLI_KV_TYPE_HELP
    "      --no-kv-reuse     re-prefill the whole conversation every turn (for comparison;\n"
    "                        by default only the tokens after what the KV cache holds)\n"
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
    double ttft_ms, prefill_ms, gen_tps;
    const char *finish; // "stop", "length", "context", "interrupted"
};

struct chat {
    const char *path;
    struct lm_model *m;
    const struct lm_tokenizer *tok;
    struct lm_context *c;
    enum lm_chat_template tmpl;
    int32_t n_ctx, n_batch;
    // options
    int64_t n_predict;
    struct lm_sampler_params sp;
    bool kv_reuse, interactive;
    struct lm_grammar *grammar; // --grammar / --json-schema: each reply follows it (or NULL)
    uint32_t *mask;             // [(n_vocab + 31) / 32] the allowed tokens of the next draw
    // conversation
    struct msg *msgs;
    size_t n_msgs, cap_msgs;
    int turn_no;
    // mirror of the sequence's KV: the tokens at positions [0, kv_n)
    int32_t *kv_toks;
    int32_t kv_n;
    struct lm_batch_entry *batch;
    char *piece;
    size_t piece_cap;
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
    while (ch->n_msgs > i) msgs_pop(ch);
    lm_kv_cache_seq_rm(ch->c, 0, 0, -1);
    ch->kv_n = 0;
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

struct sbuf {
    char *s;
    size_t n, cap;
};
static void sb_put(struct sbuf *b, const char *p, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (b->n + n + 1 > nc) nc *= 2;
        char *ns = realloc(b->s, nc);
        if (!ns) die_oom();
        b->s = ns;
        b->cap = nc;
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
}

// Answers the conversation's last (user) message: fits it into the context, prefills
// what the KV lacks, streams the reply to stdout and appends it to the conversation.
// Returns 0, or 1 on a failure of the library (message printed).
static int chat_turn(struct chat *ch, uint64_t t_enter) {
    enum lm_status st;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    // room kept for the reply when deciding whether the conversation fits
    int64_t reserve = ch->n_predict > 0 ? ch->n_predict : 256;
    if (reserve > ch->n_ctx / 2) reserve = ch->n_ctx / 2;
    // a message that does not fit even alone (with the system prompt) is refused before
    // any turn is dropped for it
    if ((st = render(ch, true, &ids, &n_ids)) != LM_OK) {
        fprintf(stderr, "lumen chat: %s\n", lm_error_msg());
        msgs_pop(ch);
        return 1;
    }
    if ((int64_t)n_ids >= ch->n_ctx) {
        fprintf(stderr, "lumen chat: this message makes a prompt of %zu tokens; the context holds %d "
                        "(raise --ctx); not sent\n", n_ids, ch->n_ctx);
        free(ids);
        msgs_pop(ch);
        return 0;
    }
    int dropped = 0;
    for (;;) {
        free(ids);
        ids = NULL;
        if ((st = render(ch, false, &ids, &n_ids)) != LM_OK) {
            fprintf(stderr, "lumen chat: %s\n", lm_error_msg());
            msgs_pop(ch);
            return 1;
        }
        if ((int64_t)n_ids + reserve <= ch->n_ctx) break;
        if (!msgs_drop_oldest_turn(ch)) break;
        dropped++;
    }
    if (dropped)
        fprintf(stderr, "lumen chat: context full (%d tokens): dropped the oldest %d turn(s); the "
                        "conversation is now %zu tokens\n", ch->n_ctx, dropped, n_ids);

    // ---- reuse the KV's longest common prefix (at least one token is computed: logits)
    int32_t keep = 0;
    if (ch->kv_reuse)
        while (keep < ch->kv_n && keep < (int32_t)n_ids && ch->kv_toks[keep] == ids[keep]) keep++;
    if (keep == (int32_t)n_ids && keep > 0) keep--;
    if (keep < ch->kv_n) {
        if ((st = lm_kv_cache_seq_rm(ch->c, 0, keep, -1)) != LM_OK) {
            fprintf(stderr, "lumen chat: %s\n", lm_error_msg());
            free(ids);
            msgs_pop(ch);
            return 1;
        }
        ch->kv_n = keep;
    }
    memcpy(ch->kv_toks, ids, (size_t)keep * sizeof *ids); // (already equal; keeps the mirror exact)

    struct reply_stats rs = {.n_prompt = (int32_t)n_ids, .n_prefilled = (int32_t)n_ids - keep};
    struct lm_sampler_params sp = ch->sp;
    sp.seed += (uint64_t)ch->turn_no++;
    struct lm_sampler *smp = NULL;
    if ((st = lm_sampler_init(&smp, &sp, lm_model_n_vocab(ch->m))) != LM_OK) {
        fprintf(stderr, "lumen chat: %s\n", lm_error_msg());
        free(ids);
        msgs_pop(ch);
        return 1;
    }
    for (size_t i = 0; i < n_ids; i++) lm_sampler_accept(smp, ids[i]);
    // the LM head selects the candidates the sampler draws from, when that is all it needs
    // (the same tokens as the sampler's own pass over the full row)
    int32_t top_need = ch->grammar ? 0 : lm_sampler_top_k_need(smp); // masked: the full row
    if (lm_context_set_top_k(ch->c, top_need) != LM_OK) top_need = 0;
    struct lm_grammar_matcher *gm = NULL; // the reply's position in the grammar
    if (ch->grammar && (st = lm_grammar_matcher_init(&gm, ch->grammar)) != LM_OK) {
        fprintf(stderr, "lumen chat: %s\n", lm_error_msg());
        lm_sampler_free(smp);
        free(ids);
        msgs_pop(ch);
        return 1;
    }

    // ---- prefill [keep, n_ids) in chunks; Ctrl-C is honoured between chunks
    struct cli_progress prog;
    cli_progress_begin(&prog, "prefill", (int64_t)n_ids - keep, "tok");
    const uint64_t t_pf0 = lm_time_ns();
    bool stopped = false;
    for (int32_t off = keep; off < (int32_t)n_ids && !stopped; off += ch->n_batch) {
        const int32_t nb = (int32_t)n_ids - off < ch->n_batch ? (int32_t)n_ids - off : ch->n_batch;
        for (int32_t j = 0; j < nb; j++)
            ch->batch[j] = (struct lm_batch_entry){.token = ids[off + j], .pos = off + j, .seq = 0,
                                                   .want_logits = off + j == (int32_t)n_ids - 1};
        if ((st = lm_decode(ch->c, ch->batch, nb)) != LM_OK) {
            cli_progress_end(&prog);
            fprintf(stderr, "lumen chat: %s\n", lm_error_msg());
            lm_grammar_matcher_free(gm);
            lm_sampler_free(smp);
            free(ids);
            msgs_pop(ch);
            return 1;
        }
        memcpy(ch->kv_toks + off, ids + off, (size_t)nb * sizeof *ids);
        ch->kv_n = off + nb;
        cli_progress_update(&prog, off + nb - keep);
        if (g_interrupted) stopped = true;
    }
    cli_progress_end(&prog);
    rs.prefill_ms = (double)(lm_time_ns() - t_pf0) / 1e6;
    free(ids);
    if (stopped && ch->kv_n < rs.n_prompt) { // the message is withdrawn; the KV keeps what it has
        fputs("\n[stopped before the reply; message withdrawn]\n", stdout);
        fflush(stdout);
        lm_grammar_matcher_free(gm);
        lm_sampler_free(smp);
        msgs_pop(ch);
        return 0;
    }

    // ---- generate: sample, print, decode, until end of turn, -n, context, or Ctrl-C
    struct lm_detok dt;
    lm_detok_init(&dt, false);
    struct sbuf reply = {0};
    sb_put(&reply, "", 0);
    uint64_t t_first = 0;
    rs.finish = "length";
    while (ch->n_predict == 0 || rs.n_gen < ch->n_predict) {
        if (g_interrupted) { rs.finish = "interrupted"; break; }
        const struct lm_token_logit *top = NULL;
        const int32_t n_top = top_need > 0 ? lm_get_top_k(ch->c, 0, &top) : 0;
        int32_t id;
        if (gm) {
            lm_grammar_matcher_fill_mask(gm, ch->mask);
            if ((id = lm_sampler_sample_masked(smp, lm_get_logits(ch->c, 0), ch->mask)) < 0 ||
                !lm_grammar_matcher_accept(gm, id)) {
                fprintf(stderr, "\nlumen chat: grammar: %s\n", lm_error_msg());
                rs.finish = "error";
                break;
            }
        } else {
            id = n_top > 0 ? lm_sampler_sample_top_k(smp, top, n_top)
                           : lm_sampler_sample(smp, lm_get_logits(ch->c, 0));
        }
        lm_sampler_accept(smp, id);
        if (rs.n_gen == 0) t_first = lm_time_ns();
        rs.n_gen++;
        if (lm_tokenizer_is_eog(ch->tok, id)) { rs.finish = "stop"; break; }
        size_t np = 0;
        lm_detok_push(ch->tok, &dt, id, ch->piece, ch->piece_cap, &np);
        fwrite(ch->piece, 1, np, stdout);
        fflush(stdout);
        sb_put(&reply, ch->piece, np);
        if (gm && lm_grammar_matcher_is_done(gm)) { rs.finish = "stop"; break; } // nothing may follow
        if (ch->n_predict > 0 && rs.n_gen == ch->n_predict) break;
        if (ch->kv_n >= ch->n_ctx) { rs.finish = "context"; break; }
        if (g_interrupted) { rs.finish = "interrupted"; break; }
        struct lm_batch_entry e = {.token = id, .pos = ch->kv_n, .seq = 0, .want_logits = true};
        if ((st = lm_decode(ch->c, &e, 1)) != LM_OK) {
            fprintf(stderr, "\nlumen chat: %s\n", lm_error_msg());
            lm_grammar_matcher_free(gm);
            lm_sampler_free(smp);
            free(reply.s);
            msgs_pop(ch);
            return 1;
        }
        ch->kv_toks[ch->kv_n++] = id;
    }
    const uint64_t t_end = lm_time_ns();
    size_t np = lm_detok_flush(&dt, ch->piece, ch->piece_cap);
    fwrite(ch->piece, 1, np, stdout);
    sb_put(&reply, ch->piece, np);
    fputc('\n', stdout);
    fflush(stdout);
    lm_grammar_matcher_free(gm);
    lm_sampler_free(smp);
    if (!strcmp(rs.finish, "interrupted") && reply.n == 0) { // nothing shown: withdraw the message
        fputs("[stopped before the reply; message withdrawn]\n", stdout);
        fflush(stdout);
        free(reply.s);
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
    rs.valid = true;
    rs.ttft_ms = rs.n_gen ? (double)(t_first - t_enter) / 1e6 : 0.0;
    rs.gen_tps = rs.n_gen > 1 && t_end > t_first ? (double)(rs.n_gen - 1) / ((double)(t_end - t_first) / 1e9) : 0.0;
    rs.n_ctx_used = ch->kv_n;
    ch->last = rs;
    msgs_push(ch, "assistant", reply.s); // what was shown, also when stopped early
    return 0;
}

static void print_stats(const struct chat *ch) {
    const struct reply_stats *s = &ch->last;
    if (!s->valid) {
        puts("no reply yet");
        return;
    }
    printf("last reply: TTFT %.1f ms | prompt %d tok: %d prefilled (%.1f tok/s), %d reused from the KV cache%s"
           " | reply %d tok, %.1f tok/s (%s) | context %d/%d\n",
           s->ttft_ms, s->n_prompt, s->n_prefilled,
           s->prefill_ms > 0 ? s->n_prefilled / (s->prefill_ms / 1e3) : 0.0, s->n_prompt - s->n_prefilled,
           ch->kv_reuse ? "" : " (--no-kv-reuse)", s->n_gen, s->gen_tps, s->finish, s->n_ctx_used, ch->n_ctx);
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

int cmd_chat(int argc, char **argv) {
    const char *cmd = "chat";
    const char *model_path = NULL, *system = NULL, *tmpl_name = NULL, *history_path = NULL;
    const char *grammar_path = NULL, *schema_path = NULL;
    int64_t n_predict = 512, n_threads = 0, n_ctx = 0;
    int kv_type_k = 0, kv_type_v = 0;
    bool kv_reuse = true;
    struct lm_sampler_params sp = lm_sampler_params_default();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(k_chat_help, stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-s") || !strcmp(a, "--system")) system = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--template")) tmpl_name = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--history")) history_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--grammar")) grammar_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--json-schema")) schema_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict"))
            n_predict = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1 << 24);
        else if (!strcmp(a, "--no-kv-reuse")) kv_reuse = false;
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
            sp.seed = (uint64_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, INT64_MAX / 2);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            n_threads = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 256);
        else if (!strcmp(a, "--ctx"))
            n_ctx = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 16, 1 << 24);
        else if (cli_kv_type(cmd, argc, argv, &i, &kv_type_k, &kv_type_v)) continue;
        else cli_usage_error(cmd, "unknown option '%s' (try `lumen chat --help`)", a);
    }
    if (tmpl_name && lm_chat_template_from_name(tmpl_name) == LM_CHAT_TEMPLATE_NONE)
        cli_usage_error(cmd, "--template: unknown format '%s' (gemma, llama3 or chatml)", tmpl_name);
    if (grammar_path && schema_path) cli_usage_error(cmd, "give either --grammar or --json-schema, not both");
    if (!model_path) model_path = cli_default_model();

    struct chat ch = {.path = model_path, .n_predict = n_predict, .sp = sp, .kv_reuse = kv_reuse,
                      .interactive = isatty(STDIN_FILENO)};
    enum lm_status st = lm_model_load(&ch.m, model_path, NULL);
    if (st != LM_OK) {
        fprintf(stderr, "lumen chat: %s\n", lm_error_msg());
        return st == LM_ERR_IO ? LM_EXIT_USAGE : 1;
    }
    ch.tok = lm_model_tokenizer(ch.m);
    if ((ch.grammar = cli_grammar_load(cmd, ch.tok, grammar_path, schema_path)) &&
        !(ch.mask = malloc(((size_t)lm_model_n_vocab(ch.m) + 31) / 32 * sizeof *ch.mask)))
        die_oom();
    const int32_t n_train = lm_model_n_ctx_train(ch.m);
    if (n_ctx == 0) n_ctx = n_train < 4096 ? n_train : 4096;
    if (n_ctx > n_train) {
        lm_model_free(ch.m);
        cli_usage_error(cmd, "--ctx %lld exceeds the model's context length %d", (long long)n_ctx, n_train);
    }
    ch.tmpl = (enum lm_chat_template)cli_chat_template(cmd, ch.m, model_path, tmpl_name);
    ch.n_ctx = (int32_t)n_ctx;
    ch.n_batch = 512;
    struct lm_context_params cp = {.n_ctx = ch.n_ctx, .n_seq_max = 1, .n_batch = ch.n_batch,
                                   .n_threads = (int32_t)n_threads, .no_prefix_cache = true,
                                   .kv_type_k = kv_type_k, .kv_type_v = kv_type_v};
    if ((st = lm_context_init(&ch.c, ch.m, &cp)) != LM_OK) {
        fprintf(stderr, "lumen chat: %s\n", lm_error_msg());
        lm_model_free(ch.m);
        return 1;
    }
    ch.kv_toks = malloc((size_t)ch.n_ctx * sizeof *ch.kv_toks);
    ch.batch = malloc((size_t)ch.n_batch * sizeof *ch.batch);
    ch.piece_cap = lm_tokenizer_max_piece(ch.tok) + 8;
    ch.piece = malloc(ch.piece_cap);
    if (!ch.kv_toks || !ch.batch || !ch.piece) die_oom();
    if (system) msgs_push(&ch, "system", xstrdup(system));

    // Ctrl-C: a flag the reply loop checks every token (no SA_RESTART, so a blocking read
    // returns EINTR and the prompt clears its line). Non-interactive runs keep the default.
    struct sigaction sa_old, sa = {0};
    if (ch.interactive) {
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &sa_old);
    }
    struct input in = {.history_path = history_path};
    input_open(&ch, &in, argv[0]);
    if (ch.interactive)
        fprintf(stderr, "lumen chat: %s, %s turns, context %d, replies up to %lld tokens; /help for "
                        "commands, Ctrl-D or /exit to leave\n",
                model_path, lm_chat_template_name(ch.tmpl), ch.n_ctx, (long long)n_predict);

    int rc = 0;
    struct sbuf msg = {0};
    for (;;) {
        const char *line = NULL;
        const int r = input_line(&ch, &in, &line);
        if (r == 0) { // Ctrl-D / end of input
            if (ch.interactive) fputc('\n', stdout);
            break;
        }
        if (r < 0) { // Ctrl-C at the prompt: drop the line (and a message being continued)
            fputs("^C\n", stdout);
            fflush(stdout);
            in.cont = false;
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
            in.cont = true;
            continue;
        }
        in.cont = false;
        const char *text = msg.s;
        while (*text == ' ' || *text == '\t') text++;
        if (!*text) { msg.n = 0; continue; }
        input_history_add(&in, msg.s);
        if (text[0] == '/') {
            char word[32];
            size_t k = 0;
            while (text[k] && text[k] != ' ' && text[k] != '\n' && k + 1 < sizeof word) { word[k] = text[k]; k++; }
            word[k] = 0;
            msg.n = 0;
            if (!strcmp(word, "/exit") || !strcmp(word, "/quit")) break;
            else if (!strcmp(word, "/stats")) print_stats(&ch);
            else if (!strcmp(word, "/reset")) {
                chat_reset(&ch);
                puts("(conversation cleared)");
            } else if (!strcmp(word, "/help")) fputs(k_commands, stdout);
            else printf("unknown command '%s' (/help lists them)\n", word);
            fflush(stdout);
            continue;
        }
        msgs_push(&ch, "user", xstrdup(msg.s));
        msg.n = 0;
        g_interrupted = 0;
        if (chat_turn(&ch, t_enter) != 0) { rc = 1; break; }
    }
    if (ch.interactive) sigaction(SIGINT, &sa_old, NULL);
    input_close(&in);
    free(msg.s);
    while (ch.n_msgs) msgs_pop(&ch);
    free(ch.msgs);
    free(ch.kv_toks);
    free(ch.batch);
    free(ch.piece);
    lm_context_free(ch.c);
    lm_grammar_free(ch.grammar);
    free(ch.mask);
    lm_model_free(ch.m);
    return rc;
}
