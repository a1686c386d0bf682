/// One entry of a cluster's shared log: what a node was asked to do, already checked and
/// authorized, with the time it was asked. Every node applies the same entries in the same order
/// to the same state with the same `now`, so every node holds the same tasks and sequence.
public struct LogEntry: Sendable {
    public enum Kind: Sendable {
        /// An HTTP request's commands, the shape of its answer, and whom they are for.
        case request([Command], RequestPlan.Answer, Principal)
        /// A WebSocket message's commands (the frames it earned at once stayed with its node).
        case message(MessagePlan)
        /// Deadlines due by `now` (ticks, hides, leases, retention), claimed once for the cluster.
        case due
    }

    /// Which node asked, and its own number for the request, so that node can answer it.
    public var node: String
    public var token: UInt64
    public var worker: Int
    /// Unix ms on the asking node's clock.
    public var now: Double
    public var kind: Kind

    public init(node: String, token: UInt64, worker: Int, now: Double, kind: Kind) {
        self.node = node
        self.token = token
        self.worker = worker
        self.now = now
        self.kind = kind
    }

    public func encoded() -> [UInt8] {
        var writer = JSONWriter(capacity: 256)
        writer.beginObject()
        writer.key("n")
        writer.string(node)
        writer.key("k")
        writer.number(Double(token))
        writer.key("w")
        writer.number(worker)
        writer.key("t")
        writer.number(now)
        switch kind {
        case .request(let commands, let answer, let principal):
            writePrincipal(principal, into: &writer)
            writer.key("x")
            writer.string(answer.logName)
            writer.key("c")
            writer.beginArray()
            for command in commands { writer.value(command.encodedEvent) }
            writer.endArray()
        case .message(let plan):
            writePrincipal(plan.principal, into: &writer)
            writer.key("x")
            writer.string("message")
            writer.key("b")
            writer.bool(plan.isBatch)
            if plan.socketKey != 0 {
                writer.key("s")
                writer.number(Double(plan.socketKey))
            }
            if let flush = plan.flush {
                writer.key("f")
                if let ref = flush { writer.string(ref) } else { writer.null() }
            }
            writer.key("c")
            writer.beginArray()
            for (_, command) in plan.commands { writer.value(command.encodedEvent) }
            writer.endArray()
            writer.key("i")
            writer.beginArray()
            for (index, _) in plan.commands { writer.number(index) }
            writer.endArray()
        case .due:
            writer.key("x")
            writer.string("due")
        }
        writer.endObject()
        return writer.bytes
    }

    /// The entry `encoded()` wrote; nil when the bytes are not one (a newer node's entry this node
    /// cannot read is skipped by the caller, who logs it).
    public init?(decoding bytes: [UInt8]) {
        // Numbers are converted only when exact (`init?(exactly:)`): another node's entry is
        // outside input, and a 1e300 where a count belongs must skip the entry, not trap.
        guard let json = try? JSONParser.parse(bytes), case .string(let node)? = json["n"],
            let token = json.number("k").flatMap(UInt64.init(exactly:)),
            let worker = json.number("w").flatMap(Int.init(exactly:)), let now = json.number("t"), now.isFinite, case .string(let kind)? = json["x"]
        else { return nil }
        func commands() -> [Command]? {
            guard case .array(let events)? = json["c"] else { return nil }
            var parsed: [Command] = []
            for event in events {
                guard let command = try? Command.parse(logged: event) else { return nil }
                parsed.append(command)
            }
            return parsed
        }
        switch kind {
        case "task", "receipt", "batch", "control", "controlReceipt":
            guard let commands = commands(), let answer = RequestPlan.Answer(logName: kind) else { return nil }
            self.kind = .request(commands, answer, LogEntry.principal(in: json))
        case "message":
            guard let commands = commands(), case .array(let indices)? = json["i"], indices.count == commands.count else { return nil }
            var plan = MessagePlan()
            plan.principal = LogEntry.principal(in: json)
            plan.isBatch = json["b"] == .bool(true)
            guard let socketKey = json.number("s").map(UInt64.init(exactly:)) ?? 0 else { return nil }
            plan.socketKey = socketKey
            switch json["f"] {
            case .string(let ref)?: plan.flush = .some(ref)
            case .null?: plan.flush = .some(nil)
            default: break
            }
            for (index, command) in zip(indices, commands) {
                guard case .number(let position) = index, let position = Int(exactly: position) else { return nil }
                plan.commands.append((position, command))
            }
            self.kind = .message(plan)
        case "due":
            self.kind = .due
        default:
            return nil
        }
        self.node = node
        self.token = token
        self.worker = worker
        self.now = now
    }
}

extension LogEntry {
    /// `"a"`: the principal's name, `"q"`: its share of tasks; left out for the server's own.
    fileprivate func writePrincipal(_ principal: Principal, into writer: inout JSONWriter) {
        guard principal != .server else { return }
        writer.key("a")
        writer.string(principal.name)
        if let share = principal.maxTasks {
            writer.key("q")
            writer.number(share)
        }
    }

    fileprivate static func principal(in json: JSONValue) -> Principal {
        guard case .string(let name)? = json["a"] else { return .server }
        return Principal(name: name, maxTasks: json.number("q").flatMap(Int.init(exactly:)))
    }
}

extension RequestPlan.Answer {
    /// How the log names the shape of an answer.
    var logName: String {
        switch self {
        case .task: "task"
        case .receipt: "receipt"
        case .batch: "batch"
        case .control: "control"
        case .controlReceipt: "controlReceipt"
        }
    }

    init?(logName: String) {
        switch logName {
        case "task": self = .task
        case "receipt": self = .receipt
        case "batch": self = .batch
        case "control": self = .control
        case "controlReceipt": self = .controlReceipt
        default: return nil
        }
    }
}
