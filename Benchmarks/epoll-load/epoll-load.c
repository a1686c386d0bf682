/*
 * epoll-load: a load generator that shares no code with Ringcast or libwebsockets, to check that
 * what `ringcast load` measures is the server and not the tool. One epoll thread holds the
 * watchers (WebSocket handshakes written by hand, frames parsed by hand); one more thread
 * publishes over one keep-alive HTTP connection, one request at a time, each update to its own
 * task (so nothing may be conflated), padded to --payload bytes. The server's CPU is read from
 * /proc/PID/task/ * /schedstat: per connection over the connect phase, per delivery from the
 * first publish to the last delivery.
 *
 *   epoll-load --port P --pid PID [--watchers N] [--rate R] [--messages M] [--payload B] [--hold S]
 *              [--tasks T] [--churn K] [--churn-concurrency C] [--churn-until upgrade|snapshot] [--deflate]
 *              [--sse PATH]
 *
 * --rate 0 publishes as fast as one request at a time allows. Prints one line of JSON.
 * --tasks T first creates T tasks (one POST each, about 200 bytes of snapshot apiece), so that
 * every watcher's snapshot carries them. --churn K then, with the N watchers held, connects K
 * more, C at a time: each upgrades, waits for its snapshot (or only the upgrade: Nchan sends
 * none), and closes; the server's CPU over that phase, per watcher, is churnCpuUsPerConnection
 * (a connect and a close at N held). --deflate: the churning watchers ask for permessage-deflate;
 * their frames are not inflated, so the snapshot is taken to be the second whole message (the first
 * is the hello) and snapshotBytes is what it took on the wire. The held watchers ask for it too,
 * and inflate what they get (zlib) to count the updates in it.
 *
 * --storm restart|cut: N watchers connect and get their snapshots; then either the server is
 * restarted by whoever runs this (restart: it waits for every watcher to be closed, and learns the
 * new server's pid from --pid-file once all are back) or this generator drops every socket at once
 * (cut: a reset, as a page's watchdog does after a network blip). Each watcher then reconnects as
 * the dashboard does (Public/js/connection.js: a delay random in [0, min(15 s, 0.5 s * 2^n)), n the
 * attempts since its last snapshot), resuming with ?since=EPOCH:SEQ from its hello (the first
 * watcher's, for the others' first connection), until it has a
 * snapshot again. Prints the time until every watcher was live again, the p50/p99 of each one's
 * time from its loss to its snapshot, and the server's CPU over the storm (restart: the new
 * server's whole CPU time, start-up included). --ready-file: created once the N are connected.
 * --sse PATH: the held watchers follow PATH as a stream over plain HTTP instead (Ringcast's
 * /api/stream?watch=*, Nchan's eventsource subscriber): a GET asking for text/event-stream, and
 * the updates counted in whatever whole events (up to a blank line) have come, the chunked
 * framing between them ignored. Not with --churn, --storm or --deflate.
 * Loopback only: it connects to 127.0.0.1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define MARK "epl:"

struct watcher {
	int fd;
	int upgraded;
	size_t have;		/* bytes in buf */
	char *buf;
	size_t cap;
	/* --deflate: the inflater (kept across messages: the server may keep its context) and the
	 * message being inflated */
	z_stream z;
	int z_ready, in_message;
	char *message;
	size_t message_len, message_cap;
};

static int port, watchers_n = 1000, rate = 100, messages = 1000, payload = 120;
static double hold_seconds = 0;
static int tasks_n = 0, churn_n = 0, churn_concurrency = 32, churn_until_snapshot = 1;
static long server_pid;
static volatile int publishing_done;
static volatile uint64_t published;
static uint64_t delivered;
static uint32_t *latencies;	/* microseconds, one per delivery */
static uint64_t latency_cap;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Every thread's run time (ns) of the server, from the kernel's scheduler statistics. */
static uint64_t server_cpu_ns(void)
{
	char path[64], line[128];
	uint64_t total = 0;
	snprintf(path, sizeof(path), "/proc/%ld/task", server_pid);
	DIR *dir = opendir(path);
	if (!dir)
		return 0;
	struct dirent *entry;
	while ((entry = readdir(dir))) {
		if (entry->d_name[0] == '.')
			continue;
		char file[384];
		snprintf(file, sizeof(file), "%s/%s/schedstat", path, entry->d_name);
		FILE *f = fopen(file, "r");
		if (!f)
			continue;
		if (fgets(line, sizeof(line), f))
			total += strtoull(line, NULL, 10);
		fclose(f);
	}
	closedir(dir);
	return total;
}

