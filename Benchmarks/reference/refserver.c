/*
 * refserver: a raw libwebsockets reference server for Ringcast benchmarks.
 *
 * It does the work Ringcast does at its simplest, the idiomatic lws way, so
 * that benchmark numbers for Ringcast have a ceiling to compare against:
 *
 *   - one lws context, one service thread (this one), no locks;
 *   - WebSocket watchers at /ws get a hello and an empty snapshot, then every
 *     broadcast frame;
 *   - POST /api/tasks/{id}, POST /api/events and WS text frames from a client
 *     are each turned into one frame, encoded once, put in one shared ring of
 *     RING_SIZE messages (LWS_PRE headroom included) and written to every
 *     watcher from its own tail, only in LWS_CALLBACK_SERVER_WRITEABLE;
 *   - a watcher more than RING_SIZE messages behind skips to the oldest
 *     message still in the ring (counted, reported on exit).
 *
 * See README.md beside this file for the exact frame formats.
 */

#include <libwebsockets.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define RING_SIZE 4096u		/* messages retained in the shared ring */
#define MAX_BODY (64 * 1024)	/* largest HTTP body or WS message taken in */
#define MAX_ID 128		/* longest task id */

/* ---------------------------------------------------------------------- */
/* the shared ring                                                         */

struct msg {
	uint8_t *buf;		/* LWS_PRE headroom, then len bytes of payload */
	size_t len;
	uint64_t sender;	/* ws session id that published it, 0 = HTTP */
};

/* one ws or http connection; lws allocates and zeroes it per wsi */
struct pss {
	struct pss *next_watcher;	/* intrusive list of ws watchers */
	struct lws *wsi;
	uint64_t id;			/* ws session id, never 0 */
	uint64_t next;			/* next ring index to send */
	uint64_t hello_seq;		/* seq at connect, for hello/snapshot */
	uint64_t skipped;		/* messages skipped by falling behind */
	int stage;			/* 0 hello, 1 snapshot, 2 ring */
	int closing;			/* shutting down: send close 1001 */
	int armed;			/* writable already requested */

	/* ws rx reassembly (fragmented or split messages) */
	char *rx;
	size_t rx_len;
	int rx_bad;			/* message too big or binary: drop it */

	/* http request */
	int route;			/* ROUTE_* */
	char task_id[MAX_ID + 1];
	char *body;
	size_t body_len;
	int body_too_big;
	int status;			/* response ready to write */
	char resp[64];
	size_t resp_len;
};

enum { ROUTE_NONE, ROUTE_HEALTHZ, ROUTE_TASK, ROUTE_EVENTS, ROUTE_NOTFOUND,
       ROUTE_BADMETHOD };

static struct msg ring[RING_SIZE];
static uint64_t ring_head;		/* index the next message gets */
static uint64_t seq;			/* last sequence number handed out */
static uint64_t next_session_id = 1;
static struct pss *watchers;		/* every established ws session */
static int batch = 8;			/* max frames per WRITEABLE callback */

static struct {
	uint64_t connects, disconnects, broadcasts, frames, bytes, skipped,
		 http_requests;
} stats;

static struct lws_context *context;
static volatile sig_atomic_t interrupted;

static uint64_t
now_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (uint64_t)tv.tv_sec * 1000u + (uint64_t)tv.tv_usec / 1000u;
}

static void
wake_watchers(void)
{
	struct pss *p;

	for (p = watchers; p; p = p->next_watcher)
		if (!p->armed) {
			p->armed = 1;
			lws_callback_on_writable(p->wsi);
		}
}

/*
 * Put one message, made of up to three parts, in the ring and wake every
 * watcher.  The message is allocated once, with LWS_PRE headroom, and every
 * watcher writes from that same buffer.
 */
static int
broadcast(uint64_t sender, const void *a, size_t alen, const void *b,
	  size_t blen, const void *c, size_t clen)
{
	struct msg *m = &ring[ring_head % RING_SIZE];
	size_t len = alen + blen + clen;
	uint8_t *buf = malloc(LWS_PRE + len);

	if (!buf)
		return -1;
	memcpy(buf + LWS_PRE, a, alen);
	if (blen)
		memcpy(buf + LWS_PRE + alen, b, blen);
	if (clen)
		memcpy(buf + LWS_PRE + alen + blen, c, clen);

	free(m->buf);		/* the message RING_SIZE ago, if any */
	m->buf = buf;
	m->len = len;
	m->sender = sender;
	ring_head++;
	stats.broadcasts++;

	wake_watchers();
	return 0;
}

