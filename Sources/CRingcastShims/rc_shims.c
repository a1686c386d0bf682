#define _GNU_SOURCE
#include "rc_shims.h"
#include <stdlib.h>
#include <sys/socket.h>
#include <ev.h>

/* rc_loop_run_once reads the service thread's array of scheduled-event lists through the owner of
 * a list it scheduled on (4.1's private layout: LWS_COUNT_PT_SUL_OWNERS owners side by side). */
#if LWS_LIBRARY_VERSION_MAJOR != 4 || LWS_LIBRARY_VERSION_MINOR != 1
#error "Ringcast's shim relies on libwebsockets 4.1's private layout (the sul owner array); this is another version (LWS_LIBRARY_VERSION in lws_config.h): install libwebsockets-dev 4.1.x or port rc_shims.c"
#endif

_Static_assert(LWS_PRE >= 16, "LWS_PRE shrank: buffers sized from rc_lws_pre() are still right, but check the shim");

size_t rc_lws_pre(void) { return LWS_PRE; }

/* The lws functions used here beyond the usual API are public symbols that Debian's headers
 * declare, for event-library plugins and optional links ("not normally needed"):
 * __lws_sul_service_ripe (lws-timeout-timer.h) runs the scheduled events of a service thread that
 * are due and returns the microseconds until the next one; _lws_plat_service_forced_tsi
 * (lws-eventlib-exports.h) services what lws holds already read (a pipelined request, buffered
 * rx, TLS data OpenSSL has decrypted but lws not yet taken). What is private is only where the thread's lists are: see rc_loop_run_once.
 *
 * Several contexts may run on one loop (each socket's libev watcher names its own context, and each
 * context has its own wake-up pipe, timers and idle watcher on it): rc_loop keeps an anchor for each. */

/* One context on the loop, and its anchor: a scheduled event of lws's due in a year, kept so: its
 * list's owner is that context's array of scheduled-event lists, which rc_loop_run_once services
 * itself. Where lws links it, so never moved: the loop's array of them is allocated once. */
struct rc_attached {
    struct lws_context *context;
    lws_sorted_usec_list_t anchor;
};

struct rc_loop {
    struct ev_loop *ev;
    /* The contexts that run on this loop, in the order they were attached: `count` of `capacity`. */
    struct rc_attached *attached;
    int count;
    int capacity;
    ev_timer lws_due;
};

static const lws_usec_t rc_anchor_us = (lws_usec_t)365 * 24 * 3600 * LWS_US_PER_SEC;

static void rc_anchor_fired(lws_sorted_usec_list_t *sul) { (void)sul; }

static void rc_lws_due(struct ev_loop *ev, ev_timer *watcher, int revents)
{
    (void)ev;
    (void)watcher;
    (void)revents;
    /* Nothing here: waking the loop is the point, rc_loop_run_once does the rest. */
}

rc_loop *rc_loop_new(int contexts)
{
    if (contexts < 1)
        return NULL;
    rc_loop *loop = calloc(1, sizeof(*loop));
    if (!loop)
        return NULL;
    loop->attached = calloc((size_t)contexts, sizeof(*loop->attached));
    if (!loop->attached) {
        free(loop);
        return NULL;
    }
    loop->capacity = contexts;
    /* No signal handling of libev's: the process's own handlers stay in charge. */
    loop->ev = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV | EVFLAG_NOSIGMASK);
    if (!loop->ev) {
        free(loop->attached);
        free(loop);
        return NULL;
    }
    ev_timer_init(&loop->lws_due, rc_lws_due, 0., 0.);
    return loop;
}

void **rc_loop_foreign(rc_loop *loop) { return (void **)&loop->ev; }

int rc_loop_attach(rc_loop *loop, struct lws_context *context)
{
    if (loop->count == loop->capacity)
        return -1;
    struct rc_attached *slot = &loop->attached[loop->count++];
    slot->context = context;
    lws_sul_schedule(context, 0, &slot->anchor, rc_anchor_fired, rc_anchor_us);
    return 0;
}