static int connect_loopback(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0) {
		perror("epoll-load: connect to 127.0.0.1");
		exit(1);
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void write_all(int fd, const char *data, size_t length)
{
	while (length) {
		ssize_t n = write(fd, data, length);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			perror("epoll-load: write");
			exit(1);
		}
		data += n;
		length -= (size_t)n;
	}
}

/* Counts the marked updates in one frame's payload and times each from the send time it carries. */
static void count_updates(const char *data, size_t length, uint64_t now)
{
	const char *end = data + length, *at = data;
	while ((at = memmem(at, (size_t)(end - at), MARK, sizeof(MARK) - 1))) {
		at += sizeof(MARK) - 1;
		uint64_t sent = strtoull(at, NULL, 10);
		if (delivered < latency_cap)
			latencies[delivered] = (uint32_t)((now - sent) / 1000);
		delivered++;
	}
}

static int ask_deflate;
static const char *sse_path;	/* --sse: the stream's path and query */

/* Inflates one frame of a compressed message into w->message; at its last frame the updates in
 * the whole message are counted. */
static void inflate_frame(struct watcher *w, const char *data, size_t length, int fin, uint64_t now)
{
	static const unsigned char tail[4] = { 0x00, 0x00, 0xff, 0xff };
	if (!w->z_ready) {
		if (inflateInit2(&w->z, -15) != Z_OK) {
			fprintf(stderr, "epoll-load: inflateInit2 failed\n");
			exit(1);
		}
		w->z_ready = 1;
	}
	for (int part = 0; part < (fin ? 2 : 1); part++) {
		w->z.next_in = (Bytef *)(part ? tail : (const unsigned char *)data);
		w->z.avail_in = (uInt)(part ? sizeof(tail) : length);
		while (w->z.avail_in) {
			if (w->message_cap - w->message_len < 65536) {
				w->message_cap = w->message_cap ? w->message_cap * 2 : 1 << 17;
				w->message = realloc(w->message, w->message_cap);
			}
			w->z.next_out = (Bytef *)w->message + w->message_len;
			w->z.avail_out = (uInt)(w->message_cap - w->message_len);
			int r = inflate(&w->z, Z_SYNC_FLUSH);
			w->message_len = (size_t)((char *)w->z.next_out - w->message);
			if (r != Z_OK && r != Z_BUF_ERROR) {
				fprintf(stderr, "epoll-load: inflate failed (%d)\n", r);
				exit(1);
			}
			if (r == Z_BUF_ERROR && w->z.avail_out)
				break;
		}
	}
	w->in_message = !fin;
	if (fin) {
		count_updates(w->message, w->message_len, now);
		w->message_len = 0;
	}
}

/* A server frame's header at h (have bytes there): its payload length and header size, or 0 when
 * the header is not all there yet. Server frames are never masked. */
static int frame_header(const unsigned char *h, size_t have, uint64_t *length, size_t *header)
{
	*length = h[1] & 0x7f;
	*header = 2;
	if (*length == 126) {
		if (have < 4)
			return 0;
		*length = (uint64_t)h[2] << 8 | h[3];
		*header = 4;
	} else if (*length == 127) {
		if (have < 10)
			return 0;
		*length = 0;
		for (int i = 0; i < 8; i++)
			*length = *length << 8 | h[2 + i];
		*header = 10;
	}
	return 1;
}

/* Takes whole frames off the front of the buffer; server frames are never masked. */
/* --sse: the updates in every whole event received; what follows the last blank line waits. */
static void consume_stream(struct watcher *w, uint64_t now)
{
	size_t at = 0;
	if (!w->upgraded) {
		char *end = memmem(w->buf, w->have, "\r\n\r\n", 4);
		if (!end)
			return;
		if (strncmp(w->buf, "HTTP/1.1 200", 12)) {
			fprintf(stderr, "epoll-load: the stream was refused: %.*s\n", (int)(end - w->buf), w->buf);
			exit(1);
		}
		w->upgraded = 1;
		at = (size_t)(end - w->buf) + 4;
	}
	char *last = NULL, *from = w->buf + at;
	for (char *found = from; (found = memmem(found, w->have - (size_t)(found - w->buf), "\n\n", 2)); found += 2)
		last = found;
	if (!last)
		return;
	size_t whole = (size_t)(last + 2 - w->buf);
	count_updates(from, whole - at, now);
	memmove(w->buf, w->buf + whole, w->have - whole);
	w->have -= whole;
}

