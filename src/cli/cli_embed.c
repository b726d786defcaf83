// `lumen embed`: embeddings of texts (arguments, or a file's lines) through the engine, one
// JSON line per input in input order: {"index": i, "n_tokens": n, "embedding": [...]}.
// `lumen rerank`: a reranker's relevance scores of documents for a query, best first.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lumen.h"

static const char *k_embed_help =
    "usage: lumen embed [-m MODEL] [-f FILE | TEXT...] [options]\n"
    "\n"
    "  -m, --model PATH      GGUF embedding model (default: " LM_DEFAULT_MODEL ")\n"
    "  -f, --file PATH       one input per line (empty lines skipped)\n"
    "      --pooling P       mean, cls or last (default: the model's pooling_type; a model\n"
    "                        without one, such as a chat model, needs this flag)\n"
    "      --dimensions N    keep the first N values, renormalised (Matryoshka)\n"
    "  -c, --ctx N           longest input in tokens (default: min(model's, 8192)); longer\n"
    "                        inputs are refused\n"
    "  -b, --batch N         tokens per engine step (default 512): inputs share steps\n"
    "  -t, --threads N       threads (default: physical cores)\n"
    "\n"
    "Each input is tokenized as llama.cpp's llama-embedding and llama-server do (BOS/EOS as the\n"
    "vocabulary says, special-token text parsed), its final normed hidden states pooled and\n"
    "L2-normalised; values print with 9 significant digits (the float's exact value).\n";

static const char *k_rerank_help =
    "usage: lumen rerank [-m MODEL] -q QUERY [-f FILE | DOCUMENT...] [options]\n"
    "\n"
    "  -m, --model PATH      GGUF reranker (pooling_type rank: a classification head, such as\n"
    "                        Qwen3-Reranker's)\n"
    "  -q, --query TEXT      the query\n"
    "  -f, --file PATH       one document per line (empty lines skipped)\n"
    "      --top-n N         print the N best (default: all)\n"
    "  -c, -b, -t            as `lumen embed`\n"
    "\n"
    "One JSON line per document, best first: {\"index\": i, \"relevance_score\": s}: the\n"
    "first output of the model's head on its rerank prompt (llama-server's /v1/rerank score;\n"
    "Qwen3-Reranker: P(yes)).\n";

struct embed_out {
    float *v;     // the vector, once delivered
    int32_t n, n_tokens;
    const char *error;
    bool done;
};

static void on_event(void *user, const struct lm_event *ev) {
    struct embed_out *o = user;
    if (ev->finish == LM_FINISH_NONE) return;
    o->done = true;
    if (!ev->embd) {
        o->error = ev->error ? ev->error : lm_finish_name(ev->finish);
        return;
    }
    o->n = ev->n_embd;
    o->n_tokens = ev->n_prompt;
    if ((o->v = malloc((size_t)ev->n_embd * sizeof *o->v)))
        memcpy(o->v, ev->embd, (size_t)ev->n_embd * sizeof *o->v);
}

// The inputs: the arguments, or the file's non-empty lines (pointers into *buf).
static int32_t read_inputs(const char *cmd, const char *file, char **args, int32_t n_args,
                           const char ***out, char **buf) {
    if (!file) {
        *out = (const char **)args;
        return n_args;
    }
    size_t len = 0;
    if (!(*buf = cli_read_file(file, &len))) cli_usage_error(cmd, "cannot read file '%s'", file);
    int32_t n = 0, cap = 16;
    const char **v = malloc((size_t)cap * sizeof *v);
    for (char *s = *buf, *e; v && s < *buf + len; s = e + 1) {
        if (!(e = memchr(s, '\n', (size_t)(*buf + len - s)))) e = *buf + len;
        *e = 0;
        if (e > s && e[-1] == '\r') e[-1] = 0;
        if (!*s) continue;
        if (n == cap && !(v = realloc(v, (size_t)(cap *= 2) * sizeof *v))) break;
        v[n++] = s;
    }
    if (!v) cli_usage_error(cmd, "out of memory");
    *out = v;
    return n;
}

