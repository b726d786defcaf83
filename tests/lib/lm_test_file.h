// Whole-file reading for the tests (golden files, grammars, traces, model copies to patch).
// Part of the lumen_test library (tests/lib/*.c).
#ifndef LM_TEST_FILE_H
#define LM_TEST_FILE_H

#include <stddef.h>

// The bytes of the file at path, NUL-terminated (one byte past *n), from malloc; its length
// in *n unless n is NULL. NULL when it cannot be opened or read whole.
char *lm_test_read_file(const char *path, size_t *n);

#endif
