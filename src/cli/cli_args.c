// The argument helpers every lumen subcommand shares (one-line usage errors, numbers in
// range, the default model, KV cache types, whole files) and the one sampling option table
// of run, chat and bench: each flag's parsing and help text written once.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "lumen.h"

// ================================================================ errors, values, files

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

// ================================================================ the sampling options

enum opt_kind { OPT_FLOAT, OPT_INT32, OPT_U64 };

// One sampling flag: where it goes in struct lm_sampler_params, its range, its help line.
// The ranges are the server's where it has the field (docs/sampling.md: both, one table).
struct sampling_opt {
    const char *flag;
    enum opt_kind kind;
    size_t offset;
    double lo, hi;
    const char *help; // the text after the flag's column
};

#define SP_OFF(f) offsetof(struct lm_sampler_params, f)
static const struct sampling_opt k_sampling[] = {
    {"--temp", OPT_FLOAT, SP_OFF(temperature), 0, 100,
     "      --temp T          temperature (default 0.8; 0 = greedy)\n"},
    {"--top-k", OPT_INT32, SP_OFF(top_k), 0, 1 << 30,
     "      --top-k K         keep the K most likely tokens (default 40; 0 = off)\n"},
    {"--top-p", OPT_FLOAT, SP_OFF(top_p), 0, 1,
     "      --top-p P         nucleus sampling (default 0.95; 1 = off)\n"},
    {"--min-p", OPT_FLOAT, SP_OFF(min_p), 0, 1,
     "      --min-p P         drop tokens below P x the top probability (default 0.05; 0 = off)\n"},
    {"--repeat-penalty", OPT_FLOAT, SP_OFF(repeat_penalty), 0.01, 100,
     "      --repeat-penalty R  penalize the last 64 tokens (default 1.0 = off)\n"},
    {"--presence-penalty", OPT_FLOAT, SP_OFF(presence_penalty), -2, 2,
     "      --presence-penalty P  subtract P from the logit of each token seen in the last 64\n"
     "                        (OpenAI's presence_penalty; [-2, 2], default 0 = off)\n"},
    {"--frequency-penalty", OPT_FLOAT, SP_OFF(frequency_penalty), -2, 2,
     "      --frequency-penalty F  subtract F x its count in the last 64 from each token's\n"
     "                        logit (OpenAI's frequency_penalty; [-2, 2], default 0 = off)\n"},
    {"--seed", OPT_U64, SP_OFF(seed), 0, 0, // [0, INT64_MAX]
     "      --seed S          RNG seed (default 0); same seed and flags give the same text\n"},
};

bool cli_sampling_flag(const char *cmd, int argc, char **argv, int *i, struct lm_sampler_params *sp) {
    const char *a = argv[*i];
    for (size_t k = 0; k < sizeof k_sampling / sizeof *k_sampling; k++) {
        const struct sampling_opt *o = &k_sampling[k];
        if (strcmp(a, o->flag)) continue;
        const char *v = cli_value(cmd, argc, argv, i);
        char *dst = (char *)sp + o->offset;
        if (o->kind == OPT_FLOAT) *(float *)dst = (float)cli_float(cmd, a, v, o->lo, o->hi);
        else if (o->kind == OPT_INT32) *(int32_t *)dst = (int32_t)cli_int(cmd, a, v, (int64_t)o->lo, (int64_t)o->hi);
        else *(uint64_t *)dst = (uint64_t)cli_int(cmd, a, v, 0, INT64_MAX);
        return true;
    }
    return false;
}

void cli_sampling_help(FILE *f) {
    for (size_t k = 0; k < sizeof k_sampling / sizeof *k_sampling; k++) fputs(k_sampling[k].help, f);
}
