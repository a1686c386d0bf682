#define _GNU_SOURCE
#include "rc_shims.h"
#include <stdlib.h>
#include <sys/socket.h>

_Static_assert(LWS_PRE >= 16, "LWS_PRE shrank: buffers sized from rc_lws_pre() are still right, but check the shim");

size_t rc_lws_pre(void) { return LWS_PRE; }

void rc_log(int level, const char *message) { _lws_log(level, "%s\n", message); }

struct rc_timer {
    lws_sorted_usec_list_t sul; /* first, but found through container_of anyway */
    void *user;
    void (*fire)(void *user);
};

static void rc_timer_fired(lws_sorted_usec_list_t *sul)
{
    rc_timer *timer = lws_container_of(sul, rc_timer, sul);
    timer->fire(timer->user);
}

rc_timer *rc_timer_new(void *user, void (*fire)(void *user))
{
    rc_timer *timer = calloc(1, sizeof(*timer));
    if (!timer)
        return NULL;
    timer->user = user;
    timer->fire = fire;
    return timer;
}

void rc_timer_schedule(struct lws_context *context, rc_timer *timer, int64_t delay_us)
{
    lws_sul_schedule(context, 0, &timer->sul, rc_timer_fired, delay_us < 0 ? 0 : delay_us);
}

void rc_timer_cancel(rc_timer *timer) { lws_sul_cancel(&timer->sul); }

void rc_timer_free(rc_timer *timer) { free(timer); }

int rc_accept_nonblocking(int listener, struct sockaddr *address, socklen_t *length)
{
    return accept4(listener, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