static void consume(struct watcher *w, uint64_t now)
{
	size_t at = 0;
	if (sse_path) {
		consume_stream(w, now);
		return;
	}
	if (!w->upgraded) {
		char *end = memmem(w->buf, w->have, "\r\n\r\n", 4);
		if (!end)
			return;
		if (strncmp(w->buf, "HTTP/1.1 101", 12)) {
			fprintf(stderr, "epoll-load: the upgrade was refused: %.*s\n", (int)(end - w->buf), w->buf);
			exit(1);
		}
		w->upgraded = 1;
		at = (size_t)(end - w->buf) + 4;
	}
	for (;;) {
		if (w->have - at < 2)
			break;
		const unsigned char *h = (const unsigned char *)w->buf + at;
		uint64_t length;
		size_t header;
		if (!frame_header(h, w->have - at, &length, &header))
			break;
		if (w->have - at < header + length)
			break;
		if (ask_deflate && ((h[0] & 0x0f) == 1 || (h[0] & 0x0f) == 0) && ((h[0] & 0x40) || w->in_message))
			inflate_frame(w, w->buf + at + header, (size_t)length, h[0] & 0x80, now);
		else if ((h[0] & 0x0f) == 1 || (h[0] & 0x0f) == 0)
			count_updates(w->buf + at + header, (size_t)length, now);
		at += header + (size_t)length;
	}
	memmove(w->buf, w->buf + at, w->have - at);
	w->have -= at;
}

static void read_answer(int fd, const char *what);

static void *publish(void *unused)
{
	(void)unused;
	int fd = connect_loopback();
	char body[4096], request[8192];
	uint64_t start = now_ns();
	for (int i = 0; i < messages; i++) {
		if (rate > 0) {
			uint64_t due = start + (uint64_t)i * 1000000000ull / (uint64_t)rate;
			uint64_t now = now_ns();
			if (due > now) {
				struct timespec pause = { .tv_sec = (time_t)((due - now) / 1000000000ull), .tv_nsec = (long)((due - now) % 1000000000ull) };
				nanosleep(&pause, NULL);
			}
		}
		int n = snprintf(body, sizeof(body), "{\"progress\":0.5,\"title\":\"bench\",\"detail\":\"" MARK "%llu ", (unsigned long long)now_ns());
		while (n < payload - 2 && n < (int)sizeof(body) - 3)
			body[n++] = 'x';
		n += snprintf(body + n, sizeof(body) - (size_t)n, "\"}");
		int r = snprintf(request, sizeof(request),
				 "POST /api/tasks/epl-%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
				 "Content-Length: %d\r\n\r\n%s", i, port, n, body);
		write_all(fd, request, (size_t)r);
		read_answer(fd, "a publish");
		published++;
	}
	close(fd);
	publishing_done = 1;
	return NULL;
}

static int by_value(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Reads one HTTP answer (headers and Content-Length body) on fd; exits unless it is a 2xx. */
static void read_answer(int fd, const char *what)
{
	char answer[8192];
	size_t have = 0;
	for (;;) {
		ssize_t got = read(fd, answer + have, sizeof(answer) - 1 - have);
		if (got <= 0) {
			fprintf(stderr, "epoll-load: the server closed the connection during %s\n", what);
			exit(1);
		}
		have += (size_t)got;
		answer[have] = 0;
		char *end = strstr(answer, "\r\n\r\n");
		if (!end)
			continue;
		char *cl = strcasestr(answer, "content-length:");
		size_t want = (size_t)(end - answer) + 4 + (cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0);
		if (have >= want)
			break;
	}
	if (strncmp(answer, "HTTP/1.1 2", 10)) {
		fprintf(stderr, "epoll-load: %s was refused: %.60s\n", what, answer);
		exit(1);
	}
}

/* --tasks: T tasks, one POST each over one keep-alive connection. */
static void preload_tasks(void)
{
	int fd = connect_loopback();
	char body[512], request[1024];
	for (int i = 0; i < tasks_n; i++) {
		int n = snprintf(body, sizeof(body),
				 "{\"progress\":0.%02d,\"title\":\"held task %d\",\"detail\":\"step %d of a long job, on its way\","
				 "\"completed\":%d,\"total\":100}", i % 100, i, i % 100, i % 100);
		int r = snprintf(request, sizeof(request),
				 "POST /api/tasks/held-%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
				 "Content-Length: %d\r\n\r\n%s", i, port, n, body);
		write_all(fd, request, (size_t)r);
		read_answer(fd, "a task's creation (--tasks)");
	}
	close(fd);
}

/* One churning watcher: upgraded yet, and whether a whole snapshot frame has come. */
struct churner {
	int fd;
	int upgraded;
	int messages;		/* whole messages seen (--deflate) */
	size_t message_bytes;	/* the current message's bytes so far (--deflate) */
	size_t have, cap;
	char *buf;
};

static int snapshot_bytes;

/* Whether the churner has what it waits for; frames it has seen whole are dropped. */
static int churner_done(struct churner *c)
{
	size_t at = 0;
	if (!c->upgraded) {
		char *end = memmem(c->buf, c->have, "\r\n\r\n", 4);
		if (!end)
			return 0;
		if (strncmp(c->buf, "HTTP/1.1 101", 12)) {
			fprintf(stderr, "epoll-load: a churn upgrade was refused: %.*s\n", (int)(end - c->buf), c->buf);
			exit(1);
		}
		c->upgraded = 1;
		at = (size_t)(end - c->buf) + 4;
		if (!churn_until_snapshot)
			return 1;
	}
	int done = 0;
	while (!done && c->have - at >= 2) {
		const unsigned char *h = (const unsigned char *)c->buf + at;
		uint64_t length;
		size_t header;
		if (!frame_header(h, c->have - at, &length, &header))
			break;
		if (c->have - at < header + length)
			break;
		const char *payload = c->buf + at + header;
		if (ask_deflate) {
			c->message_bytes += length;
			if (h[0] & 0x80) {	/* FIN: a whole message */
				if (++c->messages == 2) {
					snapshot_bytes = (int)c->message_bytes;
					done = 1;
				}
				c->message_bytes = 0;
			}
		} else if (length > 20 && memmem(payload, length < 64 ? length : 64, "\"snapshot\"", 10)) {
			snapshot_bytes = (int)length;
			done = 1;
		}
		at += header + (size_t)length;
	}
	memmove(c->buf, c->buf + at, c->have - at);
	c->have -= at;
	return done;
}

static void churn_start(struct churner *c, int ep, const char *handshake, int hl)
{
	c->fd = connect_loopback();
	c->upgraded = 0;
	c->have = 0;
	c->messages = 0;
	c->message_bytes = 0;
	write_all(c->fd, handshake, (size_t)hl);
	fcntl(c->fd, F_SETFL, O_NONBLOCK);
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = c };
	epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e);
}

