// `lumen bench`: llama-bench-style throughput tests (pp N prefill, tg N decode, TTFT),
// tokenizer and sampler throughput, a STREAM-like read-bandwidth probe and the decode
// roofline (weight bytes per token / bandwidth); markdown, CSV or JSON; --breakdown.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "base/timer.h"
#include "cli/cli.h"
#include "cli/cli_progress.h"
#include "cli/cli_bench.h"
#include "cli/cli_bench_parallel.h"
#include "kernels/kernels.h"
#include "lumen.h"
#include "model/model.h"
#include "prof/prof.h"

#define BENCH_N_BATCH 512
#define BENCH_TG_PROMPT 16  // tokens prefilled (untimed) before a tg test
#define BENCH_MAX_LIST 32
#define BENCH_SAMPLES_PER_REP 32
#define BENCH_TOK_TEXT_BYTES (64 * 1024)

static const char *k_bench_help =
    "usage: lumen bench [-m MODEL] [options]\n"
    "\n"
    "  -m, --model PATH    GGUF model (default: " LM_DEFAULT_MODEL ")\n"
    "  -p, --n-prompt LIST prefill tests, comma-separated token counts (default 512; 0 = none)\n"
    "  -n, --n-gen LIST    decode tests: N single-token steps after a 16-token prompt\n"
    "                      (default 128; 0 = none)\n"
    "      --ttft N        time to first token: prefill N tokens + sample one (default 0 = off)\n"
    "  -r, --reps N        timed repetitions per test (default 5)\n"
    "      --warmup N      untimed runs before each test (default 1)\n"
    "  -t, --threads LIST  thread counts (default: physical cores)\n"
    "  -o, --output FMT    md (default), csv or json\n"
    "      --bw-mib N      buffer of the read-bandwidth probe in MiB (default 512; 0 = skip)\n"
    "      --breakdown     also run one profiled generation (first -p prompt, first -n\n"
    "                      tokens; 128 each if 0) at the largest thread count and report\n"
    "                      phases, prefill and decode by component, per-layer\n"
    "                      attention/FFN (decode), bottlenecks\n"
    "                      (md: after the table; json: \"breakdown\" object; csv: to stderr)\n"
    "      --progress      print each test as it runs to stderr\n"
    "      --parallel LIST batched decode instead of the pp/tg tests (llama-batched-bench's\n"
    "                      job): for each N, N requests with distinct prompts of -p tokens\n"
    "                      (default 64) generate -n tokens each (default 128) on the engine;\n"
    "                      reports aggregate decode t/s, TTFT and inter-token latency\n"
    "                      percentiles, KV memory held, and the compute roof (the pp512\n"
    "                      prefill MAC rate / MACs of one decode token with the LM head)\n"
    "      --step-tokens S --parallel: the engine's token budget per step (default: N x -p,\n"
    "                      every prompt in the first step; 256 in the --arrival runs)\n"
    "      --arrival L     --parallel: per N, also a run where a prompt of L tokens arrives\n"
    "                      while the N streams decode; reports their worst inter-token gap\n"
    "                      before and during its prefill against one full-chunk step\n"
    "      --trace FILE    --parallel: one extra profiled run at the largest N and -t (its\n"
    "                      --arrival run if given): JSONL for `lumen analyze`\n"
    "      --perfetto FILE --parallel: the same run as a Perfetto trace\n"
    "      --profile       --parallel: that run's profiler summary on stderr\n"
    "      --lookup        --parallel: requests draft by prompt lookup (speculative decoding,\n"
    "                      docs/speculative.md; the prompts repeat a text, so drafts are often\n"
    "                      right); drafted / accepted tokens on stderr\n"
    "\n"
    "Prompts are deterministic: BOS + a fixed English text's token ids, repeated to length;\n"
    "prefill runs in chunks of 512 with logits only for the last token. Each test reports\n"
    "mean +- sd and median tok/s over the repetitions. tg rows also give the weight bytes\n"
    "read per token x tok/s (GB/s) and its fraction of the probe's bandwidth at the same\n"
    "thread count (the decode roofline).\n";

// ================================================================ fixed text + tokens

const char lm_bench_text[] =
    "The old lighthouse keeper climbed the spiral stairs every evening at dusk, counting "
    "each of the one hundred and twelve steps as his father had taught him. From the gallery "
    "he could see the whole bay: fishing boats returning with their nets, gulls circling over "
    "the harbour, and the long grey line of the breakwater where children liked to run when "
    "the tide was low. He trimmed the wick, polished the great lens with a soft cloth, and "
    "wrote the weather in his logbook: wind from the south-west, a light swell, clouds "
    "gathering over the hills. Ships had relied on his light for forty years, and in all that "
    "time he had never once let it go dark. In winter the storms came quickly. Rain hammered "
    "against the windows and the tower seemed to sway, but the light kept turning, sweeping "
    "its beam across the black water so that sailors far from shore would know where the "
    "rocks were hidden. Some nights he read by the lamp in the small room below the lantern, "
    "books about navigation, astronomy and the history of the coast; other nights he simply "
    "listened to the sea. When the village built a new automatic beacon on the point, people "
    "asked whether he would finally retire. He smiled and said that a machine could turn a "
    "light, but it could not watch the sea, and that he would keep climbing the stairs for as "
    "long as his legs allowed. ";

int32_t *lm_bench_tokens(const struct lm_model *m, int32_t n) {
    const struct lm_tokenizer *tok = lm_model_tokenizer(m);
    int32_t *body = NULL;
    size_t n_body = 0;
    if (lm_tokenize(tok, lm_bench_text, strlen(lm_bench_text), false, false, &body, &n_body) !=
        LM_OK)
        return NULL;
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (!ids || n_body == 0) {
        free(body);
        free(ids);
        lm_error_set(LM_ERR_NOMEM, "bench: cannot build %d prompt tokens", n);
        return NULL;
    }
    int32_t i = 0;
    const int32_t bos = lm_tokenizer_bos(tok);
    if (bos >= 0 && n > 0) ids[i++] = bos;
    for (size_t j = 0; i < n; j = (j + 1) % n_body) ids[i++] = body[j];
    free(body);
    return ids;
}

