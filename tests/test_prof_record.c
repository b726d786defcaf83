// Profiler recording and writers: a synthetic forward pass on a 2-thread pool records
// phases, ops, barriers, matmuls, variants and memory; the summary, the JSONL (every
// line checked against the documented schema, then read back by the analyzer) and the
// Perfetto file (valid JSON, complete events, strict nesting per thread) are checked.
// Synthetic engine steps (lm_prof_step around the phases, as lm_engine_step records
// them) give step events whose ops carry the step index, and the analyzer's step rows.
// LM_TEST_LABELS: unit
#include <stdint.h>
#include <unistd.h>

#include "base/threadpool.h"
#include "lm_test.h"
#include "lm_test_file.h"
#include "prof/prof.h"
#include "report/report.h"

#define N_LAYERS 3
#define N_STEPS 5
#define N_PROMPT 7

// ============================================================================
// synthetic forward pass
// ============================================================================

static const enum lm_prof_op k_layer_ops[] = {
    LM_OP_ATTN_NORM, LM_OP_QKV, LM_OP_ROPE, LM_OP_ATTENTION, LM_OP_O_PROJ,
    LM_OP_FFN_NORM, LM_OP_GATE_UP, LM_OP_ACTIVATION, LM_OP_DOWN, LM_OP_FFN_RESIDUAL,
};
#define N_LOPS (int)(sizeof k_layer_ops / sizeof k_layer_ops[0])

// Sizes of run_generation (the demo mode enlarges them).
static int g_layers = N_LAYERS, g_steps = N_STEPS, g_jitter = 0;

struct fwd {
    struct lm_pool *pool;
    int n_tokens, step;
    volatile double sink;
};

static void spin(struct fwd *f, int iters) {
    double x = 1;
    for (int i = 0; i < iters; i++) x = x * 1.0000001 + 1e-9;
    f->sink = x;
}

static void matmul(enum lm_prof_op op, int layer, int64_t m, int64_t k, int n, uint64_t t0,
                   uint64_t t1) {
    char name[64];
    snprintf(name, sizeof name, "blk.%d.%s.weight", layer, lm_prof_op_name(op));
    struct lm_prof_matmul mm = {.op = op, .layer = layer, .weight = name, .m = m, .n = n,
                                .k = k, .wtype = LM_DTYPE_Q4_K, .variant = "q4_K_avx2",
                                .reason = "cpu_feature avx2",
                                .bytes = (uint64_t)(m * k / 256 * 144 + k * n * 4),
                                .flops = (uint64_t)(2 * m * n * k)};
    lm_prof_matmul_shape(&mm, t0, t1);
}

static void forward(void *arg, int ith, int nth) {
    struct fwd *f = arg;
    (void)nth;
    if (ith == 0) {
        uint64_t t0 = lm_prof_ticks();
        spin(f, 200);
        lm_prof_op(0, LM_OP_EMBED, -1, t0, lm_prof_ticks());
    }
    lm_pool_barrier(f->pool);
    for (int l = 0; l < g_layers; l++) {
        for (int o = 0; o < N_LOPS; o++) {
            enum lm_prof_op op = k_layer_ops[o];
            uint64_t t0 = lm_prof_ticks();
            int work = 300 + 200 * ith + 50 * o;
            if (g_jitter) // demo: matmuls dominate, scale with tokens, occasional slow steps
                work = (op == LM_OP_GATE_UP || op == LM_OP_DOWN ? 6000 : op == LM_OP_QKV ||
                        op == LM_OP_O_PROJ ? 3000 : op == LM_OP_ATTENTION ? 1500 : 400) *
                       (f->n_tokens > 1 ? 4 : 1) * (f->step % 23 == 7 ? 3 : 1) + 300 * ith +
                       (f->step * 37 + l * 11 + o) % 200;
            spin(f, work);
            uint64_t t1 = lm_prof_ticks();
            if (ith == 0 && (op == LM_OP_QKV || op == LM_OP_O_PROJ || op == LM_OP_GATE_UP ||
                             op == LM_OP_DOWN))
                matmul(op, l, op == LM_OP_GATE_UP ? 4096 : 640, op == LM_OP_DOWN ? 2048 : 640,
                       f->n_tokens, t0, t1);
            lm_prof_op(ith, op, l, t0, t1);
            uint64_t b0 = lm_prof_ticks();
            lm_pool_barrier(f->pool);
            lm_prof_barrier(ith, op, l, b0, lm_prof_ticks());
        }
    }
    if (ith == 0) {
        uint64_t t0 = lm_prof_ticks();
        spin(f, 200);
        lm_prof_op(0, LM_OP_OUTPUT_NORM, -1, t0, lm_prof_ticks());
        t0 = lm_prof_ticks();
        spin(f, 500);
        uint64_t t1 = lm_prof_ticks();
        matmul(LM_OP_LM_HEAD, -1, 262144, 640, 1, t0, t1);
        lm_prof_op(0, LM_OP_LM_HEAD, -1, t0, t1);
    }
}

