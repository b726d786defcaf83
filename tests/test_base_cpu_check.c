// The start-up CPU check (src/base/cpu_check.c): its cpuid table against /proc/cpuinfo and
// __builtin_cpu_supports, the required list, and the exact refusal line for a missing feature.
// LM_TEST_LABELS: unit
#include "base/cpu_check.h"
#include "lm_test.h"

// lumen's name (gcc -m spelling) -> the Linux /proc/cpuinfo flag for the same cpuid bit
static const char *k_names[][2] = {
    {"sse3", "pni"}, {"pclmul", "pclmulqdq"}, {"ssse3", "ssse3"}, {"fma", "fma"},
    {"cx16", "cx16"}, {"sse4.1", "sse4_1"}, {"sse4.2", "sse4_2"}, {"movbe", "movbe"},
    {"popcnt", "popcnt"}, {"aes", "aes"}, {"xsave", "xsave"}, {"avx", "avx"},
    {"f16c", "f16c"}, {"rdrnd", "rdrand"}, {"bmi", "bmi1"}, {"avx2", "avx2"},
    {"bmi2", "bmi2"}, {"avx512f", "avx512f"}, {"avx512dq", "avx512dq"}, {"rdseed", "rdseed"},
    {"adx", "adx"}, {"avx512ifma", "avx512ifma"}, {"clflushopt", "clflushopt"},
    {"clwb", "clwb"}, {"avx512pf", "avx512pf"}, {"avx512er", "avx512er"},
    {"avx512cd", "avx512cd"}, {"sha", "sha_ni"}, {"avx512bw", "avx512bw"},
    {"avx512vl", "avx512vl"}, {"avx512vbmi", "avx512vbmi"}, {"avx512vbmi2", "avx512_vbmi2"},
    {"gfni", "gfni"}, {"vaes", "vaes"}, {"vpclmulqdq", "vpclmulqdq"},
    {"avx512vnni", "avx512_vnni"}, {"avx512bitalg", "avx512_bitalg"},
    {"avx512vpopcntdq", "avx512_vpopcntdq"}, {"rdpid", "rdpid"},
    {"avx5124vnniw", "avx512_4vnniw"}, {"avx5124fmaps", "avx512_4fmaps"},
    {"avx512vp2intersect", "avx512_vp2intersect"}, {"amx-bf16", "amx_bf16"},
    {"avx512fp16", "avx512_fp16"}, {"amx-tile", "amx_tile"}, {"amx-int8", "amx_int8"},
    {"avxvnni", "avx_vnni"}, {"avx512bf16", "avx512_bf16"}, {"xsaveopt", "xsaveopt"},
    {"xsavec", "xsavec"}, {"xsaves", "xsaves"}, {"sahf", "lahf_lm"}, {"lzcnt", "abm"},
    {"sse4a", "sse4a"}, {"prfchw", "3dnowprefetch"}, {"xop", "xop"}, {"fma4", "fma4"},
    {"clzero", "clzero"},
};
#define N_NAMES (sizeof k_names / sizeof k_names[0])

// The first "flags" line of /proc/cpuinfo as " f1 f2 ... fn " (each flag between spaces), or NULL.
static const char *cpuinfo_flags(void) {
    static char line[16384], flags[16384];
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return NULL;
    const char *res = NULL;
    while (!res && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "flags", 5) != 0 || !colon) continue;
        line[strcspn(line, "\n")] = '\0';
        snprintf(flags, sizeof flags, "%s ", colon + 1); // colon + 1 starts with ' '
        res = flags;
    }
    fclose(f);
    return res;
}

static int has_flag(const char *flags, const char *name) {
    char pat[64];
    snprintf(pat, sizeof pat, " %s ", name);
    return strstr(flags, pat) != NULL;
}

static void test_table_vs_cpuinfo(void) {
#if defined(__x86_64__)
    const char *flags = cpuinfo_flags();
    if (!flags) {
        printf("no /proc/cpuinfo flags: table check skipped\n");
        return;
    }
    for (size_t i = 0; i < N_NAMES; i++) {
        const int want = has_flag(flags, k_names[i][1]);
        const int got = lm_cpu_has(k_names[i][0]);
        // The kernel hides a flag whose instruction misbehaves (it still executes): Linux
        // clears rdseed on AMD Zen 5 with old microcode, as on the machine this was written on.
        if (got == 1 && !want && strcmp(k_names[i][0], "rdseed") == 0) {
            printf("note: cpuid has rdseed, the kernel hides it (an erratum)\n");
            continue;
        }
        CHECKF(got == want, "%s: lm_cpu_has %d, /proc/cpuinfo '%s' %d", k_names[i][0], got,
               k_names[i][1], want);
    }
#endif
}

