// Start-up guard: a binary built with -march=native on one machine refuses, with one line
// naming the missing features, to run on a CPU that lacks them, instead of dying on SIGILL.
// Compiled for the x86-64 baseline (CMakeLists.txt) so it can itself run anywhere.
#include "base/cpu_check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
// The whole point of this file: fail the build rather than check the CPU with the very
// instructions being checked for (explicit -m flags survive a later -march=x86-64).
#if defined(__SSE3__) || defined(__SSSE3__) || defined(__AVX__) || defined(__BMI__) ||            \
    defined(__BMI2__) || defined(__LZCNT__) || defined(__POPCNT__) || defined(__MOVBE__)
#error "cpu_check.c must be compiled for the x86-64 baseline (see CMakeLists.txt)"
#endif
#endif

extern const char lm_cpu_required_list[]; // cpu_required.c: "+sse3+ssse3+..." or ""

// ---------------------------------------------------------------- feature table (cpuid)
// cpuid straight, not __builtin_cpu_supports: clang 14 accepts neither f16c, lzcnt, movbe nor
// avxvnni there, and GCC 12's f16c answer is wrong on some CPUs (kernels/kernels.c). Bits from the
// Intel SDM / AMD APM; tests/test_base_cpu_check.c compares them with /proc/cpuinfo.

enum { REG_EAX, REG_EBX, REG_ECX, REG_EDX };
enum { XS_NONE, XS_AVX, XS_AVX512, XS_AMX }; // register state the OS must save (XCR0)

struct lm_cpu_feature {
    const char *name;
    unsigned leaf, sub;
    unsigned char reg, bit, xstate;
};

static const struct lm_cpu_feature k_features[] = {
    {"sse3", 1, 0, REG_ECX, 0, XS_NONE},
    {"pclmul", 1, 0, REG_ECX, 1, XS_NONE},
    {"ssse3", 1, 0, REG_ECX, 9, XS_NONE},
    {"fma", 1, 0, REG_ECX, 12, XS_AVX},
    {"cx16", 1, 0, REG_ECX, 13, XS_NONE},
    {"sse4.1", 1, 0, REG_ECX, 19, XS_NONE},
    {"sse4.2", 1, 0, REG_ECX, 20, XS_NONE},
    {"movbe", 1, 0, REG_ECX, 22, XS_NONE},
    {"popcnt", 1, 0, REG_ECX, 23, XS_NONE},
    {"aes", 1, 0, REG_ECX, 25, XS_NONE},
    {"xsave", 1, 0, REG_ECX, 26, XS_NONE},
    {"avx", 1, 0, REG_ECX, 28, XS_AVX},
    {"f16c", 1, 0, REG_ECX, 29, XS_AVX},
    {"rdrnd", 1, 0, REG_ECX, 30, XS_NONE},
    {"bmi", 7, 0, REG_EBX, 3, XS_NONE},
    {"avx2", 7, 0, REG_EBX, 5, XS_AVX},
    {"bmi2", 7, 0, REG_EBX, 8, XS_NONE},
    {"avx512f", 7, 0, REG_EBX, 16, XS_AVX512},
    {"avx512dq", 7, 0, REG_EBX, 17, XS_AVX512},
    {"rdseed", 7, 0, REG_EBX, 18, XS_NONE},
    {"adx", 7, 0, REG_EBX, 19, XS_NONE},
    {"avx512ifma", 7, 0, REG_EBX, 21, XS_AVX512},
    {"clflushopt", 7, 0, REG_EBX, 23, XS_NONE},
    {"clwb", 7, 0, REG_EBX, 24, XS_NONE},
    {"avx512pf", 7, 0, REG_EBX, 26, XS_AVX512},
    {"avx512er", 7, 0, REG_EBX, 27, XS_AVX512},
    {"avx512cd", 7, 0, REG_EBX, 28, XS_AVX512},
    {"sha", 7, 0, REG_EBX, 29, XS_NONE},
    {"avx512bw", 7, 0, REG_EBX, 30, XS_AVX512},
    {"avx512vl", 7, 0, REG_EBX, 31, XS_AVX512},
    {"avx512vbmi", 7, 0, REG_ECX, 1, XS_AVX512},
    {"avx512vbmi2", 7, 0, REG_ECX, 6, XS_AVX512},
    {"gfni", 7, 0, REG_ECX, 8, XS_NONE},
    {"vaes", 7, 0, REG_ECX, 9, XS_AVX},
    {"vpclmulqdq", 7, 0, REG_ECX, 10, XS_AVX},
    {"avx512vnni", 7, 0, REG_ECX, 11, XS_AVX512},
    {"avx512bitalg", 7, 0, REG_ECX, 12, XS_AVX512},
    {"avx512vpopcntdq", 7, 0, REG_ECX, 14, XS_AVX512},
    {"rdpid", 7, 0, REG_ECX, 22, XS_NONE},
    {"avx5124vnniw", 7, 0, REG_EDX, 2, XS_AVX512},
    {"avx5124fmaps", 7, 0, REG_EDX, 3, XS_AVX512},
    {"avx512vp2intersect", 7, 0, REG_EDX, 8, XS_AVX512},
    {"amx-bf16", 7, 0, REG_EDX, 22, XS_AMX},
    {"avx512fp16", 7, 0, REG_EDX, 23, XS_AVX512},
    {"amx-tile", 7, 0, REG_EDX, 24, XS_AMX},
    {"amx-int8", 7, 0, REG_EDX, 25, XS_AMX},
    {"avxvnni", 7, 1, REG_EAX, 4, XS_AVX},
    {"avx512bf16", 7, 1, REG_EAX, 5, XS_AVX512},
    {"xsaveopt", 0xd, 1, REG_EAX, 0, XS_NONE},
    {"xsavec", 0xd, 1, REG_EAX, 1, XS_NONE},
    {"xsaves", 0xd, 1, REG_EAX, 3, XS_NONE},
    {"sahf", 0x80000001u, 0, REG_ECX, 0, XS_NONE},
    {"lzcnt", 0x80000001u, 0, REG_ECX, 5, XS_NONE},
    {"sse4a", 0x80000001u, 0, REG_ECX, 6, XS_NONE},
    {"prfchw", 0x80000001u, 0, REG_ECX, 8, XS_NONE},
    {"xop", 0x80000001u, 0, REG_ECX, 11, XS_AVX},
    {"fma4", 0x80000001u, 0, REG_ECX, 16, XS_AVX},
    {"clzero", 0x80000008u, 0, REG_EBX, 0, XS_NONE},
};
#define N_FEATURES (sizeof k_features / sizeof k_features[0])

