/// Snapshots already encoded at the store's current seq, by pattern set and resume point, so every
/// watcher that connects (or resyncs) with the same patterns before the next change is handed the
/// same bytes: a reconnect storm against 10 000 tasks encodes each distinct snapshot once, not once
/// per watcher. Valid for one seq of one state: a change (a new seq) or a replaced state empties it.
/// Owned by the `TaskStore`, and so touched only where the store is.
struct SharedSnapshots {
    struct Key: Hashable {
        let watch: WatchSet
        /// The resume point the snapshot answers (nil: a full snapshot).
        let since: UInt64?
    }

    /// At most this many pattern sets and resume points, and bytes in all, for one seq; past either,
    /// a new snapshot is still encoded and sent, just not kept.
    static let maxEntries = 256
    static let maxBytes = 32 << 20

    private var seq: UInt64 = 0
    private var entries: [Key: [UInt8]] = [:]
    private var bytes = 0
    /// Snapshots handed out again instead of encoded, since the start.
    private(set) var reused = 0

    /// The bytes kept for `key` at `seq`; a different seq lets go of everything kept.
    mutating func lookup(_ key: Key, seq: UInt64) -> [UInt8]? {
        guard seq == self.seq else {
            removeAll(at: seq)
            return nil
        }
        guard let kept = entries[key] else { return nil }
        reused += 1
        return kept
    }

    mutating func keep(_ snapshot: [UInt8], for key: Key, seq: UInt64) {
        if seq != self.seq { removeAll(at: seq) }
        guard entries.count < SharedSnapshots.maxEntries, bytes + snapshot.count <= SharedSnapshots.maxBytes else { return }
        entries[key] = snapshot
        bytes += snapshot.count
    }

    /// The state was replaced without a new seq (a cluster node reloaded it).
    mutating func removeAll(at seq: UInt64) {
        self.seq = seq
        entries.removeAll()
        bytes = 0
    }
}
