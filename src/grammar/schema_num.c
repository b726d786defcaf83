// Numeric bounds of JSON Schema -> GBNF: decimal integer ranges as digit-by-digit
// alternatives (no leading zeros), and numbers as integer-part ranges times fraction kinds,
// so minimum/maximum/exclusive* hold exactly for every sentence.
#include "grammar/schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP_16 9999999999999999ull // the widest integer part of an unbounded side

static void put_digits(struct lm_gbnf_buf *b, char lo, char hi) {
    if (lo == hi) lm_gbnf_buf_printf(b, "\"%c\"", lo);
    else if (lo == '0' && hi == '9') lm_gbnf_buf_puts(b, "[0-9]");
    else lm_gbnf_buf_printf(b, "[%c-%c]", lo, hi);
}

static bool all_of(const char *s, int n, char c) {
    for (int i = 0; i < n; i++)
        if (s[i] != c) return false;
    return true;
}

static void put_any(struct lm_gbnf_buf *b, int n) {
    if (n == 1) lm_gbnf_buf_puts(b, " [0-9]");
    else if (n > 1) lm_gbnf_buf_printf(b, " [0-9]{%d}", n);
}

// Digit strings of length n from a to b (same length, a <= b).
static void same_len(struct lm_gbnf_buf *b, const char *lo, const char *hi, int n) {
    int i = 0;
    while (i < n && lo[i] == hi[i]) i++;
    if (i) lm_gbnf_buf_put(b, "\"", 1), lm_gbnf_buf_put(b, lo, (size_t)i), lm_gbnf_buf_put(b, "\"", 1);
    if (i == n) return;
    if (i) lm_gbnf_buf_puts(b, " ");
    const char *a = lo + i, *z = hi + i;
    int k = n - i; // a[0] < z[0]
    if (all_of(a + 1, k - 1, '0') && all_of(z + 1, k - 1, '9')) {
        put_digits(b, a[0], z[0]);
        put_any(b, k - 1);
        return;
    }
    char nines[20], zeros[20];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    lm_gbnf_buf_puts(b, "(");
    char first = a[0];
    if (all_of(a + 1, k - 1, '0')) { // a[0]... covers the whole block: merge into the middle
        first = (char)(a[0] - 1);
    } else {
        put_digits(b, a[0], a[0]);
        lm_gbnf_buf_puts(b, " ");
        same_len(b, a + 1, nines, k - 1);
    }
    char last = z[0];
    if (all_of(z + 1, k - 1, '9')) last = (char)(z[0] + 1);
    if (first + 1 <= last - 1) {
        if (first != (char)(a[0] - 1)) lm_gbnf_buf_puts(b, " | ");
        put_digits(b, (char)(first + 1), (char)(last - 1));
        put_any(b, k - 1);
    }
    if (last == z[0]) {
        if (first != (char)(a[0] - 1) || first + 1 <= last - 1) lm_gbnf_buf_puts(b, " | ");
        put_digits(b, z[0], z[0]);
        lm_gbnf_buf_puts(b, " ");
        same_len(b, zeros, z + 1, k - 1);
    }
    lm_gbnf_buf_puts(b, ")");
}

