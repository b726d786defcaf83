// `lumen serve`: start-up (the listening socket, libmicrohttpd in thread-per-connection mode,
// the model, the engine), signals, the drain and shutdown. The route table and the request
// callbacks are in dispatch.c; the engine thread owns the model, every HTTP thread parses,
// queues, then waits on its job.
#define _GNU_SOURCE
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "policy.h"
#include "srv.h"

// ================================================================ start-up, shutdown

// The listening socket on host:port (url: "http://ADDR:PORT"); *loopback: bound to
// 127.0.0.0/8 or ::1 only. -1 (with a line on stderr) when it cannot listen.
static int listen_on(const char *host, int port, char *url, size_t url_cap, bool *loopback) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    const int gai = getaddrinfo(host, ps, &hints, &ai);
    if (gai != 0) {
        fprintf(stderr, "lumen serve: cannot resolve --host '%s': %s\n", host, gai_strerror(gai));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        const int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        fprintf(stderr, "lumen serve: cannot listen on %s:%d: %s\n", host, port, strerror(err));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    char addr[INET6_ADDRSTRLEN] = "?";
    int bound = port;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, addr, sizeof addr);
        bound = ntohs(in->sin_port);
        *loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
        snprintf(url, url_cap, "http://%s:%d", addr, bound);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof addr);
        bound = ntohs(in6->sin6_port);
        *loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
        snprintf(url, url_cap, "http://[%s]:%d", addr, bound);
    }
    return fd;
}

// The chat template: --chat-template (a name or a file), else the model's own text, else
// the vocabulary's turn tokens / the architecture (lm_chat_template_detect); chatml last.
static int pick_template(struct server *s) {
    const char *want = s->o->chat_template;
    const char *arch = lm_model_arch(s->m);
    if (want) {
        s->tmpl = lm_chat_template_from_name(want);
        s->tmpl_source = "--chat-template";
        if (s->tmpl != LM_CHAT_TEMPLATE_NONE) {
            srv_reason_detect(s, NULL); // a name: the vocabulary's markers decide
            return 0;
        }
        FILE *f = fopen(want, "rb");
        if (!f) {
            fprintf(stderr, "lumen serve: --chat-template '%s' is neither a template name (gemma, llama3, "
                    "chatml, granite) nor a readable file\n", want);
            return 2;
        }
        struct sbuf text = {0};
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0 && text.n < (1u << 20)) sbuf_append(&text, buf, n);
        fclose(f);
        s->tmpl = lm_chat_template_detect(s->tok, arch, text.p ? text.p : "");
        srv_reason_detect(s, text.p);
        sbuf_free(&text);
        s->tmpl_source = "--chat-template file";
        if (s->tmpl == LM_CHAT_TEMPLATE_NONE) {
            fprintf(stderr, "lumen serve: --chat-template '%s': not a template lumen knows (gemma, llama3, "
                    "chatml, granite)\n", want);
            return 2;
        }
        return 0;
    }
    const char *text = lm_model_chat_template(s->m);
    s->tmpl = lm_chat_template_detect(s->tok, arch, text);
    s->tmpl_source = text ? "the model's tokenizer.chat_template"
                          : "the architecture's turn format (the model has no chat template)";
    if (s->tmpl == LM_CHAT_TEMPLATE_NONE) {
        s->tmpl = LM_CHAT_TEMPLATE_CHATML;
        s->tmpl_source = text ? "fallback: the model's template is not one lumen knows"
                              : "fallback: no template and no known turn format";
    }
    return 0;
}

static void model_name(struct server *s) {
    if (s->o->alias) {
        snprintf(s->model_id, sizeof s->model_id, "%s", s->o->alias);
        return;
    }
    const char *p = strrchr(s->o->model_path, '/');
    snprintf(s->model_id, sizeof s->model_id, "%s", p ? p + 1 : s->o->model_path);
}

// ================================================================ stopping

void srv_drain(struct server *s, const char *why) {
    pthread_mutex_lock(&s->life_mu);
    if (!s->drain_requested) {
        s->drain_requested = true;
        snprintf(s->drain_why, sizeof s->drain_why, "%s", why);
        int ready = SRV_READY;
        atomic_compare_exchange_strong(&s->state, &ready, SRV_DRAINING);
        pthread_cond_broadcast(&s->life_cv);
    }
    pthread_mutex_unlock(&s->life_mu);
}