/* --churn: K watchers connect, get what they wait for and close, C at a time. Returns the seconds taken. */
static double churn(const char *handshake, int hl)
{
	int ep = epoll_create1(0), started = 0, finished = 0;
	int slots = churn_concurrency < churn_n ? churn_concurrency : churn_n;
	struct churner *cs = calloc((size_t)slots, sizeof(*cs));
	for (int i = 0; i < slots; i++) {
		cs[i].cap = 1 << 16;
		cs[i].buf = malloc(cs[i].cap);
		churn_start(&cs[i], ep, handshake, hl);
		started++;
	}
	uint64_t began = now_ns(), give_up = began + 120ull * 1000000000ull;
	struct epoll_event events[256];
	while (finished < churn_n && now_ns() < give_up) {
		int ready = epoll_wait(ep, events, 256, 100);
		for (int k = 0; k < ready; k++) {
			struct churner *c = events[k].data.ptr;
			for (;;) {
				if (c->cap - c->have < 65536) {
					c->cap *= 2;
					c->buf = realloc(c->buf, c->cap);
				}
				ssize_t got = read(c->fd, c->buf + c->have, c->cap - c->have);
				if (got == 0) {
					fprintf(stderr, "epoll-load: the server closed a churning watcher\n");
					exit(1);
				}
				if (got < 0)
					break;
				c->have += (size_t)got;
				if (churner_done(c)) {
					epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
					close(c->fd);
					finished++;
					if (started < churn_n) {
						churn_start(c, ep, handshake, hl);
						started++;
					}
					break;
				}
			}
		}
	}
	if (finished < churn_n) {
		fprintf(stderr, "epoll-load: only %d of %d churning watchers got their %s in 120 s\n", finished, churn_n,
			churn_until_snapshot ? "snapshot" : "upgrade");
		exit(1);
	}
	close(ep);
	return (double)(now_ns() - began) / 1e9;
}

/* --storm: one watcher through a loss and its reconnection. */
struct stormer {
	int fd;
	int state;		/* 0 waiting to connect, 1 upgrading, 2 live */
	int sent;		/* the upgrade request has gone (the non-blocking connect finished) */
	int attempts;
	uint64_t due, lost_at, live_after;
	size_t have, cap;
	char *buf;
	int upgraded;
};

static char storm_epoch[64];
static unsigned long long storm_seq;
static const char *storm_mode, *pid_file, *ready_file;

static uint64_t backoff_ns(int attempts)
{
	double ceiling = 500.0 * (double)(1u << (attempts > 10 ? 10 : attempts));
	if (ceiling > 15000.0)
		ceiling = 15000.0;
	return (uint64_t)((double)rand() / ((double)RAND_MAX + 1.0) * ceiling * 1e6);
}

