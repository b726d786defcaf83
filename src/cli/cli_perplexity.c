// `lumen perplexity`: llama-perplexity's method (chunks of -c tokens, BOS first, each chunk
// scored on its second half; the same "+/-" estimate), and its KL-divergence mode on its own
// base-logits file format (include/lumen_kld_base.h), written and read, so lumen and llama.cpp
// compare through one file.
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lumen_kld_base.h"
#include "lumen.h"

static const char *k_ppl_help =
    "usage: lumen perplexity [-m MODEL] -f TEXT [-c N] [-b N] [-t N] [options]\n"
    "       lumen perplexity [-m MODEL] -f TEXT --kl-divergence-base FILE     (write FILE)\n"
    "       lumen perplexity [-m MODEL] --kl-divergence-base FILE --kl-divergence (compare)\n"
    "\n"
    "  -m, --model PATH      GGUF model (default: " LM_DEFAULT_MODEL ")\n"
    "  -f, --file PATH       the text (tokenized with BOS as the vocabulary says)\n"
    "  -c, --ctx-size N      tokens per chunk (default 512)\n"
    "  -b, --batch-size N    tokens per lm_decode call (default min(c, 512)); below c, or a\n"
    "                        multiple of it: then b/c chunks run side by side as sequences\n"
    "  -t, --threads N       threads (default: physical cores)\n"
    "      --chunks N        score at most N chunks (default: all)\n"
    CLI_KV_TYPE_HELP
    "      --kl-divergence-base FILE\n"
    "                        without --kl-divergence: also write the tokens and every scored\n"
    "                        position's log-probabilities to FILE in llama-perplexity's format\n"
    "                        (`llama-perplexity --kl-divergence-base` reads and writes the same)\n"
    "      --kl-divergence   read FILE (from lumen or llama-perplexity) instead of a text: run\n"
    "                        its tokens and compare with its log-probabilities: KL-divergence\n"
    "                        (mean, percentiles), top-1 agreement, and the PPL of both\n"
    "\n"
    "The text is split into chunks of c tokens (at least 2 chunks are needed); each chunk runs\n"
    "alone from an empty KV cache, its first token replaced by BOS, and the tokens after\n"
    "position c/2 are scored given everything before them in the chunk: PPL = exp(mean\n"
    "negative log-likelihood), +/- its standard error. stdout: the running PPL after each chunk\n"
    "as llama-perplexity prints it ([1]13.0142,[2]13.8935,...), then 'Final estimate: PPL = X\n"
    "+/- Y'. Progress and timing go to stderr.\n";

enum ppl_mode { PPL_PLAIN, PPL_WRITE, PPL_KLD };

// Rows (scored positions) handed to the worker threads at once: bounds the memory of
// encoded / read base rows to ROW_BLOCK x n_vocab x 2 bytes.
#define ROW_BLOCK 32

// =====================================================================  per-row math
// Each function mirrors the one of tools/perplexity/perplexity.cpp it is named after,
// operation for operation (float vs double where llama.cpp has them), so the same logits
// give the same figures.

// llama.cpp's nearest_int: round to nearest through the float mantissa (|x| < 2^22).
static inline int nearest_int(float fval) {
    const float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

struct row_job {
    const float *logits;  // n_vocab
    int32_t tok;          // the token this position predicts
    const uint16_t *base; // PPL_KLD: the base row
    uint16_t *out;        // PPL_WRITE: the row to fill
    double nll;           // PPL_PLAIN, PPL_WRITE: -log p(tok)
    // PPL_KLD
    float nll_f, nll_base, p_diff;
    double kld;
    int same_top;
};

// log_softmax(n_vocab, logits, tok) of perplexity.cpp (plain perplexity).
static void row_plain(struct row_job *j, int n_vocab) {
    const float *l = j->logits;
    float max_logit = l[0];
    for (int i = 1; i < n_vocab; i++) max_logit = l[i] > max_logit ? l[i] : max_logit;
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; i++) sum_exp += expf(l[i] - max_logit);
    j->nll = -((double)(l[j->tok] - max_logit) - log(sum_exp));
}

