"""Three Ringcast nodes and Redis across a network of the test's own, with faults on it.

Topology (every name carries this run's tag, so reruns never collide; every address is in
198.18.0.0/15, the benchmarking range, and exists only inside the namespaces made here):

    {tag}-hub    two bridges: data (198.18.1.0/24, nodes <-> Redis) and front (198.18.2.0/24,
                 client <-> nodes); one veth pair per namespace and network
    {tag}-redis  redis-server on 198.18.1.2:6379
    {tag}-n1..3  a fault proxy on 127.0.0.1:7000 -> 198.18.1.2:6379 (faultproxy.py), and
                 `ringcast serve` on 198.18.2.1{i}:8080 with "storage": "redis://127.0.0.1:7000"
    {tag}-cli    the publishers and one watcher per node (threads of this process, moved into
                 the namespace with setns)

Scenarios: 50 ± 20 ms delay and 5 % of connections reset each second under steady publishing;
one node's data link taken down for 10 s, then up; Redis restarted empty while a node is paused;
the master killed under Redis Sentinel (a replica and three sentinels in {tag}-redis), with
`redisReplicas: 1` (nothing answered may be lost) and without (losses are counted, as the docs
say they can happen).
The checker reads every node's state and every watcher's stream at the end: every update
answered 200 is in the final state of every node, every watcher converges to it, and no watcher
sees seq go backwards within an epoch. Needs root (CI is): without it the test fails, it never
skips. The namespaces are deleted at the end whatever happens.
"""

import ctypes
import json
import os
import secrets
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import websocket

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BINARY = Path(os.environ.get("RINGCAST_BIN") or ROOT / ".build/debug/ringcast")
TAG = f"rc{os.getpid() % 10000}{secrets.token_hex(2)}"
REDIS_ADDRESS = "198.18.1.2"
CLIENT_ADDRESS = "198.18.2.2"
NODES = 3
TOKEN = "cluster-harness-token-0123456789"
TASKS_PER_PUBLISHER = 8
PUBLISHERS = 6
CLONE_NEWNET = 0x40000000


def node_address(i):
    return f"198.18.2.1{i}"


def sh(*args, check=True):
    done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")
    return done


def in_ns(ns, *args, check=True):
    return sh("ip", "netns", "exec", ns, *args, check=check)


def enter(ns):
    """Moves the calling thread (only it) into namespace `ns`."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open(f"/run/netns/{ns}") as handle:
        if libc.setns(handle.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {ns}")


class Topology:
    """The namespaces, bridges and links; `close()` deletes every namespace it made."""

    def __init__(self):
        self.hub, self.redis, self.client = f"{TAG}-hub", f"{TAG}-redis", f"{TAG}-cli"
        self.nodes = [f"{TAG}-n{i}" for i in range(1, NODES + 1)]
        self.made = []
        for ns in [self.hub, self.redis, self.client, *self.nodes]:
            sh("ip", "netns", "add", ns)
            self.made.append(ns)
            in_ns(ns, "ip", "link", "set", "lo", "up")
        for bridge in ("data", "front"):
            in_ns(self.hub, "ip", "link", "add", bridge, "type", "bridge")
            in_ns(self.hub, "ip", "link", "set", bridge, "up")
        links = [(self.redis, "data", REDIS_ADDRESS), (self.client, "front", CLIENT_ADDRESS)]
        for i, ns in enumerate(self.nodes, 1):
            links += [(ns, "data", f"198.18.1.1{i}"), (ns, "front", node_address(i))]
        for number, (ns, bridge, address) in enumerate(links):
            hub_end = f"{bridge[0]}{number}"
            sh("ip", "link", "add", hub_end, "netns", self.hub, "type", "veth", "peer", "name", bridge, "netns", ns)
            in_ns(self.hub, "ip", "link", "set", hub_end, "master", bridge)
            in_ns(self.hub, "ip", "link", "set", hub_end, "up")
            in_ns(ns, "ip", "addr", "add", f"{address}/24", "dev", bridge)
            in_ns(ns, "ip", "link", "set", bridge, "up")

    def partition(self, node, cut):
        """Takes node `node`'s link to Redis down (`cut`) or up again."""
        in_ns(self.nodes[node], "ip", "link", "set", "data", "down" if cut else "up")

    def close(self):
        for ns in self.made:  # deleting a namespace deletes the veth ends in it, and so the pairs
            sh("ip", "netns", "delete", ns, check=False)


