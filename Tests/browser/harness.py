"""Shared pieces of the browser tests and the render benchmark: the real ringcast server on an
ephemeral port, a headless Chromium driven by selenium, and small HTTP API helpers."""

import json
import os
import posixpath
import re
import shutil
import signal
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

os.environ.setdefault("SE_OFFLINE", "true")  # selenium-manager must not try to download a driver

REPO = Path(__file__).resolve().parents[2]
PUBLIC = REPO / "Public"
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver")


# `import … from './x.js'`, `export … from './x.js'`, `import './x.js'` and `import('./x.js')`: the
# relative imports of a module, which the browser resolves against the module's own URL.
MODULE_IMPORT = re.compile(
    r"""^\s*(?:import|export)\b[^'"]*?\bfrom\s*['"](\.[^'"]+)['"]"""
    r"""|^\s*import\s*['"](\.[^'"]+)['"]"""
    r"""|\bimport\(\s*['"](\.[^'"]+)['"]\s*\)""",
    re.M)


def module_graph(entry):
    """Every module `entry` (a path under Public/) loads, itself included, found by following its
    relative imports through the files: {path: [paths it imports]}."""
    graph = {}
    todo = [entry]
    while todo:
        path = todo.pop()
        if path in graph:
            continue
        text = (PUBLIC / path).read_text()
        deps = [posixpath.normpath(posixpath.join(posixpath.dirname(path), next(g for g in m.groups() if g)))
                for m in MODULE_IMPORT.finditer(text)]
        graph[path] = deps
        todo.extend(deps)
    return graph


def server_binary():
    path = Path(os.environ.get("RINGCAST_BIN", ".build/release/ringcast"))
    if not path.is_absolute():
        path = REPO / path
    return path


def make_certificate(folder):
    """A self-signed certificate for 127.0.0.1 and localhost, made with openssl in `folder`, valid
    two days. Returns (cert path, key path)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / "cert.pem", folder / "key.pem"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        capture_output=True, text=True)
    if made.returncode != 0:
        raise RuntimeError(f"openssl could not make a certificate (scripts/deps.sh test installs it): {made.stderr}")
    return cert, key


def spki_hash(cert):
    """base64 of the SHA-256 of the certificate's public key (SubjectPublicKeyInfo, DER), the form
    Chromium's --ignore-certificate-errors-spki-list takes."""
    pub = subprocess.run(["openssl", "x509", "-in", str(cert), "-pubkey", "-noout"],
                         capture_output=True, check=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"],
                         input=pub, capture_output=True, check=True).stdout
    import base64
    import hashlib
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