// log_softmax(n_vocab, logits, log_prob, tok): the 16-bit row of the base file.
static void row_write(struct row_job *j, int n_vocab, int64_t row_words) {
    const float *l = j->logits;
    float max_logit = l[0], min_logit = l[0];
    for (int i = 1; i < n_vocab; i++) {
        max_logit = l[i] > max_logit ? l[i] : max_logit;
        min_logit = l[i] < min_logit ? l[i] : min_logit;
    }
    min_logit = min_logit > max_logit - 16 ? min_logit : max_logit - 16;
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; i++) sum_exp += expf(l[i] - max_logit);
    const float log_sum_exp = (float)log(sum_exp);
    const float min_log_prob = min_logit - max_logit - log_sum_exp;
    const float scale = (max_logit - min_logit) / 65535.f;
    const float d[2] = {scale, min_log_prob};
    memcpy(j->out, d, sizeof d);
    uint16_t *q = j->out + 4;
    if (scale != 0) {
        const float inv_scale = 1 / scale;
        for (int i = 0; i < n_vocab; i++)
            q[i] = l[i] > min_logit ? (uint16_t)nearest_int(inv_scale * (l[i] - min_logit)) : 0;
    } else {
        memset(q, 0, (size_t)n_vocab * sizeof *q);
    }
    for (int64_t i = 4 + n_vocab; i < row_words; i++) j->out[i] = 0; // padding (odd n_vocab)
    j->nll = (double)(max_logit + log_sum_exp - l[j->tok]);
}

// log_softmax(n_vocab, logits, base_log_prob, tok, kld): one position against the base.
static void row_kld(struct row_job *j, int n_vocab) {
    const float *l = j->logits;
    float max_logit = l[0];
    int imax = 0;
    for (int i = 1; i < n_vocab; i++)
        if (l[i] > max_logit) {
            max_logit = l[i];
            imax = i;
        }
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; i++) sum_exp += expf(l[i] - max_logit);
    const float log_sum_exp = (float)log(sum_exp);
    float scale, min_log_prob;
    lm_kld_row_params(j->base, &scale, &min_log_prob);
    const uint16_t *q = j->base + 4;
    j->nll_f = max_logit + log_sum_exp - l[j->tok];
    j->nll_base = -(scale * q[j->tok] + min_log_prob);
    max_logit += log_sum_exp;
    double sum = 0;
    int imax_base = -1;
    float p_log_base_max = 0;
    for (int i = 0; i < n_vocab; i++) {
        const float p_log_base = scale * q[i] + min_log_prob;
        if (i == 0 || p_log_base > p_log_base_max) {
            p_log_base_max = p_log_base;
            imax_base = i;
        }
        if (p_log_base > -16.f) {
            const float p_base = expf(p_log_base);
            sum += p_base * (p_log_base - l[i] + max_logit);
        }
    }
    j->kld = sum;
    j->same_top = imax == imax_base;
    j->p_diff = expf(-j->nll_f) - expf(-j->nll_base);
}

// ---- worker threads over one block of rows (each row independent; results per row, so
// the sums made afterwards in row order do not depend on the thread count)

struct row_pool {
    struct row_job *jobs;
    int n;
    atomic_int next;
    enum ppl_mode mode;
    int n_vocab;
    int64_t row_words;
};

static void *row_worker(void *arg) {
    struct row_pool *p = arg;
    for (;;) {
        const int i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n) break;
        if (p->mode == PPL_PLAIN) row_plain(&p->jobs[i], p->n_vocab);
        else if (p->mode == PPL_WRITE) row_write(&p->jobs[i], p->n_vocab, p->row_words);
        else row_kld(&p->jobs[i], p->n_vocab);
    }
    return NULL;
}

static void rows_run(struct row_pool *p, int n_threads) {
    atomic_store(&p->next, 0);
    pthread_t th[64];
    int nt = n_threads > p->n ? p->n : n_threads;
    if (nt > 64) nt = 64;
    int started = 0;
    for (int t = 1; t < nt; t++)
        if (pthread_create(&th[started], NULL, row_worker, p) == 0) started++;
    row_worker(p);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
}

// =====================================================================  statistics

struct kld_stats { // kl_divergence_result of perplexity.cpp
    double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2, sum_nll_nll_base;
    double sum_kld, sum_kld2, sum_p_diff, sum_p_diff2, sum_p_diff4;
    float max_p_diff;
    size_t n_same_top, count;
    float *kld_values, *p_diff_values; // count of each, for percentiles
};