class Process:
    """A program inside a namespace, its output in a file; stopped with SIGTERM, then SIGKILL."""

    def __init__(self, ns, args, log, ready=None):
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(["ip", "netns", "exec", ns, *map(str, args)], stdout=subprocess.PIPE, stderr=out)
        self.first = self.proc.stdout.readline().decode().strip() if ready else ""
        if ready and not self.first.startswith(ready):
            self.stop()
            raise RuntimeError(f"{args[0]} in {ns} said {self.first!r}: {Path(log).read_text()[-2000:]}")

    @property
    def pid(self):
        return self.proc.pid  # ip netns exec execs the program: the same pid

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        rest = self.proc.stdout.read().decode() if self.proc.stdout else ""
        return rest


class Cluster:
    """Redis, one fault proxy and one node per node namespace, for one scenario."""

    def __init__(self, topology, folder, latency=0, jitter=0, reset=0):
        self.topology, self.folder = topology, folder
        self.redis, self.proxy_stats = None, None
        self.start_redis()
        self.proxies, self.nodes = [], []
        for i, ns in enumerate(topology.nodes, 1):
            self.proxies.append(Process(ns, ["python3", HERE / "faultproxy.py", "--listen", "127.0.0.1:7000", "--to",
                                             f"{REDIS_ADDRESS}:6379", "--latency", latency, "--jitter", jitter, "--reset", reset,
                                             "--seed", i], folder / f"proxy{i}.log", ready="ready"))
        for i, ns in enumerate(topology.nodes, 1):
            config = folder / f"node{i}.json"
            config.write_text(json.dumps({
                "host": node_address(i), "port": 8080, "publicDir": str(ROOT / "Public"), "storage": "redis://127.0.0.1:7000",
                "logLevel": "info", "anonymousRead": True, "heartbeatSeconds": 2, "maxPublishRate": 0,
                "publishers": [{"name": "harness", "token": TOKEN, "patterns": ["*"]}],
            }))
            self.nodes.append(Process(ns, [BINARY, "serve", "--config", config], folder / f"node{i}.log", ready="listening on"))

    def start_redis(self):
        self.redis = Process(self.topology.redis, ["redis-server", "--bind", REDIS_ADDRESS, "--port", 6379, "--save", "",
                                                   "--appendonly", "no", "--protected-mode", "no"],
                             self.folder / "redis.log")
        deadline = time.time() + 10
        while in_ns(self.topology.redis, "redis-cli", "-h", REDIS_ADDRESS, "ping", check=False).stdout.strip() != "PONG":
            assert time.time() < deadline, f"redis-server did not start: {(self.folder / 'redis.log').read_text()}"
            time.sleep(0.1)

    def stop(self):
        """Stops everything (once); what each proxy did."""
        if self.proxy_stats is None:
            self.proxy_stats = [json.loads((p.stop().strip().splitlines() or ["{}"])[-1]) for p in self.proxies]
            for node in self.nodes:
                node.stop()
            self.redis.stop(signal.SIGKILL)
        return self.proxy_stats


class Client:
    """HTTP to the nodes from the client namespace: one thread per call, moved into it."""

    def __init__(self, ns):
        self.ns = ns

    def call(self, method, node, path, body=None, timeout=15):
        result = {}

        def run():
            enter(self.ns)
            request = urllib.request.Request(f"http://{node_address(node + 1)}:8080{path}", method=method,
                                             data=None if body is None else json.dumps(body).encode(),
                                             headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=timeout) as answer:
                    result["status"], result["body"] = answer.status, answer.read()
            except urllib.error.HTTPError as error:
                result["status"], result["body"] = error.code, error.read()
            except OSError as error:
                result["status"], result["body"] = 0, str(error).encode()

        thread = threading.Thread(target=run)
        thread.start()
        thread.join(timeout + 5)
        return result.get("status", 0), result.get("body", b"")

    def until_200(self, method, node, path, body=None):
        """The call, again while the faults make it fail (at most 20 tries): its last status."""
        for _ in range(20):
            status, _ = self.call(method, node, path, body)
            if status == 200:
                break
            time.sleep(0.3)
        return status

    def state(self, node):
        status, body = self.call("GET", node, "/api/tasks?watch=nx.*")
        return json.loads(body) if status == 200 else None