enum lm_status lm_bench_prefill(struct lm_context *c, const int32_t *ids, int32_t n,
                                struct lm_batch_entry *batch) {
    for (int32_t off = 0; off < n; off += BENCH_N_BATCH) {
        const int32_t nb = n - off < BENCH_N_BATCH ? n - off : BENCH_N_BATCH;
        for (int32_t j = 0; j < nb; j++)
            batch[j] = (struct lm_batch_entry){.token = ids[off + j], .pos = off + j, .seq = 0,
                                               .want_logits = off + j == n - 1};
        enum lm_status st = lm_decode(c, batch, nb);
        if (st != LM_OK) return st;
    }
    return LM_OK;
}

// ================================================================ model info

static const char *ftype_name(uint32_t ft) {
    switch (ft) { // llama.cpp's llama_model_ftype_name()
    case 0: return "all F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K - Medium";
    case 11: return "Q3_K - Small";
    case 12: return "Q3_K - Medium";
    case 13: return "Q3_K - Large";
    case 14: return "Q4_K - Small";
    case 15: return "Q4_K - Medium";
    case 16: return "Q5_K - Small";
    case 17: return "Q5_K - Medium";
    case 18: return "Q6_K";
    case 32: return "BF16";
    default: return NULL;
    }
}

static bool name_has(const struct lm_gguf_str *s, const char *sub) {
    const size_t n = strlen(sub);
    for (uint64_t i = 0; i + n <= s->len; i++)
        if (!memcmp(s->data + i, sub, n)) return true;
    return false;
}

// Bytes a decode step reads, from the tensor table: every tensor except the token
// embedding (one row of it is read), and the whole embedding when it doubles as the
// output head (tied). Grouped by the matmul that reads them.
static void model_info(struct lm_model *m, const char *path, struct lm_bench_model_info *mi) {
    memset(mi, 0, sizeof *mi);
    mi->path = path;
    const struct lm_gguf *g = &m->gguf;
    bool has_output = lm_gguf_find_tensor(g, "output.weight") != NULL;
    uint64_t by_dtype[LM_DTYPE_COUNT] = {0};
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct lm_gguf_tensor *t = &g->tensors[i];
        uint64_t ne = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) ne *= (uint64_t)t->ne[d];
        mi->size_bytes += t->nbytes;
        mi->n_params += ne;
        if ((unsigned)t->type < LM_DTYPE_COUNT) by_dtype[t->type] += t->nbytes;
        const bool is_embd = lm_gguf_str_eq(t->name, "token_embd.weight");
        const bool is_head = lm_gguf_str_eq(t->name, "output.weight") ||
                             lm_gguf_str_eq(t->name, "output.bias") ||
                             (is_embd && !has_output);
        enum lm_bench_grp grp = LM_BENCH_GRP_OTHER;
        uint64_t bytes = t->nbytes;
        if (is_head) {
            grp = LM_BENCH_GRP_HEAD;
            if (!lm_gguf_str_eq(t->name, "output.bias")) {
                mi->head_params += ne;
                snprintf(mi->head_dtype, sizeof mi->head_dtype, "%s", lm_dtype_name(t->type));
            }
            if (is_embd) mi->grp_bytes[LM_BENCH_GRP_OTHER] += t->ne[1] ? t->nbytes / (uint64_t)t->ne[1] : 0;
        } else if (is_embd) {
            bytes = t->ne[1] ? t->nbytes / (uint64_t)t->ne[1] : 0; // one row per token
        } else if (name_has(&t->name, ".attn_q.") || name_has(&t->name, ".attn_k.") ||
                   name_has(&t->name, ".attn_v.") || name_has(&t->name, ".attn_qkv.")) {
            grp = LM_BENCH_GRP_QKV;
        } else if (name_has(&t->name, ".attn_output.")) {
            grp = LM_BENCH_GRP_O;
        } else if (name_has(&t->name, ".ffn_gate.") || name_has(&t->name, ".ffn_up.") ||
                   name_has(&t->name, ".ffn_gate_up.")) {
            grp = LM_BENCH_GRP_GATE_UP;
        } else if (name_has(&t->name, ".ffn_down.")) {
            grp = LM_BENCH_GRP_DOWN;
        }
        mi->grp_bytes[grp] += bytes;
        if (t->n_dims >= 2 && t->name.len > 4 && !memcmp(t->name.data, "blk.", 4))
            mi->layer_params += ne;
    }
    for (int i = 0; i < LM_BENCH_GRP_COUNT; i++) mi->bytes_per_token += mi->grp_bytes[i];
    mi->n_layer = m->hp.n_layer;
    mi->n_vocab = m->hp.n_vocab;
    mi->n_ctx_train = m->hp.n_ctx_train;
    mi->kernels = lm_kernels_best()->name;

    char size_lbl[32];
    if (mi->n_params >= 1000000000ull) snprintf(size_lbl, sizeof size_lbl, "%.1fB", (double)mi->n_params / 1e9);
    else if (mi->n_params >= 1000000ull) snprintf(size_lbl, sizeof size_lbl, "%.0fM", (double)mi->n_params / 1e6);
    else snprintf(size_lbl, sizeof size_lbl, "%.0fK", (double)mi->n_params / 1e3);
    uint32_t ft = UINT32_MAX;
    lm_gguf_get_u32(g, "general.file_type", &ft, false);
    const char *ftn = ft != UINT32_MAX ? ftype_name(ft) : NULL;
    char ft_buf[32];
    if (!ftn) { // most bytes in one dtype
        int best = 0;
        for (int d = 1; d < LM_DTYPE_COUNT; d++) if (by_dtype[d] > by_dtype[best]) best = d;
        snprintf(ft_buf, sizeof ft_buf, "%s", lm_dtype_name((enum lm_dtype)best));
        ftn = ft_buf;
    }
    snprintf(mi->desc, sizeof mi->desc, "%s %s %s", lm_model_arch(m), size_lbl, ftn);
}

// ================================================================ statistics