/* Sends the upgrade, resuming from the epoch and seq known now. */
static int stormer_send_upgrade(struct stormer *w)
{
	char request[512];
	int n = storm_epoch[0]
		? snprintf(request, sizeof(request), "GET /ws?since=%s:%llu HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
			   "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
			   storm_epoch, storm_seq, port)
		: snprintf(request, sizeof(request), "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
			   "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
			   port);
	if (write(w->fd, request, (size_t)n) != n)
		return -1;
	w->sent = 1;
	return 0;
}

/* Starts a non-blocking connect (so a full accept queue, whose SYNs the kernel retries after 1 s,
 * stalls this watcher and not the others); the upgrade goes once it is writable. Refused at once
 * while the server is down. */
static int stormer_connect(struct stormer *w, int ep)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	if (fd < 0 || (connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0 && errno != EINPROGRESS)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	w->fd = fd;
	w->state = 1;
	w->sent = 0;
	w->have = 0;
	w->upgraded = 0;
	struct epoll_event e = { .events = EPOLLIN | EPOLLOUT, .data.ptr = w };
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
	return 0;
}

/* A watcher's connect finished: the upgrade goes, or the connect failed (-1). */
static int stormer_writable(struct stormer *w, int ep)
{
	int error = 0;
	socklen_t size = sizeof(error);
	if (getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &error, &size) < 0 || error)
		return -1;
	if (stormer_send_upgrade(w) < 0)
		return -1;
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = w };
	epoll_ctl(ep, EPOLL_CTL_MOD, w->fd, &e);
	return 0;
}

/* Whole frames off the front: returns 1 once a snapshot has come (the hello's epoch and seq kept). */
static int stormer_frames(struct stormer *w)
{
	size_t at = 0;
	int snapshot = 0;
	if (!w->upgraded) {
		char *end = memmem(w->buf, w->have, "\r\n\r\n", 4);
		if (!end)
			return 0;
		if (strncmp(w->buf, "HTTP/1.1 101", 12))
			return -1;
		w->upgraded = 1;
		at = (size_t)(end - w->buf) + 4;
	}
	while (w->have - at >= 2) {
		const unsigned char *h = (const unsigned char *)w->buf + at;
		uint64_t length;
		size_t header;
		if (!frame_header(h, w->have - at, &length, &header))
			break;
		if (w->have - at < header + length)
			break;
		const char *payload = w->buf + at + header;
		size_t look = length < 96 ? length : 96;
		if ((h[0] & 0x0f) == 8)
			return -1;	/* a close frame: lost */
		if (memmem(payload, look, "\"type\":\"hello\"", 14)) {
			const char *e = memmem(payload, length, "\"epoch\":\"", 9), *q = memmem(payload, length, "\"seq\":", 6);
			if (e && q) {
				const char *close_quote = memchr(e + 9, '"', (size_t)(payload + length - (e + 9)));
				if (close_quote && close_quote - (e + 9) < (long)sizeof(storm_epoch)) {
					memcpy(storm_epoch, e + 9, (size_t)(close_quote - (e + 9)));
					storm_epoch[close_quote - (e + 9)] = 0;
				}
				storm_seq = strtoull(q + 6, NULL, 10);
			}
		} else if (memmem(payload, look, "\"type\":\"snapshot\"", 17))
			snapshot = 1;
		at += header + (size_t)length;
	}
	memmove(w->buf, w->buf + at, w->have - at);
	w->have -= at;
	return snapshot;
}

static void stormer_lost(struct stormer *w, int ep, uint64_t now)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, w->fd, NULL);
	close(w->fd);
	w->fd = -1;
	w->state = 0;
	if (!w->lost_at)
		w->lost_at = now;
	w->due = now + backoff_ns(w->attempts++);
}

static long read_pid_file(void)
{
	FILE *f = pid_file ? fopen(pid_file, "r") : NULL;
	long pid = 0;
	if (f) {
		if (fscanf(f, "%ld", &pid) != 1)
			pid = 0;
		fclose(f);
	}
	return pid;
}

/* The whole process's user and system time (ns), exited threads included. */
static uint64_t process_cpu_ns(long pid)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	uint64_t total = 0;
	if (fgets(line, sizeof(line), f)) {
		char *p = strrchr(line, ')');
		unsigned long long utime = 0, stime = 0;
		if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) == 2)
			total = (utime + stime) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
	}
	fclose(f);
	return total;
}

/* This process's CPU time (who: RUSAGE_SELF, or RUSAGE_THREAD for the calling thread), in seconds:
 * the generator's own cost per delivery, beside ringcast load's. */
