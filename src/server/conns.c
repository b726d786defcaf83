// The front door (conns.h): one thread accepts, counts connections per address, evicts or
// refuses at the caps, holds each new connection (in its poll set, no thread) until the
// request's header block has arrived (MSG_PEEK: MHD then reads it all), enforces the
// request deadline, and lingers on refused sockets until their clients have read the 503
// (closing a socket with unread input sends a reset that can destroy the answer unread).
#define _GNU_SOURCE
#include "conns.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

// ================================================================ records

// One accepted connection, from accept to MHD's close.
struct link {
    struct link *prev, *next;
    int fd;
    uint8_t addr[16];      // the address it counts against (IPv4, or an IPv6 /64)
    uint8_t addr_len;
    enum conns_phase phase;
    uint64_t since_ns;     // ready for a request since (the deadline's start)
    bool kicked;           // shut down by us (evicted or timed out): no longer counted
    bool started;          // MHD has linked it (NOTIFY_STARTED)
    struct sockaddr_storage ss; // the peer's address, for MHD
    socklen_t sl;
};

// A connection may be closed to admit another (at a cap) while no request is under way on
// it: a new one whose header block has not arrived, or an idle keep-alive one.
static bool evictable(const struct link *l) {
    return !l->kicked && (l->phase == CONNS_PENDING || l->phase == CONNS_IDLE);
}
// A connection waiting for (the rest of) a request: the deadline applies.
static bool waiting(const struct link *l) { return !l->kicked && l->phase != CONNS_ACTIVE; }

#define LINGER_MAX 256      // refused sockets kept open until their client read the 503
#define HEADER_PEEK 16384   // a header block not complete in this many bytes goes to MHD as is
#define LINGER_NS (2000000000ull)
#define TICK_MS 100         // deadline scan period
#define LOG_EVERY_NS (10000000000ull)

struct lingering {
    int fd;
    uint64_t until;
};

struct conns {
    struct conns_opts o;
    struct MHD_Daemon *d;
    pthread_mutex_t mu;    // guards the list, the counters and the phases
    struct link *head;
    int open;              // links not kicked
    uint64_t refused, evicted, timed_out;
    uint64_t logged[3], log_at;
    struct lingering linger[LINGER_MAX];
    int n_linger;
    int wake_fd;           // eventfd: conns_stop, conns_close_idle
    atomic_bool stop, close_idle;
    pthread_t thread;
    bool running;
    struct pollfd *pfd;    // the accepting thread's poll set: wake, listen, lingering, pending
    struct link **pend;    // the pending records polled, in pfd's order
    int pend_cap;
};

static const char k_busy[] =
    "{\"error\":{\"message\":\"Too many connections: retry later\",\"type\":\"unavailable_error\","
    "\"param\":null,\"code\":\"too_many_connections\"}}";

struct conns *conns_new(const struct conns_opts *o) {
    struct conns *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->o = *o;
    f->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&f->mu, NULL);
    f->pend_cap = o->max_total;
    f->pfd = malloc((size_t)(2 + LINGER_MAX + f->pend_cap) * sizeof *f->pfd);
    f->pend = malloc((size_t)f->pend_cap * sizeof *f->pend);
    if (f->wake_fd < 0 || !f->pfd || !f->pend) {
        f->o.listen_fd = -1; // the caller's still
        conns_free(f);
        return NULL;
    }
    const int fl = fcntl(o->listen_fd, F_GETFL);
    if (fl < 0 || fcntl(o->listen_fd, F_SETFL, fl | O_NONBLOCK) != 0) { // accept until EAGAIN
        f->o.listen_fd = -1;
        conns_free(f);
        return NULL;
    }
    f->log_at = srv_now_ns() + LOG_EVERY_NS;
    return f;
}