static void kld_add(struct kld_stats *k, const struct row_job *j) {
    const float nll = j->nll_f, nll_base = j->nll_base;
    k->sum_nll += nll;
    k->sum_nll2 += nll * nll;
    k->sum_nll_base += nll_base;
    k->sum_nll_base2 += nll_base * nll_base;
    k->sum_nll_nll_base += nll * nll_base;
    k->sum_kld += j->kld;
    k->sum_kld2 += j->kld * j->kld;
    k->n_same_top += (size_t)j->same_top;
    const float p_diff = j->p_diff;
    k->sum_p_diff += p_diff;
    const double p_diff2 = p_diff * p_diff;
    k->sum_p_diff2 += p_diff2;
    k->sum_p_diff4 += p_diff2 * p_diff2;
    if (fabsf(p_diff) > k->max_p_diff) k->max_p_diff = fabsf(p_diff);
    k->kld_values[k->count] = (float)j->kld;
    k->p_diff_values[k->count] = p_diff;
    k->count++;
}

struct mean_unc { double v, unc; };

static struct mean_unc mean_and_uncertainty(double sum, double sum2, size_t count) {
    if (count < 1) return (struct mean_unc){0, 0};
    const double f = sum / (double)count;
    double df = sum2 / (double)count - f * f;
    df = df > 0 && count > 10 ? sqrt(df / (double)(count - 1)) : 0.;
    return (struct mean_unc){f, df};
}

