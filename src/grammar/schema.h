// JSON Schema -> GBNF (lm_json_schema_to_gbnf in lumen.h): the converter's limits and the
// numeric-range emitter it shares with its tests. docs/structured.md describes the output.
#ifndef LM_GRAMMAR_SCHEMA_H
#define LM_GRAMMAR_SCHEMA_H

#include <stdbool.h>
#include <stdint.h>

#include "grammar/gbnf_text.h"

// Limits against hostile schemas (each exceeded one is LM_ERR_ARG naming it):
#define LM_SCHEMA_MAX_INPUT (1u << 20)  // bytes of schema text
#define LM_SCHEMA_MAX_DEPTH 128         // nested subschemas (through $ref too)
#define LM_SCHEMA_MAX_OUTPUT (1u << 20) // bytes of GBNF
#define LM_SCHEMA_MAX_REFS 1000         // distinct $ref targets expanded
#define LM_SCHEMA_MAX_NODES 20000       // subschemas visited
#define LM_SCHEMA_MAX_MS 250            // wall time of one conversion
#define LM_SCHEMA_MAX_REPEAT 10000      // minLength/maxLength/minItems/maxItems

// An exact decimal: (neg ? -1 : 1) * (ip + 0.frac), frac the digits after the point without
// trailing zeros ("" for an integer).
struct lm_dec {
    bool neg;
    uint64_t ip;
    char frac[24];
};
void lm_dec_from_int(struct lm_dec *d, int64_t v);
// d exactly as its shortest round-trip digits; false if the fraction is too long for frac.
bool lm_dec_from_double(struct lm_dec *d, double v);
// The nearest decimal of 15 significant digits strictly above (below) v: every decimal at or
// beyond it reads back as a double beyond v. False if the fraction is too long.
bool lm_dec_beyond(struct lm_dec *d, double v, bool above);

// Numeric bounds, inclusive or exclusive. schema.c rounds the bounds of integers inward to
// integers and makes every nonzero exclusive bound of a number inclusive at the next
// 15-significant-digit decimal (so that text above the bound never reads back, as a double,
// equal to it).
struct lm_num_bounds {
    bool has_lo, lo_excl, has_hi, hi_excl;
    struct lm_dec lo, hi;
};

// Appends a GBNF expression for the JSON numbers (integer: integers only, no fraction, no
// exponent) within the bounds; unbounded sides stop at 16 integer digits (as the plain
// `integer`/`number` rules). False when no number satisfies the bounds.
bool lm_schema_emit_number(struct lm_strbuf *b, const struct lm_num_bounds *nb, bool integer);

#endif