static void address_of(const struct sockaddr_storage *ss, struct link *l) {
    if (ss->ss_family == AF_INET) {
        memcpy(l->addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
        l->addr_len = 4;
        return;
    }
    const uint8_t *a = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (!memcmp(a, v4mapped, 12)) {
        memcpy(l->addr, a + 12, 4);
        l->addr_len = 4;
    } else {
        memcpy(l->addr, a, 8); // one host's /64
        l->addr_len = 8;
    }
}

static bool same_address(const struct link *a, const struct link *b) {
    return a->addr_len == b->addr_len && !memcmp(a->addr, b->addr, a->addr_len);
}

static void unlink_rec(struct conns *f, struct link *l) {
    if (l->prev) l->prev->next = l->next;
    else f->head = l->next;
    if (l->next) l->next->prev = l->prev;
    if (!l->kicked) f->open--;
    if (l->phase == CONNS_PENDING && l->fd >= 0) close(l->fd); // still ours: MHD never had it
    free(l);
}

static void refuse(struct conns *f, int fd);

// Under mu, on the accepting thread: ends the connection (a pending one is ours to close;
// MHD's thread closes the others once their socket is shut); it stops counting now. A
// pending one that is evicted (answer) gets the 503 a refused one gets: its request may be
// on its way (a client slower to send than a burst of connections from its address is to
// arrive), and a bare close would leave it without an answer, or reset once it arrives.
static void kick(struct conns *f, struct link *l, bool answer) {
    if (l->phase == CONNS_PENDING) {
        const int fd = l->fd;
        if (answer) l->fd = -1; // refuse() closes it, after the answer
        unlink_rec(f, l);
        if (answer) refuse(f, fd);
        return;
    }
    shutdown(l->fd, SHUT_RDWR);
    l->kicked = true;
    f->open--;
}

// ================================================================ MHD's side

void conns_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                  enum MHD_ConnectionNotificationCode code) {
    struct conns *f = cls;
    pthread_mutex_lock(&f->mu);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        for (struct link *l = f->head; l && ci; l = l->next)
            if (l->fd == ci->connect_fd && !l->started && l->phase != CONNS_PENDING) {
                l->started = true;
                *socket_context = l;
                break;
            }
    } else if (*socket_context) { // CLOSED: before MHD closes the socket
        unlink_rec(f, *socket_context);
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&f->mu);
}

void conns_phase(struct conns *f, void *link, enum conns_phase p) {
    if (!f || !link) return;
    pthread_mutex_lock(&f->mu);
    struct link *l = link;
    l->phase = p;
    if (p == CONNS_IDLE) l->since_ns = srv_now_ns(); // the next request's deadline starts
    pthread_mutex_unlock(&f->mu);
}

void conns_close_idle(struct conns *f) {
    if (!f) return;
    atomic_store(&f->close_idle, true); // the accepting thread does it: it owns pending records
    const uint64_t one = 1;
    (void)!write(f->wake_fd, &one, sizeof one);
}

void conns_stats(struct conns *f, struct metrics_conns *out) {
    memset(out, 0, sizeof *out);
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    out->open = f->open;
    out->refused = f->refused;
    out->evicted = f->evicted;
    out->timed_out = f->timed_out;
    pthread_mutex_unlock(&f->mu);
}

// ================================================================ the accepting thread

// A refused connection: the 503 goes out, then the socket is half-closed and read until
// the client closes it (or LINGER_NS passes).
static void refuse(struct conns *f, int fd) {
    char head[256];
    const int n = snprintf(head, sizeof head, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: "
                           "application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: "
                           "%zu\r\n\r\n", sizeof k_busy - 1);
    char drop[4096];
    while (recv(fd, drop, sizeof drop, MSG_DONTWAIT) > 0) {} // what the client sent already
    struct iovec iov[2] = {{head, (size_t)n}, {(void *)k_busy, sizeof k_busy - 1}};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
    (void)!sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL); // fits the empty send buffer
    shutdown(fd, SHUT_WR);
    if (f->n_linger == LINGER_MAX) {
        close(fd);
        return;
    }
    f->linger[f->n_linger++] = (struct lingering){fd, srv_now_ns() + LINGER_NS};
}

// Under mu: the evictable connection waiting longest (from l's address when same_addr).
static struct link *oldest_evictable(struct conns *f, const struct link *l, bool same_addr) {
    struct link *best = NULL;
    for (struct link *x = f->head; x; x = x->next)
        if (x != l && evictable(x) && (!same_addr || same_address(x, l)) && (!best || x->since_ns < best->since_ns))
            best = x;
    return best;
}