static void run_generation(struct lm_pool *pool) {
    struct fwd f = {.pool = pool};
    lm_prof_variant("dot_q4_K", "avx2", "cpu_feature avx2");
    struct lm_prof_memory mem = {.weights_mapped = 200u << 20, .kv_cache = 3u << 20,
                                 .scratch = 1u << 20};
    lm_prof_read_rss(&mem.rss, &mem.rss_peak);
    lm_prof_memory(&mem);
    uint64_t t0 = lm_prof_phase_begin(LM_PHASE_PREFILL);
    f.n_tokens = N_PROMPT;
    f.step = -1;
    lm_pool_run(pool, forward, &f);
    lm_prof_phase(LM_PHASE_PREFILL, t0, lm_prof_ticks(), -1, N_PROMPT);
    for (int s = 0; s < g_steps; s++) {
        t0 = lm_prof_phase_begin(LM_PHASE_DECODE);
        f.n_tokens = 1;
        f.step = s;
        lm_pool_run(pool, forward, &f);
        lm_prof_phase(LM_PHASE_DECODE, t0, lm_prof_ticks(), s, 1);
        t0 = lm_prof_phase_begin(LM_PHASE_SAMPLE);
        spin(&f, 100);
        lm_prof_phase(LM_PHASE_SAMPLE, t0, lm_prof_ticks(), s, 1);
    }
    mem.kv_cache = 4u << 20;
    lm_prof_memory(&mem);
}

// Engine steps as lm_engine_step records them: step 0 prefills two prompts (5 + 2
// tokens), steps 1..3 decode both sequences (step 3 also verifies 4 drafts, 3 accepted),
// step 4 decodes one and prefills a third prompt of 3 tokens. Each: step span > forward phase (prefill if any prefill token) +
// sample phase, with the phases' step = the engine step index.
#define ENG_STEPS 5
static const struct lm_prof_step k_eng[ENG_STEPS] = {
    {0, 7, 0, 2, 0, 0}, {1, 2, 2, 2, 0, 0}, {2, 2, 2, 2, 0, 0}, {3, 6, 2, 2, 4, 3}, {4, 4, 1, 2, 0, 0},
};

static void run_engine_steps(struct lm_pool *pool) {
    struct fwd f = {.pool = pool};
    for (int s = 0; s < ENG_STEPS; s++) {
        const struct lm_prof_step *st = &k_eng[s];
        const uint64_t t_step = lm_prof_ticks();
        const enum lm_prof_phase ph = st->n_decode + st->n_draft == st->n_tokens ? LM_PHASE_DECODE
                                                                                  : LM_PHASE_PREFILL;
        uint64_t t0 = lm_prof_phase_begin(ph);
        f.n_tokens = st->n_tokens;
        f.step = s;
        lm_pool_run(pool, forward, &f);
        lm_prof_phase(ph, t0, lm_prof_ticks(), s, st->n_tokens);
        t0 = lm_prof_phase_begin(LM_PHASE_SAMPLE);
        spin(&f, 100);
        const uint64_t t1 = lm_prof_ticks();
        lm_prof_phase(LM_PHASE_SAMPLE, t0, t1, s, st->n_seqs);
        lm_prof_step(st, t_step, t1);
    }
}