class Publishers:
    """Threads that publish steadily, round-robin over the nodes; each owns its tasks, so the
    values of one task rise in the order they were answered. `answered[task]` is the highest value
    answered 200."""

    def __init__(self, client, nodes=range(NODES)):
        self.client, self.nodes = client, list(nodes)
        self.answered, self.statuses, self.lock = {}, {}, threading.Lock()
        self.running = True
        self.threads = [threading.Thread(target=self.run, args=(n,), daemon=True) for n in range(PUBLISHERS)]
        running.append(self)
        for thread in self.threads:
            thread.start()

    def run(self, number):
        enter(self.client.ns)
        step = 0
        while self.running and step < 5000:
            step += 1
            task = f"nx.p{number}-{step % TASKS_PER_PUBLISHER}"
            value = round(step / 10000, 4)
            node = self.nodes[(number + step) % len(self.nodes)]
            # A change Redis took just before the node's link went down is answered when the node
            # reads it back, after the partition heals: the client waits that long.
            status, _ = self.client.call("POST", node, f"/api/tasks/{task}", {"progress": value}, timeout=30)
            with self.lock:
                self.statuses[status] = self.statuses.get(status, 0) + 1
                if status == 200:
                    self.answered[task] = max(value, self.answered.get(task, 0))
            time.sleep(0.02)

    def stop(self):
        self.running = False
        for thread in self.threads:
            thread.join(30)


# Publishers and watchers of the running test, stopped by the fixture whatever happens.
running = []


class Watcher(threading.Thread):
    """A WebSocket watcher of one node from the client namespace: keeps the tasks it was told of,
    reconnects with `since`, and notes every time seq went backwards within an epoch."""

    def __init__(self, ns, node):
        super().__init__(daemon=True)
        self.ns, self.node = ns, node
        self.tasks, self.epoch, self.seq = {}, None, 0
        self.backwards, self.epochs, self.snapshots = [], [], 0
        self.ticks, self.hides = [], []  # (id, elapsed) of every tick, id of every hide
        self.running = True
        self.lock = threading.Lock()
        running.append(self)
        self.start()

    def run(self):
        enter(self.ns)
        while self.running:
            since = f"&since={self.epoch}:{self.seq}" if self.epoch else ""
            try:
                socket = websocket.create_connection(f"ws://{node_address(self.node + 1)}:8080/ws?watch=nx.*{since}", timeout=2)
            except (OSError, websocket.WebSocketException):
                time.sleep(0.3)
                continue
            try:
                while self.running:
                    try:
                        frame = socket.recv()
                    except websocket.WebSocketTimeoutException:
                        continue
                    events = json.loads(frame)
                    for event in events if isinstance(events, list) else [events]:
                        self.take(event)
            except (OSError, websocket.WebSocketException, ValueError):
                time.sleep(0.3)
            finally:
                socket.close()

    def take(self, event):
        with self.lock:
            kind = event.get("type")
            if kind == "snapshot":
                self.snapshots += 1
                if event["epoch"] == self.epoch and event["seq"] < self.seq:
                    self.backwards.append((self.epoch, self.seq, event["seq"], "snapshot"))
                if event["epoch"] != self.epoch:
                    self.epochs.append(event["epoch"])
                if event.get("full", True):
                    self.tasks = {}
                for task in event.get("tasks", []):
                    self.tasks[task["id"]] = task
                for gone in event.get("removed", []):
                    self.tasks.pop(gone, None)
                self.epoch, self.seq = event["epoch"], event["seq"]
            elif "seq" in event and "id" in event:
                if event["seq"] < self.seq:
                    self.backwards.append((self.epoch, self.seq, event["seq"], kind))
                self.seq = max(self.seq, event["seq"])
                if kind == "tick":
                    self.ticks.append((event["id"], event.get("elapsed")))
                if kind == "hide":
                    self.hides.append(event["id"])
                if kind == "remove":
                    self.tasks.pop(event["id"], None)
                else:
                    self.tasks[event["id"]] = event

    def progress(self):
        with self.lock:
            return {task: fields.get("progress") for task, fields in self.tasks.items()}