static const struct lm_cpu_feature *feature_find(const char *name, size_t len) {
    for (size_t i = 0; i < N_FEATURES; i++)
        if (strlen(k_features[i].name) == len && memcmp(k_features[i].name, name, len) == 0)
            return &k_features[i];
    return NULL;
}

#if defined(__x86_64__)
static int cpuid_bit(const struct lm_cpu_feature *f) {
    unsigned r[4] = {0, 0, 0, 0};
    // __get_cpuid_count checks the leaf against the highest supported (basic or extended)
    if (!__get_cpuid_count(f->leaf, f->sub, &r[0], &r[1], &r[2], &r[3])) return 0;
    if (f->leaf == 7 && f->sub > 0) {
        unsigned a, b, c, d; // leaf 7's EAX is its highest sub-leaf
        if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < f->sub) return 0;
    }
    return (r[f->reg] >> f->bit) & 1u;
}

// XCR0 bits the OS enabled (0 when it did not enable XSAVE for user code)
static unsigned long long os_xcr0(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0; // OSXSAVE
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static int feature_ok(const struct lm_cpu_feature *f) {
    if (!cpuid_bit(f)) return 0;
    const unsigned long long xcr0 = f->xstate == XS_NONE ? 0 : os_xcr0();
    switch (f->xstate) {
    case XS_AVX: return (xcr0 & 0x6) == 0x6;            // SSE + AVX (YMM) state
    case XS_AVX512: return (xcr0 & 0xe6) == 0xe6;       // + opmask, ZMM0-15 high, ZMM16-31
    case XS_AMX: return (xcr0 & 0x60000) == 0x60000;    // TILECFG + TILEDATA
    default: return 1;
    }
}
#else
static int feature_ok(const struct lm_cpu_feature *f) { return 1; } // nothing to check off x86
#endif

// ---------------------------------------------------------------- checking

const char *lm_cpu_required(void) {
    return lm_cpu_required_list[0] == '+' ? lm_cpu_required_list + 1 : lm_cpu_required_list;
}

int lm_cpu_has(const char *name) {
    const struct lm_cpu_feature *f = feature_find(name, strlen(name));
    return f ? feature_ok(f) : -1;
}

static int is_sep(char c) { return c == '+' || c == ',' || c == ' ' || c == '\t'; }

// Appends s[0..len) to out (NUL-terminated, truncated at cap) at *pos.
static void put(char *out, size_t cap, size_t *pos, const char *s, size_t len) {
    if (cap == 0) return;
    for (size_t i = 0; i < len && *pos + 1 < cap; i++) out[(*pos)++] = s[i];
    out[*pos] = '\0';
}

int lm_cpu_missing_features(const char *required, char *out, size_t cap) {
    size_t pos = 0;
    int n = 0;
    if (cap) out[0] = '\0';
    for (const char *p = required ? required : ""; *p;) {
        while (*p && is_sep(*p)) p++;
        const char *s = p;
        while (*p && !is_sep(*p)) p++;
        const size_t len = (size_t)(p - s);
        if (len == 0) continue;
        const struct lm_cpu_feature *f = feature_find(s, len);
        if (f && feature_ok(f)) continue;
        if (n++) put(out, cap, &pos, ", ", 2);
        put(out, cap, &pos, s, len);
        if (!f) put(out, cap, &pos, " (unknown feature)", 18);
    }
    return n;
}

int lm_cpu_check_message(const char *required, const char *built_with, const char *advice,
                         char *out, size_t cap) {
    char missing[512];
    const int n = lm_cpu_missing_features(required, missing, sizeof missing);
    size_t pos = 0;
    if (cap) out[0] = '\0';
    if (n == 0) return 0;
    // "lumen: this CPU lacks a, b; this binary was built for x+y+a+b (built_with). advice."
    // The missing names first: the required list is long (~50 names for -march=native).
    const char *head[] = {"lumen: this CPU lacks ", missing, "; this binary was built for "};
    for (size_t i = 0; i < 3; i++) put(out, cap, &pos, head[i], strlen(head[i]));
    int k = 0;
    for (const char *p = required; *p;) { // the names again, joined with '+'
        while (*p && is_sep(*p)) p++;
        const char *s = p;
        while (*p && !is_sep(*p)) p++;
        if (p == s) continue;
        if (k++) put(out, cap, &pos, "+", 1);
        put(out, cap, &pos, s, (size_t)(p - s));
    }
    const char *tail[] = {" (", built_with, "). ", advice, "."};
    for (size_t i = 0; i < 5; i++) put(out, cap, &pos, tail[i], strlen(tail[i]));
    return n;
}

// ---------------------------------------------------------------- the start-up check

#ifndef LM_CPU_BUILT_WITH
#define LM_CPU_BUILT_WITH "the build's -march/-m flags"
#endif
#ifndef LM_CPU_ADVICE
#define LM_CPU_ADVICE "Rebuild on this machine"
#endif

static int g_done;

int lm_cpu_check_done(void) { return g_done; }

// Priority 101: the first user constructor, ahead of any (natively compiled) other one.
// This is the one place the library exits instead of returning a status: the process cannot
// run at all (the next natively compiled instruction may be an illegal one), and there is no
// caller yet to return to. _exit, not exit: no atexit handler or destructor (native code) runs.
__attribute__((constructor(101))) void lm_cpu_check_at_start(void) {
    g_done = 1;
    const char *extra = getenv("LUMEN_CPU_CHECK_EXTRA");
    const char *req = lm_cpu_required();
    char buf[1024];
    if (extra && extra[0]) {
        size_t pos = 0;
        put(buf, sizeof buf, &pos, req, strlen(req));
        if (req[0]) put(buf, sizeof buf, &pos, "+", 1);
        put(buf, sizeof buf, &pos, extra, strlen(extra));
        req = buf;
    }
    char msg[2048];
    if (lm_cpu_check_message(req, LM_CPU_BUILT_WITH, LM_CPU_ADVICE, msg, sizeof msg - 1) == 0)
        return;
    size_t len = strlen(msg);
    msg[len++] = '\n';
    if (write(2, msg, len) < 0) { /* nothing more to do */ }
    _exit(1);
}