static double covariance(double suma, double sumb, double sumab, size_t count) {
    if (count < 10) return 0.0;
    double var = sumab / (double)count - (suma / (double)count) * (sumb / (double)count);
    return var / (double)(count - 1);
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static float percentile(const float *v, size_t n, float fraction) {
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    float p = fraction * (float)(n - 1);
    const size_t ip = (size_t)p;
    p -= (float)ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

static float median(const float *v, size_t n) {
    return n % 2 == 0 ? 0.5f * (v[n / 2] + v[n / 2 - 1]) : v[n / 2];
}

static void kld_print_chunk(const struct kld_stats *k, int chunk) {
    const struct mean_unc lp = mean_and_uncertainty(k->sum_nll, k->sum_nll2, k->count);
    const double ppl = exp(lp.v);
    const struct mean_unc lb = mean_and_uncertainty(k->sum_nll_base, k->sum_nll_base2, k->count);
    const double cov = covariance(k->sum_nll, k->sum_nll_base, k->sum_nll_nll_base, k->count);
    const double ratio_unc = sqrt(lp.unc * lp.unc + lb.unc * lb.unc - 2.0 * cov);
    const struct mean_unc kl = mean_and_uncertainty(k->sum_kld, k->sum_kld2, k->count);
    const struct mean_unc mse = mean_and_uncertainty(k->sum_p_diff2, k->sum_p_diff4, k->count);
    const double rms = sqrt(mse.v), rms_unc = rms > 0 ? 0.5 / rms * mse.unc : 0;
    const double top = (double)k->n_same_top / (double)k->count;
    const double top_unc = k->count > 1 ? sqrt(top * (1 - top) / (double)(k->count - 1)) : 0;
    printf("%4d    %9.4f +/- %9.4f    %10.5f +/- %10.5f    %10.5f +/- %10.5f    %6.3f +/- %6.3f %%"
           "    %6.3f +/- %6.3f %%\n",
           chunk, ppl, ppl * lp.unc, lp.v - lb.v, ratio_unc, kl.v, kl.unc, 100.0 * rms,
           100.0 * rms_unc, 100.0 * top, 100.0 * top_unc);
    fflush(stdout);
}

// The closing statistics of perplexity.cpp's kl_divergence(), ASCII (+/-, dp for its Δp).
static void kld_print_final(struct kld_stats *k) {
    if (k->count < 1) return;
    const size_t n = k->count;
    qsort(k->kld_values, n, sizeof(float), cmp_float);
    qsort(k->p_diff_values, n, sizeof(float), cmp_float);
    const struct mean_unc lp = mean_and_uncertainty(k->sum_nll, k->sum_nll2, n);
    const double ppl = exp(lp.v), ppl_unc = ppl * lp.unc;
    const struct mean_unc lb = mean_and_uncertainty(k->sum_nll_base, k->sum_nll_base2, n);
    const double ppl_b = exp(lb.v), ppl_b_unc = ppl_b * lb.unc;
    const double cov = covariance(k->sum_nll, k->sum_nll_base, k->sum_nll_nll_base, n);
    const double cor = lp.unc > 0 && lb.unc > 0 ? cov / (lp.unc * lb.unc) : 0;
    const double lr = lp.v - lb.v, lr_unc = sqrt(lp.unc * lp.unc + lb.unc * lb.unc - 2.0 * cov);
    const double r = exp(lr), r_unc = r * lr_unc;
    const double pc = ppl * ppl_b * cov;
    const double d_unc = sqrt(ppl_unc * ppl_unc + ppl_b_unc * ppl_b_unc - 2.0 * pc);
    printf("\n====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f +/- %10.6f\n", ppl, ppl_unc);
    printf("Mean PPL(base)                : %10.6f +/- %10.6f\n", ppl_b, ppl_b_unc);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * cor);
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f +/- %10.6f\n", lr, lr_unc);
    printf("Mean PPL(Q)/PPL(base)         : %10.6f +/- %10.6f\n", r, r_unc);
    printf("Mean PPL(Q)-PPL(base)         : %10.6f +/- %10.6f\n", ppl - ppl_b, d_unc);

    const struct mean_unc kl = mean_and_uncertainty(k->sum_kld, k->sum_kld2, n);
    const float *kv = k->kld_values;
    printf("\n====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6f +/- %10.6f\n", kl.v, kl.unc);
    printf("Maximum KLD: %10.6f\n", kv[n - 1]);
    printf("99.9%%   KLD: %10.6f\n", percentile(kv, n, 0.999f));
    printf("99.0%%   KLD: %10.6f\n", percentile(kv, n, 0.990f));
    printf("95.0%%   KLD: %10.6f\n", percentile(kv, n, 0.950f));
    printf("90.0%%   KLD: %10.6f\n", percentile(kv, n, 0.900f));
    printf("Median  KLD: %10.6f\n", median(kv, n));
    printf("10.0%%   KLD: %10.6f\n", percentile(kv, n, 0.100f));
    printf(" 5.0%%   KLD: %10.6f\n", percentile(kv, n, 0.050f));
    printf(" 1.0%%   KLD: %10.6f\n", percentile(kv, n, 0.010f));
    printf(" 0.1%%   KLD: %10.6f\n", percentile(kv, n, 0.001f));
    printf("Minimum KLD: %10.6f\n", kv[0]);

    const struct mean_unc pd = mean_and_uncertainty(k->sum_p_diff, k->sum_p_diff2, n);
    const float *pv = k->p_diff_values;
    printf("\n====== Token probability statistics ======\n");
    printf("Mean    dp: %6.3f +/- %5.3f %%\n", 100.0 * pd.v, 100.0 * pd.unc);
    printf("Maximum dp: %6.3f%%\n", 100.0 * pv[n - 1]);
    static const float fr[] = {0.999f, 0.990f, 0.950f, 0.900f, 0.750f};
    static const char *lb_[] = {"99.9%", "99.0%", "95.0%", "90.0%", "75.0%"};
    for (int i = 0; i < 5; i++) printf("%-7s dp: %6.3f%%\n", lb_[i], 100.0 * percentile(pv, n, fr[i]));
    printf("Median  dp: %6.3f%%\n", 100.0 * median(pv, n));
    static const float fr2[] = {0.250f, 0.100f, 0.050f, 0.010f, 0.001f};
    static const char *lb2[] = {"25.0%", "10.0%", " 5.0%", " 1.0%", " 0.1%"};
    for (int i = 0; i < 5; i++) printf("%-7s dp: %6.3f%%\n", lb2[i], 100.0 * percentile(pv, n, fr2[i]));
    printf("Minimum dp: %6.3f%%\n", 100.0 * pv[0]);
    const struct mean_unc mse = mean_and_uncertainty(k->sum_p_diff2, k->sum_p_diff4, n);
    const double rms = sqrt(mse.v), rms_unc = rms > 0 ? 0.5 / rms * mse.unc : 0;
    printf("RMS dp    : %6.3f +/- %5.3f %%\n", 100.0 * rms, 100.0 * rms_unc);
    const double top = (double)k->n_same_top / (double)n;
    printf("Same top p: %6.3f +/- %5.3f %%\n", 100.0 * top,
           n > 1 ? 100.0 * sqrt(top * (1.0 - top) / (double)(n - 1)) : 0.0);
}

// =====================================================================  command

struct ppl_run {
    enum ppl_mode mode;
    struct lm_context *ctx;
    int n_vocab, n_threads;
    int32_t bos;           // substituted for each chunk's first token, or -1
    const int32_t *tokens; // n_chunk * n_ctx
    int n_ctx, n_chunk, n_batch, n_seq;
    int n_score;           // scored positions per chunk: n_ctx - 1 - n_ctx/2
    struct lm_kld_base *base; // PPL_KLD
    FILE *out;                // PPL_WRITE
    const char *out_path;
    int64_t row_words;
    // results
    double nll, nll2;
    long count;
    struct kld_stats kld;
};

// Runs the rows of the last lm_decode (n_rows of them, in entry order; row r predicts
// targets[r]) through the pool in blocks, then adds them up in order.
static int process_rows(struct ppl_run *r, const int32_t *targets, int n_rows, uint16_t *rowbuf,
                        struct row_job *jobs) {
    for (int b0 = 0; b0 < n_rows; b0 += ROW_BLOCK) {
        const int nb = n_rows - b0 < ROW_BLOCK ? n_rows - b0 : ROW_BLOCK;
        for (int i = 0; i < nb; i++) {
            struct row_job *j = &jobs[i];
            memset(j, 0, sizeof *j);
            j->logits = lm_get_logits(r->ctx, b0 + i);
            j->tok = targets[b0 + i];
            if (!j->logits) {
                fprintf(stderr, "lumen perplexity: no logits for row %d\n", b0 + i);
                return 0;
            }
            if (r->mode == PPL_KLD) {
                uint16_t *row = rowbuf + (int64_t)i * r->row_words;
                if (lm_kld_base_read_row(r->base, row) != LM_OK) {
                    fprintf(stderr, "lumen perplexity: %s\n", lm_error_msg());
                    return 0;
                }
                j->base = row;
            } else if (r->mode == PPL_WRITE) {
                j->out = rowbuf + (int64_t)i * r->row_words;
            }
        }
        struct row_pool pool = {.jobs = jobs, .n = nb, .mode = r->mode, .n_vocab = r->n_vocab,
                                .row_words = r->row_words};
        rows_run(&pool, r->n_threads);
        for (int i = 0; i < nb; i++) {
            // rows arrive chunk by chunk, positions in order: a chunk is complete when its
            // n_score-th row is in, and its line shows the running figures, as llama prints
            if (r->mode == PPL_KLD) {
                kld_add(&r->kld, &jobs[i]);
                if (r->kld.count % (size_t)r->n_score == 0)
                    kld_print_chunk(&r->kld, (int)(r->kld.count / (size_t)r->n_score));
            } else {
                r->nll += jobs[i].nll;
                r->nll2 += jobs[i].nll * jobs[i].nll;
                r->count++;
                if (r->count % r->n_score == 0) {
                    printf("[%ld]%.4f,", r->count / r->n_score, exp(r->nll / (double)r->count));
                    fflush(stdout);
                }
            }
        }
        if (r->mode == PPL_WRITE &&
            fwrite(rowbuf, 2 * (size_t)r->row_words, (size_t)nb, r->out) != (size_t)nb) {
            fprintf(stderr, "lumen perplexity: %s: write failed\n", r->out_path);
            return 0;
        }
    }
    return 1;
}

// The chunk loop of perplexity.cpp's perplexity() / kl_divergence().
static int run_chunks(struct ppl_run *r) {
    const int n_ctx = r->n_ctx, first = n_ctx / 2, n_score = n_ctx - 1 - first;
    const int n_batch = r->n_batch, n_seq = r->n_seq;
    const int num_batches = (n_ctx + n_batch - 1) / n_batch;
    const int per_call = n_batch < n_ctx ? n_batch : n_ctx; // positions of one sequence per call
    const int rows_max = n_seq * (per_call < n_score ? per_call : n_score);
    struct lm_batch_entry *e = malloc(sizeof *e * (size_t)n_seq * (size_t)per_call);
    int32_t *targets = malloc(sizeof *targets * (size_t)rows_max);
    struct row_job *jobs = malloc(sizeof *jobs * ROW_BLOCK);
    uint16_t *rowbuf = r->mode == PPL_PLAIN ? NULL
                                            : malloc((size_t)ROW_BLOCK * 2 * (size_t)r->row_words);
    int ok = e && targets && jobs && (r->mode == PPL_PLAIN || rowbuf);
    if (!ok) fputs("lumen perplexity: out of memory\n", stderr);
    if (r->mode == PPL_KLD && ok)
        printf("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence"
               "              dp RMS            Same top p\n");
    const uint64_t t0 = lm_time_ns();
    for (int i = 0; ok && i < r->n_chunk; i += n_seq) {
        const int n_seq_batch = n_seq < r->n_chunk - i ? n_seq : r->n_chunk - i;
        const uint64_t t_start = lm_time_ns();
        for (int s = 0; s < n_seq_batch; s++) lm_kv_cache_seq_rm(r->ctx, s, 0, -1);
        for (int j = 0; ok && j < num_batches; j++) {
            const int p0 = j * n_batch;
            const int bs = n_ctx - p0 < n_batch ? n_ctx - p0 : n_batch;
            int n = 0, n_rows = 0;
            for (int s = 0; s < n_seq_batch; s++) {
                const int32_t *tk = r->tokens + (size_t)(i + s) * n_ctx;
                for (int k = 0; k < bs; k++) {
                    const int pos = p0 + k;
                    const bool want = pos >= first && pos < n_ctx - 1;
                    e[n++] = (struct lm_batch_entry){
                        .token = pos == 0 && r->bos >= 0 ? r->bos : tk[pos],
                        .pos = pos, .seq = s, .want_logits = want};
                    if (want) targets[n_rows++] = tk[pos + 1];
                }
            }
            const enum lm_status st = lm_decode(r->ctx, e, n);
            if (st != LM_OK) {
                fprintf(stderr, "lumen perplexity: lm_decode (chunk %d): %s\n", i + 1, lm_error_msg());
                ok = 0;
                break;
            }
            if (n_rows && !process_rows(r, targets, n_rows, rowbuf, jobs)) ok = 0;
        }
        if (!ok) break;
        if (i == 0) {
            const double t = (double)(lm_time_ns() - t_start) / 1e9;
            const double eta = t * (double)((r->n_chunk + n_seq - 1) / n_seq);
            fprintf(stderr, "lumen perplexity: %.2f seconds per pass - ETA %.2f minutes\n", t,
                    eta / 60.0);
        }
    }
    const double el = (double)(lm_time_ns() - t0) / 1e9;
    if (ok) {
        const long n_tok = (long)r->n_chunk * n_ctx;
        fprintf(stderr, "lumen perplexity: %d chunks, %ld tokens in %.2f s (%.1f tok/s)\n",
                r->n_chunk, n_tok, el, el > 0 ? (double)n_tok / el : 0.0);
    }
    free(e);
    free(targets);
    free(jobs);
    free(rowbuf);
    return ok;
}

struct ppl_opts {
    const char *model_path, *text_path, *base_path;
    int64_t n_ctx, n_batch, n_threads, max_chunks;
    bool kld;
    int kv_type_k, kv_type_v;
};

static void ppl_parse(int argc, char **argv, struct ppl_opts *o) {
    const char *cmd = "perplexity";
    *o = (struct ppl_opts){.max_chunks = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(k_ppl_help, stdout); exit(0); }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) o->text_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size"))
            o->n_ctx = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 4, LM_KLD_MAX_CTX);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size"))
            o->n_batch = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 1 << 16);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            o->n_threads = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 256);
        else if (!strcmp(a, "--chunks"))
            o->max_chunks = cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 1 << 24);
        else if (!strcmp(a, "--kl-divergence-base")) o->base_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--kl-divergence")) o->kld = true;
        else if (cli_kv_type(cmd, argc, argv, &i, &o->kv_type_k, &o->kv_type_v)) continue;
        else cli_usage_error(cmd, "unknown option '%s' (try `lumen perplexity --help`)", a);
    }
    if (o->kld && !o->base_path) cli_usage_error(cmd, "--kl-divergence needs --kl-divergence-base FILE");
    if (o->kld && o->text_path)
        cli_usage_error(cmd, "-f is not used with --kl-divergence: the base file holds the tokens");
    if (!o->kld && !o->text_path) cli_usage_error(cmd, "no text: give -f FILE (see --help)");
}

