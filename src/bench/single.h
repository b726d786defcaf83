// The single-stream tests of `lumen bench` (llama-bench's): pp N (prefill N tokens), tg N
// (N decode steps after a 16-token prompt), ttft N (prefill N + sample one), tokenizer and
// sampler throughput; each repeated, with its statistics and, for tg, the roofline. pp and
// tg run at a depth D too (llama-bench's -d): after D tokens already in the cache.
#ifndef LM_BENCH_SINGLE_H
#define LM_BENCH_SINGLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bandwidth.h"
#include "lumen.h"
#include "roofline.h"

#define LM_BENCH_TG_PROMPT 16       // tokens prefilled (untimed) before a tg test
#define LM_BENCH_SAMPLES_PER_REP 32 // draws per repetition of the sampling test
#define LM_BENCH_TOK_TEXT_BYTES (64 * 1024) // text of the tokenizer test

enum lm_bench_test_kind { LM_BENCH_PP, LM_BENCH_TG, LM_BENCH_TTFT, LM_BENCH_TOKENIZE, LM_BENCH_SAMPLE };
const char *lm_bench_test_kind_name(enum lm_bench_test_kind k); // "pp", "tg", ...

struct lm_bench_test {
    char name[32];   // "pp512", "tg128", "ttft16", "tokenize", "sample"
    enum lm_bench_test_kind kind;
    int threads;
    int n_prompt, n_gen;
    int depth;       // positions in the cache before the timed part (pp, tg at -d D)
    double units;    // tokens (or samples) per repetition: t/s = units / seconds
    double bytes;    // tokenize: text bytes per repetition
    int reps;
    double *ns;      // [reps] duration of each repetition (malloc'd; the owner frees it)
    // lm_bench_test_finish
    double avg_ts, sd_ts, med_ts, min_ts, max_ts, avg_ns, sd_ns, med_ns;
    double kv_bytes;     // tg: KV bytes read per step, averaged over the steps (0 otherwise)
    double gbps, roof;   // tg: achieved read bandwidth (weights + KV) and fraction of the
                         // probe (NAN otherwise)
};

// A live display of a test that runs for a while (lumen bench draws a one-line progress
// with it when stderr is a terminal): called with done = 0 before the first run, with the
// runs done (of total, warm-up included) after each, and with done = -1 when the test ends,
// also on failure.
typedef void (*lm_bench_live_fn)(void *user, const char *label, int done, int total);

// What the tests run on, and how they report while they run.
struct lm_bench_test_setup {
    struct lm_context *c;        // one sequence, n_ctx >= every test's positions
    const int32_t *ids;          // prompt ids (lm_bench_tokens), as many as the longest test
    struct lm_batch_entry *batch; // LM_BENCH_N_BATCH entries
    struct lm_sampler *smp;      // the chain of lm_bench_params.sampling (ttft, sample)
    int warmup, reps;            // untimed runs, timed runs
    int depth;                   // positions [0, depth) of sequence 0 are in the cache and
                                 // stay there: pp and tg run after them (0: from empty)
    FILE *log;                   // with progress: a line per timed run
    bool progress;
    lm_bench_live_fn live;       // without progress (NULL: none)
    void *live_user;
};

// Runs a pp, tg or ttft test of n tokens at `threads` (the context's) into *t, which it
// names and sizes; pp and tg at s->depth (ttft only at depth 0). Failure: lm_decode's
// status and message, or LM_ERR_NOMEM.
enum lm_status lm_bench_run_test(const struct lm_bench_test_setup *s,
                                 enum lm_bench_test_kind kind, int n, int threads,
                                 struct lm_bench_test *t);
// Tokenizer throughput over the fixed text repeated to LM_BENCH_TOK_TEXT_BYTES (one thread).
// Failure: lm_tokenize's status and message, or LM_ERR_NOMEM.
enum lm_status lm_bench_run_tokenize(const struct lm_bench_test_setup *s,
                                     const struct lm_model *m, struct lm_bench_test *t);
// Sampling with the default chain over a copy of the context's last logits (one thread).
// Failure: LM_ERR_STATE when the context has no logits, LM_ERR_NOMEM; with a message.
enum lm_status lm_bench_run_sample(const struct lm_bench_test_setup *s, int32_t n_vocab,
                                   struct lm_bench_test *t);
// Fills the cache of sequence 0 with ids[0, depth) (untimed; a line to s->log with
// progress) for the tests at that depth. Failure: lm_decode's status and message.
enum lm_status lm_bench_fill_depth(const struct lm_bench_test_setup *s, int depth);
// The statistics of t's repetitions; for tg also the read GB/s ((mi's weight bytes per token
// + the KV bytes its steps read on average) x median tok/s) and its fraction of the
// probe's bandwidth at t's thread count.
void lm_bench_test_finish(struct lm_bench_test *t, const struct lm_bench_model_info *mi,
                          const struct lm_bench_bw *bw, int n_bw);

#endif
