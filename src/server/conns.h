// The front door of lumen serve: its own thread accepts every connection, admits it under
// the total and per-address caps (evicting the oldest connection that has no request under
// way when a cap is reached, else answering a fast 503 with a JSON body: never a reset; an
// evicted connection whose request has not arrived gets the same 503),
// holds it without a thread until its request's header block has arrived, then hands it to
// libmicrohttpd (MHD_add_connection), and closes a connection that has not delivered a
// request's headers and body within --timeout of being ready for one.
#ifndef LM_SERVER_CONNS_H
#define LM_SERVER_CONNS_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#include "metrics.h"

struct conns_opts {
    int listen_fd;          // listening, taken over once conns_new succeeds (closed by conns_stop)
    int max_total;          // connections held at most
    int max_per_address;    // of them, from one address (IPv6: one /64)
    int request_timeout_s;  // a request's headers and body arrive within this of the connection
                            // being ready for one (accepted, or the previous answer sent)
};

struct conns;

// The front door, not yet accepting. NULL when out of memory or file descriptors.
struct conns *conns_new(const struct conns_opts *o);
// MHD_OPTION_NOTIFY_CONNECTION's callback (cls: the struct conns): links MHD's connection
// to its record, and drops the record when MHD closes it.
void conns_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                  enum MHD_ConnectionNotificationCode code);
// Starts the accepting thread on d (started with MHD_USE_NO_LISTEN_SOCKET). False on failure.
bool conns_start(struct conns *f, struct MHD_Daemon *d);
// Stops accepting (the listening socket is closed, refused connections still lingering are
// closed): before MHD_stop_daemon. Idempotent.
void conns_stop(struct conns *f);
// After MHD_stop_daemon (every connection closed). NULL is fine.
void conns_free(struct conns *f);

// A connection's phase: PENDING (accepted, its request's header block not yet arrived: held
// by the front door, no thread), then MHD's: REQUEST (headers arrived, the body arriving),
// ACTIVE (worked on and answered: no deadline), IDLE (keep-alive, between requests).
// PENDING and IDLE ones may be evicted; all but ACTIVE ones meet the request deadline, which
// starts at accept and again at IDLE. The server reports REQUEST, ACTIVE and IDLE (link:
// MHD's socket context; NULL is fine).
enum conns_phase { CONNS_PENDING, CONNS_REQUEST, CONNS_ACTIVE, CONNS_IDLE };
void conns_phase(struct conns *f, void *link, enum conns_phase p);

// Closes every connection waiting for a request (draining: clients go elsewhere).
void conns_close_idle(struct conns *f);

void conns_stats(struct conns *f, struct metrics_conns *out); // NULL f: zeros

#endif
