import Synchronization

/// Signed tokens a browser signed out with (`DELETE /api/session`), refused from then until their
/// own `exp`, when they would be refused anyway. Kept by their SHA-256, never the token itself, and
/// at most `capacity` of them: past it, the one that expires soonest goes first. Held by one
/// node, in memory: a restart forgets them, and another node of a cluster never knew them.
/// Tokens of config.json's entries are not signed out (they are the entry's, not the session's:
/// take one out of config.json to revoke it). Any thread.
public final class SignedOutTokens: Sendable, Equatable {
    public static let capacity = 10_000
    private let expiries = Mutex<[[UInt8]: Double]>([:])

    public init() {}

    /// Signs `token` out until `expiresAt` (Unix ms).
    public func add(_ token: String, until expiresAt: Double, now: Double) {
        guard expiresAt > now else { return }
        let key = Crypto.current.sha256(Array(token.utf8))
        expiries.withLock { expiries in
            if expiries.count >= SignedOutTokens.capacity { expiries = expiries.filter { $0.value > now } }
            if expiries.count >= SignedOutTokens.capacity, let soonest = expiries.min(by: { $0.value < $1.value }) {
                expiries.removeValue(forKey: soonest.key)
            }
            expiries[key] = expiresAt
        }
    }

    public func contains(_ token: String, now: Double) -> Bool {
        // Most servers never see a sign-out: no hash for them.
        guard !expiries.withLock({ $0.isEmpty }) else { return false }
        let key = Crypto.current.sha256(Array(token.utf8))
        return expiries.withLock { ($0[key] ?? 0) > now }
    }

    public var count: Int { expiries.withLock { $0.count } }

    public static func == (a: SignedOutTokens, b: SignedOutTokens) -> Bool { a === b }
}
