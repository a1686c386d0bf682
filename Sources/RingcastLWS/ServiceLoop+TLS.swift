import CLibWebSockets
import Foundation
import RingcastPlatform

/// A renewed certificate for a loop's server contexts, checked before it is put in force.
extension ServiceLoop {
    /// Serves new TLS handshakes on every context of the loop with this certificate and key (PEM
    /// files) and cipher list, as lws loaded the first ones; connections already open keep theirs
    /// (each holds its own reference to what it was handshaken with). Check the files first
    /// (`checkCertificate`): a pair that does not load leaves a context without a usable key.
    /// Service thread only.
    package func replaceCertificate(_ certificate: (cert: String, key: String, ciphers: String)) throws(CCallError) {
        assertOnLoopThread()
        for tls in serverTLSContexts {
            // The certificate first: OpenSSL drops a held key that does not match it, and the
            // new key then goes in beside it.
            guard SSL_CTX_use_certificate_chain_file(tls, certificate.cert) == 1,
                SSL_CTX_use_PrivateKey_file(tls, certificate.key, SSL_FILETYPE_PEM) == 1,
                SSL_CTX_check_private_key(tls) == 1,
                SSL_CTX_set_cipher_list(tls, certificate.ciphers) == 1
            else {
                let reason = ServiceLoop.openSSLReason()
                throw CCallError(
                    "SSL_CTX_use_certificate_chain_file", "\(name): could not load \(certificate.cert) and \(certificate.key): \(reason)")
            }
        }
    }

    /// How many server TLS contexts the loop holds (one per context, with a certificate). Service thread only.
    package var serverTLSContextCount: Int { serverTLSContexts.count }

    /// Whether PEM files hold a certificate (with its chain) and its private key, and the cipher
    /// list is one OpenSSL takes: loaded into a throwaway OpenSSL context, so nothing that serves
    /// is touched. Any thread.
    package static func checkCertificate(_ certificate: (cert: String, key: String, ciphers: String)) throws(CCallError) {
        guard let tls = SSL_CTX_new(TLS_server_method()) else { throw CCallError("SSL_CTX_new", "OpenSSL could not make a context") }
        defer { SSL_CTX_free(tls) }
        let steps: [(String, () -> Bool)] = [
            ("tls.cert: '\(certificate.cert)' is not a PEM certificate", { SSL_CTX_use_certificate_chain_file(tls, certificate.cert) == 1 }),
            // OpenSSL checks the key against the certificate as it loads it; the reason says which failed.
            (
                "tls.key: '\(certificate.key)' is not the PEM private key of '\(certificate.cert)'",
                { SSL_CTX_use_PrivateKey_file(tls, certificate.key, SSL_FILETYPE_PEM) == 1 }
            ),
            ("tls.key: '\(certificate.key)' is not the PEM private key of '\(certificate.cert)'", { SSL_CTX_check_private_key(tls) == 1 }),
            ("tls.ciphers: OpenSSL takes none of '\(certificate.ciphers)'", { SSL_CTX_set_cipher_list(tls, certificate.ciphers) == 1 }),
        ]
        for (failure, step) in steps where !step() {
            throw CCallError("SSL_CTX_use_certificate_chain_file", "\(failure) (\(openSSLReason()))")
        }
    }

    /// The newest OpenSSL error of this thread, in words, and the thread's error queue emptied.
    private static func openSSLReason() -> String {
        let code = ERR_peek_last_error()
        defer { ERR_clear_error() }
        guard code != 0, let text = ERR_reason_error_string(code) else { return "no reason given" }
        return String(cString: text)
    }
}
