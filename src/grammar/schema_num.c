// Numeric bounds of JSON Schema -> GBNF: decimal integer ranges as digit-by-digit
// alternatives (no leading zeros), and numbers as integer-part ranges times fraction kinds,
// so minimum/maximum/exclusive* hold exactly for every sentence.
#include "grammar/schema.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP_16 9999999999999999ull // the widest integer part of an unbounded side

static void put_digits(struct lm_strbuf *b, char lo, char hi) {
    if (lo == hi) lm_strbuf_printf(b, "\"%c\"", lo);
    else if (lo == '0' && hi == '9') lm_strbuf_puts(b, "[0-9]");
    else lm_strbuf_printf(b, "[%c-%c]", lo, hi);
}

static bool all_of(const char *s, int n, char c) {
    for (int i = 0; i < n; i++)
        if (s[i] != c) return false;
    return true;
}

static void put_any(struct lm_strbuf *b, int n) {
    if (n == 1) lm_strbuf_puts(b, " [0-9]");
    else if (n > 1) lm_strbuf_printf(b, " [0-9]{%d}", n);
}

// Digit strings of length n from a to b (same length, a <= b).
static void same_len(struct lm_strbuf *b, const char *lo, const char *hi, int n) {
    int i = 0;
    while (i < n && lo[i] == hi[i]) i++;
    if (i) lm_strbuf_put(b, "\"", 1), lm_strbuf_put(b, lo, (size_t)i), lm_strbuf_put(b, "\"", 1);
    if (i == n) return;
    if (i) lm_strbuf_puts(b, " ");
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
    lm_strbuf_puts(b, "(");
    char first = a[0];
    if (all_of(a + 1, k - 1, '0')) { // a[0]... covers the whole block: merge into the middle
        first = (char)(a[0] - 1);
    } else {
        put_digits(b, a[0], a[0]);
        lm_strbuf_puts(b, " ");
        same_len(b, a + 1, nines, k - 1);
    }
    char last = z[0];
    if (all_of(z + 1, k - 1, '9')) last = (char)(z[0] + 1);
    if (first + 1 <= last - 1) {
        if (first != (char)(a[0] - 1)) lm_strbuf_puts(b, " | ");
        put_digits(b, (char)(first + 1), (char)(last - 1));
        put_any(b, k - 1);
    }
    if (last == z[0]) {
        if (first != (char)(a[0] - 1) || first + 1 <= last - 1) lm_strbuf_puts(b, " | ");
        put_digits(b, z[0], z[0]);
        lm_strbuf_puts(b, " ");
        same_len(b, zeros, z + 1, k - 1);
    }
    lm_strbuf_puts(b, ")");
}

static int n_digits(uint64_t v) {
    int n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

// Canonical decimals in [lo, hi] as one parenthesized group.
static void uint_range(struct lm_strbuf *b, uint64_t lo, uint64_t hi) {
    lm_strbuf_puts(b, "(");
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
            if (!first) lm_strbuf_puts(b, " | ");
            first = 0;
            same_len(b, sa, sz, n_digits(a));
        }
        if (bhi >= hi || n == 20) break;
        p *= 10;
    }
    lm_strbuf_puts(b, ")");
}

// ---------------------------------------------------------------- fractions

// Digit strings f (the fraction 0.f) between optional decimal bounds lo and hi (digits after
// the point; "" is 0), each inclusive or strict. The bounds are walked digit by digit, an
// exhausted bound reading as zeros.
static bool frac_empty_ok(const char *lo, bool ls, const char *hi, bool hs) {
    if (lo && !(lo[strspn(lo, "0")] == 0 && !ls)) return false; // 0 >= lo (0 > lo) fails
    if (hi && hi[strspn(hi, "0")] == 0 && hs) return false;     // 0 < 0
    return true;
}

static bool frac_nonempty(struct lm_strbuf *b, const char *lo, bool ls, const char *hi, bool hs);