// events of one generation: per forward, per thread N_LAYERS*N_LOPS ops + barriers,
// thread 0 also embed, output_norm, lm_head and 4 matmuls per layer + lm_head matmul
#define N_FWD (1 + N_STEPS)
#define EV_OPS (N_FWD * (2 * N_LAYERS * N_LOPS + 3))
#define EV_BARRIERS (N_FWD * 2 * N_LAYERS * N_LOPS)
#define EV_MATMULS (N_FWD * (4 * N_LAYERS + 1))
#define EV_PHASES (1 + 2 * N_STEPS)

// ============================================================================
// tiny JSON reader for the Perfetto file: validates syntax, collects X events
// ============================================================================

struct xev {
    int tid;
    double ts, dur;
    char ph;
};

struct jr {
    const char *p;
    bool ok;
    // current object being scanned at depth 2 (inside traceEvents)
    struct xev cur;
    struct xev *out;
    int n, cap;
};

static void ws(struct jr *j) {
    while (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r') j->p++;
}
static void jvalue(struct jr *j, int depth, const char *key);
static void jstring(struct jr *j, char *buf, size_t n) {
    if (*j->p != '"') {
        j->ok = false;
        return;
    }
    j->p++;
    size_t o = 0;
    while (*j->p && *j->p != '"') {
        if (*j->p == '\\') j->p++;
        if (!*j->p) break;
        if (buf && o + 1 < n) buf[o++] = *j->p;
        j->p++;
    }
    if (buf) buf[o] = 0;
    if (*j->p != '"') j->ok = false;
    else j->p++;
}
static void jvalue(struct jr *j, int depth, const char *key) {
    ws(j);
    if (!j->ok) return;
    if (*j->p == '{') {
        j->p++;
        bool ev = depth == 2;
        if (ev) j->cur = (struct xev){.tid = -1, .ts = -1, .dur = -1, .ph = 0};
        ws(j);
        if (*j->p == '}') j->p++;
        else
            for (;;) {
                char k[64];
                ws(j);
                jstring(j, k, sizeof k);
                ws(j);
                if (*j->p != ':') { j->ok = false; return; }
                j->p++;
                jvalue(j, depth + 1, k);
                if (!j->ok) return;
                ws(j);
                if (*j->p == ',') { j->p++; continue; }
                if (*j->p == '}') { j->p++; break; }
                j->ok = false;
                return;
            }
        if (ev && j->n < j->cap) j->out[j->n++] = j->cur;
    } else if (*j->p == '[') {
        j->p++;
        ws(j);
        if (*j->p == ']') { j->p++; return; }
        for (;;) {
            jvalue(j, depth + 1, NULL);
            if (!j->ok) return;
            ws(j);
            if (*j->p == ',') { j->p++; continue; }
            if (*j->p == ']') { j->p++; break; }
            j->ok = false;
            return;
        }
    } else if (*j->p == '"') {
        char v[128];
        jstring(j, v, sizeof v);
        if (depth == 3 && key && !strcmp(key, "ph")) j->cur.ph = v[0];
    } else {
        char *end;
        double v = strtod(j->p, &end);
        if (end == j->p) {
            if (!strncmp(j->p, "true", 4)) end = (char *)j->p + 4;
            else if (!strncmp(j->p, "false", 5)) end = (char *)j->p + 5;
            else if (!strncmp(j->p, "null", 4)) end = (char *)j->p + 4;
            else { j->ok = false; return; }
        }
        j->p = end;
        if (depth == 3 && key) {
            if (!strcmp(key, "tid")) j->cur.tid = (int)v;
            else if (!strcmp(key, "ts")) j->cur.ts = v;
            else if (!strcmp(key, "dur")) j->cur.dur = v;
        }
    }
}

static int cmp_xev(const void *a, const void *b) {
    const struct xev *x = a, *y = b;
    if (x->tid != y->tid) return x->tid - y->tid;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->dur > y->dur ? -1 : x->dur < y->dur;
}

static void check_perfetto(const char *path, int n_threads) {
    char *text = lm_test_read_file(path, NULL);
    CHECK(text != NULL);
    if (!text) return;
    struct jr j = {.p = text, .ok = true, .cap = 100000};
    j.out = malloc(sizeof *j.out * (size_t)j.cap);
    // root object is depth 0, traceEvents array depth 1, events depth 2
    jvalue(&j, 0, NULL);
    ws(&j);
    CHECKF(j.ok && *j.p == 0, "perfetto JSON invalid near offset %ld", (long)(j.p - text));
    CHECK(strstr(text, "\"traceEvents\"") != NULL);
    CHECK(strstr(text, "\"thread_name\"") != NULL);
    CHECK(strstr(text, "\"process_name\"") != NULL);
    CHECK(strstr(text, "\"name\":\"block_2\"") != NULL);
    CHECK(strstr(text, "\"name\":\"decode\"") != NULL);
    CHECK(strstr(text, "\"name\":\"barrier\"") != NULL);
    CHECK(strstr(text, "\"GB/s\"") != NULL);
    CHECK(strstr(text, "\"variant\":\"q4_K_avx2\"") != NULL);
    CHECK(strstr(text, "\"clamped\"") == NULL); // our synthetic spans nest by construction
    // complete events: tid/ts/dur present and sane; per-thread strict nesting
    int nx = 0, per_tid[8] = {0}, bad = 0;
    struct xev *x = malloc(sizeof *x * (size_t)(j.n ? j.n : 1));
    for (int i = 0; i < j.n; i++) {
        if (j.out[i].ph != 'X') continue;
        if (j.out[i].tid < 0 || j.out[i].tid >= n_threads || j.out[i].ts < 0 || j.out[i].dur < 0)
            bad++;
        else {
            x[nx++] = j.out[i];
            per_tid[j.out[i].tid]++;
        }
    }
    CHECKF(bad == 0, "%d X events lack tid/ts/dur", bad);
    for (int t = 0; t < n_threads; t++) CHECKF(per_tid[t] > 0, "no slices on tid %d", t);
    qsort(x, (size_t)nx, sizeof *x, cmp_xev);
    double stack[64];
    int depth = 0, overlap = 0, maxdepth = 0, tid = -1;
    for (int i = 0; i < nx; i++) {
        if (x[i].tid != tid) {
            tid = x[i].tid;
            depth = 0;
        }
        double end = x[i].ts + x[i].dur;
        while (depth && stack[depth - 1] <= x[i].ts + 1e-9 && !(x[i].dur == 0 && stack[depth - 1] == x[i].ts))
            depth--;
        if (depth && end > stack[depth - 1] + 1e-9) overlap++;
        if (depth < 64) stack[depth++] = end;
        if (depth > maxdepth) maxdepth = depth;
    }
    CHECKF(overlap == 0, "%d slices overlap their parent", overlap);
    CHECKF(maxdepth >= 4, "max nesting depth %d (expected phase > block > op > matmul)", maxdepth);
    free(x);
    free(j.out);
    free(text);
}

// ============================================================================
// JSONL schema check (independent of the analyzer: required keys per type)
// ============================================================================

static bool has_key(const char *line, const char *key, char kind) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (!p) return false;
    p += strlen(pat);
    if (kind == 's') return *p == '"';
    if (kind == 'i') return *p == '-' || (*p >= '0' && *p <= '9');
    return (*p >= '0' && *p <= '9');
}