void srv_set_draining(struct server *s, bool on, const char *why) {
    pthread_mutex_lock(&s->life_mu);
    int from = on ? SRV_READY : SRV_DRAINING;
    const bool changed = s->operator_drain != on && (on || !s->drain_requested) &&
                         atomic_compare_exchange_strong(&s->state, &from, on ? SRV_DRAINING : SRV_READY);
    s->operator_drain = on; // while loading: applied when the model is ready
    pthread_mutex_unlock(&s->life_mu);
    if (changed && on) conns_close_idle(s->conns); // a balancer's kept-alive connections go elsewhere
    if (changed)
        fprintf(stderr, on ? "lumen serve: %s: draining: /health and new requests answer 503, running "
                             "requests finish (SIGUSR2 resumes)\n"
                           : "lumen serve: %s: serving again\n", why);
}

// The signals signal_main takes (sigwait): blocked in every thread.
static void server_signals(sigset_t *sigs) {
    sigemptyset(sigs);
    sigaddset(sigs, SIGINT);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGUSR1);
    sigaddset(sigs, SIGUSR2);
}

// SIGINT / SIGTERM (blocked in every other thread): the first drains, or ends a model load
// at once (nothing runs yet); a second exits at once. SIGUSR1 / SIGUSR2: the operator's drain
// on / off (srv_set_draining).
static void *signal_main(void *arg) {
    struct server *s = arg;
    sigset_t sigs;
    server_signals(&sigs);
    for (int n = 0;; n++) {
        int sig = 0;
        if (sigwait(&sigs, &sig) != 0) continue;
        if (sig == SIGUSR1 || sig == SIGUSR2) {
            srv_set_draining(s, sig == SIGUSR1, sig == SIGUSR1 ? "SIGUSR1" : "SIGUSR2");
            n--; // not a stop: n counts SIGINT / SIGTERM
            continue;
        }
        const char *name = sig == SIGINT ? "SIGINT" : "SIGTERM";
        if (n > 0) {
            fprintf(stderr, "lumen serve: %s again: exiting now\n", name);
            _exit(128 + sig);
        }
        pthread_mutex_lock(&s->life_mu);
        const bool loading = atomic_load(&s->state) == SRV_LOADING;
        pthread_mutex_unlock(&s->life_mu);
        if (loading) { // the model load cannot be interrupted, the process can
            fprintf(stderr, "lumen serve: %s while loading: stopped\n", name);
            _exit(0);
        }
        srv_drain(s, name);
    }
    return NULL;
}

// The drain: waits for the running requests until the grace runs out, then cancels the
// rest (streams end with an error event and [DONE], whole answers with a 503) and gives
// them a second to be written.
static void drain(struct server *s) {
    pthread_mutex_lock(&s->life_mu);
    while (!s->drain_requested) pthread_cond_wait(&s->life_cv, &s->life_mu);
    fprintf(stderr, "lumen serve: %s: draining (%d requests running, --shutdown-grace %d s)\n", s->drain_why,
            s->active, s->o->shutdown_grace_s);
    conns_close_idle(s->conns); // keep-alive clients reconnect (and are answered 503 now)
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += s->o->shutdown_grace_s;
    while (s->active > 0 && pthread_cond_timedwait(&s->life_cv, &s->life_mu, &dl) != ETIMEDOUT) {}
    const int left = s->active;
    atomic_store(&s->state, SRV_STOPPING);
    pthread_mutex_unlock(&s->life_mu);
    if (left > 0) fprintf(stderr, "lumen serve: the grace ran out: cancelling %d requests\n", left);
    const uint64_t one = 1;
    ssize_t w = write(s->stop_fd, &one, sizeof one); // every waiting HTTP thread wakes and ends
    (void)w;
    pthread_mutex_lock(&s->life_mu);
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += 1;
    while (s->active > 0 && pthread_cond_timedwait(&s->life_cv, &s->life_mu, &dl) != ETIMEDOUT) {}
    pthread_mutex_unlock(&s->life_mu);
}

// The server's state before anything starts (NULL when out of memory); s->metrics may be
// NULL (out of memory: lm_server_run stops).
static struct server *server_new(const struct lm_server_opts *o) {
    struct server *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->o = o;
    s->started = (long long)time(NULL);
    s->salt = srv_splitmix((uint64_t)srv_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL));
    atomic_init(&s->state, SRV_LOADING);
    s->stop_fd = eventfd(0, EFD_CLOEXEC);
    pthread_mutex_init(&s->life_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->life_cv, &ca);
    pthread_condattr_destroy(&ca);
    return s;
}