// The names both gcc 12 and clang 14 accept in __builtin_cpu_supports (f16c left out: GCC 12
// gets it wrong on some CPUs, kernels/kernels.c).
#define BUILTIN_NAMES(X)                                                                      \
    X("sse3") X("ssse3") X("sse4.1") X("sse4.2") X("popcnt") X("avx") X("avx2") X("fma")      \
    X("bmi") X("bmi2") X("aes") X("pclmul") X("sse4a") X("fma4") X("xop") X("avx512f")        \
    X("avx512cd") X("avx512dq") X("avx512bw") X("avx512vl") X("avx512ifma") X("avx512vbmi")   \
    X("avx512vbmi2") X("avx512vnni") X("avx512bitalg") X("avx512vpopcntdq") X("avx512bf16")   \
    X("avx512vp2intersect") X("gfni") X("vpclmulqdq") X("avx512er") X("avx512pf")            \
    X("avx5124vnniw") X("avx5124fmaps")

static void test_table_vs_builtin(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
#define X(n) CHECKF(lm_cpu_has(n) == (__builtin_cpu_supports(n) != 0), "%s: lm_cpu_has %d", n, lm_cpu_has(n));
    BUILTIN_NAMES(X)
#undef X
#endif
}

static void test_required(void) {
    CHECK(lm_cpu_check_done() == 1); // the constructor ran before main
    const char *req = lm_cpu_required();
    printf("required: %s\n", req[0] ? req : "(none: baseline build)");
    char out[512];
    CHECK(lm_cpu_missing_features(req, out, sizeof out) == 0); // we are running, after all
    CHECK(out[0] == '\0');
    CHECK(lm_cpu_check_message(req, "x", "y", out, sizeof out) == 0 && out[0] == '\0');
#if defined(__x86_64__) && defined(__AVX2__)
    CHECK(strstr(req, "avx2") != NULL);
#endif

    // every name cpu_required.c can emit is one the table knows
    FILE *f = fopen(lm_test_path("src/base/cpu_required.c"), "r");
    CHECK(f != NULL);
    int n = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        char name[64];
        if (sscanf(line, " \"+%63[^\"]\"", name) != 1) continue;
        n++;
        CHECKF(lm_cpu_has(name) >= 0, "cpu_required.c names '%s', which cpu_check.c does not know", name);
    }
    if (f) fclose(f);
    CHECK(n > 40);
}

static void test_parsing(void) {
    char out[512];
    CHECK(lm_cpu_has("bogus") == -1);
    CHECK(lm_cpu_missing_features("", out, sizeof out) == 0 && out[0] == '\0');
    CHECK(lm_cpu_missing_features(NULL, out, sizeof out) == 0);
    CHECK(lm_cpu_missing_features(" ,+ ", out, sizeof out) == 0);
    CHECK(lm_cpu_missing_features("bogus+avx512nope", out, sizeof out) == 2);
    CHECK(strcmp(out, "bogus (unknown feature), avx512nope (unknown feature)") == 0);
    // truncation never overflows and keeps a terminator
    char small[8];
    memset(small, 'x', sizeof small);
    CHECK(lm_cpu_missing_features("bogus+bogus2", small, sizeof small) == 2);
    CHECK(strlen(small) == sizeof small - 1 && strncmp(small, "bogus (", 7) == 0);
    CHECK(lm_cpu_missing_features("bogus", small, 0) == 1);
    CHECK(lm_cpu_check_message("bogus", "b", "a", small, 0) == 1);
}

static void test_message(void) {
    // a real feature this CPU lacks (AVX-512 FP16 and AMX are absent on most x86 machines)
    const char *cand[] = {"avx512fp16", "amx-tile", "avx5124vnniw", "avx512er", "fma4", "xop"};
    const char *absent = NULL;
    for (size_t i = 0; i < sizeof cand / sizeof cand[0] && !absent; i++)
        if (lm_cpu_has(cand[i]) == 0) absent = cand[i];
    if (!absent) {
        printf("every candidate feature present: message check on an unknown name only\n");
        absent = "bogus";
    }
    char req[256], out[1024], want[1024];
    snprintf(req, sizeof req, "sse3, %s +sse4.1", absent);
    const char *unk = strcmp(absent, "bogus") == 0 ? " (unknown feature)" : "";
    const int n = lm_cpu_check_message(req, "-march=native on the build machine",
                                       "Rebuild on this machine", out, sizeof out);
    CHECK(n == 1);
    snprintf(want, sizeof want,
             "lumen: this CPU lacks %s%s; this binary was built for sse3+%s+sse4.1 "
             "(-march=native on the build machine). Rebuild on this machine.",
             absent, unk, absent);
    CHECKF(strcmp(out, want) == 0, "\n got: %s\nwant: %s", out, want);
    CHECK(strchr(out, '\n') == NULL);
    printf("message: %s\n", out);
}

int main(void) {
    test_table_vs_cpuinfo();
    test_table_vs_builtin();
    test_required();
    test_parsing();
    test_message();
    return lm_test_finish();
}
