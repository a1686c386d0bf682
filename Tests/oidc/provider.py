"""A real OpenID Connect provider for the tests, built on authlib (its PKCE check, and joserfc,
authlib's JOSE library, for keys and signing): discovery at /.well-known/openid-configuration, a JWKS at /jwks, a login form with a
password at /authorize, and a token endpoint at /token that trades a code for an ID token only with
the PKCE verifier the code was asked with. It signs with RS256 or ES256, can rotate its keys, and
counts the JWKS fetches so a test can tell how often the server asked. Loopback only.

    provider = Provider(users={"alice": ("secret", ["team-a"])}).start()
    provider.issuer                       # http://127.0.0.1:PORT
    provider.mint({"sub": "x", ...})      # an ID token of this provider, for the refusal tests
    provider.rotate()                     # a new key signs from now on; the old one stays published
    provider.retire(kid)                  # a key leaves the JWKS
"""

import html
import json
import secrets
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey


class Provider:
    def __init__(self, users, client_id="ringcast", client_secret=None, algorithm="RS256", groups_claim="groups"):
        self.users = dict(users)  # name -> (password, [groups])
        self.client_id = client_id
        self.client_secret = client_secret
        self.algorithm = algorithm
        self.groups_claim = groups_claim
        self.keys = []  # private keys, newest last; all are published until retired
        self.jwks_fetches = 0
        self.token_requests = []  # the forms the token endpoint was sent, for the PKCE checks
        self.codes = {}  # code -> what it was asked with
        self.lock = threading.Lock()
        self.httpd = None
        self.rotate()

    # Keys

    def _generate(self, algorithm):
        kid = f"{algorithm.lower()}-{secrets.token_hex(4)}"
        if algorithm.startswith("ES"):
            return ECKey.generate_key("P-256", parameters={"kid": kid, "alg": algorithm})
        return RSAKey.generate_key(2048, parameters={"kid": kid, "alg": algorithm})

    def rotate(self, algorithm=None):
        """A new key signs from now on; the older ones stay in the JWKS until `retire`d."""
        key = self._generate(algorithm or self.algorithm)
        with self.lock:
            self.keys.append(key)
        return key.as_dict()["kid"]

    def retire(self, kid):
        with self.lock:
            self.keys = [k for k in self.keys if k.as_dict()["kid"] != kid]

    @property
    def current(self):
        return self.keys[-1]

    @property
    def kid(self):
        return self.current.as_dict()["kid"]

    def public_pem(self, key=None):
        """The public key as PEM: what an attacker who downloaded the JWKS holds."""
        return (key or self.current).as_pem(private=False)

    def jwks(self):
        with self.lock:
            return {"keys": [k.as_dict(private=False) for k in self.keys]}

    # Tokens

    def claims(self, sub, groups=None, **extra):
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": sub, "aud": self.client_id, "iat": now, "exp": now + 300,
                  "preferred_username": sub, self.groups_claim: list(groups or [])}
        if "." in self.groups_claim:  # a path like realm_access.roles
            outer, inner = self.groups_claim.split(".", 1)
            claims.pop(self.groups_claim)
            claims[outer] = {inner: list(groups or [])}
        claims.update(extra)
        return claims

    def mint(self, claims, key=None, header=None):
        key = key or self.current
        alg = key.as_dict().get("alg", self.algorithm)
        head = {"alg": alg, "kid": key.as_dict()["kid"], "typ": "JWT", **(header or {})}
        return jwt.encode(head, claims, key, algorithms=[alg])

    # HTTP

    @property
    def issuer(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def discovery(self):
        return {
            "issuer": self.issuer,
            "authorization_endpoint": self.issuer + "/authorize",
            "token_endpoint": self.issuer + "/token",
            "jwks_uri": self.issuer + "/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256", "ES256"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_post", "none"],
        }

    def start(self):
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, status, body, content_type="application/json", headers=()):
                data = body if isinstance(body, bytes) else (json.dumps(body) if content_type == "application/json" else body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def form(self):
                length = int(self.headers.get("Content-Length") or 0)
                return {k: v[0] for k, v in urllib.parse.parse_qs(self.rfile.read(length).decode()).items()}

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
                if url.path == "/.well-known/openid-configuration":
                    self.answer(200, provider.discovery())
                elif url.path == "/jwks":
                    with provider.lock:
                        provider.jwks_fetches += 1
                    self.answer(200, provider.jwks())
                elif url.path == "/authorize":
                    problem = provider.check_authorization(query)
                    if problem:
                        self.answer(400, {"error": "invalid_request", "error_description": problem})
                        return
                    hidden = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                                     for k, v in query.items())
                    self.answer(200, (
                        "<!doctype html><title>Test provider sign-in</title><form method=post action=/authorize>"
                        f"{hidden}<label>User <input id=username name=username></label>"
                        "<label>Password <input id=password name=password type=password></label>"
                        "<button id=login type=submit>Log in</button></form>"), "text/html")
                else:
                    self.answer(404, {"error": "not_found"})

            def do_POST(self):
                url = urllib.parse.urlsplit(self.path)
                form = self.form()
                if url.path == "/authorize":
                    problem = provider.check_authorization(form)
                    user = provider.users.get(form.get("username", ""))
                    if problem or user is None or not secrets.compare_digest(user[0], form.get("password", "")):
                        self.answer(401, "<!doctype html><p id=error>Wrong user or password</p>", "text/html")
                        return
                    code = secrets.token_urlsafe(24)
                    with provider.lock:
                        provider.codes[code] = {**form, "issued": time.time()}
                    target = form["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": form["state"]})
                    self.answer(302, b"", "text/plain", [("Location", target)])
                elif url.path == "/token":
                    status, body = provider.token(form)
                    self.answer(status, body)
                else:
                    self.answer(404, {"error": "not_found"})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self):
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()

    def check_authorization(self, params):
        """What is wrong with an authorization request, or None. PKCE is required, S256 only."""
        if params.get("response_type") != "code":
            return "response_type must be code"
        if params.get("client_id") != self.client_id:
            return "unknown client_id"
        if not params.get("redirect_uri", "").startswith("http"):
            return "redirect_uri missing"
        if params.get("code_challenge_method") != "S256" or not params.get("code_challenge"):
            return "PKCE with S256 is required"
        if not params.get("state") or not params.get("nonce"):
            return "state and nonce are required"
        return None

    def token(self, form):
        """The token endpoint: the code once, with its redirect_uri, client and PKCE verifier."""
        with self.lock:
            self.token_requests.append(dict(form))
            asked = self.codes.pop(form.get("code", ""), None)
        if form.get("grant_type") != "authorization_code" or asked is None:
            return 400, {"error": "invalid_grant", "error_description": "unknown or used code"}
        if form.get("client_id") != self.client_id or (self.client_secret and form.get("client_secret") != self.client_secret):
            return 401, {"error": "invalid_client"}
        if form.get("redirect_uri") != asked["redirect_uri"]:
            return 400, {"error": "invalid_grant", "error_description": "redirect_uri differs"}
        verifier = form.get("code_verifier", "")
        if not verifier or create_s256_code_challenge(verifier) != asked["code_challenge"]:
            return 400, {"error": "invalid_grant", "error_description": "PKCE verification failed"}
        name = asked["username"]
        claims = self.claims(name, self.users[name][1], nonce=asked["nonce"], auth_time=int(time.time()))
        return 200, {"access_token": secrets.token_urlsafe(24), "token_type": "Bearer", "expires_in": 300,
                     "id_token": self.mint(claims)}
