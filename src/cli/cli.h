// What the lumen subcommands share: argument parsing with one-line errors (exit 2), the
// sampling option table, the default model (cli_args.c); the chat format (cli_template.c);
// grammars (cli_grammar.c); one request generated through the engine (cli_gen.c).
#ifndef LM_CLI_CLI_H
#define LM_CLI_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LM_DEFAULT_MODEL "models/gemma-3-270m-q4_k_m.gguf"

// Exit code for usage errors (bad flag, value or path).
#define LM_EXIT_USAGE 2

// Prints "lumen <cmd>: <msg>" to stderr and exits with LM_EXIT_USAGE.
void cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
// Value of flag argv[*i] (advances *i); usage error if missing.
const char *cli_value(const char *cmd, int argc, char **argv, int *i);
int64_t cli_int(const char *cmd, const char *flag, const char *v, int64_t lo, int64_t hi);
double cli_float(const char *cmd, const char *flag, const char *v, double lo, double hi);
// Default model: $LUMEN_MODEL, ./models/..., or <exe dir>/../models/...
const char *cli_default_model(void);
// -ctk / --cache-type-k and -ctv / --cache-type-v TYPE (f16, q8_0): if argv[*i] is one of
// them, takes its value (advances *i) into *type_k or *type_v (enum lm_kv_type values) and
// returns true; a bad value is a usage error. CLI_KV_TYPE_HELP: their help lines.
bool cli_kv_type(const char *cmd, int argc, char **argv, int *i, int *type_k, int *type_v);
#define CLI_KV_TYPE_HELP                                                                      \
    "  -ctk, --cache-type-k T  KV cache type of K: f16 (default) or q8_0 (half the memory)\n" \
    "  -ctv, --cache-type-v T  KV cache type of V: f16 (default) or q8_0\n"

// The sampling flags of run, chat and bench (one table: --temp, --top-k, --top-p, --min-p,
// --repeat-penalty, --presence-penalty, --frequency-penalty, --seed; docs/sampling.md lists
// them beside the server's fields): if argv[*i] is one,
// takes its value (advances *i) into *sp and returns true; a bad value is a usage error.
struct lm_sampler_params;
bool cli_sampling_flag(const char *cmd, int argc, char **argv, int *i, struct lm_sampler_params *sp);
// Their help lines, in the table's order.
void cli_sampling_help(FILE *f);

// The whole file, NUL-terminated (*len bytes before the NUL), or NULL if it cannot be read.
char *cli_read_file(const char *path, size_t *len);
// --grammar / --json-schema (cli_grammar.c): the grammar compiled for tok, NULL when neither
// path is given; an unreadable file or a refused grammar or schema exits with a usage error
// naming the file and the problem.
struct lm_tokenizer;
struct lm_grammar;
struct lm_grammar *cli_grammar_load(const char *cmd, const struct lm_tokenizer *tok,
                                    const char *grammar_path, const char *schema_path);
int cmd_run(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_rerank(int argc, char **argv);

struct lm_model;
// The chat format for a model (cli_template.c): the named one when forced ("gemma", "llama3",
// "chatml"), else the model's; a model without a template it knows gets one stderr line
// naming the fallback used. Returns an enum lm_chat_template.
int cli_chat_template(const char *cmd, const struct lm_model *m, const char *path, const char *forced);

#endif
