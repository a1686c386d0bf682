import CLibWebSockets
import RingcastCore
import RingcastLWS

/// The Swift side of one lws connection, reached from the C callback through the per-session pointer.
/// The pointer holds one retain (taken in `attach`, given back in `detach`). Service thread only.
final class Connection: FanOutWriter {
    let wsi: OpaquePointer

    // HTTP exchange
    var request: APIRequest?
    var expectsBody = false
    var bodyTooLarge = false
    var response: (status: Int, body: [UInt8])?
    var contentType = "application/json"

    // WebSocket watcher
    var subscription: Subscription?
    /// Who this client publishes as; set from the upgrade's Authorization header or an `auth` message.
    var credential = Credential.missing
    var incoming: [UInt8] = []
    var incomingTooLarge = false
    /// Set when the connection must close once what is queued has left (a refused watch pattern).
    var closeReason: (status: lws_close_status, text: String)?

    init(wsi: OpaquePointer) { self.wsi = wsi }

    func requestWrite() { lws_callback_on_writable(wsi) }

    static func attach(_ connection: Connection, to sessionData: UnsafeMutableRawPointer) {
        sessionData.storeBytes(of: Unmanaged.passRetained(connection).toOpaque(), as: UnsafeMutableRawPointer?.self)
    }

    static func find(_ sessionData: UnsafeMutableRawPointer?) -> Connection? {
        guard let sessionData, let pointer = sessionData.load(as: UnsafeMutableRawPointer?.self) else { return nil }
        return Unmanaged<Connection>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Gives back the per-session retain; safe to call twice.
    static func detach(_ sessionData: UnsafeMutableRawPointer?) -> Connection? {
        guard let sessionData, let pointer = sessionData.load(as: UnsafeMutableRawPointer?.self) else { return nil }
        sessionData.storeBytes(of: nil, as: UnsafeMutableRawPointer?.self)
        return Unmanaged<Connection>.fromOpaque(pointer).takeRetainedValue()
    }
}

/// The per-session memory lws allocates (zeroed) for each connection and keeps across the requests
/// of a kept-alive connection and its WebSocket upgrade: word 0 holds the Connection, word 1 what
/// is known of the peer (0 unknown, 1 loopback, 2 elsewhere), so getpeername runs once per socket.
enum SessionMemory {
    static let size = 2 * MemoryLayout<Int>.size

    static func isLoopbackPeer(_ wsi: OpaquePointer) -> Bool {
        guard let memory = lws_wsi_user(wsi) else { return isLoopbackAddress(LWS.peerAddress(wsi)) }
        let slot = memory.advanced(by: MemoryLayout<Int>.size)
        switch slot.load(as: Int.self) {
        case 1: return true
        case 2: return false
        default:
            let loopback = isLoopbackAddress(LWS.peerAddress(wsi))
            slot.storeBytes(of: loopback ? 1 : 2, as: Int.self)
            return loopback
        }
    }
}
