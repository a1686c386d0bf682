"""Debian's nginx in front of a test's ringcast server, on loopback ports of its own: one
`server` that forwards WebSocket upgrades (README.md's recipe) and one that does not, as a
reverse proxy configured for plain HTTP alone would, so `GET /ws` reaches ringcast without its
`Upgrade` and gets no WebSocket."""

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

NGINX = "/usr/sbin/nginx"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NginxProxy:
    def __init__(self, upstream_port):
        if not Path(NGINX).exists():
            raise RuntimeError("nginx missing: install Debian's nginx (scripts/deps.sh test does)")
        self.dir = Path(tempfile.mkdtemp(prefix="ringcast-nginx-"))
        self.upgrading_port = free_port()
        self.plain_port = free_port()
        for temp in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.dir / temp).mkdir()
        common = f"""
                proxy_pass http://127.0.0.1:{upstream_port};
                proxy_http_version 1.1;
                proxy_set_header Host $http_host;
                proxy_buffering off;
                proxy_read_timeout 1h;"""
        conf = f"""
master_process off;
pid {self.dir}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 128; }}
http {{
    access_log off;
    client_body_temp_path {self.dir}/body;
    proxy_temp_path {self.dir}/proxy;
    fastcgi_temp_path {self.dir}/fastcgi;
    uwsgi_temp_path {self.dir}/uwsgi;
    scgi_temp_path {self.dir}/scgi;
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        ''      close;
    }}
    server {{
        listen 127.0.0.1:{self.upgrading_port};
        location / {{{common}
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
        }}
    }}
    server {{
        listen 127.0.0.1:{self.plain_port};
        location / {{{common}
        }}
    }}
}}
"""
        (self.dir / "nginx.conf").write_text(conf)
        self.proc = subprocess.Popen(
            [NGINX, "-p", str(self.dir), "-c", str(self.dir / "nginx.conf"), "-e", "stderr", "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx did not start: {self.proc.stderr.read().decode(errors='replace')}")
            try:
                for port in (self.upgrading_port, self.plain_port):
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        self.close()
        raise RuntimeError("nginx did not listen within 10 s")

    def base(self, upgrades):
        return f"http://127.0.0.1:{self.upgrading_port if upgrades else self.plain_port}"

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)
