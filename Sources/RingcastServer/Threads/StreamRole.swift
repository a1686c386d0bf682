import RingcastCore
import RingcastLWS
import RingcastPlatform

/// `GET /api/stream`: a watcher over plain HTTP, for clients and proxies that cannot upgrade. It
/// is a `SocketPeer` like a `/ws` watcher, opened by the same `API.openSocket`, subscribed to the
/// same fan-out and held to the same caps, deadlines and conflation; only the writing differs:
/// each frame is one message, framed as a Server-Sent Event or a JSON line, and what one
/// writeable callback gathers leaves as one HTTP/1.1 chunk. Service thread only.
extension ServiceWorker {
    static let streamPath = "/api/stream"

    /// Opens the stream from its request, or answers why not (400/422 for the query, 401/403 for
    /// what it may not read, 429 past its entry's connections) and closes. False closes.
    func openStream(_ link: LWSConnection, _ request: APIRequest) -> Bool {
        let stream: StreamRequest
        switch StreamRequest.parse(request.query, accept: request.headers.accept, lastEventID: link.customHeader("last-event-id:")) {
        case .failure(let error):
            refuseHTTP(error, on: link)
            return false
        case .success(let parsed): stream = parsed
        }
        let headers = request.headers
        // A stream sends nothing, so it publishes no task: no control request is ever for it.
        let (opening, seq, epoch) = state.connectWatcher(stream.socket, headers: headers, fromLoopback: request.fromLoopback, controls: nil)
        // A stream cannot send `auth` later: what a WebSocket would wait for is refused at once.
        if let refusal = opening.refusal {
            refuseHTTP(refusal, on: link)
            return false
        }
        let socket = SocketPeer(link: link, worker: self, messageLimit: 0)
        socket.stream = StreamOutput(stream, epoch: epoch)
        socket.session = opening.session
        if let refusal = admitConnection(socket, of: opening.session) {
            refuseHTTP(APIError(.rateLimited, refusal.reason), on: link)
            return false
        }
        let opened = StreamEncoder.opening(stream.framing)
        let written = link.writeStreamHead(
            status: 200, contentType: stream.framing.contentType, body: opened.isEmpty ? [] : StreamEncoder.chunk(opened[...]),
            headers: [
                ("cache-control:", "no-store"),
                // nginx passes the stream on as it comes rather than filling its buffers first.
                ("x-accel-buffering:", "no"),
                ("transfer-encoding:", "chunked"),
            ] + http.gate.corsHeaders(headers))
        release(link.attach(Connection(.stream(socket))))
        guard written else { return false }
        state.record { $0.httpRequests += 1 }
        subscribe(socket, to: opening.session.watch, lastSeq: seq, frames: opening.frames)
        socket.subscription?.singleEvents = true
        sockets.watchSessionDeadline(of: socket)
        counters.update(from: fanOut)
        logger.debug("\(stream.framing.rawValue) stream from \(link.peerAddress) watching \(opening.session.watch.key)")
        return true
    }

    /// A stream's writeable callback (or the round's end): what the fan-out has for it, framed,
    /// in one chunk of up to `fragmentBytes` (a message longer than that, a snapshot, leaves in
    /// chunks of that size over the next callbacks). Once closing with nothing left: the last
    /// chunk, after an `error` event saying why unless the server is stopping.
    func writeStream(_ socket: SocketPeer, on link: LWSConnection) -> Bool {
        guard let subscription = socket.subscription, let stream = socket.stream else { return true }
        subscription.writeableCallbackBegan()
        if socket.unfinished != nil {
            guard writeNextStreamPiece(of: socket, on: link) else { return false }
            if socket.unfinished != nil || link.isChoked {
                subscription.requestWrite()
                sockets.watchOutput(of: socket)
                return true
            }
        }
        var out = sockets.streamScratch
        sockets.streamScratch = []
        out.removeAll(keepingCapacity: true)
        defer { sockets.streamScratch = out }
        var events = 0
        let seenBefore = subscription.newestSeqSent
        while out.count < Self.fragmentBytes, events < fanOut.maxEventsPerFrame, let plan = fanOut.nextFrame(for: subscription) {
            switch plan {
            case .frame(let bytes, _):
                StreamEncoder.append(
                    bytes, epoch: stream.epoch, seq: subscription.newestSeqSent, framing: stream.framing,
                    heartbeatEvents: stream.heartbeatEvents, to: &out)
            case .resync(let since):
                let (snapshot, seq, epoch) = state.snapshot(matching: subscription.watch, since: since)
                fanOut.markResynced(subscription, seq: seq)
                stream.epoch = Array(epoch.utf8)
                StreamEncoder.append(
                    snapshot, epoch: stream.epoch, seq: seq, framing: stream.framing, heartbeatEvents: stream.heartbeatEvents, to: &out)
            }
            events += 1
        }
        if events == 0 {
            guard let reason = socket.closeReason else { return true }
            var last: [UInt8] = []
            if reason.status != .goingAway {
                StreamEncoder.append(
                    APIError(reason.status.code == SocketClose.tooManyConnections ? .rateLimited : .unauthorized, reason.text).encodedEvent(),
                    epoch: stream.epoch, seq: subscription.newestSeqSent, framing: stream.framing, heartbeatEvents: false, to: &last)
            }
            _ = link.writeHTTPBody((last.isEmpty ? [] : StreamEncoder.chunk(last[...])) + StreamEncoder.lastChunk)
            return false
        }
        counters.wrote(events: events)
        figures.noteFrameWritten(
            bytes: out.count, events: events, newestSeq: subscription.newestSeqSent > seenBefore ? subscription.newestSeqSent : nil)
        let written: Bool
        if out.count <= Self.fragmentBytes {
            written = link.writeHTTPChunk(out, 0..<out.count)
        } else {
            socket.unfinished = (out, 0)
            written = writeNextStreamPiece(of: socket, on: link)
        }
        guard written else { return false }
        if subscription.hasPending || socket.closeReason != nil || socket.unfinished != nil { subscription.requestWrite() }
        sockets.watchOutput(of: socket)
        return true
    }

    /// The next chunk of what `writeStream` framed: lws keeps what the kernel does not take of a
    /// write, so each write is at most `fragmentBytes`.
    private func writeNextStreamPiece(of socket: SocketPeer, on link: LWSConnection) -> Bool {
        guard let (bytes, offset) = socket.unfinished else { return true }
        let end = min(bytes.count, offset + Self.fragmentBytes)
        socket.unfinished = end == bytes.count ? nil : (bytes, end)
        return link.writeHTTPChunk(bytes, offset..<end)
    }
}