struct bench_test {
    char name[32];   // "pp512", "tg128", "ttft16", "tokenize", "sample"
    char kind[12];   // "pp", "tg", "ttft", "tokenize", "sample"
    int threads;
    int n_prompt, n_gen;
    double units;    // tokens (or samples) per repetition: t/s = units / seconds
    int reps;
    double *ns;      // [reps] duration of each repetition
    // derived
    double avg_ts, sd_ts, med_ts, min_ts, max_ts, avg_ns, sd_ns, med_ns;
    double gbps, roof;   // tg: achieved weight bandwidth and fraction of the probe (NAN otherwise)
    double extra;        // tokenize: bytes per repetition
};

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
    if (n <= 0) return NAN;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return NAN;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_dbl);
    double r = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return r;
}

static void mean_sd(const double *v, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = n ? s / n : NAN;
    for (int i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0.0;
}

static void test_finish(struct bench_test *t, const struct lm_bench_model_info *mi,
                        const struct lm_bench_bw *bw, int n_bw) {
    double ts[1024];
    const int n = t->reps < 1024 ? t->reps : 1024;
    for (int i = 0; i < n; i++) ts[i] = t->ns[i] > 0 ? t->units / (t->ns[i] * 1e-9) : 0.0;
    mean_sd(ts, n, &t->avg_ts, &t->sd_ts);
    mean_sd(t->ns, n, &t->avg_ns, &t->sd_ns);
    t->med_ts = median(ts, n);
    t->med_ns = median(t->ns, n);
    t->min_ts = t->max_ts = n ? ts[0] : NAN;
    for (int i = 1; i < n; i++) {
        if (ts[i] < t->min_ts) t->min_ts = ts[i];
        if (ts[i] > t->max_ts) t->max_ts = ts[i];
    }
    t->gbps = t->roof = NAN;
    if (!strcmp(t->kind, "tg")) {
        t->gbps = (double)mi->bytes_per_token * t->med_ts / 1e9;
        const double b = lm_bench_bw_for(bw, n_bw, t->threads);
        if (b > 0) t->roof = t->gbps / b;
    }
}

// ================================================================ bandwidth probe

double lm_bench_bw_for(const struct lm_bench_bw *bw, int n_bw, int threads) {
    double best = 0;
    int best_t = -1;
    for (int i = 0; i < n_bw; i++) {
        if (bw[i].threads == threads && bw[i].gbps > 0) return bw[i].gbps;
        if (bw[i].gbps > 0 && bw[i].threads > best_t) { best_t = bw[i].threads; best = bw[i].gbps; }
    }
    return best;
}

struct bw_job {
    const uint64_t *p;
    size_t n;
    uint64_t sums[256 * 8]; // one cache line per thread
};

// Plain reduction: the compiler vectorizes it (integer adds are associative); one
// vector add per 32-64 bytes is far above what DRAM delivers per core.
static uint64_t sum_u64(const uint64_t *p, size_t n) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) s += p[i];
    return s;
}

static void bw_worker(void *arg, int ith, int nth) {
    struct bw_job *j = arg;
    const size_t per = j->n / (size_t)nth;
    const size_t i0 = per * (size_t)ith, i1 = ith == nth - 1 ? j->n : i0 + per;
    j->sums[ith * 8] = sum_u64(j->p + i0, i1 - i0);
}

// Best of 3 timed passes (after one untimed) over buf with n threads; GB/s.
static double bw_probe(const uint64_t *buf, size_t n, int threads) {
    struct lm_pool *pool = lm_pool_create(threads);
    if (!pool) return -1;
    static struct bw_job job;
    job.p = buf;
    job.n = n;
    double best = 0;
    volatile uint64_t sink = 0;
    for (int pass = 0; pass < 4; pass++) {
        const uint64_t t0 = lm_now_ns();
        lm_pool_run(pool, bw_worker, &job);
        const uint64_t dt = lm_now_ns() - t0;
        for (int i = 0; i < threads; i++) sink += job.sums[i * 8];
        const double gbps = (double)(n * sizeof *buf) / (double)dt;
        if (pass > 0 && gbps > best) best = gbps;
    }
    (void)sink;
    lm_pool_free(pool);
    return best;
}

// ================================================================ tests

struct bench_run {
    struct lm_context *c;
    const int32_t *ids;
    struct lm_batch_entry *batch;
    struct lm_sampler *smp;
};

static enum lm_status run_pp(struct bench_run *r, int n, uint64_t *ns) {
    lm_kv_cache_seq_rm(r->c, 0, 0, -1);
    const uint64_t t0 = lm_now_ns();
    enum lm_status st = lm_bench_prefill(r->c, r->ids, n, r->batch);
    *ns = lm_now_ns() - t0;
    return st;
}

static enum lm_status run_tg(struct bench_run *r, int n, uint64_t *ns) {
    lm_kv_cache_seq_rm(r->c, 0, 0, -1);
    enum lm_status st = lm_bench_prefill(r->c, r->ids, BENCH_TG_PROMPT, r->batch);
    if (st != LM_OK) return st;
    const uint64_t t0 = lm_now_ns();
    for (int i = 0; i < n; i++) {
        const int32_t pos = BENCH_TG_PROMPT + i;
        struct lm_batch_entry e = {.token = r->ids[pos], .pos = pos, .seq = 0, .want_logits = true};
        if ((st = lm_decode(r->c, &e, 1)) != LM_OK) return st;
    }
    *ns = lm_now_ns() - t0;
    return LM_OK;
}

static enum lm_status run_ttft(struct bench_run *r, int n, uint64_t *ns) {
    lm_kv_cache_seq_rm(r->c, 0, 0, -1);
    const uint64_t t0 = lm_now_ns();
    enum lm_status st = lm_bench_prefill(r->c, r->ids, n, r->batch);
    if (st != LM_OK) return st;
    volatile int32_t id = lm_sampler_sample(r->smp, lm_get_logits(r->c, 0));
    (void)id;
    *ns = lm_now_ns() - t0;
    return LM_OK;
}

typedef enum lm_status (*bench_fn)(struct bench_run *r, int n, uint64_t *ns);

