// libFuzzer target for the JSON Schema -> GBNF converter (src/grammar/schema.c, regex.c):
// arbitrary bytes as a schema; a success must give NUL-terminated text of the stated length
// starting with the root rule, a failure a message (ASan/UBSan catch the rest).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lumen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *g = NULL;
    size_t n = 0;
    enum lm_status st = lm_json_schema_to_gbnf((const char *)data, size, &g, &n);
    if (st == LM_OK) {
        if (!g || strlen(g) != n || strncmp(g, "root ::= ", 9)) __builtin_trap();
    } else {
        if (g || !lm_error_msg()[0]) __builtin_trap();
    }
    free(g);
    return 0;
}
