// The sampling chain of the bench tests that sample, described for the reports (sampling.h).
#include "sampling.h"

bool lm_bench_sampling_is_default(const struct lm_sampler_params *sp) {
    const struct lm_sampler_params d = lm_sampler_params_default();
    return sp->temperature == d.temperature && sp->top_k == d.top_k && sp->top_p == d.top_p &&
           sp->min_p == d.min_p && sp->repeat_penalty == d.repeat_penalty &&
           sp->repeat_last_n == d.repeat_last_n && sp->seed == d.seed &&
           sp->presence_penalty == d.presence_penalty && sp->frequency_penalty == d.frequency_penalty;
}

void lm_bench_sampling_desc(const struct lm_sampler_params *sp, char *buf, size_t n) {
    if (lm_bench_sampling_is_default(sp)) { // the text the reports had before the flags
        snprintf(buf, n, "default chain: temp 0.8, top-k 40, top-p 0.95, min-p 0.05");
        return;
    }
    size_t k = 0;
    if (sp->temperature <= 0) k = (size_t)snprintf(buf, n, "chain: greedy");
    else
        k = (size_t)snprintf(buf, n, "chain: temp %g, top-k %d, top-p %g, min-p %g",
                             (double)sp->temperature, (int)sp->top_k, (double)sp->top_p,
                             (double)sp->min_p);
    if (k < n && sp->repeat_penalty != 1.0f)
        k += (size_t)snprintf(buf + k, n - k, ", repeat penalty %g", (double)sp->repeat_penalty);
    if (k < n && sp->presence_penalty != 0.0f)
        k += (size_t)snprintf(buf + k, n - k, ", presence penalty %g", (double)sp->presence_penalty);
    if (k < n && sp->frequency_penalty != 0.0f)
        k += (size_t)snprintf(buf + k, n - k, ", frequency penalty %g", (double)sp->frequency_penalty);
    if (k < n) snprintf(buf + k, n - k, ", seed %llu", (unsigned long long)sp->seed);
}

void lm_bench_sampling_json(FILE *f, const struct lm_sampler_params *sp) {
    fprintf(f, "{\"temperature\": %g, \"top_k\": %d, \"top_p\": %g, \"min_p\": %g, "
               "\"repeat_penalty\": %g, \"presence_penalty\": %g, \"frequency_penalty\": %g, "
               "\"seed\": %llu}",
            (double)sp->temperature, (int)sp->top_k, (double)sp->top_p, (double)sp->min_p,
            (double)sp->repeat_penalty, (double)sp->presence_penalty,
            (double)sp->frequency_penalty, (unsigned long long)sp->seed);
}