static int check_jsonl_schema(const char *path, int *n_types) {
    static const char *const req[][16] = {
        {"header", "schema:s", "version:u", "unit:s", "clock:s", "n_threads:u", "events:u", "dropped:u"},
        {"phase", "tid:u", "ts_ns:u", "dur_ns:u", "phase:s", "step:i", "n_tokens:i"},
        {"op", "tid:u", "ts_ns:u", "dur_ns:u", "phase:s", "step:i", "op:s", "layer:i"},
        {"barrier", "tid:u", "ts_ns:u", "dur_ns:u", "phase:s", "step:i", "op:s", "layer:i"},
        {"matmul", "tid:u", "ts_ns:u", "dur_ns:u", "phase:s", "step:i", "op:s", "layer:i",
         "weight:s", "m:u", "n:u", "k:u", "dtype:s", "variant:s", "reason:s", "bytes:u"},
        {"variant", "tid:u", "ts_ns:u", "kernel:s", "variant:s", "reason:s"},
        {"memory", "tid:u", "ts_ns:u", "weights_mapped:u", "kv_cache:u", "scratch:u", "rss:u", "rss_peak:u"},
        {"end", "events:u", "dropped:u"},
        {"step", "tid:u", "ts_ns:u", "dur_ns:u", "step:u", "n_tokens:u", "n_decode:u", "n_prefill:u", "n_seqs:u",
         "n_draft:u", "n_accepted:u"},
    };
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    int bad = 0, ln = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        size_t len = strlen(line);
        if (!len || line[len - 1] != '\n' || line[0] != '{' || line[len - 2] != '}') {
            bad++;
            continue;
        }
        int ti = -1;
        for (int t = 0; t < 9; t++) {
            char pat[64];
            snprintf(pat, sizeof pat, "{\"type\":\"%s\"", req[t][0]);
            if (!strncmp(line, pat, strlen(pat))) ti = t;
        }
        if (ti < 0 || (ln == 1) != (ti == 0)) {
            fprintf(stderr, "line %d: bad type/order: %s", ln, line);
            bad++;
            continue;
        }
        n_types[ti]++;
        for (int k = 1; k < 16 && req[ti][k]; k++) {
            char key[32];
            snprintf(key, sizeof key, "%s", req[ti][k]);
            char *colon = strchr(key, ':');
            *colon = 0;
            if (!has_key(line, key, colon[1])) {
                fprintf(stderr, "line %d: key %s missing or wrong type: %s", ln, req[ti][k], line);
                bad++;
                break;
            }
        }
    }
    fclose(f);
    return bad;
}

