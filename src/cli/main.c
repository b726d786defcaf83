// lumen command line: dispatches to the subcommands (run, chat, tokenize, perplexity, info,
// analyze, bench, serve).
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <limits.h>
#include <math.h>

#include "cli.h"
#include "lumen.h"

static const char *k_usage =
    "lumen: LLM inference for GGUF models on CPUs, with a built-in profiler\n"
    "\n"
    "usage: lumen <command> [options]\n"
    "\n"
    "commands:\n"
    "  run     generate text from a prompt (streams to stdout, stats on stderr)\n"
    "  chat    interactive multi-turn chat (line editing, history, KV kept between turns)\n"
    "  tokenize print a text's token ids and pieces\n"
    "  perplexity a text's perplexity (llama-perplexity's method); KL-divergence against a\n"
    "          base-logits file written by lumen or llama-perplexity\n"
    "  info    print a model's architecture, hyper-parameters, tokenizer and tensors\n"
    "  analyze report on a JSONL profile trace (text, optional --html page)\n"
    "  bench   throughput tests (pp/tg/TTFT), bandwidth roofline, --breakdown report\n"
    "  serve   OpenAI-compatible HTTP server on the continuous-batching engine\n"
    "\n"
    "`lumen <command> --help` shows each command's options.\n";

void cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "lumen %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(LM_EXIT_USAGE);
}

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        cap *= 2;
        char *nb = realloc(buf, cap + 1);
        if (!nb) free(buf);
        buf = nb;
    }
    const int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

const char *cli_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) cli_usage_error(cmd, "option %s needs a value", argv[*i]);
    return argv[++*i];
}

bool cli_kv_type(const char *cmd, int argc, char **argv, int *i, int *type_k, int *type_v) {
    const char *a = argv[*i];
    const bool k = !strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k");
    if (!k && strcmp(a, "-ctv") && strcmp(a, "--cache-type-v")) return false;
    const char *v = cli_value(cmd, argc, argv, i);
    enum lm_kv_type t;
    if (lm_kv_type_from_name(v, &t) != LM_OK)
        cli_usage_error(cmd, "%s: unknown KV cache type '%s' (f16 or q8_0)", a, v);
    *(k ? type_k : type_v) = (int)t;
    return true;
}

int64_t cli_int(const char *cmd, const char *flag, const char *v, int64_t lo, int64_t hi) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end)
        cli_usage_error(cmd, "%s: '%s' is not an integer", flag, v);
    if (x < lo || x > hi)
        cli_usage_error(cmd, "%s: %lld is out of range [%lld, %lld]", flag, x, (long long)lo,
                        (long long)hi);
    return x;
}

double cli_float(const char *cmd, const char *flag, const char *v, double lo, double hi) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || isnan(x))
        cli_usage_error(cmd, "%s: '%s' is not a number", flag, v);
    if (x < lo || x > hi) cli_usage_error(cmd, "%s: %g is out of range [%g, %g]", flag, x, lo, hi);
    return x;
}

const char *cli_default_model(void) {
    static char buf[PATH_MAX + 64];
    const char *env = getenv("LUMEN_MODEL");
    if (env && *env) return env;
    if (access(LM_DEFAULT_MODEL, R_OK) == 0) return LM_DEFAULT_MODEL;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(buf, sizeof buf, "%s/../%s", exe, LM_DEFAULT_MODEL);
            if (access(buf, R_OK) == 0) return buf;
        }
    }
    return LM_DEFAULT_MODEL;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        fputs(k_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? LM_EXIT_USAGE : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "analyze")) return cmd_analyze(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "chat")) return cmd_chat(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve")) return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "perplexity")) return cmd_perplexity(argc - 1, argv + 1);
    fprintf(stderr, "lumen: unknown command '%s' (try `lumen --help`)\n", cmd);
    return LM_EXIT_USAGE;
}
