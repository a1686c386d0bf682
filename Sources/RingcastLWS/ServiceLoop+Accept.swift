import CLibWebSockets
import Foundation
import RingcastPlatform

/// Accepting: the listeners a loop serves, the sockets they accept spread over its contexts by
/// descriptor, and the pause when the process runs out of descriptors.
extension ServiceLoop {
    /// Serves the connections `socket` accepts on this loop: each is offered to the handler as
    /// `accepted(address:)`, then adopted (TLS too, when the contexts have a certificate) by one
    /// of the contexts, chosen by its descriptor (`context(for:)`). The first context watches the
    /// socket and closes it when it is destroyed. Service thread only (e.g. in `prepare`).
    package func adoptListener(_ socket: ListeningSocket) throws(CCallError) {
        assertOnLoopThread()
        guard let vhost = vhosts.first else {
            throw CCallError("lws_get_vhost_by_name", "the loop has no server vhost to adopt a listener into")
        }
        var descriptor = lws_sock_file_fd_type()
        descriptor.filefd = socket.descriptor
        let raw = try checkedNotNil(
            lws_adopt_descriptor_vhost(vhost, LWS_ADOPT_RAW_FILE_DESC, descriptor, protocolName, nil),
            "lws_adopt_descriptor_vhost", detail: { _, _ in "could not watch the listening socket on port \(socket.port)" })
        socket.adopted = true
        listeners[Int(bitPattern: UnsafeRawPointer(raw))] = socket
    }

    /// Accepts everything waiting on a listener (level-triggered: what is left wakes us again).
    func acceptConnections(_ socket: ListeningSocket, on listener: LWSConnection) {
        guard let handler, !vhosts.isEmpty else { return }
        for _ in 0..<256 {
            switch socket.accept() {
            case .none:
                endAcceptPause()
                return
            case .outOfResources(let code):
                pauseAccepting(listener, errno: code)
                return
            case .connection(let descriptor, let address):
                endAcceptPause()
                guard handler.handle(.accepted(address: address), on: listener) else {
                    close(descriptor)
                    continue
                }
                // lws makes the connection (WSI_CREATE, so `created` reaches the handler and the count
                // grows) or closes the descriptor.
                _ = lws_adopt_socket_vhost(vhosts[context(for: descriptor)], descriptor)
            }
        }
    }

    /// Out of descriptors: the listener stays readable while a connection waits, so a loop that
    /// kept polling it would try, and fail, on every turn (a core's worth of CPU, for nothing). It
    /// is left unpolled, the connections waiting in its backlog, until a connection of this loop
    /// closes or a second has passed (descriptors freed elsewhere); then one accept tries again.
    private func pauseAccepting(_ listener: LWSConnection, errno code: Int32) {
        if unpolledListeners[listener.identifier] == nil {
            _ = lws_rx_flow_control(listener.wsi, 0)
            unpolledListeners[listener.identifier] = listener.wsi
        }
        if acceptRetryTimer == nil { acceptRetryTimer = try? makeTimer { [unowned self] in pollListenersAgain() } }
        acceptRetryTimer?.schedule(seconds: 1)
        guard !acceptingPaused else { return }
        acceptingPaused = true
        borrowedHandler?.loopPausedAccepting(self, reason: CCallError.errnoText(code))
    }

    /// Polls the listeners accepting left alone again; the next accept says whether the pause is over.
    func pollListenersAgain() {
        for (_, wsi) in unpolledListeners { _ = lws_rx_flow_control(wsi, 1) }
        unpolledListeners.removeAll()
    }

    private func endAcceptPause() {
        guard acceptingPaused else { return }
        acceptingPaused = false
        acceptRetryTimer?.cancel()
        borrowedHandler?.loopResumedAccepting(self)
    }

    /// The context an accepted descriptor goes to: the one for its range (`descriptorRange`), whose
    /// fd table reaches it. Not the context that holds fewest: lws's scan on close follows every
    /// filled slot of the table to its connection, and slots filled one here and one there cost a
    /// cache miss and a mispredicted branch each (measured slower than one context,
    /// Benchmarks/NOTES.md); a range's slots are filled densely, since the kernel hands out the
    /// lowest free descriptor.
    func context(for descriptor: Int32) -> Int {
        min(Int(max(0, descriptor)) / descriptorRange, max(0, vhosts.count - 1))
    }
}
