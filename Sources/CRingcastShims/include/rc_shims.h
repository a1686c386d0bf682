// What Swift cannot reach in libwebsockets 4.1.6 directly: computed macros, variadic logging,
// and sorted-usec-list timers whose callback must find its owner through container_of.
#ifndef RC_SHIMS_H
#define RC_SHIMS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <libwebsockets.h>

/// LWS_PRE: the headroom lws needs in front of every buffer passed to lws_write.
size_t rc_lws_pre(void);

/// One fixed-argument entry to lws's variadic logger (level is an LLL_* bit).
void rc_log(int level, const char *message);

/// A one-shot timer on a context's service thread. Owned by whoever called rc_timer_new;
/// fire(user) runs on the service thread. Free only after cancelling, on that thread.
typedef struct rc_timer rc_timer;
rc_timer *rc_timer_new(void *user, void (*fire)(void *user));
void rc_timer_schedule(struct lws_context *context, rc_timer *timer, int64_t delay_us);
void rc_timer_cancel(rc_timer *timer);
void rc_timer_free(rc_timer *timer);

/// accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC: glibc declares it only under _GNU_SOURCE, which
/// Swift's Glibc module does not define.
struct sockaddr;
int rc_accept_nonblocking(int listener, struct sockaddr *address, socklen_t *length);

#endif