// The chunks' tokens: the base file's (--kl-divergence) or the text's; writing a base file,
// its header and tokens; comparing with one, the room for the per-token values. Returns 0,
// or the exit status (message printed).
static int ppl_tokens(struct ppl_run *r, const struct ppl_opts *o, struct lm_kld_base *base,
                      const struct lm_tokenizer *tok, const char *text, size_t text_len,
                      int32_t **ids, size_t *n_ids) {
    const char *base_path = o->base_path;
    if (r->mode == PPL_KLD) {
        if (base->n_vocab != r->n_vocab) {
            fprintf(stderr, "lumen perplexity: %s: n_vocab %d, but the model %s has %d (a base file "
                    "of another model?)\n", base_path, base->n_vocab, o->model_path, r->n_vocab);
            return 1;
        }
        r->tokens = base->tokens;
        r->n_chunk = base->n_chunk;
    } else {
        if (lm_tokenize(tok, text, text_len, true, false, ids, n_ids) != LM_OK) {
            fprintf(stderr, "lumen perplexity: %s\n", lm_error_msg());
            return 1;
        }
        if (*n_ids < 2 * (size_t)r->n_ctx) {
            fprintf(stderr, "lumen perplexity: %s tokenizes to %zu tokens; -c %d needs at least "
                    "%lld (2 chunks)\n", o->text_path, *n_ids, r->n_ctx, 2 * (long long)r->n_ctx);
            return LM_EXIT_USAGE;
        }
        r->tokens = *ids;
        r->n_chunk = (int)(*n_ids / (size_t)r->n_ctx);
    }
    if (o->max_chunks > 0 && o->max_chunks < r->n_chunk) r->n_chunk = (int)o->max_chunks;
    if (r->mode == PPL_WRITE) {
        if (!(r->out = fopen(base_path, "wb"))) {
            fprintf(stderr, "lumen perplexity: cannot write '%s'\n", base_path);
            return LM_EXIT_USAGE;
        }
        r->out_path = base_path;
        const int32_t h[3] = {r->n_ctx, r->n_vocab, r->n_chunk};
        if (fwrite(LM_KLD_MAGIC, 8, 1, r->out) != 1 || fwrite(h, sizeof h, 1, r->out) != 1 ||
            fwrite(r->tokens, sizeof *r->tokens * (size_t)r->n_ctx, (size_t)r->n_chunk, r->out) !=
                (size_t)r->n_chunk) {
            fprintf(stderr, "lumen perplexity: %s: write failed\n", base_path);
            return 1;
        }
    }
    if (r->mode == PPL_KLD) {
        r->base = base;
        const size_t n = (size_t)r->n_chunk * (size_t)r->n_score;
        r->kld.kld_values = malloc(n * sizeof(float));
        r->kld.p_diff_values = malloc(n * sizeof(float));
        if (!r->kld.kld_values || !r->kld.p_diff_values) {
            fputs("lumen perplexity: out of memory\n", stderr);
            return 1;
        }
    }
    return 0;
}