static enum lm_status run_test(struct bench_run *r, bench_fn fn, int n, int warmup, int reps,
                               struct bench_test *t, bool progress) {
    uint64_t ns;
    enum lm_status st;
    char label[64]; // a live line on a terminal when the test runs over ~2 s (cli_progress.h)
    snprintf(label, sizeof label, "lumen bench: %s t=%d", t->name, t->threads);
    struct cli_progress pg;
    cli_progress_begin(&pg, label, warmup + reps, "runs");
    pg.enabled = pg.enabled && !progress; // --progress prints a line per run instead
    for (int w = 0; w < warmup; w++) {
        if ((st = fn(r, n, &ns)) != LM_OK) { cli_progress_end(&pg); return st; }
        cli_progress_update(&pg, w + 1);
    }
    t->reps = reps;
    t->ns = calloc((size_t)reps, sizeof *t->ns);
    if (!t->ns) { cli_progress_end(&pg); return lm_error_set(LM_ERR_NOMEM, "bench: out of memory"); }
    for (int i = 0; i < reps; i++) {
        if ((st = fn(r, n, &ns)) != LM_OK) { cli_progress_end(&pg); return st; }
        cli_progress_update(&pg, warmup + i + 1);
        t->ns[i] = (double)ns;
        if (progress)
            fprintf(stderr, "lumen bench: %s t=%d rep %d/%d: %.2f ms (%.2f t/s)\n", t->name,
                    t->threads, i + 1, reps, (double)ns / 1e6, t->units / ((double)ns * 1e-9));
    }
    cli_progress_end(&pg);
    return LM_OK;
}

// Tokenizer throughput over lm_bench_text repeated to 64 KiB (single thread).
static enum lm_status run_tokenize(const struct lm_model *m, int warmup, int reps,
                                   struct bench_test *t) {
    const size_t tl = strlen(lm_bench_text), copies = BENCH_TOK_TEXT_BYTES / tl + 1;
    char *text = malloc(copies * tl + 1);
    if (!text) return lm_error_set(LM_ERR_NOMEM, "bench: out of memory");
    for (size_t i = 0; i < copies; i++) memcpy(text + i * tl, lm_bench_text, tl);
    const size_t len = copies * tl;
    text[len] = 0;
    t->ns = calloc((size_t)reps, sizeof *t->ns);
    if (!t->ns) { free(text); return lm_error_set(LM_ERR_NOMEM, "bench: out of memory"); }
    t->reps = reps;
    t->extra = (double)len;
    for (int i = -warmup; i < reps; i++) {
        int32_t *ids = NULL;
        size_t n_ids = 0;
        const uint64_t t0 = lm_now_ns();
        enum lm_status st = lm_tokenize(lm_model_tokenizer(m), text, len, true, false, &ids, &n_ids);
        const uint64_t dt = lm_now_ns() - t0;
        free(ids);
        if (st != LM_OK) { free(text); return st; }
        t->units = (double)n_ids;
        if (i >= 0) t->ns[i] = (double)dt;
    }
    free(text);
    return LM_OK;
}

// Sampling with default parameters over real logits (a copy of the last decode's).
static enum lm_status run_sample(struct bench_run *r, int32_t n_vocab, int warmup, int reps,
                                 struct bench_test *t) {
    const float *lg = lm_get_logits(r->c, 0);
    if (!lg) return lm_error_set(LM_ERR_STATE, "bench: no logits to sample from");
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    t->ns = calloc((size_t)reps, sizeof *t->ns);
    if (!logits || !t->ns) { free(logits); return lm_error_set(LM_ERR_NOMEM, "bench: out of memory"); }
    memcpy(logits, lg, (size_t)n_vocab * sizeof *logits);
    t->reps = reps;
    t->units = BENCH_SAMPLES_PER_REP;
    for (int i = -warmup; i < reps; i++) {
        const uint64_t t0 = lm_now_ns();
        for (int k = 0; k < BENCH_SAMPLES_PER_REP; k++)
            lm_sampler_accept(r->smp, lm_sampler_sample(r->smp, logits));
        const uint64_t dt = lm_now_ns() - t0;
        if (i >= 0) t->ns[i] = (double)dt;
    }
    free(logits);
    return LM_OK;
}

// ================================================================ output

void lm_bench_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        const unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch == '\n') fputs("\\n", f);
        else if (ch == '\t') fputs("\\t", f);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

// JSON number or null for NaN/inf.
static void json_num(FILE *f, double v, const char *fmt) {
    if (isfinite(v)) fprintf(f, fmt, v);
    else fputs("null", f);
}

static void print_md(FILE *f, const struct lm_bench_model_info *mi, const struct bench_test *t,
                     int n_t, const struct lm_bench_bw *bw, int n_bw, int bw_mib) {
    char size[32], params[32], backend[48];
    snprintf(size, sizeof size, "%.2f MiB", (double)mi->size_bytes / (1 << 20));
    snprintf(params, sizeof params, "%.2f M", (double)mi->n_params / 1e6);
    snprintf(backend, sizeof backend, "CPU (%s)", mi->kernels);
    fprintf(f, "| model | size | params | backend | threads | test | t/s | median t/s | "
               "ms/run | GB/s | roofline |\n");
    fprintf(f, "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int i = 0; i < n_t; i++) {
        const struct bench_test *x = &t[i];
        char gb[24] = "", rf[24] = "";
        if (isfinite(x->gbps)) snprintf(gb, sizeof gb, "%.2f", x->gbps);
        if (isfinite(x->roof)) snprintf(rf, sizeof rf, "%.0f%%", 100 * x->roof);
        fprintf(f, "| %s | %s | %s | %s | %d | %s | %.2f ± %.2f | %.2f | %.3f | %s | %s |\n",
                mi->desc, size, params, backend, x->threads, x->name, x->avg_ts, x->sd_ts,
                x->med_ts, x->med_ns / 1e6, gb, rf);
    }
    fprintf(f, "\nmodel: %s | load %.1f ms + context %.1f ms | kernels %s\n", mi->path, mi->load_ms,
            mi->ctx_init_ms, mi->kernels);
    for (int i = 0; i < n_t; i++) {
        if (!strcmp(t[i].kind, "tokenize"))
            fprintf(f, "tokenize: %.0f bytes -> %.0f tokens per run: %.0f tok/s, %.2f MB/s (median of %d)\n",
                    t[i].extra, t[i].units, t[i].med_ts,
                    t[i].extra / (t[i].med_ns * 1e-9) / 1e6, t[i].reps);
        if (!strcmp(t[i].kind, "sample"))
            fprintf(f, "sampling: %.1f us/token (default chain: temp 0.8, top-k 40, top-p 0.95, "
                       "min-p 0.05 over %d logits; median of %d x %d)\n",
                    1e6 / t[i].med_ts, mi->n_vocab, t[i].reps, BENCH_SAMPLES_PER_REP);
    }
    if (n_bw) {
        fprintf(f, "read bandwidth (sum over %d MiB, best of 3):", bw_mib);
        for (int i = 0; i < n_bw; i++)
            fprintf(f, "%s %d thread%s %.2f GB/s", i ? " |" : "", bw[i].threads,
                    bw[i].threads == 1 ? "" : "s", bw[i].gbps);
        fputc('\n', f);
    }
    const double mb = 1e6;
    fprintf(f, "weights read per decoded token: %.2f MB (qkv %.2f, attn_output %.2f, gate+up %.2f, "
               "down %.2f, output head %.2f [%s], other %.2f)\n",
            (double)mi->bytes_per_token / mb, (double)mi->grp_bytes[LM_BENCH_GRP_QKV] / mb,
            (double)mi->grp_bytes[LM_BENCH_GRP_O] / mb, (double)mi->grp_bytes[LM_BENCH_GRP_GATE_UP] / mb,
            (double)mi->grp_bytes[LM_BENCH_GRP_DOWN] / mb, (double)mi->grp_bytes[LM_BENCH_GRP_HEAD] / mb,
            mi->head_dtype, (double)mi->grp_bytes[LM_BENCH_GRP_OTHER] / mb);
    for (int i = 0; i < n_bw; i++)
        fprintf(f, "decode roofline at %d thread%s: %.1f tok/s (%.2f GB/s / %.2f MB)\n",
                bw[i].threads, bw[i].threads == 1 ? "" : "s",
                bw[i].gbps * 1e9 / (double)mi->bytes_per_token, bw[i].gbps,
                (double)mi->bytes_per_token / mb);
}