def node_progress(state):
    return {task["id"]: task.get("progress") for task in state["tasks"]}


def check(name, cluster, client, publishers, watchers, *, expect_new_epoch=False, old_epoch=None, loss_allowed=False):
    """The checker: answered updates in every node's final state, watchers converged to it, seq
    never backwards within an epoch. Prints the figures; fails on any loss."""
    finals = None
    deadline = time.time() + 30
    while time.time() < deadline:
        states = [client.state(i) for i in range(NODES)]
        if all(states) and all(node_progress(s) == node_progress(states[0]) and s["seq"] == states[0]["seq"] for s in states):
            finals = states
            break
        time.sleep(0.5)
    assert finals, f"{name}: the nodes never agreed: {[(s or {}).get('seq') for s in states]}"
    final = node_progress(finals[0])
    lost = {task: (value, final.get(task)) for task, value in publishers.answered.items() if (final.get(task) or -1) < value}
    deadline = time.time() + 20
    while time.time() < deadline and not all(w.progress() == final for w in watchers):
        time.sleep(0.3)
    converged = [w.progress() == final for w in watchers]
    figures = {
        "scenario": name, "answers": publishers.statuses, "tasks answered": len(publishers.answered),
        "present on every node": len(publishers.answered) - len(lost), "lost": lost,
        "epoch": finals[0]["epoch"], "seq": finals[0]["seq"], "watchers converged": converged,
        "seq backwards": [w.backwards for w in watchers], "watcher snapshots": [w.snapshots for w in watchers],
    }
    print(json.dumps(figures))
    assert sum(publishers.statuses.get(s, 0) for s in (200,)) > 0, figures
    if not loss_allowed:
        assert not lost, f"{name}: answered updates missing from the final state: {figures}"
    assert all(converged), f"{name}: a watcher did not converge: {figures}"
    assert not any(w.backwards for w in watchers), f"{name}: seq went backwards within an epoch: {figures}"
    assert set(publishers.statuses) <= {200, 503}, f"{name}: answers other than 200 and 503: {figures}"
    if expect_new_epoch:
        assert finals[0]["epoch"] != old_epoch, f"{name}: the lost log's epoch was reused: {figures}"
        assert all(old_epoch in w.epochs and w.epochs[-1] == finals[0]["epoch"] for w in watchers), figures
    return figures