static double own_cpu_s(int who)
{
	struct rusage usage;
	getrusage(who, &usage);
	return (double)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + (double)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

static int by_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int storm(void)
{
	int restart = !strcmp(storm_mode, "restart");
	int ep = epoll_create1(0);
	struct stormer *ws = calloc((size_t)watchers_n, sizeof(*ws));
	for (int i = 0; i < watchers_n; i++) {
		ws[i].cap = 1 << 16;
		ws[i].buf = malloc(ws[i].cap);
	}
	/* The first watcher takes a full snapshot and learns the epoch and seq; the others connect as
	 * pages that have been open a while, resuming from there (so the set-up does not move a full
	 * snapshot to every one of them). */
	if (stormer_connect(&ws[0], ep) < 0) {
		perror("epoll-load: connect to 127.0.0.1");
		return 1;
	}
	struct epoll_event events[256];
	int live = 0, lost = 0;
	uint64_t give_up = now_ns() + 60ull * 1000000000ull, storm_began = 0, cpu_began = 0;
	/* Phase 1: every watcher live once. */
	while (live < watchers_n && now_ns() < give_up) {
		int ready = epoll_wait(ep, events, 256, 100);
		for (int k = 0; k < ready; k++) {
			struct stormer *w = events[k].data.ptr;
			if (!w->sent) {
				if (stormer_writable(w, ep) < 0) {
					fprintf(stderr, "epoll-load: a watcher could not connect\n");
					return 1;
				}
				continue;
			}
			for (;;) {
				if (w->cap - w->have < 65536) { w->cap *= 2; w->buf = realloc(w->buf, w->cap); }
				ssize_t got = read(w->fd, w->buf + w->have, w->cap - w->have);
				if (got <= 0)
					break;
				w->have += (size_t)got;
				if (w->state == 1 && stormer_frames(w) == 1) {
					w->state = 2;
					live++;
					if (w == &ws[0]) {
						for (int i = 1; i < watchers_n; i++) {
							if (stormer_connect(&ws[i], ep) < 0) {
								perror("epoll-load: connect to 127.0.0.1");
								return 1;
							}
						}
					}
				}
			}
		}
	}
	if (live < watchers_n) {
		fprintf(stderr, "epoll-load: only %d of %d watchers were live in 60 s\n", live, watchers_n);
		return 1;
	}
	if (ready_file) {
		FILE *f = fopen(ready_file, "w");
		if (f)
			fclose(f);
	}
	if (!restart) {
		/* The cut: every socket reset at once. */
		cpu_began = server_cpu_ns();
		storm_began = now_ns();
		struct linger reset = { .l_onoff = 1, .l_linger = 0 };
		for (int i = 0; i < watchers_n; i++) {
			setsockopt(ws[i].fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
			stormer_lost(&ws[i], ep, storm_began);
		}
		lost = watchers_n;
	}
	/* Phase 2: each lost watcher back with its snapshot, as the dashboard retries. */
	live = 0;
	give_up = now_ns() + 180ull * 1000000000ull;
	while (live < watchers_n && now_ns() < give_up) {
		int ready = epoll_wait(ep, events, 256, 2);
		uint64_t now = now_ns();
		for (int k = 0; k < ready; k++) {
			struct stormer *w = events[k].data.ptr;
			if (w->state == 1 && !w->sent) {
				if (stormer_writable(w, ep) < 0)
					stormer_lost(w, ep, now);
				continue;
			}
			for (;;) {
				if (w->cap - w->have < 65536) { w->cap *= 2; w->buf = realloc(w->buf, w->cap); }
				ssize_t got = read(w->fd, w->buf + w->have, w->cap - w->have);
				int frames = 0;
				if (got > 0) {
					w->have += (size_t)got;
					frames = stormer_frames(w);
				}
				if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR) || frames < 0) {
					if (w->state == 2 && w->lost_at == 0) {
						if (!storm_began)
							storm_began = now;
						lost++;
					}
					if (w->state == 2 && w->live_after) {
						/* lost again after it was back: counts once, from its first loss */
						live--;
						w->live_after = 0;
					}
					stormer_lost(w, ep, now);
					break;
				}
				if (got < 0)
					break;
				if (frames == 1 && w->state == 1 && w->lost_at) {
					w->state = 2;
					w->attempts = 0;
					w->live_after = now - w->lost_at;
					live++;
					break;
				}
			}
		}
		for (int i = 0; i < watchers_n; i++) {
			if (ws[i].state == 0 && ws[i].due <= now && stormer_connect(&ws[i], ep) < 0)
				ws[i].due = now + backoff_ns(ws[i].attempts++);
		}
	}
	uint64_t ended = now_ns();
	long pid = restart ? read_pid_file() : server_pid;
	double cpu = restart ? (double)process_cpu_ns(pid) / 1e9 : (double)(server_cpu_ns() - cpu_began) / 1e9;
	if (live < watchers_n) {
		fprintf(stderr, "epoll-load: only %d of %d watchers were live again within 180 s\n", live, watchers_n);
		return 1;
	}
	uint64_t *times = calloc((size_t)watchers_n, sizeof(uint64_t));
	for (int i = 0; i < watchers_n; i++)
		times[i] = ws[i].live_after;
	qsort(times, (size_t)watchers_n, sizeof(uint64_t), by_u64);
	printf("{\"storm\":\"%s\",\"watchers\":%d,\"tasks\":%d,\"allLiveSeconds\":%.3f,\"liveP50Ms\":%.1f,\"liveP99Ms\":%.1f,"
	       "\"serverCpuSeconds\":%.3f,\"serverCpuMsPerWatcher\":%.3f}\n",
	       storm_mode, watchers_n, tasks_n, (double)(ended - storm_began) / 1e9,
	       (double)times[(watchers_n - 1) * 50 / 100] / 1e6, (double)times[(watchers_n - 1) * 99 / 100] / 1e6, cpu,
	       cpu * 1000.0 / watchers_n);
	return 0;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i += 2) {
		if (strcmp(argv[i], "--deflate") && i + 1 >= argc) {
			fprintf(stderr, "epoll-load: %s needs a value\n", argv[i]);
			return 2;
		}
		if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--pid")) server_pid = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--watchers")) watchers_n = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--rate")) rate = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--messages")) messages = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--payload")) payload = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--hold")) hold_seconds = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--tasks")) tasks_n = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--churn")) churn_n = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--churn-concurrency")) churn_concurrency = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : 1;
		else if (!strcmp(argv[i], "--churn-until")) churn_until_snapshot = strcmp(argv[i + 1], "upgrade") != 0;
		else if (!strcmp(argv[i], "--deflate")) { ask_deflate = 1; i--; }
		else if (!strcmp(argv[i], "--sse")) sse_path = argv[i + 1];
		else if (!strcmp(argv[i], "--storm")) storm_mode = argv[i + 1];
		else if (!strcmp(argv[i], "--pid-file")) pid_file = argv[i + 1];
		else if (!strcmp(argv[i], "--ready-file")) ready_file = argv[i + 1];
		else { fprintf(stderr, "epoll-load: unknown option %s\n", argv[i]); return 2; }
	}
	if (!port || !server_pid) {
		fprintf(stderr, "usage: epoll-load --port P --pid PID [--watchers N] [--rate R] [--messages M] [--payload B] [--hold S]\n");
		return 2;
	}
	latency_cap = (uint64_t)watchers_n * (uint64_t)messages;
	latencies = malloc(latency_cap * sizeof(uint32_t) + 1);
	struct watcher *ws = calloc((size_t)watchers_n, sizeof(*ws));
	int ep = epoll_create1(0);
	char handshake[512];
	int hl = snprintf(handshake, sizeof(handshake),
			  "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
			  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n%s\r\n", port,
			  ask_deflate ? "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n" : "");
	if (sse_path)
		hl = snprintf(handshake, sizeof(handshake), "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: text/event-stream\r\n\r\n",
			      sse_path, port);

	if (tasks_n > 0)
		preload_tasks();
	if (storm_mode) {
		if (strcmp(storm_mode, "restart") && strcmp(storm_mode, "cut")) {
			fprintf(stderr, "epoll-load: --storm is restart or cut, not %s\n", storm_mode);
			return 2;
		}
		if (!strcmp(storm_mode, "restart") && !pid_file) {
			fprintf(stderr, "epoll-load: --storm restart needs --pid-file (the new server's pid, written by whoever restarts it)\n");
			return 2;
		}
		srand((unsigned)now_ns());
		return storm();
	}
	uint64_t cpu_before_connect = server_cpu_ns();
	int upgraded = 0;
	struct epoll_event events[256];
	for (int i = 0; i < watchers_n; i++) {
		ws[i].fd = connect_loopback();
		ws[i].cap = 1 << 16;
		ws[i].buf = malloc(ws[i].cap);
		write_all(ws[i].fd, handshake, (size_t)hl);
		fcntl(ws[i].fd, F_SETFL, O_NONBLOCK);
		struct epoll_event e = { .events = EPOLLIN, .data.ptr = &ws[i] };
		epoll_ctl(ep, EPOLL_CTL_ADD, ws[i].fd, &e);
	}
	uint64_t phase_end = now_ns() + 30ull * 1000000000ull;