static void print_csv(FILE *f, const struct lm_bench_model_info *mi, const struct bench_test *t,
                      int n_t, const struct lm_bench_bw *bw, int n_bw) {
    fprintf(f, "model,size_bytes,n_params,backend,threads,test,n_prompt,n_gen,reps,avg_ts,"
               "stddev_ts,median_ts,min_ts,max_ts,avg_ms,median_ms,gbps,roofline_frac,"
               "bytes_per_token\n");
    for (int i = 0; i < n_t; i++) {
        const struct bench_test *x = &t[i];
        fprintf(f, "\"%s\",%llu,%llu,CPU %s,%d,%s,%d,%d,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,",
                mi->desc, (unsigned long long)mi->size_bytes, (unsigned long long)mi->n_params,
                mi->kernels, x->threads, x->name, x->n_prompt, x->n_gen, x->reps, x->avg_ts,
                x->sd_ts, x->med_ts, x->min_ts, x->max_ts, x->avg_ns / 1e6, x->med_ns / 1e6);
        if (isfinite(x->gbps)) fprintf(f, "%.4f", x->gbps);
        fputc(',', f);
        if (isfinite(x->roof)) fprintf(f, "%.4f", x->roof);
        fprintf(f, ",%llu\n", (unsigned long long)mi->bytes_per_token);
    }
    for (int i = 0; i < n_bw; i++) // bandwidth rows: gbps only
        fprintf(f, "\"%s\",%llu,%llu,CPU %s,%d,membw,0,0,3,,,,,,,,%.4f,,%llu\n", mi->desc,
                (unsigned long long)mi->size_bytes, (unsigned long long)mi->n_params,
                mi->kernels, bw[i].threads, bw[i].gbps, (unsigned long long)mi->bytes_per_token);
}