// A new connection: counted, evicting at a cap (else refused with a 503), then held until
// its header block arrives (front_main).
static void admit(struct conns *f, int fd, const struct sockaddr_storage *ss, socklen_t sl) {
    struct link *l = calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        return;
    }
    l->fd = fd;
    l->phase = CONNS_PENDING;
    l->since_ns = srv_now_ns();
    address_of(ss, l);
    memcpy(&l->ss, ss, sl);
    l->sl = sl;
    pthread_mutex_lock(&f->mu);
    // a record with this descriptor is stale: MHD closed it without telling (a failed start)
    for (struct link *x = f->head, *nx; x; x = nx) {
        nx = x->next;
        if (x->fd == fd && x->phase != CONNS_PENDING) unlink_rec(f, x);
    }
    int same = 0;
    for (struct link *x = f->head; x; x = x->next) same += !x->kicked && same_address(x, l);
    bool ok = true;
    if (same >= f->o.max_per_address || f->open >= f->o.max_total) {
        struct link *victim = oldest_evictable(f, l, same >= f->o.max_per_address);
        if (victim) {
            kick(f, victim, true);
            f->evicted++;
        } else {
            ok = false;
            f->refused++;
        }
    }
    if (ok) {
        l->next = f->head;
        if (f->head) f->head->prev = l;
        f->head = l;
        f->open++;
    }
    pthread_mutex_unlock(&f->mu);
    if (!ok) {
        free(l);
        refuse(f, fd);
    }
}

