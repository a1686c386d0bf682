/// The last lines of a task's output (`POST /api/tasks/{id}/log`), as the store keeps them:
/// at most `logLines` lines and `logBytes` bytes (config), the newest last. Watchers receive
/// appended lines as `log` events; a task object carries only `logCount`, never the lines, so a
/// snapshot of 10 000 tasks does not grow by their logs; `GET /api/tasks/{id}/log` answers the
/// tail. Every line carries its number in one sequence across all tasks, so `LogTails` can evict
/// the oldest line of all when every tail together passes `maxLogBytes`. Service thread only (the store's).
struct LogTail {
    /// Lines before `head` are gone (dropped from the front without moving the rest each time).
    private var storage: [(number: UInt64, line: String)] = []
    private var head = 0
    private(set) var bytes = 0

    var lines: [String] { storage[head...].map(\.line) }
    var isEmpty: Bool { head == storage.count }
    var oldestNumber: UInt64? { isEmpty ? nil : storage[head].number }

    /// What a line counts against the budgets: its UTF-8 bytes and what holding it costs (the
    /// string's header and allocation, its slot here and in the eviction order), so a flood of
    /// empty lines is bounded too.
    static func cost(_ line: String) -> Int { line.utf8.count + 96 }

    mutating func append(_ line: String, number: UInt64) {
        storage.append((number, line))
        bytes += LogTail.cost(line)
    }

    mutating func dropOldest() {
        guard !isEmpty else { return }
        bytes -= LogTail.cost(storage[head].line)
        storage[head].line = ""
        head += 1
        if head >= 64, head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
    }

    var count: Int { storage.count - head }
}

/// Every task's log tail, and the order their lines came in: a task's tail keeps at most
/// `logLines` lines and `logBytes` bytes (its own oldest go first); all tails together keep at most
/// `maxLogBytes` (the oldest line of all goes first, whichever task it belongs to: a busy task's
/// output pushes out old output of quiet ones before its own). Service thread only (the store's).
struct LogTails {
    private(set) var tails: [String: LogTail] = [:]
    /// Every line held, oldest first: (task, number). A line its tail dropped already, or of a task
    /// removed, is skipped when reached; the order is compacted when those outnumber the rest.
    private var order: [(id: String, number: UInt64)] = []
    private var orderHead = 0
    private var nextNumber: UInt64 = 0
    private(set) var bytes = 0
    private(set) var lineCount = 0

    subscript(id: String) -> LogTail? { tails[id] }

    /// Entries in the eviction order (for tests: it must stay near the lines held).
    var orderCount: Int { order.count - orderHead }

    /// Appends `lines` to the tail of `id` within the budgets; returns the ids of other tasks whose
    /// tails lost lines to `maxLogBytes` (their stored copies change too).
    mutating func append(_ lines: [String], to id: String, maxLines: Int, maxBytes: Int, totalBytes: Int) -> Set<String> {
        var tail = tails[id] ?? LogTail()
        let before = (tail.bytes, tail.count)
        for line in lines {
            tail.append(line, number: nextNumber)
            order.append((id, nextNumber))
            nextNumber += 1
        }
        while tail.count > maxLines || tail.bytes > maxBytes { tail.dropOldest() }
        bytes += tail.bytes - before.0
        lineCount += tail.count - before.1
        tails[id] = tail
        var touched: Set<String> = []
        while bytes > totalBytes, let oldest = popOldest() {
            guard var other = tails[oldest.id], other.oldestNumber == oldest.number else { continue }
            let (bytesBefore, countBefore) = (other.bytes, other.count)
            other.dropOldest()
            bytes -= bytesBefore - other.bytes
            lineCount -= countBefore - other.count
            tails[oldest.id] = other.isEmpty && oldest.id != id ? nil : other
            if oldest.id != id { touched.insert(oldest.id) }
        }
        compactOrder()
        return touched
    }

    mutating func remove(_ id: String) {
        guard let tail = tails.removeValue(forKey: id) else { return }
        bytes -= tail.bytes
        lineCount -= tail.count
        compactOrder()
    }

    private mutating func popOldest() -> (id: String, number: UInt64)? {
        guard orderHead < order.count else { return nil }
        defer { orderHead += 1 }
        return order[orderHead]
    }