static void cpu_name(char *out, size_t n) {
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ') c++;
                c[strcspn(c, "\n")] = 0;
                snprintf(out, n, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

static void print_json(FILE *f, const struct lm_bench_model_info *mi, struct lm_model *m,
                       const struct bench_test *t, int n_t, const struct lm_bench_bw *bw,
                       int n_bw, int bw_mib, int reps, int warmup, const int64_t *th, int n_th,
                       const struct lm_bench_breakdown *bd,
                       const struct lm_bench_parallel_params *pp,
                       const struct lm_bench_parallel_result *pr, int n_pr) {
    char cpu[128];
    cpu_name(cpu, sizeof cpu);
    fprintf(f, "{\n  \"schema\": \"lumen-bench\",\n  \"version\": 1,\n");
    fprintf(f, "  \"system\": {\"cpu\": ");
    lm_bench_json_str(f, cpu);
    fprintf(f, ", \"physical_cores\": %d, \"kernels\": ", lm_cpu_physical_cores());
    lm_bench_json_str(f, mi->kernels);
    fprintf(f, "},\n  \"model\": {\"path\": ");
    lm_bench_json_str(f, mi->path);
    fprintf(f, ", \"desc\": ");
    lm_bench_json_str(f, mi->desc);
    fprintf(f, ", \"arch\": ");
    lm_bench_json_str(f, lm_model_arch(m));
    fprintf(f, ", \"size_bytes\": %llu, \"n_params\": %llu, \"n_layer\": %d, \"n_vocab\": %d, "
               "\"load_ms\": %.3f, \"ctx_init_ms\": %.3f,\n",
            (unsigned long long)mi->size_bytes, (unsigned long long)mi->n_params, mi->n_layer,
            mi->n_vocab, mi->load_ms, mi->ctx_init_ms);
    static const char *const gn[LM_BENCH_GRP_COUNT] = {"qkv", "attn_output", "ffn_gate_up",
                                                       "ffn_down", "output_head", "other"};
    fprintf(f, "    \"bytes_per_token\": %llu, \"head_dtype\": \"%s\", \"bytes_per_token_by_group\": {",
            (unsigned long long)mi->bytes_per_token, mi->head_dtype);
    for (int i = 0; i < LM_BENCH_GRP_COUNT; i++)
        fprintf(f, "%s\"%s\": %llu", i ? ", " : "", gn[i], (unsigned long long)mi->grp_bytes[i]);
    fprintf(f, "}},\n  \"params\": {\"reps\": %d, \"warmup\": %d, \"n_batch\": %d, "
               "\"tg_prompt\": %d, \"threads\": [",
            reps, warmup, BENCH_N_BATCH, BENCH_TG_PROMPT);
    for (int i = 0; i < n_th; i++) fprintf(f, "%s%lld", i ? ", " : "", (long long)th[i]);
    fprintf(f, "]},\n  \"bandwidth\": [");
    for (int i = 0; i < n_bw; i++)
        fprintf(f, "%s{\"threads\": %d, \"gbps\": %.4f, \"mib\": %d, \"best_of\": 3}",
                i ? ", " : "", bw[i].threads, bw[i].gbps, bw_mib);
    fprintf(f, "],\n  \"tests\": [\n");
    for (int i = 0; i < n_t; i++) {
        const struct bench_test *x = &t[i];
        fprintf(f, "    {\"test\": \"%s\", \"kind\": \"%s\", \"n_threads\": %d, \"n_prompt\": %d, "
                   "\"n_gen\": %d, \"reps\": %d, \"units_per_rep\": %.0f,\n     \"avg_ts\": ",
                x->name, x->kind, x->threads, x->n_prompt, x->n_gen, x->reps, x->units);
        json_num(f, x->avg_ts, "%.4f");
        fprintf(f, ", \"stddev_ts\": ");
        json_num(f, x->sd_ts, "%.4f");
        fprintf(f, ", \"median_ts\": ");
        json_num(f, x->med_ts, "%.4f");
        fprintf(f, ", \"min_ts\": ");
        json_num(f, x->min_ts, "%.4f");
        fprintf(f, ", \"max_ts\": ");
        json_num(f, x->max_ts, "%.4f");
        fprintf(f, ", \"avg_ns\": %.0f, \"stddev_ns\": %.0f, \"median_ns\": %.0f, \"gbps\": ",
                x->avg_ns, x->sd_ns, x->med_ns);
        json_num(f, x->gbps, "%.4f");
        fprintf(f, ", \"roofline_frac\": ");
        json_num(f, x->roof, "%.4f");
        if (!strcmp(x->kind, "tokenize"))
            fprintf(f, ", \"bytes_per_rep\": %.0f, \"median_mb_per_s\": %.4f", x->extra,
                    x->extra / (x->med_ns * 1e-9) / 1e6);
        if (!strcmp(x->kind, "sample"))
            fprintf(f, ", \"median_us_per_token\": %.4f", 1e6 / x->med_ts);
        fprintf(f, ",\n     \"samples_ns\": [");
        for (int k = 0; k < x->reps; k++) fprintf(f, "%s%.0f", k ? ", " : "", x->ns[k]);
        fprintf(f, "]}%s\n", i + 1 < n_t || n_pr > 0 ? "," : "");
    }
    for (int i = 0; i < n_pr; i += pp[i].n_list) // one parameter set per thread count
        lm_bench_parallel_print_json_tests(f, &pp[i], &pr[i], pp[i].n_list, i + pp[i].n_list < n_pr);
    fprintf(f, "  ]");
    if (bd) {
        fprintf(f, ",\n  \"breakdown\": ");
        lm_bench_breakdown_print_json(bd, f);
    }
    fprintf(f, "\n}\n");
}

// ================================================================ command

// "128,512" -> values (each in [lo, hi]); usage error otherwise.
static int parse_list(const char *cmd, const char *flag, const char *v, int64_t lo, int64_t hi,
                      int64_t *out) {
    int n = 0;
    char buf[512];
    if (strlen(v) >= sizeof buf) cli_usage_error(cmd, "%s: list too long", flag);
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == BENCH_MAX_LIST) cli_usage_error(cmd, "%s: more than %d values", flag, BENCH_MAX_LIST);
        out[n++] = cli_int(cmd, flag, tok, lo, hi);
    }
    if (n == 0) cli_usage_error(cmd, "%s: empty list '%s'", flag, v);
    return n;
}

static void die_status(const char *what) {
    fprintf(stderr, "lumen bench: %s%s\n", what, lm_error_msg());
}

