// Prometheus text exposition (format 0.0.4) of the server's counters and histograms and
// the engine's gauges. One mutex; only HTTP threads touch it, never the engine thread.
#include "metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

static const int k_status[] = {200, 204, 400, 401, 403, 404, 405, 408, 413, 415, 429, 499, 500, 503};
#define N_STATUS ((int)(sizeof k_status / sizeof k_status[0]))

static const char *const k_finish[MF_COUNT] = {"stop", "length", "cancelled", "error"};

// Bucket upper bounds (seconds); +Inf is implicit.
static const double k_b_ttft[] = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5,
                                  10, 20, 40, 80};
static const double k_b_itl[] = {0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1,
                                 0.25, 0.5, 1, 2.5};
static const double k_b_e2e[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320};
static const double k_b_queue[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

#define MAX_BUCKETS 16

struct hist_def {
    const char *name, *help;
    const double *b;
    int n;
};

static const struct hist_def k_hist[MH_COUNT] = {
    {"lumen_time_to_first_token_seconds", "Time from a request's arrival to its first token.",
     k_b_ttft, (int)(sizeof k_b_ttft / sizeof k_b_ttft[0])},
    {"lumen_inter_token_latency_seconds", "Time between consecutive tokens of a request.", k_b_itl,
     (int)(sizeof k_b_itl / sizeof k_b_itl[0])},
    {"lumen_request_duration_seconds", "Time from a generation request's arrival to its end "
     "(end to end).", k_b_e2e, (int)(sizeof k_b_e2e / sizeof k_b_e2e[0])},
    {"lumen_request_queue_seconds", "Time a request waited in the engine's queue before it was "
     "first scheduled.", k_b_queue, (int)(sizeof k_b_queue / sizeof k_b_queue[0])},
};

struct hist {
    uint64_t bucket[MAX_BUCKETS + 1]; // last: +Inf
    uint64_t count;
    double sum;
};

#define MAX_ROUTES (METRICS_MAX_ROUTES + 1) // the last: "other"

struct mdata {
    uint64_t requests[MAX_ROUTES][N_STATUS + 1]; // last: any other status
    uint64_t finished[MF_COUNT];
    uint64_t prompt_tokens, generated_tokens;
    struct hist h[MH_COUNT];
};

struct metrics {
    pthread_mutex_t mu;
    const char *route[MAX_ROUTES]; // labels of requests' routes; the last used: "other"
    int n_route;
    struct mdata d;
};

struct metrics *metrics_new(const char *const *routes, int n) {
    if (n < 0 || n > METRICS_MAX_ROUTES) return NULL;
    struct metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    pthread_mutex_init(&m->mu, NULL);
    for (int i = 0; i < n; i++) m->route[i] = routes[i];
    m->route[n] = "other";
    m->n_route = n + 1;
    return m;
}

void metrics_free(struct metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void metrics_request(struct metrics *m, const char *route, int status) {
    int k = N_STATUS;
    for (int i = 0; i < N_STATUS; i++)
        if (k_status[i] == status) k = i;
    int r = m->n_route - 1; // "other"
    for (int i = 0; route && i < m->n_route - 1; i++)
        if (!strcmp(m->route[i], route)) r = i;
    pthread_mutex_lock(&m->mu);
    m->d.requests[r][k]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_tokens(struct metrics *m, int64_t prompt, int64_t generated) {
    pthread_mutex_lock(&m->mu);
    m->d.prompt_tokens += (uint64_t)(prompt > 0 ? prompt : 0);
    m->d.generated_tokens += (uint64_t)(generated > 0 ? generated : 0);
    pthread_mutex_unlock(&m->mu);
}

void metrics_finish(struct metrics *m, enum metrics_finish f) {
    pthread_mutex_lock(&m->mu);
    m->d.finished[f < MF_COUNT ? f : MF_ERROR]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_observe(struct metrics *m, enum metrics_hist h, double s) {
    if (h >= MH_COUNT || !(s >= 0)) return;
    const struct hist_def *d = &k_hist[h];
    int k = d->n;
    for (int i = 0; i < d->n; i++)
        if (s <= d->b[i]) { k = i; break; }
    pthread_mutex_lock(&m->mu);
    m->d.h[h].bucket[k]++;
    m->d.h[h].count++;
    m->d.h[h].sum += s;
    pthread_mutex_unlock(&m->mu);
}

static void head(struct sbuf *b, const char *name, const char *type, const char *help) {
    sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void scalar(struct sbuf *b, const char *name, const char *type, const char *help, double v) {
    head(b, name, type, help);
    sbuf_printf(b, "%s %.17g\n", name, v);
}

char *metrics_render(struct metrics *m, const struct lm_engine_stats *st, const struct metrics_conns *cs) {
    struct mdata s;
    pthread_mutex_lock(&m->mu);
    s = m->d; // a consistent copy; render outside the lock
    pthread_mutex_unlock(&m->mu);
    struct sbuf b = {0};

    head(&b, "lumen_requests_total", "counter", "HTTP requests answered, by route and status "
         "(499: the client went away before the answer was complete).");
    for (int r = 0; r < m->n_route; r++)
        for (int k = 0; k <= N_STATUS; k++)
            if (s.requests[r][k]) {
                char code[8];
                if (k < N_STATUS) snprintf(code, sizeof code, "%d", k_status[k]);
                else snprintf(code, sizeof code, "other");
                sbuf_printf(&b, "lumen_requests_total{route=\"%s\",status=\"%s\"} %llu\n", m->route[r],
                            code, (unsigned long long)s.requests[r][k]);
            }
    head(&b, "lumen_requests_finished_total", "counter", "Generation requests ended, by reason "
         "(stop: end of generation or a stop string; length: max_tokens or the context; "
         "cancelled: client gone, too slow or shutdown; error).");
    for (int f = 0; f < MF_COUNT; f++)
        sbuf_printf(&b, "lumen_requests_finished_total{reason=\"%s\"} %llu\n", k_finish[f],
                    (unsigned long long)s.finished[f]);
    scalar(&b, "lumen_prompt_tokens_total", "counter", "Prompt tokens of the generation requests "
           "submitted to the engine.", (double)s.prompt_tokens);
    scalar(&b, "lumen_generation_tokens_total", "counter", "Generated tokens returned to clients "
           "(the sum of usage.completion_tokens).", (double)s.generated_tokens);

    for (int h = 0; h < MH_COUNT; h++) {
        const struct hist_def *d = &k_hist[h];
        head(&b, d->name, "histogram", d->help);
        uint64_t cum = 0;
        for (int i = 0; i < d->n; i++) {
            cum += s.h[h].bucket[i];
            sbuf_printf(&b, "%s_bucket{le=\"%g\"} %llu\n", d->name, d->b[i], (unsigned long long)cum);
        }
        cum += s.h[h].bucket[d->n];
        sbuf_printf(&b, "%s_bucket{le=\"+Inf\"} %llu\n", d->name, (unsigned long long)cum);
        sbuf_printf(&b, "%s_sum %.9g\n%s_count %llu\n", d->name, s.h[h].sum, d->name,
                    (unsigned long long)s.h[h].count);
    }

    scalar(&b, "lumen_model_ready", "gauge", "1 once the model is loaded and requests are served.",
           st ? 1 : 0);
    const struct metrics_conns none = {0};
    if (!cs) cs = &none;
    scalar(&b, "lumen_connections_open", "gauge", "Client connections held (at most --max-connections).",
           cs->open);
    head(&b, "lumen_connections_dropped_total", "counter", "Connections the server ended before a request "
         "(refused: a 503 at the connection caps; evicted: an idle or unfinished one closed to admit a new "
         "one at a cap; timeout: no complete request within --timeout).");
    sbuf_printf(&b, "lumen_connections_dropped_total{reason=\"refused\"} %llu\n", (unsigned long long)cs->refused);
    sbuf_printf(&b, "lumen_connections_dropped_total{reason=\"evicted\"} %llu\n", (unsigned long long)cs->evicted);
    sbuf_printf(&b, "lumen_connections_dropped_total{reason=\"timeout\"} %llu\n", (unsigned long long)cs->timed_out);
    if (st) {
        scalar(&b, "lumen_requests_running", "gauge", "Requests the engine is running (prefill or "
               "decode).", st->running);
        scalar(&b, "lumen_requests_waiting", "gauge", "Requests queued in the engine.", st->waiting);
        scalar(&b, "lumen_kv_blocks_used", "gauge", "KV pool blocks held by running requests.",
               st->kv.n_used);
        scalar(&b, "lumen_kv_blocks_cached", "gauge", "KV pool blocks held by no request, kept for "
               "the prefix cache (evicted least recently used).", st->kv.n_cached_free);
        scalar(&b, "lumen_kv_blocks_total", "gauge", "KV pool capacity in blocks.", st->kv.n_blocks);
        scalar(&b, "lumen_kv_block_tokens", "gauge", "Positions per KV block.", st->kv.block_size);
        scalar(&b, "lumen_kv_bytes_per_token", "gauge", "Bytes of K and V (all layers) one cached "
               "position holds in the KV pool (a block's bytes over its positions).",
               st->kv.block_size > 0 ? (double)st->kv.block_bytes / st->kv.block_size : 0.0);
        scalar(&b, "lumen_kv_bytes_used", "gauge", "Bytes of the KV pool's blocks held by running requests.",
               (double)st->kv.bytes_used);
        // What the Gateway API Inference Extension's endpoint picker reads (docs/server.md):
        // KV-cache utilisation as vLLM's kv_cache_usage_perc (blocks held by running requests
        // over all, 0..1; cached blocks are free to take), the pool's shape as its
        // cache_config_info (same label names, so the picker needs only the metric's name).
        scalar(&b, "lumen_kv_cache_usage_ratio", "gauge", "Fraction of the KV pool's blocks held by "
               "running requests (0..1; blocks kept only for the prefix cache count as free).",
               st->kv.n_blocks > 0 ? (double)st->kv.n_used / st->kv.n_blocks : 0.0);
        head(&b, "lumen_cache_config_info", "gauge", "The KV pool's shape in labels (value 1): "
             "block_size in tokens, num_gpu_blocks = blocks in the pool (vLLM's label names).");
        sbuf_printf(&b, "lumen_cache_config_info{block_size=\"%d\",num_gpu_blocks=\"%d\"} 1\n",
                    (int)st->kv.block_size, (int)st->kv.n_blocks);
        scalar(&b, "lumen_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the "
               "prefix cache.", (double)st->kv.prefix_query_tokens);
        scalar(&b, "lumen_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix "
               "cache (not computed again).", (double)st->kv.prefix_hit_tokens);
        scalar(&b, "lumen_engine_steps_total", "counter", "Engine steps (one forward pass each).",
               (double)st->steps);
        scalar(&b, "lumen_engine_preemptions_total", "counter", "Requests preempted (KV freed, "
               "recomputed later).", (double)st->preempted);
        scalar(&b, "lumen_spec_drafted_tokens_total", "counter", "Tokens drafted by speculative "
               "decoding (prompt lookup or the draft model) and verified in an engine step.",
               (double)st->drafted_tokens);
        scalar(&b, "lumen_spec_accepted_tokens_total", "counter", "Drafted tokens the model "
               "accepted (each saves a step of its request).", (double)st->accepted_tokens);
        scalar(&b, "lumen_grammar_forced_tokens_total", "counter", "Tokens a grammar forced that "
               "rode along a step as drafts and were accepted (jump-forward; each saves a step).",
               (double)st->forced_tokens);
        scalar(&b, "lumen_spec_verify_steps_total", "counter", "Engine steps that verified drafts.",
               (double)st->verify_steps);
        scalar(&b, "lumen_spec_verify_seconds_total", "counter", "Forward time of the steps that "
               "verified drafts.", (double)st->verify_ns / 1e9);
        scalar(&b, "lumen_spec_verify_plain_seconds_total", "counter", "Estimated forward time of "
               "the same steps without their drafts (measured cost by token count); the ratio "
               "of the two is the verify cost against a plain step.",
               (double)st->verify_plain_ns / 1e9);
        scalar(&b, "lumen_spec_draft_forwards_total", "counter", "Forward passes of the draft "
               "model (-md): catching up and drafting.", (double)st->draft_forwards);
        scalar(&b, "lumen_spec_draft_forward_seconds_total", "counter", "Time in the draft model's "
               "forward passes (-md).", (double)st->draft_forward_ns / 1e9);
    }
    if (b.oom) {
        sbuf_free(&b);
        return NULL;
    }
    return b.p;
}