// Runs every prompt through the engine (all submitted at once, sharing its steps) into outs.
// Returns 0, or 1 after a message.
static int run_all(const char *cmd, struct lm_model *m, struct lm_engine_params ep,
                   const struct lm_request_params *rp, int32_t **ids, const size_t *n, int32_t n_in,
                   struct embed_out *outs) {
    if (ep.n_ctx == 0) ep.n_ctx = lm_model_n_ctx_train(m) < 8192 ? lm_model_n_ctx_train(m) : 8192;
    ep.max_running = n_in < 64 ? n_in : 64;
    ep.max_waiting = n_in;
    if (ep.step_tokens < ep.max_running) ep.step_tokens = ep.max_running;
    struct lm_engine *e = NULL;
    if (lm_engine_init(&e, m, &ep) != LM_OK) {
        fprintf(stderr, "lumen %s: %s\n", cmd, lm_error_msg());
        return 1;
    }
    int rc = 0;
    for (int32_t i = 0; rc == 0 && i < n_in; i++)
        if (lm_engine_submit(e, ids[i], (int32_t)n[i], rp, on_event, &outs[i], NULL) != LM_OK) {
            fprintf(stderr, "lumen %s: input %d: %s\n", cmd, i, lm_error_msg());
            rc = 1;
        }
    while (rc == 0 && lm_engine_step(e) > 0) {}
    for (int32_t i = 0; rc == 0 && i < n_in; i++)
        if (!outs[i].v) {
            fprintf(stderr, "lumen %s: input %d: %s\n", cmd, i, outs[i].error ? outs[i].error : "no result");
            rc = 1;
        }
    lm_engine_free(e);
    return rc;
}

// The options both commands take (-m, -f, -c, -b, -t) and the positional inputs; true when
// argv[*i] was one of them.
struct opts {
    const char *model_path, *file;
    struct lm_engine_params ep;
    char **texts;
    int32_t n_texts;
};

static bool common_opt(const char *cmd, int argc, char **argv, int *i, struct opts *o) {
    const char *a = argv[*i];
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model_path = cli_value(cmd, argc, argv, i);
    else if (!strcmp(a, "-f") || !strcmp(a, "--file")) o->file = cli_value(cmd, argc, argv, i);
    else if (!strcmp(a, "-c") || !strcmp(a, "--ctx"))
        o->ep.n_ctx = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, i), 1, 1 << 20);
    else if (!strcmp(a, "-b") || !strcmp(a, "--batch"))
        o->ep.step_tokens = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, i), 1, 8192);
    else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
        o->ep.n_threads = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, i), 1, 256);
    else if (a[0] == '-' && a[1]) return false;
    else o->texts[o->n_texts++] = argv[*i];
    return true;
}

// The model, loaded; NULL after a message (*rc: the exit code).
static struct lm_model *load(const char *cmd, const struct opts *o, int *rc) {
    struct lm_model *m = NULL;
    const enum lm_status st = lm_model_load(&m, o->model_path ? o->model_path : cli_default_model(), NULL);
    if (st != LM_OK) {
        fprintf(stderr, "lumen %s: %s\n", cmd, lm_error_msg());
        *rc = st == LM_ERR_IO ? LM_EXIT_USAGE : 1;
    }
    return m;
}

static void free_all(int32_t **ids, size_t *n, struct embed_out *outs, int32_t n_in) {
    for (int32_t i = 0; i < n_in; i++) {
        if (ids) free(ids[i]);
        if (outs) free(outs[i].v);
    }
    free(ids);
    free(n);
    free(outs);
}