// The rest after one digit: empty allowed or not, then the nonempty strings. False: none.
static bool frac_rest(struct lm_strbuf *b, const char *lo, bool ls, const char *hi, bool hs) {
    struct lm_strbuf t = {0};
    bool e = frac_empty_ok(lo, ls, hi, hs), n = frac_nonempty(&t, lo, ls, hi, hs);
    if (n) {
        lm_strbuf_puts(b, e ? " (" : " ");
        if (t.p) lm_strbuf_put(b, t.p, t.n);
        if (e) lm_strbuf_puts(b, ")?");
    }
    if (t.nomem) b->nomem = true;
    free(t.p);
    return e || n;
}

static bool frac_nonempty(struct lm_strbuf *b, const char *lo, bool ls, const char *hi, bool hs) {
    if (lo && lo[strspn(lo, "0")] == 0 && !ls) lo = NULL; // >= 0: no bound
    bool lo_end = lo && !*lo, hi_end = hi && !*hi;
    if (!lo && !hi) return lm_strbuf_puts(b, "[0-9]{1,16}"), true;
    if (lo_end && !hi) return lm_strbuf_puts(b, "\"0\"{0,15} [1-9] [0-9]{0,15}"), true; // > 0
    if (hi_end && !hs && !lo) return lm_strbuf_puts(b, "\"0\"{1,16}"), true;            // <= 0
    if (hi_end && (hs || lo_end)) return false; // < 0, or > 0 and <= 0
    char l1 = lo ? (lo_end ? '0' : lo[0]) : 0, h1 = hi ? (hi_end ? '0' : hi[0]) : 0;
    const char *lr = lo ? (lo_end ? lo : lo + 1) : NULL, *hr = hi ? (hi_end ? hi : hi + 1) : NULL;
    char a = lo ? (char)(l1 + 1) : '0', z = hi ? (char)(h1 - 1) : '9';
    bool any = false;
    lm_strbuf_puts(b, "(");
    if (a <= z) {
        put_digits(b, a, z);
        lm_strbuf_puts(b, " [0-9]{0,15}");
        any = true;
    }
    struct lm_strbuf t = {0};
    if (lo && hi && l1 == h1) {
        if (frac_rest(&t, lr, ls, hr, hs)) {
            if (any) lm_strbuf_puts(b, " | ");
            lm_strbuf_printf(b, "\"%c\"", l1);
            if (t.p) lm_strbuf_put(b, t.p, t.n);
            any = true;
        }
    } else if (!(lo && hi && l1 > h1)) {
        if (lo && frac_rest(&t, lr, ls, NULL, false)) {
            if (any) lm_strbuf_puts(b, " | ");
            lm_strbuf_printf(b, "\"%c\"", l1);
            if (t.p) lm_strbuf_put(b, t.p, t.n);
            any = true;
        }
        t.n = 0;
        if (hi && frac_rest(&t, NULL, false, hr, hs)) {
            if (any) lm_strbuf_puts(b, " | ");
            lm_strbuf_printf(b, "\"%c\"", h1);
            if (t.p) lm_strbuf_put(b, t.p, t.n);
            any = true;
        }
    }
    if (t.nomem) b->nomem = true;
    free(t.p);
    lm_strbuf_puts(b, ")");
    return any;
}

// ---------------------------------------------------------------- magnitudes

// A magnitude M = I.F >= 0: pieces of integer-part ranges, each with bounds on its fraction
// (only at the integer part of a bound).
struct piece {
    uint64_t lo, hi;
    const char *flo, *fhi; // fraction bounds (NULL: none)
    bool fls, fhs;         // strict
};

static uint64_t mag_of_neg(int64_t v) { return (uint64_t)(-(v + 1)) + 1; } // -v for v < 0

