// `lumen embed`: embeddings of texts (arguments, or a file's lines) through the engine, one
// JSON line per input in input order: {"index": i, "n_tokens": n, "embedding": [...]}.
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
    "Each input is tokenized as `lumen tokenize` does (BOS/EOS as the vocabulary says), its\n"
    "final normed hidden states pooled and L2-normalised; values print with 9 significant\n"
    "digits (the float's exact value).\n";

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

int cmd_embed(int argc, char **argv) {
    const char *cmd = "embed";
    const char *model_path = NULL, *file = NULL;
    struct lm_request_params rp = lm_request_params_default();
    rp.embed = true;
    struct lm_engine_params ep = {.step_tokens = 512};
    char **texts = calloc((size_t)argc + 1, sizeof *texts);
    int32_t n_texts = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(k_embed_help, stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) file = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--pooling")) {
            const char *v = cli_value(cmd, argc, argv, &i);
            if (lm_pooling_from_name(v, &rp.pooling) != LM_OK || rp.pooling == LM_POOLING_NONE ||
                rp.pooling == LM_POOLING_RANK)
                cli_usage_error(cmd, "--pooling '%s': mean, cls or last", v);
        } else if (!strcmp(a, "--dimensions"))
            rp.dimensions = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 1 << 20);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx"))
            ep.n_ctx = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 1 << 20);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch"))
            ep.step_tokens = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 8192);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            ep.n_threads = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 256);
        else if (a[0] == '-' && a[1]) cli_usage_error(cmd, "unknown option '%s' (try `lumen embed --help`)", a);
        else texts[n_texts++] = argv[i];
    }
    if (file && n_texts) cli_usage_error(cmd, "give either -f FILE or texts, not both");
    char *buf = NULL;
    const char **in = NULL;
    const int32_t n_in = read_inputs(cmd, file, texts, n_texts, &in, &buf);
    if (n_in == 0) cli_usage_error(cmd, "no input: give texts or -f FILE");
    if (!model_path) model_path = cli_default_model();
    struct lm_model *m = NULL;
    struct lm_engine *e = NULL;
    enum lm_status st = lm_model_load(&m, model_path, NULL);
    if (st != LM_OK) {
        fprintf(stderr, "lumen embed: %s\n", lm_error_msg());
        return st == LM_ERR_IO ? LM_EXIT_USAGE : 1;
    }
    if (ep.n_ctx == 0) ep.n_ctx = lm_model_n_ctx_train(m) < 8192 ? lm_model_n_ctx_train(m) : 8192;
    ep.max_running = n_in < 64 ? n_in : 64;
    ep.max_waiting = n_in;
    if (ep.step_tokens < ep.max_running) ep.step_tokens = ep.max_running;
    struct embed_out *outs = calloc((size_t)n_in, sizeof *outs);
    int rc = 0;
    if (!outs || (st = lm_engine_init(&e, m, &ep)) != LM_OK) {
        fprintf(stderr, "lumen embed: %s\n", outs ? lm_error_msg() : "out of memory");
        rc = 1;
    }
    for (int32_t i = 0; rc == 0 && i < n_in; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        st = lm_tokenize(lm_model_tokenizer(m), in[i], strlen(in[i]), true, false, &ids, &n);
        if (st == LM_OK) st = lm_engine_submit(e, ids, (int32_t)n, &rp, on_event, &outs[i], NULL);
        free(ids);
        if (st != LM_OK) {
            fprintf(stderr, "lumen embed: input %d: %s\n", i, lm_error_msg());
            rc = 1;
        }
    }
    while (rc == 0 && lm_engine_step(e) > 0) {}
    for (int32_t i = 0; rc == 0 && i < n_in; i++) {
        const struct embed_out *o = &outs[i];
        if (!o->v) {
            fprintf(stderr, "lumen embed: input %d: %s\n", i, o->error ? o->error : "no result");
            rc = 1;
            break;
        }
        printf("{\"index\": %d, \"n_tokens\": %d, \"embedding\": [", i, o->n_tokens);
        for (int32_t k = 0; k < o->n; k++) printf("%s%.9g", k ? ", " : "", o->v[k]);
        fputs("]}\n", stdout);
    }
    for (int32_t i = 0; outs && i < n_in; i++) free(outs[i].v);
    free(outs);
    lm_engine_free(e);
    lm_model_free(m);
    if (in != (const char **)texts) free(in);
    free(texts);
    free(buf);
    return rc;
}