// What the HTTP threads share, set before the first connection: ids, metrics, the policy,
// the gate and the default limits (raised once the model is loaded: load_model).
static void server_http_state(struct server *s) {
    const struct lm_server_opts *o = s->o;
    atomic_init(&s->next_id, 1);
    const char *routes[METRICS_MAX_ROUTES];
    s->metrics = metrics_new(routes, srv_route_metrics(routes, METRICS_MAX_ROUTES));
    policy_init(&s->policy, o);
    pthread_mutex_init(&s->gate_mu, NULL);
    pthread_cond_init(&s->gate_cv, NULL);
    s->parse_cap = SRV_PARSE_SLOTS;
    s->gcache = gcache_new(); // NULL (out of memory): every grammar is compiled
    atomic_init(&s->max_body, o->max_body ? o->max_body : SRV_MIN_MAX_BODY);
    atomic_init(&s->body_bytes, 0);
    atomic_init(&s->body_budget, SRV_MIN_BODY_BUDGET);
    s->limits = (struct api_limits){.max_values = 65536, .max_depth = API_MAX_DEPTH};
}

// A descriptor per connection, a few for lingering refusals, the model's files: the soft
// limit raised to the hard one, a warning when that is still short.
static void raise_fd_limit(const struct lm_server_opts *o) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)o->max_connections + 512 > rl.rlim_cur)
        fprintf(stderr, "lumen serve: warning: --max-connections %d needs about %d file descriptors; the "
                "limit is %llu (ulimit -n)\n", o->max_connections, o->max_connections + 512,
                (unsigned long long)rl.rlim_cur);
}

// The front door on the listening socket lfd (taken over) and libmicrohttpd behind it.
// False (with a line on stderr) when either cannot start.
static bool start_http(struct server *s, int lfd) {
    const struct lm_server_opts *o = s->o;
    // the front door accepts and admits (conns.c); MHD serves what it is given, a thread per
    // connection (slack above the cap: evicted connections close while new ones start)
    const struct conns_opts co = {.listen_fd = lfd, .max_total = o->max_connections,
                                  .max_per_address = o->max_connections_per_ip, .request_timeout_s = o->timeout_s};
    s->conns = conns_new(&co);
    if (!s->conns) {
        close(lfd);
        fprintf(stderr, "lumen serve: out of memory\n");
        return false;
    }
    s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_NO_LISTEN_SOCKET |
                                MHD_USE_ITC, 0, NULL, NULL, srv_on_request, s,
                            MHD_OPTION_NOTIFY_COMPLETED, srv_on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, conns_notify, s->conns,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections + 256,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->keepalive_s,
                            MHD_OPTION_END);
    if (!s->d || !conns_start(s->conns, s->d)) {
        fprintf(stderr, "lumen serve: cannot start the HTTP server on %s\n", s->url);
        return false;
    }
    return true;
}

// The model (and -md's draft), its template, the engine started, and the limits that follow
// from the context. 0, else lm_server_run's exit code (a line on stderr).
static int load_model(struct server *s) {
    const struct lm_server_opts *o = s->o;
    int rc;
    if (lm_model_load(&s->m, o->model_path, NULL) != LM_OK) {
        fprintf(stderr, "lumen serve: %s\n", lm_error_msg());
        return 1;
    }
    s->tok = lm_model_tokenizer(s->m);
    s->n_vocab = lm_model_n_vocab(s->m);
    s->n_ctx_train = lm_model_n_ctx_train(s->m);
    model_name(s);
    if ((rc = pick_template(s)) != 0) return rc;
    if (!s->o->chat_template) srv_reason_detect(s, lm_model_chat_template(s->m)); // thinking (reasoning_srv.c)
    if (!srv_prompt_init(s)) {
        fprintf(stderr, "lumen serve: out of memory\n");
        return 1;
    }
    struct lm_engine_params ep = o->ep;
    if (ep.kv_tokens <= 0) ep.kv_tokens = 8192;
    ep.n_ctx = ep.kv_tokens < s->n_ctx_train ? ep.kv_tokens : s->n_ctx_train;
    if (o->draft_path) {
        if (lm_model_load(&s->dm, o->draft_path, NULL) != LM_OK) {
            fprintf(stderr, "lumen serve: %s\n", lm_error_msg());
            return 1;
        }
        if (ep.n_ctx > lm_model_n_ctx_train(s->dm)) ep.n_ctx = lm_model_n_ctx_train(s->dm);
        ep.draft_model = s->dm;
    }
    if (lm_engine_init(&s->e, s->m, &ep) != LM_OK || lm_engine_start(s->e) != LM_OK) {
        fprintf(stderr, "lumen serve: %s\n", lm_error_msg());
        return 1;
    }
    struct lm_engine_stats st;
    lm_engine_stats(s->e, &st);
    s->n_ctx = ep.n_ctx;
    // what a request may bring, from what one request holds: a body of 64 bytes per token
    // (a token id, or a token of escaped text, with room to spare), values for a prompt of
    // ids, messages and parts
    s->held_cap = (ep.max_running > 0 ? ep.max_running : 8) + (ep.max_waiting > 0 ? ep.max_waiting : 64);
    size_t max_body = o->max_body;
    if (!max_body) {
        max_body = (size_t)s->n_ctx * SRV_BODY_BYTES_PER_TOKEN;
        if (max_body < SRV_MIN_MAX_BODY) max_body = SRV_MIN_MAX_BODY;
    }
    atomic_store(&s->max_body, max_body);
    atomic_store(&s->body_budget, 8 * max_body > SRV_MIN_BODY_BUDGET ? 8 * max_body : SRV_MIN_BODY_BUDGET);
    s->limits.max_values = 2 * (size_t)s->n_ctx + 65536;
    s->kv_tokens = st.kv.n_blocks * st.kv.block_size / (s->dm ? 2 : 1); // a draft's blocks: as many again
    fprintf(stderr, "lumen serve: model %s (%s), context %d tokens per request, KV pool %d tokens, "
            "parallel %d, queue %d; chat template %s (%s)\n", s->model_id, lm_model_arch(s->m), s->n_ctx,
            s->kv_tokens, ep.max_running > 0 ? ep.max_running : 8, ep.max_waiting > 0 ? ep.max_waiting : 64,
            lm_chat_template_name(s->tmpl), s->tmpl_source);
    return 0;
}

