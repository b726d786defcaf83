// Event sink of a batched run's requests (requests.h).
#include "requests.h"

void lm_bench_request_event(void *user, const struct lm_event *ev) {
    struct lm_bench_request_sink *s = user;
    struct lm_bench_request *q = NULL;
    for (int i = 0; i < s->n_req && !q; i++) if (s->r[i].id == ev->id) q = &s->r[i];
    if (!q) { s->bad++; return; }
    if (ev->finish == LM_FINISH_ERROR) s->bad++;
    if (ev->finish == LM_FINISH_CANCELLED) s->cancelled++;
    if (ev->finish != LM_FINISH_NONE) q->done = true;
    if (ev->token < 0) return;
    if (q->n < q->cap) q->t[q->n] = ev->t_ns;
    q->n++;
}
