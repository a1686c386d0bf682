import RingcastCore

/// *(v2)* A watcher's request, carried by the server to the socket that published the task:
/// `{"type":"control","id":"etl.copy","action":"cancel","seq":812}`. The publisher answers by
/// publishing a state (`cancelled`, `paused`, `running`). Minimal on purpose: what `ringcast run`
/// needs to hear them; the Swift-client work builds the rest of the API around it.
public struct ControlRequest: Sendable, Equatable {
    public enum Action: String, Sendable {
        case cancel, pause, resume
    }

    /// The task it is about.
    public let id: String
    public let action: Action
    /// The seq of the change that marked the request on the task.
    public let seq: UInt64

    public init(id: String, action: Action, seq: UInt64) {
        (self.id, self.action, self.seq) = (id, action, seq)
    }

    /// The request a `control` event carries, or nil for any other event.
    init?(event: JSONValue) {
        guard event["type"] == .string("control"), case let .string(id)? = event["id"],
              case let .string(name)? = event["action"], let action = Action(rawValue: name) else { return nil }
        var seq: UInt64 = 0
        if case let .number(number)? = event["seq"], number >= 0 { seq = UInt64(number) }
        self.init(id: id, action: action, seq: seq)
    }
}