    /// Keeps the order's size within twice the lines held (plus a little), so lines a tail dropped
    /// by its own limits do not pile up in it.
    private mutating func compactOrder() {
        let live = order.count - orderHead
        guard live > 2 * lineCount + 1024 else {
            if orderHead >= 4096, orderHead * 2 >= order.count {
                order.removeFirst(orderHead)
                orderHead = 0
            }
            return
        }
        order = order[orderHead...].filter { entry in tails[entry.id].map { tail in tail.holds(entry.number) } ?? false }
        orderHead = 0
    }
}

extension LogTail {
    /// Whether the line numbered `number` is still held (numbers rise along a tail).
    func holds(_ number: UInt64) -> Bool {
        guard let oldest = oldestNumber else { return false }
        return number >= oldest && number <= storage[storage.count - 1].number
    }
}

extension LogTail {
    /// Longer lines are cut here (a log tail is for reading, not for keeping output).
    static let maxLineCharacters = 2000
    /// Lines one request may carry.
    static let maxLinesPerRequest = 10_000

    /// `{"lines": ["…", …]}`, as a body or as the fields of a `log` event.
    static func parseLines(_ fields: JSONValue) throws(APIError) -> [String] {
        let object = try FieldReader(fields, allowed: ["lines"])
        guard let value = object.members["lines"] else {
            throw APIError(.missingField, "a log needs \"lines\", a list of strings (or send text/plain, one line a line)", field: "lines")
        }
        guard case .array(let items) = value else {
            throw APIError(.invalidField, "lines must be a list of strings, not \(value.typeName)", field: "lines")
        }
        var lines: [String] = []
        lines.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            guard case .string(let line) = item else {
                throw APIError(.invalidField, "lines[\(index)] must be a string, not \(item.typeName)", field: "lines")
            }
            // One element is one line: a line break inside it starts another. Split as code points:
            // as Characters, "\r\n" is one and no "\n" would be found in "a\r\nb".
            for part in line.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false) { lines.append(cut(part)) }
        }
        return try checked(lines)
    }

    /// A `text/plain` body is its lines (a last line break ends the last line, it does not start
    /// an empty one); anything else is read as JSON `{"lines": […]}`.
    static func parseBody(_ body: [UInt8], contentType: String?) throws(APIError) -> [String] {
        let type = contentType.map { String($0.prefix { $0 != ";" }.filter { $0 != " " && $0 != "\t" }).lowercased() }
        guard type == "text/plain" else {
            let json =
                body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) ? JSONValue.object([]) : try JSONParser.parseForAPI(body)
            return try parseLines(json)
        }
        var parts = body.split(separator: 0x0A, omittingEmptySubsequences: false)
        if parts.last?.isEmpty == true { parts.removeLast() }
        let lines = parts.map { part -> String in
            var bytes = part
            if bytes.last == 0x0D { bytes = bytes.dropLast() }
            return cut(String(decoding: bytes, as: UTF8.self).unicodeScalars[...])
        }
        return try checked(lines)
    }

    /// Cut to `maxLineCharacters` code points, as every length of the API is counted (and JSON
    /// Schema's maxLength in the OpenAPI document): a line of 2 000 letters with accents is 4 000.
    private static func cut(_ line: Substring.UnicodeScalarView) -> String {
        var text = line
        if text.last == "\r" { text = text.dropLast() }
        var kept = String.UnicodeScalarView()
        if text.count > maxLineCharacters {
            kept.append(contentsOf: text.prefix(maxLineCharacters - 1))
            kept.append("…")
        } else {
            kept.append(contentsOf: text)
        }
        return String(kept)
    }

    private static func checked(_ lines: [String]) throws(APIError) -> [String] {
        guard !lines.isEmpty else { throw APIError(.missingField, "the log has no lines: send at least one", field: "lines") }
        guard lines.count <= maxLinesPerRequest else {
            throw APIError(.bodyTooLarge, "a log request carries at most \(maxLinesPerRequest) lines; send \(lines.count) in several", field: "lines")
        }
        return lines
    }
}

