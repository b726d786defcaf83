// One request generated through the engine from the CLI's thread (cli_gen.h): the event
// sink that streams the text, and the step loop with its progress line and cancellation.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_gen.h"
#include "lumen_prof.h"

bool cli_gen_init(struct cli_gen *g, const struct lm_tokenizer *tok) {
    *g = (struct cli_gen){.tok = tok, .show_max = INT64_MAX};
    lm_detok_init(&g->dt, false);
    g->piece_cap = lm_tokenizer_max_piece(tok) + 8;
    g->piece = malloc(g->piece_cap);
    return g->piece != NULL;
}

void cli_gen_free(struct cli_gen *g) {
    free(g->piece);
    g->piece = NULL;
    reason_split_free(&g->split);
    sbuf_free(&g->rbuf);
    sbuf_free(&g->cbuf);
}

static void put_answer(struct cli_gen *g, const char *p, size_t n) {
    fwrite(p, 1, n, stdout);
    fflush(stdout);
    if (g->capture) g->capture(g->capture_user, p, n);
}

// What the splitter released: the reasoning (shown or not; never captured), then the answer.
static void put_parts(struct cli_gen *g) {
    if (g->rbuf.n && g->show_reasoning) {
        if (g->faint) fputs("\x1b[2m", stdout);
        fwrite(g->rbuf.p, 1, g->rbuf.n, stdout);
        if (g->faint) fputs("\x1b[22m", stdout);
        fflush(stdout);
        g->shown_reason = true;
    }
    sbuf_consume(&g->rbuf, g->rbuf.n);
    if (g->cbuf.n && g->shown_reason) {
        fputs("\n\n", stdout);
        g->shown_reason = false;
    }
    if (g->cbuf.n) put_answer(g, g->cbuf.p, g->cbuf.n);
    sbuf_consume(&g->cbuf, g->cbuf.n);
}

// One token's text (tok) or the held-back tail: through the splitter when the model thinks.
static void put_text_from(struct cli_gen *g, const char *p, size_t n, bool tok) {
    if (!g->reasoning) {
        put_answer(g, p, n);
        return;
    }
    const bool was = reason_split_thinking(&g->split);
    reason_split_feed(&g->split, p, n, &g->rbuf, &g->cbuf);
    if (tok && (was || reason_split_thinking(&g->split))) g->n_reason++;
    put_parts(g);
}

static void put_text(struct cli_gen *g, size_t n) { put_text_from(g, g->piece, n, true); }

// A marker's tokens (special tokens parsed) into out[16]: how many, 0 when more.
static int32_t marker(const struct lm_tokenizer *t, const char *text, int32_t *out) {
    int32_t *ids = NULL;
    size_t n = 0;
    if (lm_tokenize(t, text, strlen(text), false, true, &ids, &n) != LM_OK) return 0;
    const int32_t k = n > 0 && n <= 16 ? (int32_t)n : 0;
    if (k) memcpy(out, ids, (size_t)k * sizeof *out);
    free(ids);
    return k;
}

void cli_gen_budget(const struct cli_gen *g, int32_t budget, struct lm_request_params *rp) {
    if (!g->reasoning || budget < 0 || g->n_think_end == 0) return;
    rp->think_start = g->think_start;
    rp->n_think_start = g->n_think_start;
    rp->think_end = g->think_end;
    rp->n_think_end = g->n_think_end;
    rp->n_think_close = g->n_think_close;
    rp->think_open = g->think_open;
    rp->think_budget = budget;
}

