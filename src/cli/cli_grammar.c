// --grammar FILE / --json-schema FILE of lumen run and lumen chat: the file read and compiled
// for the model's tokenizer (a JSON Schema through lm_json_schema_to_gbnf first).
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "lumen.h"

struct lm_grammar *cli_grammar_load(const char *cmd, const struct lm_tokenizer *tok,
                                    const char *grammar_path, const char *schema_path) {
    const char *path = grammar_path ? grammar_path : schema_path;
    if (!path) return NULL;
    size_t len = 0;
    char *text = cli_read_file(path, &len);
    if (!text) cli_usage_error(cmd, "cannot read %s file '%s'", grammar_path ? "grammar" : "schema", path);
    char *gbnf = text;
    size_t n_gbnf = len;
    if (schema_path && lm_json_schema_to_gbnf(text, len, &gbnf, &n_gbnf) != LM_OK) {
        fprintf(stderr, "lumen %s: %s: %s\n", cmd, path, lm_error_msg());
        free(text);
        exit(LM_EXIT_USAGE);
    }
    struct lm_grammar *g = NULL;
    const enum lm_status st = lm_grammar_compile(&g, tok, gbnf, n_gbnf, NULL);
    if (st != LM_OK) {
        fprintf(stderr, "lumen %s: %s: %s\n", cmd, path, lm_error_msg());
        if (gbnf != text) free(gbnf);
        free(text);
        exit(LM_EXIT_USAGE);
    }
    if (gbnf != text) free(gbnf);
    free(text);
    return g;
}
