// libFuzzer target for the KL-divergence base-file reader (include/lumen_kld_base.h): open
// arbitrary bytes as a stream, then read rows until the reader stops, touching every
// token and every word of each row (ASan/UBSan catch bad reads).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "lumen_kld_base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0; // fmemopen refuses an empty buffer
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f) return 0;
    struct lm_kld_base b;
    if (lm_kld_base_open_stream(&b, f, "fuzz.bin") != LM_OK) return 0;
    volatile uint64_t sink = 0;
    const int64_t n_tok = (int64_t)b.n_chunk * b.n_ctx;
    for (int64_t i = 0; i < n_tok; i++) {
        if (b.tokens[i] < 0 || b.tokens[i] >= b.n_vocab) __builtin_trap();
        sink += (uint64_t)b.tokens[i];
    }
    uint16_t *row = malloc(2 * (size_t)b.row_words);
    if (row) {
        for (int r = 0; r < 256 && lm_kld_base_read_row(&b, row) == LM_OK; r++) {
            float scale, mn;
            lm_kld_row_params(row, &scale, &mn);
            if (!(scale >= 0) || mn != mn) __builtin_trap();
            sink += row[b.row_words - 1];
        }
    }
    free(row);
    (void)sink;
    lm_kld_base_close(&b);
    return 0;
}
