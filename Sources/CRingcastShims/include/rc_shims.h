// What Swift cannot reach in libwebsockets 4.1.6 directly, or should not do in Swift: LWS_PRE (a
// computed macro), the libev loop each context runs on (with lws's scheduled events and the input
// lws holds serviced from it, which lws 4.1.6's libev glue does late), timers on that loop, and
// accept4.
#ifndef RC_SHIMS_H
#define RC_SHIMS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <libwebsockets.h>

/// LWS_PRE: the headroom lws needs in front of every buffer passed to lws_write.
size_t rc_lws_pre(void);

/// The event loop a context runs on: libev's, on epoll, which wakes for the connections that are
/// ready instead of scanning all of them (lws's own loop calls poll(2) over every connection).
/// lws is given it as a foreign loop (LWS_SERVER_OPTION_LIBEV); the service thread turns it.
/// Up to `contexts` lws contexts run on it, all on that one thread (NULL when contexts < 1).
typedef struct rc_loop rc_loop;
rc_loop *rc_loop_new(int contexts);
/// What lws_context_creation_info.foreign_loops points at (the same for every context on it).
void **rc_loop_foreign(rc_loop *loop);
/// Once each context is made on it; -1 when the loop already has the `contexts` it was made for.
int rc_loop_attach(rc_loop *loop, struct lws_context *context);
/// Before its contexts are destroyed: forgets all of them.
void rc_loop_detach(rc_loop *loop);
/// Runs every context's scheduled events that are due and services what lws holds already read, then
/// waits (unless some of that is left) for and handles one round of events (sockets, lws's
/// wake-up pipe, timers).
void rc_loop_run_once(rc_loop *loop);
/// After lws_context_destroy.
void rc_loop_free(rc_loop *loop);

/// A one-shot timer on a loop; fire(user) runs on the service thread. Owned by whoever called
/// rc_timer_new; every call on the service thread. A libev timer of its own, not one of lws's
/// scheduled events: those run from lws's libev timer, which lws 4.1.6 moves earlier only when
/// that timer is not running (rc_loop_run_once makes up for it for lws's own events).
typedef struct rc_timer rc_timer;
rc_timer *rc_timer_new(rc_loop *loop, void *user, void (*fire)(void *user));
void rc_timer_schedule(rc_timer *timer, int64_t delay_us);
void rc_timer_cancel(rc_timer *timer);
void rc_timer_free(rc_timer *timer);

/// accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC: glibc declares it only under _GNU_SOURCE, which
/// Swift's Glibc module does not define.
struct sockaddr;
int rc_accept_nonblocking(int listener, struct sockaddr *address, socklen_t *length);

/* The bytes of a TCP socket's output its peer has acknowledged so far (the kernel's
   tcpi_bytes_acked), or -1 when the kernel does not say. */
int64_t rc_bytes_acked(int descriptor);

#endif
