// llama-perplexity's KL-divergence base file (--kl-divergence-base): a text's tokens and a
// base model's log-probabilities at every scored position, 16 bits per vocabulary entry.
// Public reader (src/format/kld_base.c): parse and validate only, no compute; `lumen
// perplexity` writes the file and reads it through this.
#ifndef LUMEN_KLD_BASE_H
#define LUMEN_KLD_BASE_H

#include <stdint.h>
#include <stdio.h>

#include "lumen_status.h"

#ifdef __cplusplus
extern "C" {
#endif

// Layout, as tools/perplexity/perplexity.cpp writes it (host byte order, little-endian here):
//   char    magic[8]            "_logits_"
//   int32   n_ctx               tokens per chunk (llama-perplexity's -c)
//   int32   n_vocab
//   int32   n_chunk
//   int32   tokens[n_chunk * n_ctx]   the text's tokens (BOS not substituted per chunk)
//   then per chunk, per scored position p = n_ctx/2 .. n_ctx-2 (n_ctx - 1 - n_ctx/2 rows),
//   the distribution predicting token p+1, as a row of LM_KLD_ROW_WORDS(n_vocab) uint16:
//     float   scale             the first 4 uint16 hold two floats
//     float   min_log_prob
//     uint16  q[n_vocab]        log p_i = scale * q[i] + min_log_prob (q = 0: at or below
//                               the row's floor, which is at most 16 nats under the top)
//     (one uint16 of padding when n_vocab is odd)
#define LM_KLD_MAGIC "_logits_"
#define LM_KLD_ROW_WORDS(n_vocab) (2 * (((int64_t)(n_vocab) + 1) / 2) + 4)
#define LM_KLD_HEADER_BYTES 20

// Limits beyond which a header is refused as implausible (besides the size check).
#define LM_KLD_MAX_CTX (1 << 20)
#define LM_KLD_MAX_VOCAB (1 << 24)
#define LM_KLD_MAX_TOKENS (1 << 27) // n_chunk * n_ctx

struct lm_kld_base {
    FILE *f;
    char path[256];       // for messages
    int32_t n_ctx, n_vocab, n_chunk;
    int32_t n_rows;       // scored positions per chunk: n_ctx - 1 - n_ctx/2 (>= 1)
    int64_t row_words;    // uint16 per row: LM_KLD_ROW_WORDS(n_vocab)
    int32_t *tokens;      // n_chunk * n_ctx, each in [0, n_vocab)
    int64_t rows_read;    // rows returned so far (chunk-major order)
};

// Reads and validates the header and the tokens of the stream f (the reader owns f from
// here on, and closes it in lm_kld_base_close, also on failure). name is used in messages.
// When f is seekable its size must be exactly what the header implies.
enum lm_status lm_kld_base_open_stream(struct lm_kld_base *b, FILE *f, const char *name);
// Opens path (LM_ERR_IO if it cannot) and reads it as above.
enum lm_status lm_kld_base_open(struct lm_kld_base *b, const char *path);
// Reads the next row (row_words uint16) into row, checking its scale (finite, >= 0) and
// floor (finite). Rows come chunk by chunk, positions in order.
enum lm_status lm_kld_base_read_row(struct lm_kld_base *b, uint16_t *row);
void lm_kld_base_close(struct lm_kld_base *b);

// The two floats at the start of a row.
static inline void lm_kld_row_params(const uint16_t *row, float *scale, float *min_log_prob) {
    float d[2];
    __builtin_memcpy(d, row, sizeof d);
    *scale = d[0];
    *min_log_prob = d[1];
}

#ifdef __cplusplus
}
#endif
#endif
