import Foundation
import RingcastCore

/// A private CA made by openssl for one test, and what it signed: a certificate for 127.0.0.1 and
/// localhost, one for another host only, one that has expired; and one signed by a second CA that
/// no client is told to trust. Every certificate is a leaf signed by its CA (no chain is sent).
package struct TestCertificates {
    package let folder: TemporaryFolder
    /// The PEM file of the CA a client trusts.
    package var caFile: String { folder.file("ca.pem").path }
    package var good: TLSFiles { files("good") }
    package var wrongHost: TLSFiles { files("wrong-host") }
    package var expired: TLSFiles { files("expired") }
    package var unknownCA: TLSFiles { files("unknown-ca") }

    package init() throws {
        folder = try TemporaryFolder("ringcast-test-ca")
        try makeCA("ca")
        try makeCA("other-ca")
        try sign("good", by: "ca", names: "DNS:localhost,IP:127.0.0.1", days: "2")
        try sign("wrong-host", by: "ca", names: "DNS:wrong.example", days: "2")
        // A negative validity ends before it starts: notAfter is a day before now.
        try sign("expired", by: "ca", names: "DNS:localhost,IP:127.0.0.1", days: "-1")
        try sign("unknown-ca", by: "other-ca", names: "DNS:localhost,IP:127.0.0.1", days: "2")
    }

    package func remove() { folder.remove() }

    /// Another certificate for 127.0.0.1 and localhost from the same CA, with a key of its own:
    /// what a renewal brings.
    package func issue(_ name: String) throws -> TLSFiles {
        try sign(name, by: "ca", names: "DNS:localhost,IP:127.0.0.1", days: "2")
        return files(name)
    }

    /// A certificate file's serial number, as openssl prints it (hex).
    package static func serial(ofFile path: String) throws -> String {
        let printed = try runToEnd("/usr/bin/openssl", ["x509", "-noout", "-serial", "-in", path])
        guard printed.status == 0 else { throw TestCertificateError("openssl x509 -serial failed: \(printed.output)") }
        return printed.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The serial of the certificate a server presents in a new TLS handshake (openssl s_client).
    package static func serial(presentedOn port: Int) throws -> String {
        let printed = try runToEnd(
            "/bin/sh",
            [
                "-c",
                "/usr/bin/openssl s_client -connect 127.0.0.1:\(port) -servername localhost </dev/null 2>/dev/null | /usr/bin/openssl x509 -noout -serial",
            ])
        guard printed.status == 0 else { throw TestCertificateError("openssl s_client to port \(port) failed: \(printed.output)") }
        return printed.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func files(_ name: String) -> TLSFiles { TLSFiles(cert: folder.file("\(name).pem").path, key: folder.file("\(name).key").path) }

    private func openssl(_ arguments: [String]) throws {
        let made = try runToEnd("/usr/bin/openssl", arguments)
        guard made.status == 0 else { throw TestCertificateError("openssl \(arguments.prefix(2).joined(separator: " ")) failed: \(made.output)") }
    }

    private func makeCA(_ name: String) throws {
        try openssl([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", folder.file("\(name).key").path, "-out", folder.file("\(name).pem").path,
            "-days", "2", "-subj", "/CN=Ringcast test \(name)", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ])
    }

    private func sign(_ name: String, by ca: String, names: String, days: String) throws {
        let request = folder.file("\(name).csr").path
        try openssl([
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", folder.file("\(name).key").path, "-out", request, "-subj", "/CN=\(name)",
        ])
        let extensions = folder.file("\(name).ext")
        try Data("subjectAltName=\(names)\nextendedKeyUsage=serverAuth,clientAuth\n".utf8).write(to: extensions)
        try openssl([
            "x509", "-req", "-in", request, "-CA", folder.file("\(ca).pem").path, "-CAkey", folder.file("\(ca).key").path,
            "-CAcreateserial", "-out", folder.file("\(name).pem").path, "-days", days, "-extfile", extensions.path,
        ])
    }
}

package struct TestCertificateError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