/* ---------------------------------------------------------------------- */
/* WebSocket side                                                          */

static void
watcher_unlink(struct pss *pss)
{
	struct pss **pp;

	for (pp = &watchers; *pp; pp = &(*pp)->next_watcher)
		if (*pp == pss) {
			*pp = pss->next_watcher;
			return;
		}
}

static int
write_text(struct lws *wsi, uint8_t *payload, size_t len)
{
	/* payload must have LWS_PRE writable bytes in front of it */
	if (lws_write(wsi, payload, len, LWS_WRITE_TEXT) < (int)len)
		return -1;
	stats.frames++;
	stats.bytes += len;
	return 0;
}

static int
ws_writeable(struct lws *wsi, struct pss *pss)
{
	uint8_t hb[LWS_PRE + 160];
	uint64_t oldest;
	int n = 0, len;

	pss->armed = 0;

	if (pss->closing) {
		lws_close_reason(wsi, LWS_CLOSE_STATUS_GOINGAWAY,
				 (unsigned char *)"shutdown", 8);
		return -1;
	}

	while (n < batch) {
		if (pss->stage == 0) {
			len = snprintf((char *)hb + LWS_PRE, sizeof(hb) - LWS_PRE,
				"{\"type\":\"hello\",\"protocol\":1,\"epoch\":\"ref\","
				"\"seq\":%llu,\"now\":%llu}",
				(unsigned long long)pss->hello_seq,
				(unsigned long long)now_ms());
			if (write_text(wsi, hb + LWS_PRE, (size_t)len))
				return -1;
			pss->stage = 1;
		} else if (pss->stage == 1) {
			len = snprintf((char *)hb + LWS_PRE, sizeof(hb) - LWS_PRE,
				"{\"type\":\"snapshot\",\"epoch\":\"ref\","
				"\"seq\":%llu,\"tasks\":[]}",
				(unsigned long long)pss->hello_seq);
			if (write_text(wsi, hb + LWS_PRE, (size_t)len))
				return -1;
			pss->stage = 2;
		} else {
			struct msg *m;

			oldest = ring_head > RING_SIZE ? ring_head - RING_SIZE : 0;
			if (pss->next < oldest) {
				/* fell more than the ring behind: skip ahead */
				pss->skipped += oldest - pss->next;
				stats.skipped += oldest - pss->next;
				pss->next = oldest;
			}
			if (pss->next >= ring_head)
				break;
			m = &ring[pss->next % RING_SIZE];
			pss->next++;
			if (m->sender == pss->id)
				continue;	/* don't echo to the publisher */
			if (write_text(wsi, m->buf + LWS_PRE, m->len))
				return -1;
		}
		/* more in this callback only while the socket takes it */
		if (++n < batch && lws_send_pipe_choked(wsi))
			break;
	}

	if (pss->stage < 2 || pss->next < ring_head) {
		pss->armed = 1;
		lws_callback_on_writable(wsi);
	}
	return 0;
}

static int
ws_receive(struct lws *wsi, struct pss *pss, const void *in, size_t len)
{
	if (lws_is_first_fragment(wsi)) {
		pss->rx_len = 0;
		pss->rx_bad = lws_frame_is_binary(wsi);
	}
	if (!pss->rx_bad) {
		if (pss->rx_len + len > MAX_BODY) {
			lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE,
					 (unsigned char *)"too big", 7);
			return -1;
		}
		if (!pss->rx) {
			pss->rx = malloc(MAX_BODY);
			if (!pss->rx)
				return -1;
		}
		memcpy(pss->rx + pss->rx_len, in, len);
		pss->rx_len += len;
	}

	if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi))
		return 0;

	/* a complete message */
	if (!pss->rx_bad && pss->rx_len) {
		seq++;
		if (broadcast(pss->id, pss->rx, pss->rx_len, NULL, 0, NULL, 0))
			return -1;
	}
	pss->rx_len = 0;
	pss->rx_bad = 0;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* HTTP side                                                               */

static int
valid_task_id(const char *s, size_t n)
{
	size_t i;

	if (!n || n > MAX_ID)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-' || c == '/' || c == ':'))
			return 0;
	}
	return 1;
}

static void
respond(struct lws *wsi, struct pss *pss, int status, const char *body)
{
	size_t n = strlen(body);

	if (n >= sizeof(pss->resp))
		n = sizeof(pss->resp) - 1;
	memcpy(pss->resp, body, n);
	pss->resp_len = n;
	pss->status = status;
	lws_callback_on_writable(wsi);
}