// ============================================================================

static bool contains(const char *path, const char *needle) {
    char *t = lm_test_read_file(path, NULL);
    bool r = t && strstr(t, needle);
    free(t);
    return r;
}

// LM_PROF_DEMO=PREFIX: write PREFIX.jsonl / PREFIX.perfetto.json of a larger run
// (18 layers, 120 steps; LM_PROF_DEMO_LAYERS / _STEPS override) for eyeballing the
// writers and the HTML report, and for regenerating tests/data/prof_small.jsonl.
static int demo(const char *prefix) {
    char path[512];
    struct lm_pool *pool = lm_pool_create(2);
    g_layers = getenv("LM_PROF_DEMO_LAYERS") ? atoi(getenv("LM_PROF_DEMO_LAYERS")) : 18;
    g_steps = getenv("LM_PROF_DEMO_STEPS") ? atoi(getenv("LM_PROF_DEMO_STEPS")) : 120;
    if (g_layers < 1 || g_layers > LM_PROF_MAX_LAYERS || g_steps < 1) return 2;
    g_jitter = 1;
    if (!pool || lm_prof_init(LM_PROF_TRACE, 2, 0) != LM_OK) return 1;
    run_generation(pool);
    lm_prof_print_summary(stdout);
    snprintf(path, sizeof path, "%s.jsonl", prefix);
    if (lm_prof_write_jsonl(path) != LM_OK) return 1;
    snprintf(path, sizeof path, "%s.perfetto.json", prefix);
    if (lm_prof_write_perfetto(path) != LM_OK) return 1;
    lm_prof_shutdown();
    lm_pool_free(pool);
    return 0;
}

// names, bad arguments, off level
static void test_names_off(struct lm_pool *pool, const char *jsonl) {
    CHECK(!strcmp(lm_prof_op_name(LM_OP_QKV), "qkv"));
    CHECK(!strcmp(lm_prof_op_name(LM_OP_POST_FFW_NORM), "post_ffw_norm"));
    CHECK(!strcmp(lm_prof_phase_name(LM_PHASE_DECODE), "decode"));
    CHECK(lm_prof_init(LM_PROF_SUMMARY, 0, 0) == LM_ERR_ARG);
    CHECK(strstr(lm_error_msg(), "n_threads") != NULL);
    CHECK(lm_prof_init(LM_PROF_SUMMARY, LM_PROF_MAX_THREADS + 1, 0) == LM_ERR_ARG);
    CHECK(lm_prof_init(LM_PROF_OFF, 2, 0) == LM_OK);
    CHECK(lm_prof_now() == 0);
    run_generation(pool); // records nothing, must not crash
    CHECK(lm_prof_write_jsonl(jsonl) == LM_ERR_STATE);
}