class SentinelCluster(Cluster):
    """A master, a replica and three sentinels in the Redis namespace, and the nodes finding the
    master through the sentinels (no proxy on the way)."""

    SENTINELS = (26379, 26380, 26381)

    def __init__(self, topology, folder, replicas):
        self.topology, self.folder, self.proxies, self.proxy_stats = topology, folder, [], None
        self.redis = self.start_redis_server(6379, "master")
        self.replica = self.start_redis_server(6380, "replica", "--replicaof", REDIS_ADDRESS, 6379)
        self.sentinels = []
        for port in self.SENTINELS:
            config = folder / f"sentinel{port}.conf"
            config.write_text(f"port {port}\nbind {REDIS_ADDRESS}\ndir {folder}\nsentinel monitor ringcast {REDIS_ADDRESS} 6379 2\n"
                              "sentinel down-after-milliseconds ringcast 1000\nsentinel failover-timeout ringcast 10000\n")
            self.sentinels.append(Process(topology.redis, ["redis-sentinel", config], folder / f"sentinel{port}.log"))
        deadline = time.time() + 20
        while not all(self.sentinel_sees_everyone(port) for port in self.SENTINELS):
            assert time.time() < deadline, "the sentinels did not find each other and the replica within 20 s"
            time.sleep(0.3)
        url = "redis-sentinel://" + ",".join(f"{REDIS_ADDRESS}:{port}" for port in self.SENTINELS) + "/ringcast"
        self.nodes = []
        for i, ns in enumerate(topology.nodes, 1):
            config = folder / f"node{i}.json"
            config.write_text(json.dumps({
                "host": node_address(i), "port": 8080, "publicDir": str(ROOT / "Public"), "storage": url, "redisReplicas": replicas,
                "logLevel": "info", "anonymousRead": True, "heartbeatSeconds": 2, "maxPublishRate": 0,
                "publishers": [{"name": "harness", "token": TOKEN, "patterns": ["*"]}],
            }))
            self.nodes.append(Process(ns, [BINARY, "serve", "--config", config], folder / f"node{i}.log", ready="listening on"))

    def start_redis_server(self, port, name, *settings):
        server = Process(self.topology.redis, ["redis-server", "--bind", REDIS_ADDRESS, "--port", port, "--save", "", "--appendonly",
                                               "no", "--protected-mode", "no", "--dir", self.folder, *settings],
                         self.folder / f"{name}.log")
        deadline = time.time() + 10
        while in_ns(self.topology.redis, "redis-cli", "-h", REDIS_ADDRESS, "-p", str(port), "ping", check=False).stdout.strip() != "PONG":
            assert time.time() < deadline, f"redis-server {name} did not start"
            time.sleep(0.1)
        return server

    def sentinel_sees_everyone(self, port):
        fields = in_ns(self.topology.redis, "redis-cli", "-h", REDIS_ADDRESS, "-p", str(port), "sentinel", "master", "ringcast",
                       check=False).stdout.split()
        values = dict(zip(fields[::2], fields[1::2]))
        return values.get("num-other-sentinels") == "2" and values.get("num-slaves") == "1"

    def master_port(self):
        answer = in_ns(self.topology.redis, "redis-cli", "-h", REDIS_ADDRESS, "-p", str(self.SENTINELS[0]), "sentinel",
                       "get-master-addr-by-name", "ringcast", check=False).stdout.split()
        return int(answer[1]) if len(answer) == 2 else None

    def stop(self):
        if self.proxy_stats is None:
            self.proxy_stats = []
            for process in [*self.nodes, *self.sentinels]:
                process.stop()
            for server in (self.redis, self.replica):
                server.stop(signal.SIGKILL)
        return self.proxy_stats


@pytest.fixture(scope="module")
def topology():
    if os.geteuid() != 0:
        pytest.fail("the cluster network harness needs root (ip netns add); CI runs as root, so run it as root")
    if not BINARY.exists():
        pytest.fail(f"no ringcast executable at {BINARY}: build it (swift build), or point RINGCAST_BIN at it")
    made = None
    try:
        made = Topology()
        yield made
    finally:
        if made:
            made.close()
        else:  # a failure half way: delete whatever exists of this run's namespaces
            for ns in sh("ip", "netns", "list").stdout.split():
                if ns.startswith(f"{TAG}-"):
                    sh("ip", "netns", "delete", ns, check=False)


@pytest.fixture
def cluster_factory(topology, tmp_path):
    made = []

    def make(sentinel_replicas=None, **faults):
        if sentinel_replicas is None:
            made.append(Cluster(topology, tmp_path, **faults))
        else:
            made.append(SentinelCluster(topology, tmp_path, sentinel_replicas))
        return made[-1]

    yield make
    for thing in running:
        thing.running = False
    running.clear()
    for cluster in made:
        cluster.stop()


def watch_all(topology):
    watchers = [Watcher(topology.client, i) for i in range(NODES)]
    deadline = time.time() + 10
    while time.time() < deadline and not all(w.epoch for w in watchers):
        time.sleep(0.1)
    assert all(w.epoch for w in watchers), "a watcher got no snapshot"
    return watchers


def stop_watchers(watchers):
    for watcher in watchers:
        watcher.running = False