class Server:
    """One `ringcast serve` process. `start(port)` reuses a port for restart tests. With
    `tls=True` it makes its own certificate (see `make_certificate`) and serves https:// and
    wss://; `ssl_context` then trusts that certificate, and only it, for the API helpers."""

    def __init__(self, allowed_origins=(), heartbeat=2, workdir=None, tls=False, storage=None, settings=None, env=None):
        self.binary = server_binary()
        # More of config.json (publishers, readers, anonymousRead, limits…), over the settings this
        # class writes; and variables for the server's environment (a tokenSecretEnv's key).
        self.settings = dict(settings or {})
        self.env = dict(env or {})
        # None: "memory"; a path: an SQLite file kept across start()s (its state comes back).
        self.storage = storage
        self.allowed_origins = list(allowed_origins)
        self.heartbeat = heartbeat
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="ringcast-browser-"))
        self.proc = None
        self.port = 0
        self.host = "127.0.0.1"
        self.generation = 0
        self.log_path = None
        self.first_line = None
        self.tls = tls
        self.cert = self.key = None
        self.ssl_context = None
        if tls:
            self.cert, self.key = make_certificate(self.workdir / "tls")
            # Verification stays on (hostname included): the context trusts this one certificate.
            self.ssl_context = ssl.create_default_context(cafile=str(self.cert))

    @property
    def scheme(self):
        return "https" if self.tls else "http"

    @property
    def base(self):
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def ws_base(self):
        return f"{'wss' if self.tls else 'ws'}://{self.host}:{self.port}"

    def start(self, port=0, timeout=20.0):
        if not self.binary.exists():
            raise RuntimeError(
                f"ringcast binary not found at {self.binary}: build it (swift build -c release) "
                "or point RINGCAST_BIN at it")
        self.generation += 1
        # Each run gets its own working directory, so a restarted server starts from what it
        # persisted there (nothing, unless configured): the test compares the page with the server.
        cwd = self.workdir / f"run{self.generation}"
        cwd.mkdir(parents=True, exist_ok=True)
        config = cwd / "config.json"
        settings = {
            "host": "127.0.0.1",
            "port": 0,
            "publicDir": str(PUBLIC),
            "allowedOrigins": self.allowed_origins,
            "heartbeatSeconds": self.heartbeat,
            **({"storage": str(self.storage)} if self.storage else {}),
            **self.settings,
        }
        if self.tls:
            settings["tls"] = {"cert": str(self.cert), "key": str(self.key)}
        config.write_text(json.dumps(settings))
        self.log_path = cwd / "server.log"
        log = open(self.log_path, "ab")  # noqa: SIM115 (the server's stderr for as long as it runs)
        self.proc = subprocess.Popen(
            [str(self.binary), "serve", "--port", str(port), "--config", str(config)],
            cwd=cwd, stdout=subprocess.PIPE, stderr=log, start_new_session=True, env={**os.environ, **self.env})
        log.close()
        line = self._first_line(timeout)
        self.first_line = line
        prefix = f"listening on {self.scheme}://"
        if not line.startswith(prefix):
            self.stop()
            raise RuntimeError(f"unexpected first line from ringcast: {line!r}; log: {self.log_tail()}")
        hostport = line[len(prefix):].strip().rstrip("/")
        self.host, _, p = hostport.rpartition(":")
        self.port = int(p)
        # Keep draining stdout so the server never blocks on a full pipe.
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()
        self._wait_healthy(timeout)
        return self

    def _first_line(self, timeout):
        result = {}

        def read():
            result["line"] = self.proc.stdout.readline().decode("utf-8", "replace")

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout)
        if "line" not in result:
            self.stop()
            raise RuntimeError(f"ringcast printed nothing in {timeout} s; log: {self.log_tail()}")
        return result["line"]

    def _drain(self, proc):
        with open(self.log_path, "ab") as out:
            for chunk in iter(lambda: proc.stdout.read1(4096), b""):
                out.write(chunk)

    def _wait_healthy(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                # /healthz answers whoever asks: a server that reads nothing without a token is healthy too.
                with urllib.request.urlopen(self.base + "/healthz", timeout=2, context=self.ssl_context) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"ringcast exited with {self.proc.returncode}; log: {self.log_tail()}")
            time.sleep(0.05)
        raise RuntimeError("ringcast did not answer /healthz")

    def stop(self, timeout=10.0):
        proc, self.proc = self.proc, None
        if not proc or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def freeze(self):
        """SIGSTOP: connections stay open but nothing arrives (the stall the watchdog is for)."""
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self):
        self.proc.send_signal(signal.SIGCONT)

    def log_tail(self, n=2000):
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except (OSError, AttributeError):
            return ""

    def api(self, method, path, body=None, ok=(200, 201, 202, 204)):
        """Calls the HTTP API; returns the decoded JSON answer (or None)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10, context=self.ssl_context) as r:
                raw = r.read()
                status = r.status
        except urllib.error.HTTPError as e:
            raw = e.read()
            status = e.code
        if status not in ok:
            raise AssertionError(f"{method} {path} {body!r} -> {status} {raw[:500]!r}")
        return json.loads(raw) if raw.strip() else None

    def post(self, path, body=None):
        return self.api("POST", path, {} if body is None else body)


class StaticSite:
    """Another origin: a python http.server on a loopback port, serving a temporary folder."""

    def __init__(self):
        import functools
        import http.server

        self.root = Path(tempfile.mkdtemp(prefix="ringcast-site-"))

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

        handler = functools.partial(Quiet, directory=str(self.root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def write(self, name, text):
        (self.root / name).write_text(text)
        return f"{self.origin}/{name}"

    def partner_page(self, name, server, body):
        """A page of this other site embedding the widget from `server`, under a strict CSP of its
        own (no inline style, scripts and sockets only from the server); returns its URL."""
        return self.write(name, f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Partner site</title><link rel="icon" href="data:,">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'self';
  script-src {server.base}; connect-src {server.ws_base}">
</head>
<body>
{body}
  <script type="module" src="{server.base}/ringcast-widget.js"></script>
</body></html>""")

    def close(self):
        self.httpd.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)


def make_driver(width=1280, height=860, reduced_motion=False, dark=False, trust_spki=(), network_log=False):
    """Headless Chromium. `trust_spki`: base64 SHA-256 public-key hashes (see `spki_hash`) of
    certificates to accept for this run only, though no authority signed them. `network_log`:
    keep the DevTools network events (every request the browser makes, WebSockets included) for
    `driver.get_log("performance")`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not Path(CHROMIUM).exists() or not Path(CHROMEDRIVER).exists():
        raise RuntimeError("chromium/chromedriver missing: run scripts/browser-deps.sh")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--hide-scrollbars", "--mute-audio",
                "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
                "--disable-backgrounding-occluded-windows"):
        opts.add_argument(arg)
    if trust_spki:
        # Accepts a certificate error only on a chain holding one of these keys; Chromium honours
        # the flag only with --user-data-dir, which chromedriver always passes (its own profile).
        opts.add_argument("--ignore-certificate-errors-spki-list=" + ",".join(trust_spki))
    if reduced_motion:
        opts.add_argument("--force-prefers-reduced-motion")
    if dark:
        opts.add_argument("--blink-settings=preferredColorScheme=0")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", **({"performance": "ALL"} if network_log else {})})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    return driver