// timer: calibrated ticks agree with CLOCK_MONOTONIC_RAW within 2%
static void test_timer(void) {
    CHECK(lm_prof_init(LM_PROF_SUMMARY, 2, 0) == LM_OK);
    // each tick read is bracketed by two clock reads, retried until the bracket is under
    // 20 us: a preemption between the two clocks on a loaded machine would otherwise skew a
    // 100 ms window by more than the tolerance
    uint64_t n0, c0, n1, c1;
    for (int i = 0; i < 1000; i++) {
        const uint64_t a = lm_prof_ticks_slow();
        c0 = lm_prof_ticks();
        n0 = lm_prof_ticks_slow();
        if (n0 - a < 20000) { n0 = a + (n0 - a) / 2; break; }
    }
    usleep(100000);
    for (int i = 0; i < 1000; i++) {
        const uint64_t a = lm_prof_ticks_slow();
        c1 = lm_prof_ticks();
        n1 = lm_prof_ticks_slow();
        if (n1 - a < 20000) { n1 = a + (n1 - a) / 2; break; }
    }
    double ratio = lm_prof_ticks_to_ns(c1 - c0) / (double)(n1 - n0);
    CHECKF(fabs(ratio - 1) < 0.02, "ticks_to_ns / monotonic_raw = %.4f", ratio);
}