// The context for the chunks, and the lines saying what will be scored. Returns false on a
// failure (message printed).
static bool ppl_context(struct ppl_run *r, const struct ppl_opts *o, struct lm_model *m,
                        const struct lm_kld_base *base, size_t n_ids) {
    const int per_call = r->n_batch < r->n_ctx ? r->n_batch : r->n_ctx;
    struct lm_context_params cp = {
        .n_ctx = r->n_ctx, .n_seq_max = r->n_seq, .n_batch = r->n_seq * per_call,
        .n_threads = (int32_t)o->n_threads, .kv_tokens = r->n_seq * r->n_ctx, .no_prefix_cache = true,
        .n_logits_max = r->n_seq * (per_call < r->n_score ? per_call : r->n_score),
        .kv_type_k = o->kv_type_k, .kv_type_v = o->kv_type_v};
    if (lm_context_init(&r->ctx, m, &cp) != LM_OK) {
        fprintf(stderr, "lumen perplexity: %s\n", lm_error_msg());
        return false;
    }
    r->n_threads = lm_context_n_threads(r->ctx);
    if (r->n_ctx > lm_model_n_ctx_train(m) && lm_model_n_ctx_train(m) > 0)
        fprintf(stderr, "lumen perplexity: warning: the model was trained on %d context tokens, "
                "-c is %d\n", lm_model_n_ctx_train(m), r->n_ctx);
    if (r->mode == PPL_KLD)
        fprintf(stderr, "lumen perplexity: %s: %d chunks of %d tokens (of %d in the file), "
                "n_vocab %d\n", o->base_path, r->n_chunk, r->n_ctx, base->n_chunk, r->n_vocab);
    else
        fprintf(stderr, "lumen perplexity: %s: %zu tokens -> %d chunks of %d\n", o->text_path, n_ids,
                r->n_chunk, r->n_ctx);
    fprintf(stderr, "lumen perplexity: positions %d..%d of each chunk scored (%d per chunk), "
            "batch %d, %d sequence%s per call, %d threads\n", r->n_ctx / 2, r->n_ctx - 2, r->n_score,
            r->n_batch, r->n_seq, r->n_seq > 1 ? "s" : "", r->n_threads);
    return true;
}