// A pending connection's socket is readable: its header block complete (or too long to
// wait for) goes to MHD; a client that closed first is dropped.
static void pending_input(struct conns *f, struct link *l) {
    char buf[HEADER_PEEK];
    const ssize_t n = recv(l->fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    pthread_mutex_lock(&f->mu);
    if (n <= 0) { // closed by the client (or in error) before a request
        unlink_rec(f, l);
        pthread_mutex_unlock(&f->mu);
        return;
    }
    if (n < HEADER_PEEK && !memmem(buf, (size_t)n, "\r\n\r\n", 4) && !memmem(buf, (size_t)n, "\n\n", 2)) {
        pthread_mutex_unlock(&f->mu);
        return;
    }
    l->phase = CONNS_REQUEST; // MHD's now: the record stays until its NOTIFY_CLOSED
    pthread_mutex_unlock(&f->mu);
    if (MHD_add_connection(f->d, l->fd, (const struct sockaddr *)&l->ss, l->sl) != MHD_YES) {
        pthread_mutex_lock(&f->mu); // MHD closed the socket
        l->phase = CONNS_ACTIVE;   // not ours to close
        l->fd = -1;
        unlink_rec(f, l);
        f->refused++;
        pthread_mutex_unlock(&f->mu);
    }
}

// Every TICK_MS: connections past their request deadline are closed; refused sockets past
// their linger are closed; a summary line at most every 10 s.
static void tick(struct conns *f, uint64_t now) {
    const uint64_t limit = (uint64_t)f->o.request_timeout_s * 1000000000ull;
    pthread_mutex_lock(&f->mu);
    if (limit > 0)
        for (struct link *l = f->head, *next; l; l = next) {
            next = l->next;
            if (waiting(l) && now - l->since_ns > limit) {
                kick(f, l, false);
                f->timed_out++;
            }
        }
    uint64_t d[3] = {0, 0, 0};
    const int open = f->open;
    if (now >= f->log_at) {
        d[0] = f->refused - f->logged[0];
        d[1] = f->evicted - f->logged[1];
        d[2] = f->timed_out - f->logged[2];
        f->logged[0] = f->refused;
        f->logged[1] = f->evicted;
        f->logged[2] = f->timed_out;
        f->log_at = now + LOG_EVERY_NS;
    }
    pthread_mutex_unlock(&f->mu);
    if (d[0] || d[1] || d[2])
        fprintf(stderr, "lumen serve: connections: %llu refused (503), %llu evicted, %llu timed out in the "
                "last 10 s; %d open (at most %d, %d per address)\n", (unsigned long long)d[0],
                (unsigned long long)d[1], (unsigned long long)d[2], open, f->o.max_total, f->o.max_per_address);
    for (int i = 0; i < f->n_linger;) {
        if (now >= f->linger[i].until) {
            close(f->linger[i].fd);
            f->linger[i] = f->linger[--f->n_linger];
        } else {
            i++;
        }
    }
}

static void *front_main(void *arg) {
    struct conns *f = arg;
    struct pollfd *p = f->pfd;
    uint64_t next_tick = srv_now_ns();
    bool backoff = false;
    for (;;) {
        p[0] = (struct pollfd){.fd = f->wake_fd, .events = POLLIN};
        p[1] = (struct pollfd){.fd = backoff ? -1 : f->o.listen_fd, .events = POLLIN};
        int n = 2;
        for (int i = 0; i < f->n_linger; i++) p[n++] = (struct pollfd){.fd = f->linger[i].fd, .events = POLLIN};
        const int n_linger = f->n_linger;
        int n_pending = 0;
        pthread_mutex_lock(&f->mu); // pending links are freed on this thread only
        for (struct link *l = f->head; l && n_pending < f->pend_cap; l = l->next)
            if (l->phase == CONNS_PENDING) {
                f->pend[n_pending++] = l;
                p[n++] = (struct pollfd){.fd = l->fd, .events = POLLIN | POLLRDHUP};
            }
        pthread_mutex_unlock(&f->mu);
        (void)!poll(p, (nfds_t)n, backoff ? 50 : TICK_MS);
        backoff = false;
        if (p[0].revents & POLLIN) {
            uint64_t v;
            (void)!read(f->wake_fd, &v, sizeof v);
            if (atomic_load(&f->stop)) break;
            if (atomic_exchange(&f->close_idle, false)) {
                pthread_mutex_lock(&f->mu);
                for (struct link *l = f->head, *next; l; l = next) {
                    next = l->next;
                    if (evictable(l)) kick(f, l, false);
                }
                pthread_mutex_unlock(&f->mu);
                n_pending = 0; // those records are gone
            }
        }
        for (int i = 0; i < n_pending; i++) // before accept: an eviction may free a record
            if (p[2 + n_linger + i].revents) pending_input(f, f->pend[i]);
        for (int i = n_linger - 1; i >= 0; i--) { // refused clients: read until they close
            if (!(p[2 + i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char drop[4096];
            const ssize_t r = recv(f->linger[i].fd, drop, sizeof drop, MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                close(f->linger[i].fd);
                f->linger[i] = f->linger[--f->n_linger];
            }
        }
        for (int k = 0; (p[1].revents & POLLIN) && k < 64; k++) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            const int fd = accept4(f->o.listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                // out of descriptors: the backlog waits (no spinning) until some close
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) backoff = true;
                break;
            }
            if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) {
                close(fd);
                continue;
            }
            admit(f, fd, &ss, sl);
        }
        const uint64_t now = srv_now_ns();
        if (now >= next_tick) {
            tick(f, now);
            next_tick = now + TICK_MS * 1000000ull;
        }
    }
    return NULL;
}

bool conns_start(struct conns *f, struct MHD_Daemon *d) {
    f->d = d;
    f->running = pthread_create(&f->thread, NULL, front_main, f) == 0;
    return f->running;
}

void conns_stop(struct conns *f) {
    if (!f || atomic_exchange(&f->stop, true)) return;
    if (f->running) {
        const uint64_t one = 1;
        (void)!write(f->wake_fd, &one, sizeof one);
        pthread_join(f->thread, NULL);
        f->running = false;
    }
    for (int i = 0; i < f->n_linger; i++) close(f->linger[i].fd);
    f->n_linger = 0;
    if (f->o.listen_fd >= 0) close(f->o.listen_fd);
    f->o.listen_fd = -1;
}

void conns_free(struct conns *f) {
    if (!f) return;
    conns_stop(f);
    while (f->head) unlink_rec(f, f->head);
    if (f->wake_fd >= 0) close(f->wake_fd);
    pthread_mutex_destroy(&f->mu);
    free(f->pfd);
    free(f->pend);
    free(f);
}