static bool magnitude(struct lm_strbuf *b, const struct lm_dec *lo, bool lo_excl,
                      const struct lm_dec *hi, bool hi_excl, bool integer, int *n_alt) {
    uint64_t cap = CAP_16;
    if (lo && lo->ip >= cap) cap = lo->ip + 1;
    if (hi && hi->ip > cap) cap = hi->ip;
    struct piece L[2], U[2], out[4];
    int nl = 0, nu = 0, n = 0;
    if (!lo) L[nl++] = (struct piece){0, cap, NULL, NULL, false, false};
    else if (!lo->frac[0] && !lo_excl) L[nl++] = (struct piece){lo->ip, cap, NULL, NULL, false, false};
    else {
        L[nl++] = (struct piece){lo->ip + 1, cap, NULL, NULL, false, false};
        L[nl++] = (struct piece){lo->ip, lo->ip, lo->frac, NULL, lo_excl, false};
    }
    if (!hi) U[nu++] = (struct piece){0, cap, NULL, NULL, false, false};
    else {
        if (hi->ip >= 1) U[nu++] = (struct piece){0, hi->ip - 1, NULL, NULL, false, false};
        U[nu++] = (struct piece){hi->ip, hi->ip, NULL, hi->frac, false, hi_excl};
    }
    for (int i = 0; i < nl; i++)
        for (int j = 0; j < nu; j++) {
            struct piece p = {L[i].lo > U[j].lo ? L[i].lo : U[j].lo, L[i].hi < U[j].hi ? L[i].hi : U[j].hi,
                              L[i].flo, U[j].fhi, L[i].fls, U[j].fhs};
            if (p.lo > p.hi) continue;
            if (integer) { // no fraction: the piece holds iff 0 satisfies its fraction bounds
                if (!frac_empty_ok(p.flo, p.fls, p.fhi, p.fhs)) continue;
                p.flo = p.fhi = NULL;
            }
            out[n++] = p;
        }
    // integers: adjacent ranges join into one
    for (int i = 0; integer && i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j && out[j].lo <= out[i].hi + 1 && out[j].hi >= out[i].lo) {
                if (out[j].lo < out[i].lo) out[i].lo = out[j].lo;
                if (out[j].hi > out[i].hi) out[i].hi = out[j].hi;
                out[j] = out[--n];
                j = -1;
            }
    bool any = false;
    for (int i = 0; i < n; i++) {
        struct lm_strbuf f = {0};
        bool e = true, ne = false;
        if (!integer) {
            e = frac_empty_ok(out[i].flo, out[i].fls, out[i].fhi, out[i].fhs);
            ne = frac_nonempty(&f, out[i].flo, out[i].fls, out[i].fhi, out[i].fhs);
        }
        if (e || ne) {
            if ((*n_alt)++) lm_strbuf_puts(b, " | ");
            uint_range(b, out[i].lo, out[i].hi);
            if (ne) {
                lm_strbuf_puts(b, e ? " (\".\" " : " \".\" ");
                if (f.p) lm_strbuf_put(b, f.p, f.n);
                if (e) lm_strbuf_puts(b, ")?");
            }
            any = true;
        }
        if (f.nomem) b->nomem = true;
        free(f.p);
    }
    return any;
}

static bool dec_is_zero(const struct lm_dec *d) { return d->ip == 0 && !d->frac[0]; }

bool lm_schema_emit_number(struct lm_strbuf *b, const struct lm_num_bounds *nb, bool integer) {
    lm_strbuf_puts(b, "(");
    int n = 0;
    const struct lm_dec *lo = nb->has_lo ? &nb->lo : NULL, *hi = nb->has_hi ? &nb->hi : NULL;
    // x >= 0, written without a sign: exists unless hi < 0 or x < 0
    bool pos = !hi || (!hi->neg && !(dec_is_zero(hi) && nb->hi_excl)) || (dec_is_zero(hi) && !nb->hi_excl);
    if (pos) {
        bool lo_on = lo && !lo->neg && !(dec_is_zero(lo) && !nb->lo_excl);
        magnitude(b, lo_on ? lo : NULL, nb->lo_excl, hi, nb->hi_excl, integer, &n);
    }
    // x < 0: "-" M with M > 0 (never "-0"); M <= -lo, M >= -hi when hi < 0
    bool neg = !lo || (lo->neg && !dec_is_zero(lo));
    if (neg) {
        struct lm_strbuf m = {0};
        struct lm_dec mlo = {0}, mhi;
        bool hi_on = hi && hi->neg && !dec_is_zero(hi);
        if (hi_on) mlo = *hi, mlo.neg = false;
        if (lo) mhi = *lo, mhi.neg = false;
        int k = 0;
        magnitude(&m, &mlo, hi_on ? nb->hi_excl : true, lo ? &mhi : NULL, nb->lo_excl, integer, &k);
        if (k) {
            if (n) lm_strbuf_puts(b, " | ");
            lm_strbuf_puts(b, "\"-\" (");
            if (m.p) lm_strbuf_put(b, m.p, m.n);
            lm_strbuf_puts(b, ")");
            n += k;
        }
        if (m.nomem) b->nomem = true;
        free(m.p);
    }
    lm_strbuf_puts(b, ")");
    (void)mag_of_neg;
    return n > 0;
}