extension TaskStore {
    /// Appends lines to a task's log. A log line is a sign of life: it renews the lease, and a
    /// stalled task runs again (with a `state` event first). The `log` event carries the task and
    /// `from` (how many lines came before these) and `lines` (the ones kept, when more than
    /// `logLines` came at once). Written behind, like progress.
    func appendLog(_ id: String, _ lines: [String], now: Double) throws(APIError) -> Change {
        guard var task = tasks[id] else { throw notFound(id) }
        var events: [OutboundEvent] = []
        task.publishedAt = now
        if task.state == .stalled {
            task.state = .running
            events += commit(task, .state, now: now).events
            task = tasks[id]!
        }
        // The lines the tail keeps of these: as many of the newest as `logLines` and `logBytes` allow.
        var keptBytes = 0
        let newest = lines.suffix(logLines).reversed().prefix { line in
            keptBytes += LogTail.cost(line)
            return keptBytes <= logBytes
        }
        let kept = Array(newest.reversed())
        let touched = logs.append(kept, to: id, maxLines: logLines, maxBytes: logBytes, totalBytes: maxLogBytes)
        let from = task.logCount + lines.count - kept.count
        task.logCount += lines.count
        persistence.saveLog(id: id, lines: logs[id]?.lines ?? [])
        for other in touched.sorted() { persistence.saveLog(id: other, lines: logs[other]?.lines ?? []) }
        let change = commit(task, .log, now: now, urgent: false) { writer in
            writer.key("from")
            writer.number(from)
            writer.key("lines")
            writer.beginArray()
            for line in kept { writer.string(line) }
            writer.endArray()
        }
        return Change(task: change.task, events: events + change.events)
    }

    /// The lines kept of a task's log, and how many it has received in all; nil without the task.
    public func log(of id: String) -> (lines: [String], count: Int)? {
        guard let task = tasks[id] else { return nil }
        return (logs[id]?.lines ?? [], task.logCount)
    }

    /// Bytes held by every task's log (`LogTail.cost` of each line), within `maxLogBytes`.
    public var logBytesHeld: Int { logs.bytes }

    /// Logs kept by storage, back at start: the least recently updated task's first, so its lines
    /// are the oldest and the first to go if they no longer fit.
    func restoreLogs(_ saved: [String: [String]], within budgets: (lines: Int, bytes: Int, total: Int)) {
        let order = saved.keys.filter { tasks[$0] != nil }.sorted { (tasks[$0]!.updatedAt, $0) < (tasks[$1]!.updatedAt, $1) }
        for id in order { _ = logs.append(saved[id]!, to: id, maxLines: budgets.lines, maxBytes: budgets.bytes, totalBytes: budgets.total) }
    }

    /// The budgets from config: the tails held are put through them again, oldest lines first.
    public func setLogBudgets(lines: Int, bytes: Int, total: Int) {
        (logLines, logBytes, maxLogBytes) = (lines, bytes, total)
        let held = logs.tails.sorted { ($0.value.oldestNumber ?? 0) < ($1.value.oldestNumber ?? 0) }
        guard !held.isEmpty else { return }
        logs = LogTails()
        for (id, tail) in held {
            let before = tail.count
            let touched = logs.append(tail.lines, to: id, maxLines: lines, maxBytes: bytes, totalBytes: total)
            if (logs[id]?.count ?? 0) != before || !touched.isEmpty {
                for changed in touched.union([id]) { persistence.saveLog(id: changed, lines: logs[changed]?.lines ?? []) }
            }
        }
    }

    /// `GET /api/tasks/{id}/log`: `{"id", "logCount", "from", "lines"}`, `from` being the number of
    /// the first line given (lines before it were not kept).
    public func encodeLog(of id: String) throws(APIError) -> [UInt8] {
        guard let (lines, count) = log(of: id) else { throw APIError(.notFound, "no task '\(id)'", field: "id") }
        var writer = JSONWriter(capacity: 64 + lines.reduce(0) { $0 + $1.utf8.count + 4 })
        writer.beginObject()
        writer.key("id")
        writer.string(id)
        writer.key("logCount")
        writer.number(count)
        writer.key("from")
        writer.number(count - lines.count)
        writer.key("lines")
        writer.beginArray()
        for line in lines { writer.string(line) }
        writer.endArray()
        writer.endObject()
        return writer.bytes
    }
}