static void
http_reset(struct pss *pss)
{
	free(pss->body);
	pss->body = NULL;
	pss->body_len = 0;
	pss->body_too_big = 0;
	pss->route = ROUTE_NONE;
	pss->status = 0;
	pss->task_id[0] = '\0';
}

/* LWS_CALLBACK_HTTP: headers are in, body (if any) follows */
static int
http_request(struct lws *wsi, struct pss *pss)
{
	char uri[512];
	int is_post = lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0;
	int is_get = lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0;
	int ulen, clen;

	http_reset(pss);
	stats.http_requests++;

	ulen = lws_hdr_copy(wsi, uri, sizeof(uri),
			    is_post ? WSI_TOKEN_POST_URI : WSI_TOKEN_GET_URI);
	if (ulen < 0)
		ulen = 0;
	uri[ulen] = '\0';

	if (!strcmp(uri, "/healthz"))
		pss->route = is_get ? ROUTE_HEALTHZ : ROUTE_BADMETHOD;
	else if (!strcmp(uri, "/api/events"))
		pss->route = is_post ? ROUTE_EVENTS : ROUTE_BADMETHOD;
	else if (!strncmp(uri, "/api/tasks/", 11) &&
		 valid_task_id(uri + 11, (size_t)ulen - 11)) {
		pss->route = is_post ? ROUTE_TASK : ROUTE_BADMETHOD;
		memcpy(pss->task_id, uri + 11, (size_t)ulen - 11 + 1);
	} else
		pss->route = ROUTE_NOTFOUND;

	clen = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH);
	if (is_post && clen > 0) {
		char cl[24];

		lws_hdr_copy(wsi, cl, sizeof(cl), WSI_TOKEN_HTTP_CONTENT_LENGTH);
		if (atoll(cl) > 0)
			return 0;	/* wait for HTTP_BODY / BODY_COMPLETION */
	}

	/* no body: answer now */
	switch (pss->route) {
	case ROUTE_HEALTHZ:
		respond(wsi, pss, HTTP_STATUS_OK, "{\"ok\":true}");
		break;
	case ROUTE_TASK:
	case ROUTE_EVENTS:
		respond(wsi, pss, HTTP_STATUS_BAD_REQUEST,
			"{\"error\":\"empty body\"}");
		break;
	case ROUTE_BADMETHOD:
		respond(wsi, pss, HTTP_STATUS_METHOD_NOT_ALLOWED,
			"{\"error\":\"method not allowed\"}");
		break;
	default:
		respond(wsi, pss, HTTP_STATUS_NOT_FOUND,
			"{\"error\":\"not found\"}");
		break;
	}
	return 0;
}

static int
http_body(struct pss *pss, const void *in, size_t len)
{
	if (pss->route != ROUTE_TASK && pss->route != ROUTE_EVENTS)
		return 0;	/* discard; we answer 404/405 at completion */
	if (pss->body_too_big || pss->body_len + len > MAX_BODY) {
		pss->body_too_big = 1;
		return 0;	/* read and discard the rest, answer 400 */
	}
	if (!pss->body) {
		pss->body = malloc(MAX_BODY);
		if (!pss->body)
			return -1;
	}
	memcpy(pss->body + pss->body_len, in, len);
	pss->body_len += len;
	return 0;
}

