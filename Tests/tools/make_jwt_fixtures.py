#!/usr/bin/env python3
"""Writes Tests/fixtures/jwt-signatures.json: public keys as JWKs and tokens signed by PyJWT on
Python's `cryptography` (an implementation other than the one under test), for the signature tests
and the verification benchmark. Run again only to replace the keys: the file is committed.

Usage: python3 Tests/tools/make_jwt_fixtures.py [OUTPUT]
"""

import json
import sys
from pathlib import Path

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

CLAIMS = {"iss": "https://idp.example", "sub": "ada", "aud": "ringcast", "exp": 4102444800, "groups": ["ci"]}


def public_jwk(key, kid, alg):
    algorithm = jwt.get_algorithm_by_name(alg)
    jwk = json.loads(algorithm.to_jwk(key.public_key()))
    jwk.update({"kid": kid, "alg": alg, "use": "sig"})
    return jwk


def main():
    output = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent.parent / "fixtures" / "jwt-signatures.json")
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other_rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    weak_rsa = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    other_ec = ec.generate_private_key(ec.SECP256R1())
    keys = {
        "rsa": public_jwk(rsa_key, "rsa-1", "RS256"),
        "rsa-pss": public_jwk(rsa_key, "rsa-pss-1", "PS256"),
        "rsa-other": public_jwk(other_rsa, "rsa-2", "RS256"),
        "rsa-1024": public_jwk(weak_rsa, "rsa-weak", "RS256"),
        "ec": public_jwk(ec_key, "ec-1", "ES256"),
        "ec-other": public_jwk(other_ec, "ec-2", "ES256"),
    }
    tokens = {
        "RS256": jwt.encode(CLAIMS, rsa_key, algorithm="RS256", headers={"kid": "rsa-1"}),
        "PS256": jwt.encode(CLAIMS, rsa_key, algorithm="PS256", headers={"kid": "rsa-pss-1"}),
        "ES256": jwt.encode(CLAIMS, ec_key, algorithm="ES256", headers={"kid": "ec-1"}),
        "HS256": jwt.encode(CLAIMS, "benchmark-signing-key-0123456789abcdef", algorithm="HS256"),
    }
    document = {
        "about": f"made by Tests/tools/make_jwt_fixtures.py with PyJWT {jwt.__version__}",
        "hmacKey": "benchmark-signing-key-0123456789abcdef",
        "keys": keys,
        "tokens": tokens,
    }
    output.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
