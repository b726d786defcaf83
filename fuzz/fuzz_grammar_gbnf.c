// libFuzzer target for the GBNF compiler and matcher (src/grammar/): the input up to its
// first NUL byte is a grammar; if it compiles, the rest is fed to the matcher byte by byte
// (ASan/UBSan catch bad reads; a refused grammar must leave a "gbnf:" message).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "grammar/matcher.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    struct gb_limits lim = {.max_rules = 2000, .max_elems = 1 << 16, .max_repeat = 200};
    struct gb_grammar g;
    if (gb_parse(&g, (const char *)data, glen, NULL, &lim) != LM_OK) {
        if (strncmp(lm_error_msg(), "gbnf", 4)) __builtin_trap();
        return 0;
    }
    struct gm m;
    if (gm_init(&m, &g) == LM_OK) {
        m.max_nodes = 1 << 16;
        uint32_t s = gm_start(&m);
        for (size_t i = glen + 1; i < size && s != GM_DEAD; i++) s = gm_next(&m, s, data[i]);
        gm_free(&m);
    }
    gb_free(&g);
    return 0;
}