#define SERVE(timeout_ms) do { \
		int ready = epoll_wait(ep, events, 256, (timeout_ms)); \
		uint64_t t = now_ns(); \
		for (int k = 0; k < ready; k++) { \
			struct watcher *w = events[k].data.ptr; \
			for (;;) { \
				if (w->cap - w->have < 4096) { w->cap *= 2; w->buf = realloc(w->buf, w->cap); } \
				ssize_t got = read(w->fd, w->buf + w->have, w->cap - w->have); \
				if (got <= 0) break; \
				w->have += (size_t)got; \
				int was = w->upgraded; \
				consume(w, t); \
				if (!was && w->upgraded) upgraded++; \
			} \
		} \
	} while (0)
	while (upgraded < watchers_n && now_ns() < phase_end)
		SERVE(100);
	/* let the server finish each new watcher's snapshot before the connect phase is read */
	uint64_t settle = now_ns() + 300000000ull;
	while (now_ns() < settle)
		SERVE(50);
	uint64_t cpu_connected = server_cpu_ns();
	if (upgraded < watchers_n) {
		fprintf(stderr, "epoll-load: only %d of %d watchers upgraded in 30 s\n", upgraded, watchers_n);
		return 1;
	}
	if (churn_n > 0) {
		uint64_t cpu_churn = server_cpu_ns();
		double seconds = churn(handshake, hl);
		/* the last closes reach the server after the last snapshot: let it finish them */
		uint64_t settle_until = now_ns() + 200000000ull;
		while (now_ns() < settle_until)
			SERVE(50);
		double churn_cpu = (double)(server_cpu_ns() - cpu_churn);
		printf("{\"watchers\":%d,\"tasks\":%d,\"churn\":%d,\"churnSeconds\":%.3f,\"churnCpuUsPerConnection\":%.2f,"
		       "\"snapshotBytes\":%d,\"connectCpuUsPerConnection\":%.2f}\n",
		       watchers_n, tasks_n, churn_n, seconds, churn_cpu / 1000.0 / churn_n, snapshot_bytes,
		       (double)(cpu_connected - cpu_before_connect) / 1000.0 / (watchers_n ? watchers_n : 1));
		return 0;
	}
	if (hold_seconds > 0) {
		uint64_t until = now_ns() + (uint64_t)(hold_seconds * 1e9);
		uint64_t cpu_hold = server_cpu_ns();
		while (now_ns() < until)
			SERVE(100);
		printf("{\"watchers\":%d,\"connectCpuUsPerConnection\":%.2f,\"idleCpuSeconds\":%.4f}\n", watchers_n,
		       (double)(cpu_connected - cpu_before_connect) / 1000.0 / watchers_n,
		       (double)(server_cpu_ns() - cpu_hold) / 1e9);
		return 0;
	}

	delivered = 0;
	uint64_t cpu_start = server_cpu_ns(), started = now_ns();
	double own_start = own_cpu_s(RUSAGE_SELF), epoll_start = own_cpu_s(RUSAGE_THREAD);
	pthread_t publisher;
	pthread_create(&publisher, NULL, publish, NULL);
	uint64_t expected = (uint64_t)watchers_n * (uint64_t)messages, drain_until = 0;
	for (;;) {
		SERVE(20);
		if (delivered >= expected)
			break;
		if (publishing_done && !drain_until)
			drain_until = now_ns() + 10ull * 1000000000ull;
		if (drain_until && now_ns() > drain_until)
			break;
	}
	uint64_t cpu_end = server_cpu_ns(), ended = now_ns();
	double own = own_cpu_s(RUSAGE_SELF) - own_start, epoll_own = own_cpu_s(RUSAGE_THREAD) - epoll_start;
	pthread_join(publisher, NULL);
	uint64_t timed = delivered < latency_cap ? delivered : latency_cap;
	qsort(latencies, timed, sizeof(uint32_t), by_value);
	double p50 = timed ? latencies[(timed - 1) * 50 / 100] / 1000.0 : 0, p99 = timed ? latencies[(timed - 1) * 99 / 100] / 1000.0 : 0;
	printf("{\"watchers\":%d,\"published\":%llu,\"expected\":%llu,\"delivered\":%llu,\"seconds\":%.3f,"
	       "\"serverCpuSeconds\":%.4f,\"cpuUsPerDelivery\":%.3f,\"connectCpuUsPerConnection\":%.2f,"
	       "\"latencyP50Ms\":%.2f,\"latencyP99Ms\":%.2f,\"loadCpuSeconds\":%.4f,\"epollThreadCpuSeconds\":%.4f,"
	       "\"loadCpuUsPerDelivery\":%.3f}\n",
	       watchers_n, (unsigned long long)published, (unsigned long long)expected, (unsigned long long)delivered,
	       (double)(ended - started) / 1e9, (double)(cpu_end - cpu_start) / 1e9,
	       delivered ? (double)(cpu_end - cpu_start) / 1000.0 / (double)delivered : 0,
	       (double)(cpu_connected - cpu_before_connect) / 1000.0 / watchers_n, p50, p99, own, epoll_own,
	       delivered ? own * 1e6 / (double)delivered : 0);
	return delivered == expected ? 0 : 3;
}
