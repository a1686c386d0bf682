import Foundation
import RingcastCore
import RingcastLWS
import RingcastPlatform

/// SIGHUP: the configuration file read again and applied to the running server without dropping
/// a connection (`ServerConfig.liveSettings` says what changes; the rest is named and kept).
extension Server {
    /// The file the running configuration came from: generation 1, for `/readyz`, the log and the
    /// next reload's comparison. Once, after `start`.
    public func noteConfigFile(_ bytes: [UInt8], source: String) {
        let generation = ConfigGeneration(generation: 1, bytes: bytes, loadedAt: Clock.now(), source: source)
        reloading.withLock { configFile = (bytes, generation) }
        state.setConfigGeneration(generation)
    }

    /// Which configuration runs now.
    public var configGeneration: ConfigGeneration? { reloading.withLock { configFile?.generation } }

    /// Applies `file` (the configuration file as just read, `bytes` its text) to the running
    /// server, whole or not at all: every check (rules across settings, webhook URLs and files,
    /// the TLS certificate and key) passes before anything changes, and a failure throws with the
    /// reason while what runs keeps running. The certificate and key files are read again even
    /// when `tls` did not change, since a renewal rewrites the files under the same names.
    /// `overridden`: settings the environment or the command line set, which the file does not
    /// change. Returns what was applied and what waits for a restart. Any thread but a service thread.
    @discardableResult
    public func reload(_ file: ServerConfig, bytes: [UInt8], source: String, overridden: Set<String> = []) throws -> ConfigReload {
        try reloading.withLock { () throws -> ConfigReload in
            let running = config
            let read = Server.resolvingHookFiles(file, in: baseDirectory)
            var outcome = try running.reloaded(from: read, source: source)
            let written = ServerConfig.changedKeys(configFile?.bytes ?? [], bytes)
            for key in written where !ServerConfig.liveKeys.contains(key) && !overridden.contains(key) && !outcome.kept.contains(key) {
                outcome.kept.append(key)
            }
            let next = outcome.config
            let webhooksChanged = next.webhooks != running.webhooks
            let newCertificate = Server.certificate(of: next, in: baseDirectory)
            // Checked, in full, before anything is applied.
            if webhooksChanged { try WebhookSenders.check(next.webhooks) }
            if let newCertificate {
                do throws(CCallError) {
                    try ServiceLoop.checkCertificate(newCertificate)
                } catch {
                    throw ServerError(error.detail)
                }
            }

            config = next
            certificate = newCertificate
            logger.setLevel(next.logLevel)
            LWSLog.route(to: logger)
            let generation = ConfigGeneration(
                generation: (configFile?.generation.generation ?? 0) + 1, bytes: bytes, loadedAt: Clock.now(), source: source)
            configFile = (bytes, generation)
            state.reconfigure(next, generation: generation)
            if webhooksChanged { try state.reloadWebhooks(next.webhooks, logger: logger) }
            if next.oidc != running.oidc { applyIdentityProviders(next) }
            // Each thread takes the new rules for its own sockets and TLS contexts; the reload is
            // reported once every thread has (or after a bound, should one be stuck).
            let done = DispatchGroup()
            let failures = Locked<[String]>([])
            for worker in workers {
                done.enter()
                let posted = worker.loop.post { [worker, newCertificate] in
                    if let failure = worker.reconfigure(next, certificate: newCertificate) { failures.withLock { $0.append(failure) } }
                    done.leave()
                }
                if !posted { done.leave() }
            }
            if done.wait(timeout: .now() + 10) == .timedOut {
                logger.warning("reload: a service thread did not take the new configuration within 10 s; it will when it wakes")
            }
            for failure in failures.withLock({ $0 }) { logger.error("reload: \(failure)") }
            return outcome
        }
    }
}

extension ServiceWorker {
    /// On the service thread: the new origins for what arrives next, every open socket held to
    /// the new rules (`API.review`: a watcher sees only what it may read now, or is closed 4441),
    /// and new handshakes served with the certificate now named. Returns what failed, if anything.
    func reconfigure(_ config: ServerConfig, certificate: (cert: String, key: String, ciphers: String)?) -> String? {
        assertOnThread(of: loop)
        http.gate = RequestGate(config: config)
        var open: [SocketPeer] = []
        fanOut.forEachSubscription { subscription in
            if let socket = subscription.writer as? SocketPeer, socket.closeReason == nil { open.append(socket) }
        }
        let now = Clock.now()
        let reviews = state.read { api, _ in open.map { socket in socket.session.map { api.review($0, now: now) } ?? .unchanged } }
        var changed = 0
        var closed = 0
        for (socket, review) in zip(open, reviews) {
            switch review {
            case .unchanged: continue
            case .close(let close):
                closed += 1
                closeSocket(socket, close, peer: socket.link.peerAddress)
            case .changed(let session):
                changed += 1
                let before = socket.session
                socket.session = session
                grantChanged(socket, from: before)
            }
        }
        if changed + closed > 0 {
            logger.info("reload: of \(open.count) WebSockets on thread \(index), \(changed) hold new rights and \(closed) were closed (4441)")
        }
        counters.update(from: fanOut)
        guard let certificate else { return nil }
        do throws(CCallError) {
            try loop.replaceCertificate(certificate)
        } catch {
            return error.detail
        }
        return nil
    }
}