int cmd_embed(int argc, char **argv) {
    const char *cmd = "embed";
    struct lm_request_params rp = lm_request_params_default();
    rp.embed = true;
    struct opts o = {.ep = {.step_tokens = 512}, .texts = calloc((size_t)argc + 1, sizeof(char *))};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(k_embed_help, stdout); return 0; }
        else if (!strcmp(a, "--pooling")) {
            const char *v = cli_value(cmd, argc, argv, &i);
            if (lm_pooling_from_name(v, &rp.pooling) != LM_OK || rp.pooling == LM_POOLING_NONE ||
                rp.pooling == LM_POOLING_RANK)
                cli_usage_error(cmd, "--pooling '%s': mean, cls or last", v);
        } else if (!strcmp(a, "--dimensions"))
            rp.dimensions = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 1 << 20);
        else if (!common_opt(cmd, argc, argv, &i, &o))
            cli_usage_error(cmd, "unknown option '%s' (try `lumen embed --help`)", a);
    }
    if (o.file && o.n_texts) cli_usage_error(cmd, "give either -f FILE or texts, not both");
    char *buf = NULL;
    const char **in = NULL;
    const int32_t n_in = read_inputs(cmd, o.file, o.texts, o.n_texts, &in, &buf);
    if (n_in == 0) cli_usage_error(cmd, "no input: give texts or -f FILE");
    int rc = 0;
    struct lm_model *m = load(cmd, &o, &rc);
    int32_t **ids = calloc((size_t)n_in, sizeof *ids);
    size_t *n = calloc((size_t)n_in, sizeof *n);
    struct embed_out *outs = calloc((size_t)n_in, sizeof *outs);
    if (m && (!ids || !n || !outs)) fputs("lumen embed: out of memory\n", stderr), rc = 1;
    for (int32_t i = 0; m && rc == 0 && i < n_in; i++)
        if (lm_tokenize(lm_model_tokenizer(m), in[i], strlen(in[i]), true, true, &ids[i], &n[i]) != LM_OK) {
            fprintf(stderr, "lumen embed: input %d: %s\n", i, lm_error_msg());
            rc = 1;
        }
    if (m && rc == 0) rc = run_all(cmd, m, o.ep, &rp, ids, n, n_in, outs);
    for (int32_t i = 0; m && rc == 0 && i < n_in; i++) {
        printf("{\"index\": %d, \"n_tokens\": %d, \"embedding\": [", i, outs[i].n_tokens);
        for (int32_t k = 0; k < outs[i].n; k++) printf("%s%.9g", k ? ", " : "", outs[i].v[k]);
        fputs("]}\n", stdout);
    }
    free_all(ids, n, outs, n_in);
    lm_model_free(m);
    if (in != (const char **)o.texts) free(in);
    free(o.texts);
    free(buf);
    return rc;
}

int cmd_rerank(int argc, char **argv) {
    const char *cmd = "rerank";
    struct lm_request_params rp = lm_request_params_default();
    rp.embed = true;
    rp.pooling = LM_POOLING_RANK;
    struct opts o = {.ep = {.step_tokens = 512}, .texts = calloc((size_t)argc + 1, sizeof(char *))};
    const char *query = NULL;
    int32_t top_n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(k_rerank_help, stdout); return 0; }
        else if (!strcmp(a, "-q") || !strcmp(a, "--query")) query = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--top-n")) top_n = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 1 << 20);
        else if (!common_opt(cmd, argc, argv, &i, &o))
            cli_usage_error(cmd, "unknown option '%s' (try `lumen rerank --help`)", a);
    }
    if (!query) cli_usage_error(cmd, "no query: give -q QUERY");
    if (o.file && o.n_texts) cli_usage_error(cmd, "give either -f FILE or documents, not both");
    char *buf = NULL;
    const char **in = NULL;
    const int32_t n_in = read_inputs(cmd, o.file, o.texts, o.n_texts, &in, &buf);
    if (n_in == 0) cli_usage_error(cmd, "no documents: give documents or -f FILE");
    int rc = 0;
    struct lm_model *m = load(cmd, &o, &rc);
    int32_t **ids = calloc((size_t)n_in, sizeof *ids);
    size_t *n = calloc((size_t)n_in, sizeof *n);
    struct embed_out *outs = calloc((size_t)n_in, sizeof *outs);
    int32_t *order = calloc((size_t)n_in, sizeof *order);
    if (m && (!ids || !n || !outs || !order)) fputs("lumen rerank: out of memory\n", stderr), rc = 1;
    for (int32_t i = 0; m && rc == 0 && i < n_in; i++)
        if (lm_rerank_tokens(m, query, strlen(query), in[i], strlen(in[i]), &ids[i], &n[i]) != LM_OK) {
            fprintf(stderr, "lumen rerank: document %d: %s\n", i, lm_error_msg());
            rc = 1;
        }
    if (m && rc == 0) rc = run_all(cmd, m, o.ep, &rp, ids, n, n_in, outs);
    for (int32_t i = 0; m && rc == 0 && i < n_in; i++) { // best first, ties in input order
        int32_t j = i;
        for (; j > 0 && outs[order[j - 1]].v[0] < outs[i].v[0]; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    for (int32_t k = 0; m && rc == 0 && k < n_in && (top_n == 0 || k < top_n); k++)
        printf("{\"index\": %d, \"relevance_score\": %.9g}\n", order[k], outs[order[k]].v[0]);
    free_all(ids, n, outs, n_in);
    free(order);
    lm_model_free(m);
    if (in != (const char **)o.texts) free(in);
    free(o.texts);
    free(buf);
    return rc;
}
