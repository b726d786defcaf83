// Whole-file reading for the tests (lm_test_file.h): the one copy of what test_grammar_gbnf,
// _mask, test_prof_record, test_runtime_batch_moe and the tokenizer tests each used to carry.
#include "lm_test_file.h"

#include <stdio.h>
#include <stdlib.h>

char *lm_test_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    long len = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0)
        b = malloc((size_t)len + 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (!b) return NULL;
    b[len] = 0;
    if (n) *n = (size_t)len;
    return b;
}