int cmd_bench(int argc, char **argv) {
    const char *cmd = "bench";
    const char *model_path = NULL;
    int64_t pp[BENCH_MAX_LIST] = {512}, tg[BENCH_MAX_LIST] = {128}, th[BENCH_MAX_LIST];
    int n_pp = 1, n_tg = 1, n_th = 0;
    int64_t reps = 5, warmup = 1, ttft = 0, bw_mib = 512;
    enum lm_bench_fmt fmt = LM_BENCH_MD;
    bool breakdown = false, progress = false, pp_set = false, tg_set = false;
    int64_t par[BENCH_MAX_LIST];
    int n_parl = 0;
    struct lm_bench_parallel_opts popt = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(k_bench_help, stdout); return 0; }
        else if (lm_bench_parallel_flag(cmd, argc, argv, &i, &popt)) continue;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt"))
            n_pp = parse_list(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1 << 20, pp), pp_set = true;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen"))
            n_tg = parse_list(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1 << 20, tg), tg_set = true;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            n_th = parse_list(cmd, a, cli_value(cmd, argc, argv, &i), 1, LM_PROF_MAX_THREADS, th);
        else if (!strcmp(a, "-r") || !strcmp(a, "--reps"))
            reps = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 1000);
        else if (!strcmp(a, "--warmup"))
            warmup = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, 100);
        else if (!strcmp(a, "--ttft"))
            ttft = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1 << 20);
        else if (!strcmp(a, "--bw-mib"))
            bw_mib = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, 1 << 16);
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            const char *v = cli_value(cmd, argc, argv, &i);
            if (!strcmp(v, "md")) fmt = LM_BENCH_MD;
            else if (!strcmp(v, "csv")) fmt = LM_BENCH_CSV;
            else if (!strcmp(v, "json")) fmt = LM_BENCH_JSON;
            else cli_usage_error(cmd, "%s: '%s' is not one of md, csv, json", a, v);
        } else if (!strcmp(a, "--breakdown")) breakdown = true;
        else if (!strcmp(a, "--progress")) progress = true;
        else if (!strcmp(a, "--parallel"))
            n_parl = parse_list(cmd, a, cli_value(cmd, argc, argv, &i), 1, 256, par);
        else cli_usage_error(cmd, "unknown option '%s' (try `lumen bench --help`)", a);
    }
    if (n_th == 0) {
        th[0] = lm_cpu_physical_cores();
        if (th[0] > LM_PROF_MAX_THREADS) th[0] = LM_PROF_MAX_THREADS;
        n_th = 1;
    }
    if (!model_path) model_path = cli_default_model();
    if (n_parl > 0) { // batched mode: one prompt and one generation length
        if (!pp_set) pp[0] = 64;
        if (!tg_set) tg[0] = 128;
        if (n_pp != 1 || n_tg != 1 || pp[0] < 1 || tg[0] < 2)
            cli_usage_error(cmd, "--parallel takes one -p value >= 1 and one -n value >= 2");
        if (breakdown || ttft) cli_usage_error(cmd, "--parallel does not combine with --breakdown or --ttft");
    }
    lm_bench_parallel_check(cmd, &popt, n_parl > 0, par, n_parl);

    // ---- model
    const uint64_t t_load0 = lm_now_ns();
    struct lm_model *m = NULL;
    enum lm_status st = lm_model_load(&m, model_path, NULL);
    if (st != LM_OK) {
        die_status("");
        return st == LM_ERR_IO ? LM_EXIT_USAGE : 1;
    }
    struct lm_bench_model_info mi;
    model_info(m, model_path, &mi);
    mi.load_ms = (double)(lm_now_ns() - t_load0) / 1e6;

    // ---- sizes: every test must fit the context
    int64_t max_pp = 0, max_tg = 0, bd_prompt = 128, bd_gen = 128;
    for (int i = 0; i < n_pp; i++) if (pp[i] > max_pp) max_pp = pp[i];
    for (int i = 0; i < n_tg; i++) if (tg[i] > max_tg) max_tg = tg[i];
    if (pp[0] > 0) bd_prompt = pp[0];
    if (tg[0] > 0) bd_gen = tg[0];
    int64_t need = max_pp;
    if (max_tg > 0 && BENCH_TG_PROMPT + max_tg > need) need = BENCH_TG_PROMPT + max_tg;
    if (ttft > need) need = ttft;
    if (breakdown && bd_prompt + bd_gen > need) need = bd_prompt + bd_gen;
    if (need < BENCH_TG_PROMPT + 1) need = BENCH_TG_PROMPT + 1; // the sampling test's prompt
    if (n_parl > 0) // one sequence: prompt + generated (+ the arrival's long prompt)
        need = pp[0] + tg[0] + 1 > popt.arrival + 2 ? pp[0] + tg[0] + 1 : popt.arrival + 2;
    if (need > mi.n_ctx_train) {
        lm_model_free(m);
        cli_usage_error(cmd, "the tests need %lld positions; the model's context is %d "
                             "(lower -p/-n/--ttft/--arrival)", (long long)need, mi.n_ctx_train);
    }
    int32_t *ids = lm_bench_tokens(m, (int32_t)need);
    if (!ids) { die_status(""); lm_model_free(m); return 1; }

    // ---- bandwidth probe: 1 thread and every -t value, before the model runs
    struct lm_bench_bw bw[BENCH_MAX_LIST + 1];
    int n_bw = 0;
    if (bw_mib > 0) {
        const size_t n = (size_t)bw_mib * (1 << 20) / sizeof(uint64_t);
        uint64_t *buf = malloc(n * sizeof *buf);
        if (!buf) {
            fprintf(stderr, "lumen bench: cannot allocate %lld MiB for the bandwidth probe\n",
                    (long long)bw_mib);
            return 1;
        }
        for (size_t i = 0; i < n; i++) buf[i] = i; // first touch
        int want[BENCH_MAX_LIST + 1], n_want = 0;
        want[n_want++] = 1;
        for (int i = 0; i < n_th; i++) {
            bool dup = false;
            for (int k = 0; k < n_want; k++) dup |= want[k] == th[i];
            if (!dup) want[n_want++] = (int)th[i];
        }
        for (int i = 0; i < n_want; i++) {
            bw[n_bw] = (struct lm_bench_bw){.threads = want[i], .gbps = bw_probe(buf, n, want[i])};
            if (progress)
                fprintf(stderr, "lumen bench: read bandwidth %d threads: %.2f GB/s\n",
                        bw[n_bw].threads, bw[n_bw].gbps);
            n_bw++;
        }
        free(buf);
    }

    // ---- batched mode (--parallel): those tests only
    struct lm_bench_parallel_params par_p[BENCH_MAX_LIST * BENCH_MAX_LIST];
    struct lm_bench_parallel_result par_r[BENCH_MAX_LIST * BENCH_MAX_LIST];
    int n_par = 0;
    if (n_parl > 0) {
        int nl[BENCH_MAX_LIST];
        for (int i = 0; i < n_parl; i++) nl[i] = (int)par[i];
        int rc = 0, prof_ti = 0; // the profiled run: at the largest thread count
        for (int ti = 1; ti < n_th; ti++) if (th[ti] > th[prof_ti]) prof_ti = ti;
        for (int ti = 0; ti < n_th && rc == 0; ti++) {
            for (int i = 0; i < n_parl; i++)
                par_p[n_par + i] = (struct lm_bench_parallel_params){
                    .list = nl, .n_list = n_parl, .n_prompt = (int)pp[0], .n_gen = (int)tg[0],
                    .n_threads = (int)th[ti], .reps = (int)reps, .warmup = (int)warmup,
                    .step_tokens = popt.step_tokens, .arrival = popt.arrival,
                    .roof = true, .progress = progress,
                    .trace = ti == prof_ti ? popt.trace : NULL,
                    .perfetto = ti == prof_ti ? popt.perfetto : NULL,
                    .profile = ti == prof_ti && popt.profile, .lookup = popt.lookup};
            if (lm_bench_parallel_run(m, &mi, &par_p[n_par], &par_r[n_par]) != LM_OK) {
                die_status("");
                rc = 1;
                break;
            }
            n_par += n_parl;
        }
        if (rc == 0) {
            if (fmt == LM_BENCH_JSON) {
                print_json(stdout, &mi, m, NULL, 0, bw, n_bw, (int)bw_mib, (int)reps, (int)warmup,
                           th, n_th, NULL, par_p, par_r, n_par);
            } else {
                for (int i = 0; i < n_par; i += n_parl)
                    lm_bench_parallel_print_md(stdout, &mi, &par_p[i], &par_r[i], n_parl);
            }
        }
        free(ids);
        lm_model_free(m);
        return rc;
    }

    // ---- tests
    struct bench_test *tests = calloc((size_t)n_th * (size_t)(n_pp + n_tg + 1) + 2, sizeof *tests);
    int n_t = 0;
    struct lm_batch_entry *batch = malloc(BENCH_N_BATCH * sizeof *batch);
    struct lm_sampler_params sp = lm_sampler_params_default();
    struct lm_sampler *smp = NULL;
    if (!tests || !batch || lm_sampler_init(&smp, &sp, mi.n_vocab) != LM_OK) {
        die_status("");
        return 1;
    }
    double tg_ref = 0; // tg tok/s at the breakdown's thread count
    int bd_threads = 1;
    for (int i = 0; i < n_th; i++) if (th[i] > bd_threads) bd_threads = (int)th[i];
    int rc = 0;

    for (int ti = 0; ti < n_th && rc == 0; ti++) {
        struct lm_context_params cp = {.n_ctx = (int32_t)need, .n_seq_max = 1,
                                       .n_batch = BENCH_N_BATCH, .n_threads = (int32_t)th[ti]};
        struct lm_context *c = NULL;
        const uint64_t t_ctx0 = lm_now_ns();
        if ((st = lm_context_init(&c, m, &cp)) != LM_OK) { die_status(""); rc = 1; break; }
        if (ti == 0) mi.ctx_init_ms = (double)(lm_now_ns() - t_ctx0) / 1e6;
        struct bench_run r = {.c = c, .ids = ids, .batch = batch, .smp = smp};
        for (int i = 0; i < n_pp && rc == 0; i++) {
            if (pp[i] == 0) continue;
            struct bench_test *t = &tests[n_t++];
            snprintf(t->name, sizeof t->name, "pp%lld", (long long)pp[i]);
            snprintf(t->kind, sizeof t->kind, "pp");
            t->threads = (int)th[ti];
            t->n_prompt = (int)pp[i];
            t->units = (double)pp[i];
            if (run_test(&r, run_pp, (int)pp[i], (int)warmup, (int)reps, t, progress) != LM_OK) {
                die_status(""); rc = 1;
            }
        }
        for (int i = 0; i < n_tg && rc == 0; i++) {
            if (tg[i] == 0) continue;
            struct bench_test *t = &tests[n_t++];
            snprintf(t->name, sizeof t->name, "tg%lld", (long long)tg[i]);
            snprintf(t->kind, sizeof t->kind, "tg");
            t->threads = (int)th[ti];
            t->n_gen = (int)tg[i];
            t->units = (double)tg[i];
            if (run_test(&r, run_tg, (int)tg[i], (int)warmup, (int)reps, t, progress) != LM_OK) {
                die_status(""); rc = 1;
            }
        }
        if (ttft > 0 && rc == 0) {
            struct bench_test *t = &tests[n_t++];
            snprintf(t->name, sizeof t->name, "ttft%lld", (long long)ttft);
            snprintf(t->kind, sizeof t->kind, "ttft");
            t->threads = (int)th[ti];
            t->n_prompt = (int)ttft;
            t->units = (double)ttft;
            if (run_test(&r, run_ttft, (int)ttft, (int)warmup, (int)reps, t, progress) != LM_OK) {
                die_status(""); rc = 1;
            }
        }
        if (ti == 0 && rc == 0) { // single-threaded tests, once
            struct bench_test *t = &tests[n_t++];
            snprintf(t->name, sizeof t->name, "tokenize");
            snprintf(t->kind, sizeof t->kind, "tokenize");
            t->threads = 1;
            if (run_tokenize(m, (int)warmup, (int)reps, t) != LM_OK) { die_status(""); rc = 1; }
            lm_kv_cache_seq_rm(c, 0, 0, -1);
            if (rc == 0 && lm_bench_prefill(c, ids, BENCH_TG_PROMPT + 1, batch) == LM_OK) {
                t = &tests[n_t++];
                snprintf(t->name, sizeof t->name, "sample");
                snprintf(t->kind, sizeof t->kind, "sample");
                t->threads = 1;
                if (run_sample(&r, mi.n_vocab, (int)warmup, (int)reps, t) != LM_OK) {
                    die_status(""); rc = 1;
                }
            } else if (rc == 0) {
                die_status(""); rc = 1;
            }
        }
        lm_context_free(c);
    }
    for (int i = 0; i < n_t; i++) {
        test_finish(&tests[i], &mi, bw, n_bw);
        if (!strcmp(tests[i].kind, "tg") && tests[i].threads == bd_threads && tests[i].n_gen == bd_gen)
            tg_ref = tests[i].med_ts;
    }

    // ---- breakdown
    struct lm_bench_breakdown *bd = NULL;
    if (breakdown && rc == 0) {
        if (progress) fprintf(stderr, "lumen bench: breakdown run (%lld + %lld tokens, %d threads)\n",
                              (long long)bd_prompt, (long long)bd_gen, bd_threads);
        struct lm_bench_breakdown_params bp = {.n_threads = bd_threads, .n_prompt = (int)bd_prompt,
                                               .n_gen = (int)bd_gen, .warmup = (int)warmup,
                                               .tg_ref_ts = tg_ref};
        if (lm_bench_breakdown_run(m, &mi, bw, n_bw, &bp, &bd) != LM_OK) { die_status(""); rc = 1; }
    }

    if (rc == 0) {
        if (fmt == LM_BENCH_MD) {
            print_md(stdout, &mi, tests, n_t, bw, n_bw, (int)bw_mib);
            if (bd) lm_bench_breakdown_print(bd, stdout);
        } else if (fmt == LM_BENCH_CSV) {
            print_csv(stdout, &mi, tests, n_t, bw, n_bw);
            if (bd) lm_bench_breakdown_print(bd, stderr);
        } else {
            print_json(stdout, &mi, m, tests, n_t, bw, n_bw, (int)bw_mib, (int)reps, (int)warmup,
                       th, n_th, bd, NULL, NULL, 0);
        }
        fflush(stdout);
    }
    lm_bench_breakdown_free(bd);
    for (int i = 0; i < n_t; i++) free(tests[i].ns);
    free(tests);
    free(batch);
    free(ids);
    lm_sampler_free(smp);
    lm_model_free(m);
    return rc;
}