static void
http_body_done(struct lws *wsi, struct pss *pss)
{
	char head[64 + MAX_ID], r[48];
	const char *b = pss->body;
	size_t n = pss->body_len;
	int hl;

	/* skip leading whitespace, trailing whitespace */
	while (n && (*b == ' ' || *b == '\t' || *b == '\r' || *b == '\n')) {
		b++;
		n--;
	}
	while (n && (b[n - 1] == ' ' || b[n - 1] == '\t' ||
		     b[n - 1] == '\r' || b[n - 1] == '\n'))
		n--;

	switch (pss->route) {
	case ROUTE_TASK:
		if (pss->body_too_big || n < 2 || b[0] != '{' ||
		    b[n - 1] != '}') {
			respond(wsi, pss, HTTP_STATUS_BAD_REQUEST,
				pss->body_too_big ?
				"{\"error\":\"body too large\"}" :
				"{\"error\":\"body must be an object\"}");
			break;
		}
		seq++;
		hl = snprintf(head, sizeof(head),
			      "{\"type\":\"progress\",\"seq\":%llu,\"id\":\"%s\"",
			      (unsigned long long)seq, pss->task_id);
		{
			/* rest of the object after '{', possibly just "}" */
			const char *rest = b + 1;
			size_t rlen = n - 1;
			int empty = 1;
			size_t i;

			for (i = 0; i + 1 < rlen; i++)
				if (!strchr(" \t\r\n", rest[i])) {
					empty = 0;
					break;
				}
			if (empty) {
				/* "{}" -> ...,"id":"x"} */
				if (broadcast(0, head, (size_t)hl, "}", 1,
					      NULL, 0))
					goto oom;
			} else if (broadcast(0, head, (size_t)hl, ",", 1,
					     rest, rlen))
				goto oom;
		}
		snprintf(r, sizeof(r), "{\"seq\":%llu}",
			 (unsigned long long)seq);
		respond(wsi, pss, HTTP_STATUS_OK, r);
		break;

	case ROUTE_EVENTS:
		if (pss->body_too_big || n < 2 || b[0] != '[' ||
		    b[n - 1] != ']') {
			respond(wsi, pss, HTTP_STATUS_BAD_REQUEST,
				pss->body_too_big ?
				"{\"error\":\"body too large\"}" :
				"{\"error\":\"body must be an array\"}");
			break;
		}
		seq++;
		if (broadcast(0, b, n, NULL, 0, NULL, 0))
			goto oom;
		snprintf(r, sizeof(r), "{\"seq\":%llu}",
			 (unsigned long long)seq);
		respond(wsi, pss, HTTP_STATUS_OK, r);
		break;

	case ROUTE_BADMETHOD:
		respond(wsi, pss, HTTP_STATUS_METHOD_NOT_ALLOWED,
			"{\"error\":\"method not allowed\"}");
		break;

	default:
		respond(wsi, pss, HTTP_STATUS_NOT_FOUND,
			"{\"error\":\"not found\"}");
		break;
	}
	free(pss->body);
	pss->body = NULL;
	pss->body_len = 0;
	return;

oom:
	respond(wsi, pss, HTTP_STATUS_INTERNAL_SERVER_ERROR,
		"{\"error\":\"out of memory\"}");
}

static int
http_writeable(struct lws *wsi, struct pss *pss)
{
	uint8_t buf[LWS_PRE + 512], *start = buf + LWS_PRE, *p = start,
		*end = buf + sizeof(buf) - 1;
	int status = pss->status;

	if (!status)
		return 0;
	pss->status = 0;

	if (lws_add_http_common_headers(wsi, (unsigned int)status,
					"application/json", pss->resp_len,
					&p, end))
		return 1;
	if (lws_finalize_write_http_header(wsi, start, &p, end))
		return 1;

	memcpy(start, pss->resp, pss->resp_len);
	if (lws_write(wsi, start, pss->resp_len, LWS_WRITE_HTTP_FINAL) !=
	    (int)pss->resp_len)
		return 1;

	/* keep-alive: ready for the next request on this connection */
	if (lws_http_transaction_completed(wsi))
		return -1;
	return 0;
}

/* ---------------------------------------------------------------------- */

static int
callback(struct lws *wsi, enum lws_callback_reasons reason, void *user,
	 void *in, size_t len)
{
	struct pss *pss = (struct pss *)user;

	switch (reason) {

	/* ---- HTTP ---- */
	case LWS_CALLBACK_HTTP:
		return http_request(wsi, pss);

	case LWS_CALLBACK_HTTP_BODY:
		return http_body(pss, in, len);

	case LWS_CALLBACK_HTTP_BODY_COMPLETION:
		http_body_done(wsi, pss);
		return 0;

	case LWS_CALLBACK_HTTP_WRITEABLE:
		return http_writeable(wsi, pss);

	case LWS_CALLBACK_CLOSED_HTTP:
		if (pss)
			http_reset(pss);
		break;

	/* ---- WebSocket ---- */
	case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION: {
		char uri[64];
		int n = lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI);

		/* only /ws upgrades; query args are ignored */
		if (n != 3 || memcmp(uri, "/ws", 3))
			return 1;
		break;
	}

	case LWS_CALLBACK_ESTABLISHED:
		/* the same pss carried the upgrade request: start clean */
		http_reset(pss);
		memset(pss, 0, sizeof(*pss));
		pss->wsi = wsi;
		pss->id = next_session_id++;
		pss->hello_seq = seq;
		pss->next = ring_head;	/* later messages only */
		pss->next_watcher = watchers;
		watchers = pss;
		pss->armed = 1;
		lws_callback_on_writable(wsi);
		stats.connects++;
		break;

	case LWS_CALLBACK_SERVER_WRITEABLE:
		return ws_writeable(wsi, pss);

	case LWS_CALLBACK_RECEIVE:
		return ws_receive(wsi, pss, in, len);

	case LWS_CALLBACK_CLOSED:
		/* also comes for an upgrade that FILTER refused: no id yet */
		if (!pss || !pss->id)
			break;
		watcher_unlink(pss);
		free(pss->rx);
		pss->rx = NULL;
		pss->id = 0;
		stats.disconnects++;
		break;

	default:
		break;
	}

	return 0;
}

