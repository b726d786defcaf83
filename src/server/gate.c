// The gate before work that scales with a request's body (parse, template, tokenize,
// submit): at most --parallel + --queue requests past it, SRV_PARSE_SLOTS of them parsing at
// once; and the budget of the bodies buffered at once.
#include "srv.h"

#include <pthread.h>
#include <stdatomic.h>

bool srv_gate_enter(struct conn *c) {
    struct server *s = c->s;
    pthread_mutex_lock(&s->gate_mu);
    const bool ok = s->held < s->held_cap;
    if (ok) s->held++;
    pthread_mutex_unlock(&s->gate_mu);
    c->held = ok;
    return ok;
}

void srv_gate_leave(struct conn *c) {
    if (!c->held) return;
    pthread_mutex_lock(&c->s->gate_mu);
    c->s->held--;
    pthread_mutex_unlock(&c->s->gate_mu);
    c->held = false;
}

void srv_parse_begin(struct conn *c) {
    struct server *s = c->s;
    pthread_mutex_lock(&s->gate_mu);
    while (s->parsing >= s->parse_cap) pthread_cond_wait(&s->gate_cv, &s->gate_mu);
    s->parsing++;
    pthread_mutex_unlock(&s->gate_mu);
    c->parsing = true;
}

void srv_parse_end(struct conn *c) {
    if (!c->parsing) return;
    pthread_mutex_lock(&c->s->gate_mu);
    c->s->parsing--;
    pthread_cond_signal(&c->s->gate_cv);
    pthread_mutex_unlock(&c->s->gate_mu);
    c->parsing = false;
}

void srv_body_release(struct conn *c) {
    if (c->body_counted) atomic_fetch_sub(&c->s->body_bytes, c->body_counted);
    c->body_counted = 0;
    sbuf_free(&c->body);
}