def test_delay_jitter_and_resets_under_steady_publishing(topology, cluster_factory):
    cluster = cluster_factory(latency=50, jitter=20, reset=0.05)
    client = Client(topology.client)
    watchers = watch_all(topology)
    publishers = Publishers(client)
    # Deadlines fire once for the cluster, whichever node claims them through the faults.
    assert client.until_200("POST", 0, "/api/timers/nx.timer", {"seconds": 4, "interval": 0.5}) == 200
    assert client.until_200("POST", 1, "/api/tasks/nx.shown/show", {"hideAfter": 2}) == 200
    time.sleep(20)
    publishers.stop()
    figures = check("delay 50±20 ms, 5 %/s resets", cluster, client, publishers, watchers)
    for watcher in watchers:
        ticks = [elapsed for task, elapsed in watcher.ticks if task == "nx.timer"]
        assert len(ticks) == len(set(ticks)), f"a tick came twice: {ticks}"
        assert ticks and ticks == sorted(ticks), f"ticks out of order: {ticks}"
        assert watcher.hides.count("nx.shown") <= 1, f"the hideAfter fired more than once: {watcher.hides}"
        assert watcher.tasks["nx.timer"]["state"] == "done" and watcher.tasks["nx.shown"]["visible"] is False
    stop_watchers(watchers)
    proxies = cluster.stop()
    print(json.dumps({"proxies": proxies}))
    assert sum(p.get("resets", 0) for p in proxies) > 0, f"the proxies reset no connection: {proxies}"
    assert figures["answers"].get(200, 0) >= 100, figures


def test_a_node_partitioned_from_redis_for_ten_seconds(topology, cluster_factory):
    cluster_factory()
    client = Client(topology.client)
    watchers = watch_all(topology)
    publishers = Publishers(client)
    time.sleep(3)
    topology.partition(2, cut=True)
    try:
        time.sleep(10)
        during = client.call("POST", 2, "/api/tasks/nx.cut", {"progress": 0.5}, timeout=10)[0]
    finally:
        topology.partition(2, cut=False)
    time.sleep(8)
    publishers.stop()
    figures = check("node 3 partitioned from Redis for 10 s", None, client, publishers, watchers)
    stop_watchers(watchers)
    assert during == 503, f"a node cut off from Redis answers 503, not {during}"
    assert figures["answers"].get(503, 0) > 0, figures


def test_redis_restarted_empty_while_a_node_lags(topology, cluster_factory):
    cluster = cluster_factory()
    client = Client(topology.client)
    watchers = watch_all(topology)
    old_epoch = client.state(0)["epoch"]
    lagging = cluster.nodes[1]
    os.kill(lagging.pid, signal.SIGSTOP)
    try:
        publishers = Publishers(client, nodes=[0, 2])
        time.sleep(4)
        publishers.stop()
        done = [client.call("POST", 0, f"/api/tasks/nx.done-{i}", {"state": "done", "progress": 1})[0] for i in range(10)]
        assert done == [200] * 10, done
        publishers.answered.update({f"nx.done-{i}": 1 for i in range(10)})
        cluster.redis.stop(signal.SIGKILL)
        time.sleep(3)
        cluster.start_redis()
    finally:
        os.kill(lagging.pid, signal.SIGCONT)
    deadline = time.time() + 30
    while time.time() < deadline and client.call("POST", 0, "/api/tasks/nx.after", {"progress": 0.1})[0] != 200:
        time.sleep(0.5)
    publishers.answered["nx.after"] = 0.1
    check("Redis restarted empty while node 2 was paused", cluster, client, publishers, watchers, expect_new_epoch=True,
          old_epoch=old_epoch)
    stop_watchers(watchers)


@pytest.mark.parametrize("replicas", [1, 0])
def test_the_redis_master_killed_under_sentinel(topology, cluster_factory, replicas):
    cluster = cluster_factory(sentinel_replicas=replicas)
    client = Client(topology.client)
    watchers = watch_all(topology)
    publishers = Publishers(client)
    time.sleep(5)
    cluster.redis.stop(signal.SIGKILL)
    killed = time.time()
    deadline = time.time() + 30
    while time.time() < deadline and cluster.master_port() != 6380:
        time.sleep(0.2)
    assert cluster.master_port() == 6380, "the sentinels did not promote the replica within 30 s"
    promoted = time.time() - killed
    # The killed master comes back empty, and the sentinels make it the new master's replica, so
    # that redisReplicas: 1 can be met again.
    cluster.redis = cluster.start_redis_server(6379, "master-again")
    time.sleep(12)
    publishers.stop()
    name = f"master killed under Sentinel, redisReplicas {replicas}"
    figures = check(name, cluster, client, publishers, watchers, loss_allowed=replicas == 0)
    print(json.dumps({"scenario": name, "promoted after seconds": round(promoted, 1)}))
    assert figures["answers"].get(200, 0) > 0