void rc_loop_detach(rc_loop *loop)
{
    for (int n = 0; n < loop->count; n++) {
        lws_sul_cancel(&loop->attached[n].anchor);
        loop->attached[n].context = NULL;
    }
    loop->count = 0;
    ev_timer_stop(loop->ev, &loop->lws_due);
}

/* lws 4.1.6 on libev runs its scheduled events (handshake and idle timeouts, its own timers) from
 * a libev timer it re-arms with ev_timer_set on a timer that may still be running, which libev
 * ignores: an event scheduled earlier than the one it waits for is late by up to the difference
 * (a 1 s handshake timeout came after 10 s). So each round runs what is due in every context and
 * arms a timer of its own for the earliest next one. */
void rc_loop_run_once(rc_loop *loop)
{
    lws_usec_t earliest = 0, now = lws_now_usecs();
    int serviced = 0;
    for (int n = 0; n < loop->count; n++) {
        lws_dll2_owner_t *owners = loop->attached[n].anchor.list.owner;
        if (!owners)
            continue;
        serviced = 1;
        lws_usec_t next = __lws_sul_service_ripe(owners, LWS_COUNT_PT_SUL_OWNERS, now);
        if (next > 0 && (earliest == 0 || next < earliest))
            earliest = next;
    }
    if (serviced) {
        ev_timer_stop(loop->ev, &loop->lws_due);
        if (earliest > 0) {
            ev_now_update(loop->ev);
            ev_timer_set(&loop->lws_due, (double)earliest / 1e6, 0.);
            ev_timer_start(loop->ev, &loop->lws_due);
        }
    }
    /* As lws's own loop does before it waits: what lws holds already read (the second of two
     * pipelined requests) is serviced now, and while some is left the loop does not wait. lws's
     * libev glue does this only from an idle watcher it starts after socket events, and a
     * pipelined request could wait there for the next event. */
    int pending = 0;
    for (int n = 0; n < loop->count; n++) {
        struct lws_context *context = loop->attached[n].context;
        if (context && !lws_service_adjust_timeout(context, 1, 0)) {
            _lws_plat_service_forced_tsi(context, 0);
            if (!lws_service_adjust_timeout(context, 1, 0))
                pending = 1;
        }
    }
    ev_run(loop->ev, pending ? EVRUN_NOWAIT : EVRUN_ONCE);
}

void rc_loop_free(rc_loop *loop)
{
    ev_loop_destroy(loop->ev);
    free(loop->attached);
    free(loop);
}

struct rc_timer {
    ev_timer watcher; /* first: the callback finds the timer from it */
    rc_loop *loop;
    void *user;
    void (*fire)(void *user);
};

static void rc_timer_fired(struct ev_loop *ev, ev_timer *watcher, int revents)
{
    (void)ev;
    (void)revents;
    rc_timer *timer = (rc_timer *)watcher;
    timer->fire(timer->user);
}

rc_timer *rc_timer_new(rc_loop *loop, void *user, void (*fire)(void *user))
{
    rc_timer *timer = calloc(1, sizeof(*timer));
    if (!timer)
        return NULL;
    ev_timer_init(&timer->watcher, rc_timer_fired, 0., 0.);
    timer->loop = loop;
    timer->user = user;
    timer->fire = fire;
    return timer;
}

void rc_timer_schedule(rc_timer *timer, int64_t delay_us)
{
    ev_timer_stop(timer->loop->ev, &timer->watcher);
    /* From now, not from when this round of the loop began. */
    ev_now_update(timer->loop->ev);
    ev_timer_set(&timer->watcher, delay_us < 0 ? 0. : (double)delay_us / 1e6, 0.);
    ev_timer_start(timer->loop->ev, &timer->watcher);
}

void rc_timer_cancel(rc_timer *timer) { ev_timer_stop(timer->loop->ev, &timer->watcher); }

void rc_timer_free(rc_timer *timer)
{
    ev_timer_stop(timer->loop->ev, &timer->watcher);
    free(timer);
}

int rc_accept_nonblocking(int listener, struct sockaddr *address, socklen_t *length)
{
    return accept4(listener, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