// New requests get 503, waiting HTTP threads end their requests, then the HTTP server
// stops (closing what is left) and the engine ends whatever remains.
static void stop(struct server *s) {
    atomic_store(&s->state, SRV_STOPPING);
    const uint64_t one = 1;
    ssize_t w = write(s->stop_fd, &one, sizeof one);
    (void)w;
    conns_stop(s->conns);
    if (s->d) MHD_stop_daemon(s->d);
    conns_free(s->conns);
    lm_engine_free(s->e);
    gcache_free(s->gcache); // before the tokenizer the grammars were compiled for
    s->gcache = NULL;
    lm_model_free(s->dm);
    lm_model_free(s->m);
}

static void server_free(struct server *s) {
    metrics_free(s->metrics);
    free(s->is_control);
    gcache_free(s->gcache);
    if (s->stop_fd >= 0) close(s->stop_fd);
    pthread_mutex_destroy(&s->life_mu);
    pthread_cond_destroy(&s->life_cv);
    pthread_mutex_destroy(&s->gate_mu);
    pthread_cond_destroy(&s->gate_cv);
    free(s);
}

int lm_server_run(const struct lm_server_opts *o) {
    // SIGINT/SIGTERM/SIGUSR1/SIGUSR2 are taken by signal_main's sigwait: block them before any
    // thread starts
    sigset_t sigs;
    server_signals(&sigs);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct server *s = server_new(o);
    if (!s) return 1;
    pthread_t sig_thread;
    if (pthread_create(&sig_thread, NULL, signal_main, s) != 0) {
        fprintf(stderr, "lumen serve: cannot start the signal thread\n");
        return 1;
    }
    server_http_state(s);
    int rc = 1;
    raise_fd_limit(o);
    bool loopback = false;
    const int lfd = s->metrics && s->stop_fd >= 0 ? listen_on(o->host, o->port, s->url, sizeof s->url, &loopback) : -1;
    if (lfd < 0) goto out;
    if (!loopback && !o->api_key)
        fprintf(stderr, "lumen serve: warning: %s is reachable beyond this machine and no API key is set: "
                "anyone who reaches it can use the model (--api-key-file FILE)\n", s->url);
    if (!start_http(s, lfd)) goto stop;
    fprintf(stderr, "lumen serve: loading %s (%s/health answers 503 until ready)\n", o->model_path, s->url);
    if (o->load_delay_ms > 0) {
        struct timespec ts = {o->load_delay_ms / 1000, (long)(o->load_delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if ((rc = load_model(s)) != 0) goto stop;
    pthread_mutex_lock(&s->life_mu); // the signal thread reads LOADING under this lock
    atomic_store(&s->state, s->drain_requested || s->operator_drain ? SRV_DRAINING : SRV_READY);
    pthread_mutex_unlock(&s->life_mu);
    fprintf(stderr, "lumen serve: listening on %s\n", s->url);
    fflush(stderr);

    drain(s); // until a signal (or srv_drain) asks, then the grace, then the rest cancelled
    rc = 0;
stop:
    stop(s);
    if (rc == 0) fprintf(stderr, "lumen serve: stopped\n");
out:
    pthread_cancel(sig_thread); // sigwait is a cancellation point
    pthread_join(sig_thread, NULL);
    server_free(s);
    return rc;
}
