import CLibWebSockets

/// The headers of a client handshake being written (`LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER`).
package struct HandshakeHeaders {
    let wsi: OpaquePointer
    let cursor: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>
    let end: UnsafeMutablePointer<UInt8>

    /// Adds `name: value`; false when there is no room left.
    package func add(_ name: String, _ value: String) -> Bool {
        "\(name.lowercased()):".withCString { namePointer in
            value.withCString { valuePointer in
                lws_add_http_header_by_name(
                    wsi, UnsafeRawPointer(namePointer).assumingMemoryBound(to: UInt8.self),
                    UnsafeRawPointer(valuePointer).assumingMemoryBound(to: UInt8.self),
                    Int32(strlen(valuePointer)), cursor, end) == 0
            }
        }
    }
}