void lm_dec_from_int(struct lm_dec *d, int64_t v) {
    d->neg = v < 0;
    d->ip = v < 0 ? mag_of_neg(v) : (uint64_t)v;
    d->frac[0] = 0;
}

// d (finite, |d| < 9.2e18) as mantissa digits m (n of them) times 10^(e - n + 1) -> lm_dec.
// False when the fraction needs more digits than lm_dec holds.
static bool dec_from_digits(struct lm_dec *out, bool neg, const char *m, int n, int e) {
    out->neg = neg;
    out->ip = 0;
    int n_int = e + 1; // digits before the point
    size_t k = 0;
    for (int i = 0; i < n_int; i++) out->ip = out->ip * 10 + (uint64_t)(i < n ? m[i] - '0' : 0);
    for (int i = n_int < 0 ? n_int : 0; i < 0; i++) {
        if (k + 1 >= sizeof out->frac) return false;
        out->frac[k++] = '0';
    }
    for (int i = n_int > 0 ? n_int : 0; i < n; i++) {
        if (k + 1 >= sizeof out->frac) return false;
        out->frac[k++] = m[i];
    }
    while (k && out->frac[k - 1] == '0') k--;
    out->frac[k] = 0;
    if (out->ip == 0 && k == 0) out->neg = false;
    return true;
}

// "%.*e" of d: mantissa digits into m, returns the count; *e the exponent.
static int sci_digits(double d, int prec, char *m, int *e) {
    char t[64];
    snprintf(t, sizeof t, "%.*e", prec - 1, fabs(d));
    int n = 0;
    const char *p = t;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') m[n++] = *p;
    *e = atoi(p + 1);
    return n;
}

bool lm_dec_from_double(struct lm_dec *out, double d) {
    char m[24];
    int e = 0, n = 0;
    for (int prec = 1; prec <= 17; prec++) { // the shortest digits that read back as d
        n = sci_digits(d, prec, m, &e);
        char t[64];
        snprintf(t, sizeof t, "%.*se%d", n, m, e - n + 1);
        if (strtod(t, NULL) == fabs(d)) break;
    }
    return dec_from_digits(out, d < 0, m, n, e);
}

bool lm_dec_beyond(struct lm_dec *out, double d, bool above) {
    char m[24];
    int e, n = sci_digits(d, 15, m, &e);
    char t[64];
    snprintf(t, sizeof t, "%s%.*se%d", d < 0 ? "-" : "", n, m, e - n + 1);
    double v = strtod(t, NULL);
    if (above ? v <= d : v >= d) {
        // one unit in the 15th digit, in magnitude: up when moving away from zero
        bool up = above == (d > 0);
        int i = n - 1;
        if (up) {
            while (i >= 0 && m[i] == '9') m[i--] = '0';
            if (i < 0) { // 999.. -> 1000..: one more digit before the point
                memmove(m + 1, m, (size_t)n);
                m[0] = '1';
                n++;
                e++;
            } else {
                m[i]++;
            }
        } else {
            while (i >= 0 && m[i] == '0') m[i--] = '9';
            if (i >= 0) m[i]--;
        }
    }
    return dec_from_digits(out, d < 0, m, n, e);
}
