/// The last lines of a task's output (`POST /api/tasks/{id}/log`), as the store keeps them:
/// at most `logLines` (config), the newest last. Watchers receive appended lines as `log` events;
/// a task object carries only `logCount`, never the lines, so a snapshot of 10 000 tasks does not
/// grow by their logs (100 lines of 160 bytes would be 16 KB a task); `GET /api/tasks/{id}/log`
/// answers the tail. Service thread only (the store's).
struct LogTail {
    private(set) var lines: [String]

    mutating func append(_ new: [String], keep: Int) {
        lines += new
        if lines.count > keep { lines.removeFirst(lines.count - keep) }
    }

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
        let kept = Array(lines.suffix(logLines))
        var tail = logs[id] ?? LogTail(lines: [])
        tail.append(kept, keep: logLines)
        logs[id] = tail
        let from = task.logCount + lines.count - kept.count
        task.logCount += lines.count
        persistence.saveLog(id: id, lines: tail.lines)
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
