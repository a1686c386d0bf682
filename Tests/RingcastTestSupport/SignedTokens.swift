import Foundation
import RingcastCore

/// Signed tokens for the tests, minted by PyJWT (a JWT library others use, from PyPI; installed
/// by scripts/browser-deps.sh), never by the server's own code, so a test holds the server to
/// what the standard's implementations do.
package enum PyJWT {
    package struct Unavailable: Error, CustomStringConvertible {
        package let output: String
        package var description: String { "python3 with PyJWT could not mint a token (scripts/deps.sh test installs it): \(output)" }
    }

    /// One token to mint: its claims (JSON), the key (nil, with algorithm `none`: unsigned), the
    /// algorithm, extra header members (JSON), and whether the claims are signed byte for byte as
    /// written (PyJWS over the raw payload: how a member named twice reaches the server).
    package struct Spec {
        package let claims: String
        package let secret: String?
        package let algorithm: String
        package let headers: String?
        package let raw: Bool

        package init(_ claims: String, secret: String?, algorithm: String = "HS256", headers: String? = nil, raw: Bool = false) {
            self.claims = claims
            self.secret = secret
            self.algorithm = algorithm
            self.headers = headers
            self.raw = raw
        }
    }

    /// `jwt.encode(claims, secret, algorithm)` for each spec, in one python3 (which takes most of a
    /// second to start here): the tokens, in order.
    package static func encode(_ specs: [Spec]) throws -> [String] {
        let script = """
            import json, sys, warnings
            warnings.simplefilter("ignore")  # PyJWT warns of short keys; the tests choose theirs
            import jwt
            for spec in json.loads(sys.argv[1]):
                headers = json.loads(spec["headers"]) if spec["headers"] else None
                if spec["raw"]:
                    print(jwt.api_jws.PyJWS().encode(spec["claims"].encode(), spec["secret"], algorithm=spec["algorithm"], headers=headers))
                else:
                    print(jwt.encode(json.loads(spec["claims"]), spec["secret"], algorithm=spec["algorithm"], headers=headers))
            """
        let specsJSON = JSONWriter.encode(
            .array(
                specs.map {
                    .object([
                        ("claims", .string($0.claims)), ("secret", $0.secret.map(JSONValue.string) ?? .null), ("algorithm", .string($0.algorithm)),
                        ("headers", $0.headers.map(JSONValue.string) ?? .null), ("raw", .bool($0.raw)),
                    ])
                }))
        let (status, output) = try runToEnd("/usr/bin/env", ["python3", "-c", script, String(decoding: specsJSON, as: UTF8.self)])
        let tokens = output.split(separator: "\n").map(String.init).filter { $0.split(separator: ".", omittingEmptySubsequences: false).count == 3 }
        guard status == 0, tokens.count == specs.count else { throw Unavailable(output: output) }
        return tokens
    }

    package static func encode(_ claims: String, secret: String?, algorithm: String = "HS256") throws -> String {
        try encode([Spec(claims, secret: secret, algorithm: algorithm)])[0]
    }

    /// A token whose claims part was replaced by `claims` (base64url) after signing: the signature
    /// no longer matches.
    package static func tampered(_ token: String, claims: String) -> String {
        var parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        parts[1] = Data(claims.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return parts.joined(separator: ".")
    }

    /// Unix seconds `offset` from now, as a claim takes them.
    package static func seconds(from offset: Double) -> Int { Int(Date().timeIntervalSince1970 + offset) }
}
