// The report library behind `lumen analyze`: reads a JSONL trace (include/lumen_prof.h's
// writer, schema docs/profiling.md) back, validates it, aggregates it, and prints the text
// report or writes the HTML page. Program-side, like src/bench: it sees include/ only.
#ifndef LM_REPORT_REPORT_H
#define LM_REPORT_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lumen_prof.h"   // LM_PROF_JSONL_SCHEMA / _VERSION, phases, ops
#include "lumen_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LM_PROF_JSONL_VERSION_MIN 1 // oldest version the analyzer reads

struct lm_prof_report;
// Reads and validates path; on malformed input returns LM_ERR_FORMAT (or
// LM_ERR_UNSUPPORTED for another version) with "path:LINE: what" in lm_error_msg().
enum lm_status lm_prof_report_load(const char *path, struct lm_prof_report **out);
void lm_prof_report_free(struct lm_prof_report *r);
// The text report (seeds 000/001 style; every timing row count | total | avg | min |
// max | p95 | p99, percentiles exact, nearest-rank).
void lm_prof_report_print(const struct lm_prof_report *r, FILE *f);
// One self-contained HTML page (inline CSS + SVG charts, no network).
enum lm_status lm_prof_report_write_html(const struct lm_prof_report *r, const char *path);

// One timing row, in ns.
struct lm_prof_row {
    uint64_t count;
    double total, avg, min, max, p95, p99;
};
// Looks up a row of a report section for tests and tools. Sections and keys:
//   "type" (event type), "phase" ("decode"), "phase_op" ("decode :: qkv"),
//   "layer" ("decode :: block_3"), "op" ("qkv"), "barrier_phase" ("decode"),
//   "barrier_op" ("decode :: qkv"), "matmul" ("qkv m=1024 n=1 k=640 q4_K avx2"),
//   "step" (latency of each phase span, key "decode" / "prefill" / ...; of engine steps,
//   keys "engine" (all), "engine decode only", "engine with prefill"),
//   "step_tokens" (per engine step, values are counts, not ns: keys "tokens", "decode",
//   "prefill", "seqs"; total = sum over the steps),
//   "expert" (MoE expert spans, key "expert 5": all layers, gate/up and down),
//   "expert_tokens" (key "expert 5": tokens per forward pass it ran in; total = its tokens).
bool lm_prof_report_row(const struct lm_prof_report *r, const char *section,
                        const char *key, struct lm_prof_row *out);

#ifdef __cplusplus
}
#endif
#endif
