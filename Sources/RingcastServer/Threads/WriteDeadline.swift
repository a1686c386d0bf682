import RingcastCore
import RingcastLWS
import RingcastPlatform

/// The write deadline: a WebSocket with output waiting (lws holds part of a frame, or the fan-out
/// has frames for it) whose peer acknowledges none of it for `writeTimeoutSeconds` is closed with
/// 4408. Until then what waits is bounded anyway: the kernel holds at most `sendBufferBytes`,
/// lws the rest of one frame, and the fan-out conflates a slow watcher's events into a resync.
/// Progress is the peer's acknowledged bytes (TCP), so a slow reader of a big snapshot is never
/// taken for a stalled one. Service thread only.
extension SocketRole {
    /// After a write to `socket`: when output is left waiting, its clock starts (unless it runs).
    /// The delivery path calls it only when it saw output left (`owesOutput` decides).
    func watchOutput(of socket: SocketPeer) {
        guard writeTimeoutSeconds > 0 else { return }
        guard owesOutput(socket) else { return }
        let key = ObjectIdentifier(socket)
        guard writeWatch[key] == nil else { return }
        writeWatch[key] = (socket, Clock.now(), socket.link.bytesAcknowledged)
        if writeWatch.count == 1 { writeWatchTimer?.schedule(seconds: writeWatchSeconds) }
    }

    /// How often waiting sockets are looked at: a deadline falls at most this late.
    var writeWatchSeconds: Double { max(0.25, Double(writeTimeoutSeconds) / 4) }

    private func owesOutput(_ socket: SocketPeer) -> Bool {
        guard let subscription = socket.subscription else { return false }
        return socket.unfinished != nil || !socket.link.mayWriteOutsideCallback || subscription.hasPending
    }

    /// The watch timer: sockets that took something start their clock again, those done are
    /// let go, and those past the deadline are closed (`closeStalled`).
    func writeWatchFired(closeStalled: (SocketPeer) -> Void) {
        let now = Clock.now()
        let limit = Double(writeTimeoutSeconds) * 1000
        for (key, entry) in writeWatch {
            let socket = entry.socket
            guard socket.closeReason == nil, owesOutput(socket) else {
                writeWatch.removeValue(forKey: key)
                continue
            }
            let acked = socket.link.bytesAcknowledged
            if acked != entry.acked {
                writeWatch[key] = (socket, now, acked)
            } else if now - entry.since >= limit {
                writeWatch.removeValue(forKey: key)
                closeStalled(socket)
            }
        }
        if !writeWatch.isEmpty { writeWatchTimer?.schedule(seconds: writeWatchSeconds) }
    }
}

extension ServiceWorker {
    func writeWatchFired() { sockets.writeWatchFired { closeStalled($0) } }

    private func closeStalled(_ socket: SocketPeer) {
        let peer = socket.link.peerAddress
        let reason = "took nothing written to it for \(config.writeTimeoutSeconds) s (writeTimeoutSeconds)"
        count { $0.writeTimeouts += 1 }
        ledger.logRefusal(
            RefusalReason.stalled.rawValue, offender: peer, "closed a WebSocket from \(peer) (\(SocketClose.writeTimeout)): it \(reason)")
        socket.closeReason = (CloseStatus(code: SocketClose.writeTimeout), reason)
        // No close frame could pass what the peer has not taken: the connection just ends, and
        // lws drops the output it held.
        // A stream has no close frame to give a reason in.
        if socket.stream != nil { socket.link.closeSoon() } else { socket.link.closeSoon(CloseStatus(code: SocketClose.writeTimeout), reason) }
    }
}