static int n_digits(uint64_t v) {
    int n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

// Canonical decimals in [lo, hi] as one parenthesized group.
static void uint_range(struct lm_gbnf_buf *b, uint64_t lo, uint64_t hi) {
    lm_gbnf_buf_puts(b, "(");
    int first = 1;
    uint64_t p = 1; // 10^(n-1)
    for (int n = 1; n <= 20; n++) {
        uint64_t blo = n == 1 ? 0 : p, bhi = n >= 20 ? UINT64_MAX : p * 10 - 1;
        if (n > 1 && p > UINT64_MAX / 10 + 1) break;
        uint64_t a = lo > blo ? lo : blo, z = hi < bhi ? hi : bhi;
        if (a <= z) {
            char sa[24], sz[24];
            snprintf(sa, sizeof sa, "%llu", (unsigned long long)a);
            snprintf(sz, sizeof sz, "%llu", (unsigned long long)z);
            if (!first) lm_gbnf_buf_puts(b, " | ");
            first = 0;
            same_len(b, sa, sz, n_digits(a));
        }
        if (bhi >= hi || n == 20) break;
        p *= 10;
    }
    lm_gbnf_buf_puts(b, ")");
}

// A magnitude M = I.F >= 0 constrained by integral bounds; pieces of I ranges times what the
// fraction F may be.
enum frac { FRAC_ANY, FRAC_ZERO, FRAC_NONZERO };
struct piece {
    uint64_t lo, hi;
    enum frac f;
};

static int lower_pieces(struct piece *p, bool has, uint64_t a, bool excl, uint64_t cap) {
    if (!has) return p[0] = (struct piece){0, cap, FRAC_ANY}, 1;
    if (!excl) return p[0] = (struct piece){a, cap, FRAC_ANY}, 1;
    p[0] = (struct piece){a + 1, cap, FRAC_ANY};
    p[1] = (struct piece){a, a, FRAC_NONZERO};
    return 2;
}

static int upper_pieces(struct piece *p, bool has, uint64_t z, bool excl, uint64_t cap) {
    if (!has) return p[0] = (struct piece){0, cap, FRAC_ANY}, 1;
    int n = 0;
    if (z >= 1) p[n++] = (struct piece){0, z - 1, FRAC_ANY};
    if (!excl) p[n++] = (struct piece){z, z, FRAC_ZERO};
    return n;
}

static const char *frac_text(enum frac f, bool integer) {
    if (integer) return "";
    switch (f) {
    case FRAC_ANY: return " (\".\" [0-9]{1,16})?";
    case FRAC_ZERO: return " (\".\" \"0\"{1,16})?";
    case FRAC_NONZERO: return " \".\" \"0\"{0,15} [1-9] [0-9]{0,15}";
    }
    return "";
}

// Emits the magnitudes satisfying both bounds; returns the number of alternatives.
static int magnitude(struct lm_gbnf_buf *b, bool has_lo, uint64_t lo, bool lo_excl, bool has_hi,
                     uint64_t hi, bool hi_excl, bool integer, bool first) {
    uint64_t cap = CAP_16;
    if (has_lo && lo > cap) cap = lo + 1;
    if (has_hi && hi > cap) cap = hi;
    struct piece L[2], U[2];
    int nl = lower_pieces(L, has_lo, lo, lo_excl, cap), nu = upper_pieces(U, has_hi, hi, hi_excl, cap);
    struct piece out[4];
    int n = 0;
    for (int i = 0; i < nl; i++) {
        for (int j = 0; j < nu; j++) {
            uint64_t a = L[i].lo > U[j].lo ? L[i].lo : U[j].lo;
            uint64_t z = L[i].hi < U[j].hi ? L[i].hi : U[j].hi;
            if (a > z) continue;
            enum frac f;
            if (L[i].f == FRAC_ANY) f = U[j].f;
            else if (U[j].f == FRAC_ANY || U[j].f == L[i].f) f = L[i].f;
            else continue; // zero and nonzero
            if (integer && f == FRAC_NONZERO) continue;
            out[n++] = (struct piece){a, z, integer ? FRAC_ANY : f};
        }
    }
    // integers: adjacent ranges (a fraction kind apart for numbers) join into one
    for (int i = 0; integer && i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j && out[j].lo <= out[i].hi + 1 && out[j].hi >= out[i].lo) {
                if (out[j].lo < out[i].lo) out[i].lo = out[j].lo;
                if (out[j].hi > out[i].hi) out[i].hi = out[j].hi;
                out[j] = out[--n];
                j = -1;
            }
    for (int i = 0; i < n; i++) {
        if (!first || i) lm_gbnf_buf_puts(b, " | ");
        uint_range(b, out[i].lo, out[i].hi);
        lm_gbnf_buf_puts(b, frac_text(out[i].f, integer));
    }
    return n;
}

static uint64_t mag_of_neg(int64_t v) { return (uint64_t)(-(v + 1)) + 1; } // -v for v < 0

bool lm_schema_emit_number(struct lm_gbnf_buf *b, const struct lm_num_bounds *nb, bool integer) {
    lm_gbnf_buf_puts(b, "(");
    int n = 0;
    // x >= 0 written without a sign
    bool pos = !nb->has_hi || nb->hi > 0 || (nb->hi == 0 && !nb->hi_excl);
    if (pos) {
        bool lo_on = nb->has_lo && (nb->lo > 0 || (nb->lo == 0 && nb->lo_excl));
        n += magnitude(b, lo_on, lo_on ? (uint64_t)nb->lo : 0, nb->lo_excl, nb->has_hi,
                       nb->has_hi ? (uint64_t)nb->hi : 0, nb->hi_excl, integer, true);
    }
    // x < 0 (and never "-0"): "-" M with M > 0
    bool neg = !nb->has_lo || nb->lo < 0;
    if (neg) {
        struct lm_gbnf_buf m = {0};
        bool hi_on = nb->has_hi && nb->hi < 0;
        int k = magnitude(&m, true, hi_on ? mag_of_neg(nb->hi) : 0, hi_on ? nb->hi_excl : true,
                          nb->has_lo, nb->has_lo ? mag_of_neg(nb->lo) : 0, nb->lo_excl, integer,
                          true);
        if (k) {
            if (n) lm_gbnf_buf_puts(b, " | ");
            lm_gbnf_buf_puts(b, "\"-\" (");
            if (m.p) lm_gbnf_buf_put(b, m.p, m.n);
            lm_gbnf_buf_puts(b, ")");
            n += k;
        }
        if (m.nomem) b->nomem = true;
        free(m.p);
    }
    lm_gbnf_buf_puts(b, ")");
    return n > 0;
}