// summary mode (the level test_timer initialized)
static void test_summary(struct lm_pool *pool, const char *jsonl, const char *summ) {
    run_generation(pool);
    CHECK(lm_prof_write_jsonl(jsonl) == LM_ERR_STATE); // no events in summary mode
    FILE *sf = fopen(summ, "w");
    lm_prof_print_summary(sf);
    fclose(sf);
    const char *want[] = {"phases:", "decode", "prefill", "ops, decode", "qkv", "(barrier wait)",
                          "threads", "matmul shape x variant", "q4_K_avx2", "GB/s",
                          "kernel variants", "memory:", "kv_cache"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECKF(contains(summ, want[i]), "summary lacks '%s'", want[i]);
    CHECK(!contains(summ, "no phase")); // every op fell inside a begun phase
    if (getenv("LM_PROF_SHOW")) lm_prof_print_summary(stdout);
}

// trace mode, and the analyzer reads it back
static void test_trace_analyzer(struct lm_pool *pool, const char *jsonl, const char *perf) {
    CHECK(lm_prof_init(LM_PROF_TRACE, 2, 0) == LM_OK);
    run_generation(pool);
    CHECK(lm_prof_dropped() == 0);
    CHECK(lm_prof_write_jsonl(jsonl) == LM_OK);
    CHECK(lm_prof_write_perfetto(perf) == LM_OK);
    int n_types[9] = {0};
    int bad = check_jsonl_schema(jsonl, n_types);
    CHECKF(bad == 0, "%d JSONL lines fail the schema", bad);
    CHECK(n_types[0] == 1 && n_types[7] == 1);
    CHECKF(n_types[1] == EV_PHASES, "phases %d", n_types[1]);
    CHECKF(n_types[2] == EV_OPS, "ops %d vs %d", n_types[2], EV_OPS);
    CHECKF(n_types[3] == EV_BARRIERS, "barriers %d vs %d", n_types[3], EV_BARRIERS);
    CHECKF(n_types[4] == EV_MATMULS, "matmuls %d vs %d", n_types[4], EV_MATMULS);
    CHECK(n_types[5] == 1 && n_types[6] == 2 && n_types[8] == 0);
    CHECK(contains(jsonl, "\"version\":3,"));
    check_perfetto(perf, 2);

    // ---- the analyzer reads it back
    struct lm_prof_report *r = NULL;
    CHECKF(lm_prof_report_load(jsonl, &r) == LM_OK, "%s", lm_error_msg());
    if (r) {
        struct lm_prof_row row;
        CHECK(lm_prof_report_row(r, "phase", "decode", &row) && row.count == N_STEPS);
        CHECK(lm_prof_report_row(r, "phase", "prefill", &row) && row.count == 1);
        // per (phase, op): one span per thread per layer per forward
        CHECK(lm_prof_report_row(r, "phase_op", "decode :: qkv", &row) &&
              row.count == 2 * N_LAYERS * N_STEPS);
        CHECK(lm_prof_report_row(r, "phase_op", "decode :: lm_head", &row) && row.count == N_STEPS);
        CHECK(lm_prof_report_row(r, "layer", "decode :: block_2", &row) && row.count == N_STEPS);
        CHECK(lm_prof_report_row(r, "barrier_op", "prefill :: down", &row) &&
              row.count == 2 * N_LAYERS);
        CHECK(lm_prof_report_row(r, "matmul", "qkv m=640 n=1 k=640 q4_K q4_K_avx2", &row) &&
              row.count == N_LAYERS * N_STEPS);
        CHECK(lm_prof_report_row(r, "matmul", "gate_up m=4096 n=7 k=640 q4_K q4_K_avx2", &row) &&
              row.count == N_LAYERS);
        CHECK(lm_prof_report_row(r, "op", "attention", &row) && row.count == 2 * N_LAYERS * N_FWD &&
              row.min <= row.p95 && row.p95 <= row.p99 && row.p99 <= row.max && row.min > 0);
        lm_prof_report_free(r);
    }
}

// engine steps: summary, JSONL (step events, ops carry the step), Perfetto, analyzer
static void test_engine_steps(struct lm_pool *pool, const char *jsonl, const char *perf, const char *summ) {
    FILE *sf;
    int n_types[9];
    int bad;
    struct lm_prof_report *r;
    CHECK(lm_prof_init(LM_PROF_SUMMARY, 2, 0) == LM_OK);
    run_engine_steps(pool);
    sf = fopen(summ, "w");
    lm_prof_print_summary(sf);
    fclose(sf);
    CHECK(contains(summ, "engine steps"));
    CHECK(contains(summ, "tokens: 21 in 5 steps (decode 7 = 33.3%, prefill 10 = 47.6%); per step avg 4.2, min 2, max 7"));
    CHECK(contains(summ, "speculative: 4 drafts verified in 1 steps, 3 accepted (75.0%, 3.00 per verifying step)"));
    CHECK(lm_prof_init(LM_PROF_TRACE, 2, 0) == LM_OK);
    run_engine_steps(pool);
    CHECK(lm_prof_write_jsonl(jsonl) == LM_OK);
    CHECK(lm_prof_write_perfetto(perf) == LM_OK);
    memset(n_types, 0, sizeof n_types);
    bad = check_jsonl_schema(jsonl, n_types);
    CHECKF(bad == 0, "%d JSONL lines fail the schema", bad);
    CHECKF(n_types[8] == ENG_STEPS, "step events %d", n_types[8]);
    CHECK(contains(jsonl, "{\"type\":\"step\",\"tid\":0,") &&
          contains(jsonl, "\"step\":4,\"n_tokens\":4,\"n_decode\":1,\"n_prefill\":3,\"n_seqs\":2,"
                          "\"n_draft\":0,\"n_accepted\":0}") &&
          contains(jsonl, "\"step\":3,\"n_tokens\":6,\"n_decode\":2,\"n_prefill\":0,\"n_seqs\":2,"
                          "\"n_draft\":4,\"n_accepted\":3}"));
    { // every op line of the trace carries the step whose span holds it
        FILE *jf = fopen(jsonl, "r");
        char line[4096];
        int per_step[ENG_STEPS] = {0}, other = 0;
        while (jf && fgets(line, sizeof line, jf)) {
            if (strncmp(line, "{\"type\":\"op\",", 13)) continue;
            const char *p = strstr(line, "\"step\":");
            int k = p ? atoi(p + 7) : -1;
            if (k >= 0 && k < ENG_STEPS) per_step[k]++;
            else other++;
        }
        if (jf) fclose(jf);
        CHECKF(other == 0, "%d ops outside the steps", other);
        for (int k = 0; k < ENG_STEPS; k++)
            CHECKF(per_step[k] == 2 * N_LAYERS * N_LOPS + 3, "step %d: %d ops", k, per_step[k]);
    }
    check_perfetto(perf, 2);
    CHECK(contains(perf, "\"name\":\"engine step\",\"cat\":\"step\",\"args\":{\"step\":0,\"n_tokens\":7,"
                         "\"n_decode\":0,\"n_prefill\":7,\"n_seqs\":2,\"n_draft\":0,\"n_accepted\":0}"));
    CHECK(contains(perf, "\"name\":\"step tokens\""));
    r = NULL;
    CHECKF(lm_prof_report_load(jsonl, &r) == LM_OK, "%s", lm_error_msg());
    if (r) {
        struct lm_prof_row row;
        CHECK(lm_prof_report_row(r, "step", "engine", &row) && row.count == ENG_STEPS);
        CHECK(lm_prof_report_row(r, "step", "engine decode only", &row) && row.count == 3);
        CHECK(lm_prof_report_row(r, "step", "engine with prefill", &row) && row.count == 2);
        CHECK(lm_prof_report_row(r, "step_tokens", "draft", &row) && row.total == 4);
        CHECK(lm_prof_report_row(r, "step_tokens", "accepted", &row) && row.total == 3);
        CHECK(lm_prof_report_row(r, "step_tokens", "tokens", &row) && row.total == 21 &&
              row.min == 2 && row.max == 7);
        CHECK(lm_prof_report_row(r, "step_tokens", "decode", &row) && row.total == 7);
        CHECK(lm_prof_report_row(r, "step_tokens", "prefill", &row) && row.total == 10);
        CHECK(lm_prof_report_row(r, "step_tokens", "seqs", &row) && row.total == 10);
        CHECK(lm_prof_report_row(r, "phase", "prefill", &row) && row.count == 2);
        CHECK(lm_prof_report_row(r, "phase", "decode", &row) && row.count == 3);
        CHECK(lm_prof_report_row(r, "phase_op", "prefill :: qkv", &row) && row.count == 2 * 2 * N_LAYERS);
        lm_prof_report_free(r);
    }
}

// a full buffer drops (and counts) instead of overwriting
static void test_full_buffer(struct lm_pool *pool, const char *jsonl) {
    struct lm_prof_report *r;
    CHECK(lm_prof_init(LM_PROF_TRACE, 2, 100) == LM_OK);
    run_generation(pool);
    CHECK(lm_prof_dropped() > 0);
    CHECK(lm_prof_write_jsonl(jsonl) == LM_OK);
    CHECK(contains(jsonl, "\"dropped\":0") == false);
    r = NULL;
    CHECKF(lm_prof_report_load(jsonl, &r) == LM_OK, "%s", lm_error_msg());
    lm_prof_report_free(r);
}

// unwritable output paths fail with a message, not a crash
static void test_unwritable(void) {
    CHECK(lm_prof_write_jsonl("/nonexistent_dir/x.jsonl") == LM_ERR_IO);
    CHECK(strstr(lm_error_msg(), "/nonexistent_dir/x.jsonl") != NULL);
    CHECK(lm_prof_write_perfetto("/nonexistent_dir/x.json") == LM_ERR_IO);
}

int main(void) {
    if (getenv("LM_PROF_DEMO")) return demo(getenv("LM_PROF_DEMO"));
    char dir[] = "/tmp/lm_prof_test_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char jsonl[256], perf[256], summ[256];
    snprintf(jsonl, sizeof jsonl, "%s/t.jsonl", dir);
    snprintf(perf, sizeof perf, "%s/t.perfetto.json", dir);
    snprintf(summ, sizeof summ, "%s/summary.txt", dir);
    struct lm_pool *pool = lm_pool_create(2);
    CHECK(pool != NULL);
    if (!pool) return lm_test_finish();

    test_names_off(pool, jsonl);
    test_timer();
    test_summary(pool, jsonl, summ);
    test_trace_analyzer(pool, jsonl, perf);
    test_engine_steps(pool, jsonl, perf, summ);
    test_full_buffer(pool, jsonl);
    test_unwritable();

    lm_prof_shutdown();
    CHECK(lm_prof_level_g == LM_PROF_OFF);
    lm_pool_free(pool);
    unlink(jsonl);
    unlink(perf);
    unlink(summ);
    rmdir(dir);
    return lm_test_finish();
}