void cli_gen_reasoning(struct cli_gen *g, const struct lm_model *m, enum lm_chat_template tmpl, bool show) {
    const struct lm_tokenizer *t = lm_model_tokenizer(m);
    int32_t *mk = NULL;
    size_t n_open = 0, n_close = 0;
    if (lm_tokenize(t, "<think>", 7, false, true, &mk, &n_open) == LM_OK) free(mk);
    mk = NULL;
    if (lm_tokenize(t, "</think>", 8, false, true, &mk, &n_close) == LM_OK) free(mk);
    const enum reason_kind kind = reason_kind_detect(lm_model_chat_template(m), n_open == 1 && n_close == 1);
    if (kind == REASON_NONE) return;
    // the generation prompt (the format's, whatever the messages) may open the span (R1's)
    const struct lm_chat_msg probe = {.role = "user", .content = ""};
    char *text = NULL;
    size_t len = 0;
    const bool opens = lm_chat_apply(tmpl, &probe, 1, true, &text, &len) == LM_OK &&
                       reason_prompt_opens(kind, text, len);
    free(text);
    reason_split_init(&g->split, kind, opens);
    g->reasoning = true;
    g->kind = kind;
    g->think_open = opens;
    if (kind == REASON_HARMONY) lm_detok_init(&g->dt, true); // the channels' markers, for the splitter
    g->n_think_start = marker(t, reason_start_marker(kind), g->think_start);
    g->n_think_end = marker(t, reason_end_marker(kind), g->think_end);
    int32_t close[16]; // harmony: the end marker's first tokens end the span ("assistant" may be several)
    g->n_think_close = reason_close_marker(kind) ? marker(t, reason_close_marker(kind), close) : 0;
    if (reason_close_marker(kind) && (!g->n_think_close || g->n_think_close >= g->n_think_end ||
                                      memcmp(close, g->think_end, (size_t)g->n_think_close * sizeof *close) != 0))
        g->n_think_start = g->n_think_end = g->n_think_close = 0; // not its prefix: no budget
    g->faint = isatty(STDOUT_FILENO) != 0;
    g->show_reasoning = show || g->faint;
}

void cli_gen_on_event(void *user, const struct lm_event *ev) {
    struct cli_gen *g = user;
    if (ev->token >= 0 && g->n_gen < g->show_max) {
        const uint64_t t = lm_time_ns();
        if (g->n_gen++ == 0) {
            g->t_first = t;
            g->n_cached = ev->n_cached;
        }
        // an end-of-generation token ends the text without being shown
        if (g->ignore_eos || !lm_tokenizer_is_eog(g->tok, ev->token)) {
            size_t np = 0;
            const uint64_t tp = lm_prof_phase_begin(LM_PHASE_DETOKENIZE);
            lm_detok_push(g->tok, &g->dt, ev->token, g->piece, g->piece_cap, &np);
            put_text(g, np);
            lm_prof_phase_end(LM_PHASE_DETOKENIZE, tp, ev->index, 1);
        }
        if (g->n_gen > 1) g->ns_out += lm_time_ns() - t;
    }
    if (ev->finish != LM_FINISH_NONE) {
        g->done = true;
        g->finish = ev->finish;
        if (ev->finish == LM_FINISH_ERROR)
            snprintf(g->error, sizeof g->error, "%s", ev->error ? ev->error : "forward pass failed");
    }
}

int cli_gen_drive(struct lm_engine *e, uint64_t id, struct cli_gen *g, struct cli_progress *prog,
                  int64_t n_prefill, volatile sig_atomic_t *stop) {
    struct lm_engine_stats st;
    lm_engine_stats(e, &st);
    const uint64_t prefilled0 = st.prefilled_tokens; // the engine's count before this request
    bool cancelled = false, first = false;
    if (prog) cli_progress_begin(prog, "prefill", n_prefill, "tok");
    while (!g->done) {
        if (stop && *stop && !cancelled) {
            lm_engine_cancel(e, id); // its last event comes with the next step
            cancelled = true;
        }
        if (lm_engine_step(e) < 0 && !g->done) {
            if (prog) cli_progress_end(prog);
            return -1;
        }
        if (!first && g->n_gen > 0) { // the first token: the prefill is over
            first = true;
            lm_engine_stats(e, &g->at_first);
            if (prog) cli_progress_end(prog);
        } else if (!first && prog) {
            lm_engine_stats(e, &st);
            cli_progress_update(prog, (int64_t)(st.prefilled_tokens - prefilled0));
        }
    }
    if (!first && prog) cli_progress_end(prog);
    return 0;
}

void cli_gen_flush(struct cli_gen *g) {
    put_text_from(g, g->piece, lm_detok_flush(&g->dt, g->piece, g->piece_cap), false);
    if (!g->reasoning) return;
    reason_split_finish(&g->split, &g->rbuf, &g->cbuf);
    put_parts(g);
}