// The final estimate (perplexity or KL-divergence), and the base file closed. Returns false
// when writing it failed (message printed).
static bool ppl_finish(struct ppl_run *r, const char *base_path) {
    if (r->mode == PPL_KLD) {
        kld_print_final(&r->kld);
    } else {
        printf("\n");
        const double nll = r->nll / (double)r->count;
        double nll2 = r->nll2 / (double)r->count - nll * nll;
        const double ppl = exp(nll);
        if (nll2 > 0 && r->count > 1) {
            nll2 = sqrt(nll2 / (double)(r->count - 1));
            printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, nll2 * ppl);
        } else {
            printf("Final estimate: PPL = %.4f +/- nan\n", ppl);
        }
    }
    if (r->out) {
        const int err = fclose(r->out);
        r->out = NULL;
        if (err) {
            fprintf(stderr, "lumen perplexity: %s: write failed\n", base_path);
            return false;
        }
        fprintf(stderr, "lumen perplexity: wrote %s\n", base_path);
    }
    return true;
}

int cmd_perplexity(int argc, char **argv) {
    const char *cmd = "perplexity";
    struct ppl_opts o;
    ppl_parse(argc, argv, &o);
    const char *base_path = o.base_path;
    int64_t n_ctx = o.n_ctx, n_batch = o.n_batch;
    struct ppl_run r = {.mode = o.kld ? PPL_KLD : base_path ? PPL_WRITE : PPL_PLAIN};
    struct lm_kld_base base = {0};
    char *text = NULL;
    size_t text_len = 0;
    if (o.text_path && !(text = cli_read_file(o.text_path, &text_len)))
        cli_usage_error(cmd, "cannot read file '%s'", o.text_path);
    if (r.mode == PPL_KLD) {
        enum lm_status st = lm_kld_base_open(&base, base_path);
        if (st != LM_OK) {
            fprintf(stderr, "lumen perplexity: %s\n", lm_error_msg());
            return st == LM_ERR_IO ? LM_EXIT_USAGE : 1;
        }
        if (n_ctx && n_ctx != base.n_ctx) {
            lm_kld_base_close(&base);
            cli_usage_error(cmd, "%s was computed with -c %d, not %lld (leave -c out)", base_path,
                            base.n_ctx, (long long)n_ctx);
        }
        n_ctx = base.n_ctx;
    }
    if (!n_ctx) n_ctx = 512;
    if (!n_batch) n_batch = n_ctx < 512 ? n_ctx : 512;
    if (!(n_batch < n_ctx || n_batch % n_ctx == 0))
        cli_usage_error(cmd, "-b %lld must be below -c %lld or a multiple of it", (long long)n_batch,
                        (long long)n_ctx);
    r.n_ctx = (int)n_ctx;
    r.n_batch = (int)n_batch;
    r.n_seq = n_batch > n_ctx ? (int)(n_batch / n_ctx) : 1;
    r.n_score = r.n_ctx - 1 - r.n_ctx / 2;

    if (!o.model_path) o.model_path = cli_default_model();
    struct lm_model *m = NULL;
    enum lm_status st = lm_model_load(&m, o.model_path, NULL);
    if (st != LM_OK) {
        fprintf(stderr, "lumen perplexity: %s\n", lm_error_msg());
        free(text);
        lm_kld_base_close(&base);
        return st == LM_ERR_IO ? LM_EXIT_USAGE : 1;
    }
    const struct lm_tokenizer *tok = lm_model_tokenizer(m);
    r.n_vocab = lm_model_n_vocab(m);
    r.row_words = LM_KLD_ROW_WORDS(r.n_vocab);
    r.bos = lm_tokenizer_add_bos(tok) ? lm_tokenizer_bos(tok) : -1;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = ppl_tokens(&r, &o, &base, tok, text, text_len, &ids, &n_ids);
    if (rc == 0) rc = ppl_context(&r, &o, m, &base, n_ids) && run_chunks(&r) && ppl_finish(&r, base_path) ? 0 : 1;
    if (r.out) fclose(r.out);
    free(r.kld.kld_values);
    free(r.kld.p_diff_values);
    lm_context_free(r.ctx);
    lm_kld_base_close(&base);
    free(ids);
    free(text);
    lm_model_free(m);
    return rc;
}