static struct lws_protocols protocols[] = {
	/*
	 * protocols[0] gets plain HTTP and any ws upgrade that names no
	 * subprotocol (what browsers send)
	 */
	{ "ringcast-ref", callback, sizeof(struct pss), 0, 0, NULL, 0 },
	{ NULL, NULL, 0, 0, 0, NULL, 0 }	/* terminator */
};

static lws_sorted_usec_list_t tick_sul;

static void
tick(lws_sorted_usec_list_t *sul)
{
	/* only here so lws_service() returns during the shutdown drain */
	lws_sul_schedule(context, 0, sul, tick, 50 * LWS_US_PER_MS);
}

static void
sigint_handler(int sig)
{
	(void)sig;
	interrupted = 1;
	if (context)
		lws_cancel_service(context);
}

static void
usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [--host 127.0.0.1] [--port N] [--batch N]\n"
		"  --port 0 picks a free port; --batch is the most frames\n"
		"  written to one client per WRITEABLE callback (default 8)\n",
		argv0);
}

int
main(int argc, char **argv)
{
	struct lws_context_creation_info info;
	const char *host = "127.0.0.1";
	struct sigaction sa;
	struct lws_vhost *vh;
	int port = 0, n = 0, i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--host") && i + 1 < argc)
			host = argv[++i];
		else if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			batch = atoi(argv[++i]);
		else {
			usage(argv[0]);
			return 2;
		}
	}
	if (port < 0 || port > 65535 || batch < 1) {
		usage(argv[0]);
		return 2;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = sigint_handler;	/* no SA_RESTART: poll() returns */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	lws_set_log_level(LLL_ERR | LLL_WARN, NULL);

	memset(&info, 0, sizeof(info));
	info.port = port;	/* 0: the kernel picks a free port */
	info.iface = host;
	info.protocols = protocols;
	/* without DISABLE_IPV6 lws binds [::] and silently ignores iface */
	info.options = LWS_SERVER_OPTION_DISABLE_IPV6;
	info.max_http_header_pool = 64;
	info.timeout_secs = 30;

	context = lws_create_context(&info);
	if (!context) {
		fprintf(stderr, "refserver: lws_create_context failed\n");
		return 1;
	}

	vh = lws_get_vhost_by_name(context, "default");
	printf("listening on http://%s:%d\n", host,
	       vh ? lws_get_vhost_listen_port(vh) : port);
	fflush(stdout);

	while (n >= 0 && !interrupted)
		n = lws_service(context, 0);

	/*
	 * Stop cleanly: every watcher gets a close frame 1001 (going away)
	 * from its own WRITEABLE callback; give them up to 1 s to go.
	 */
	if (n >= 0 && watchers) {
		struct pss *p;
		uint64_t deadline = now_ms() + 1000;

		for (p = watchers; p; p = p->next_watcher) {
			p->closing = 1;
			lws_callback_on_writable(p->wsi);
		}
		tick(&tick_sul);
		while (n >= 0 && watchers && now_ms() < deadline)
			n = lws_service(context, 0);
	}

	lws_context_destroy(context);
	context = NULL;

	for (i = 0; i < (int)RING_SIZE; i++)
		free(ring[i].buf);

	fprintf(stderr,
		"refserver: seq %llu, broadcasts %llu, ws connects %llu, "
		"disconnects %llu, frames %llu, bytes %llu, skipped %llu, "
		"http requests %llu\n",
		(unsigned long long)seq, (unsigned long long)stats.broadcasts,
		(unsigned long long)stats.connects,
		(unsigned long long)stats.disconnects,
		(unsigned long long)stats.frames,
		(unsigned long long)stats.bytes,
		(unsigned long long)stats.skipped,
		(unsigned long long)stats.http_requests);
	return 0;
}
