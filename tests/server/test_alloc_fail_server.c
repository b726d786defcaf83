// Allocation failures (tests/lib/alloc_fail.h) swept over one server request: lm_server_run on
// the default model runs in this process (a thread; SIGTERM stops it), and for each N one
// POST /v1/chat/completions (then one POST /v1/messages, Anthropic's) is sent over loopback with the Nth allocation of lumen's code
// (the front door, the HTTP handler, parsing, the prompt, the engine, the reply) failing.
// Each N must be answered with a server error carrying a JSON message, or a success through a
// fallback, or (where the server has no state for the connection yet: the front door, MHD's
// first callback) a closed connection; the server must answer /health after each and a clean
// request at the end, and under ASan nothing leaks when it stops. Every N is tried up to the
// first that injects no failure (~50: the request's allocations).
// LM_TEST_LABELS: model;server
#include "alloc_fail.h"
#include "lm_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

static int g_port;

// a free loopback port (bound and released: the server binds it right after)
static int free_port(void) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &n) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

// One HTTP/1.1 request (Connection: close) -> the status (0: no answer); the response into
// resp[cap] (static buffers only: nothing here allocates while a failure is armed).
static int http(const char *method, const char *path, const char *body, char *resp, size_t cap) {
    resp[0] = '\0';
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct timeval tv = {.tv_sec = 60};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return 0;
    }
    static char req[4096];
    const int n = snprintf(req, sizeof req,
                           "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                           "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                           method, path, g_port, body ? strlen(body) : 0, body ? body : "");
    size_t off = 0;
    while (off < (size_t)n) {
        const ssize_t w = send(fd, req + off, (size_t)n - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += (size_t)w;
    }
    size_t got = 0;
    for (ssize_t r; got + 1 < cap && (r = recv(fd, resp + got, cap - 1 - got, 0)) > 0;) got += (size_t)r;
    resp[got] = '\0';
    close(fd);
    int status = 0;
    if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1) status = 0;
    return status;
}

static void *server_main(void *arg) {
    static int rc;
    rc = lm_server_run(arg);
    return &rc;
}

static const char k_body[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"Name three colours.\"}],"
                             "\"max_tokens\":8,\"temperature\":0}";
static const char k_msg_body[] = "{\"system\":\"Be brief.\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                                 "\"text\",\"text\":\"Name three colours.\"}]}],\"max_tokens\":8,\"temperature\":0}";

// Sweeps N = 1.. over one request to path: each answered as the header says, /health after
// each; ends at the first N that injects no failure (that answer must hold want); an error
// answer holds want_err (the route's error shape).
static void sweep(const char *path, const char *body_in, const char *want, const char *want_err) {
    static char resp[1 << 16];
    long tried = 0, ok = 0, errors = 0, dropped = 0, total = 0;
    for (long n = 1;; n++) {
        alloc_fail_arm(n);
        const int st = http("POST", path, body_in, resp, sizeof resp);
        const long count = alloc_fail_disarm();
        tried++;
        const char *body = strstr(resp, "\r\n\r\n");
        if (!alloc_fail_injected()) {
            CHECKF(st == 200 && body && strstr(body, want), "%s N %ld: no failure injected yet %d: %s", path, n,
                   st, resp);
            total = count;
            break;
        }
        if (st == 0) { // no state for the connection (the front door, MHD's first callback): closed
            dropped++;
            printf("%s N %ld: the connection was closed without an answer\n", path, n);
        } else if (st == 200) {
            ok++;
            printf("%s N %ld: answered 200 (a fallback)\n", path, n);
            CHECKF(body && strstr(body, want), "%s N %ld: 200 without %s: %s", path, n, want, resp);
        } else {
            errors++;
            // the server's failure: 5xx (413 where a body could not be buffered: server.c reads
            // that as too large), never a 4xx that blames the request
            CHECKF((st >= 500 || st == 413) && body && strstr(body, want_err) && strstr(body, "\"message\""),
                   "%s N %ld: answered %d, not a server error with a JSON message: %s", path, n, st, resp);
        }
        // the server goes on: /health, then the next N
        CHECKF(http("GET", "/health", NULL, resp, sizeof resp) == 200, "%s N %ld: /health after it: %s", path, n, resp);
        if (lm_test_fail > 20) break;
    }
    printf("%s: %ld allocations; %ld tried: %ld error answers, %ld closed, %ld succeeded despite the failure\n",
           path, total, tried, errors, dropped, ok);
}

int main(void) {
    const char *path = lm_test_model_path();
    if (access(path, R_OK) != 0) {
        if (getenv("LUMEN_ALLOW_SKIP")) {
            printf("SKIP: no model at %s\n", path);
            return 0;
        }
        fprintf(stderr, "FAIL: no model at %s\n", path);
        return 1;
    }
    // SIGTERM goes to the server's signal thread (sigwait): blocked here before any thread
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGUSR1);
    sigaddset(&sigs, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    g_port = free_port();
    struct lm_server_opts o = {.model_path = path, .host = "127.0.0.1", .port = g_port,
                               .ep = {.max_running = 2, .kv_tokens = 512, .n_threads = 1},
                               .stream_buffer = 1024, .max_connections = 64, .max_connections_per_ip = 16, .timeout_s = 30,
                               .keepalive_s = 5, .shutdown_grace_s = 5};
    pthread_t th;
    CHECK(g_port > 0 && pthread_create(&th, NULL, server_main, &o) == 0);
    static char resp[1 << 16];
    int ready = 0;
    for (int i = 0; i < 1200 && ready != 200; i++) { // up to 2 minutes (the model load under ASan)
        const struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
        ready = http("GET", "/health", NULL, resp, sizeof resp);
    }
    CHECKF(ready == 200, "the server did not become ready (last /health: %d)", ready);

    if (ready == 200) {
        sweep("/v1/chat/completions", k_body, "\"choices\"", "{\"error\":{");
        sweep("/v1/messages", k_msg_body, "\"type\":\"message\"", "{\"type\":\"error\",\"error\":{");
    }

    kill(getpid(), SIGTERM);
    void *rc = NULL;
    pthread_join(th, &rc);
    CHECKF(rc && *(int *)rc == 0, "lm_server_run returned %d", rc ? *(int *)rc : -1);
    return lm_test_finish();
}
