import CHiredis
import Glibc

/// A Redis address from config: `redis://HOST[:PORT][/DB]`.
package struct RedisURL: Equatable, Sendable, CustomStringConvertible {
    package var host: String
    package var port: Int
    package var database: Int

    package init?(_ text: String) {
        guard text.hasPrefix("redis://") else { return nil }
        var rest = Substring(text.dropFirst("redis://".count))
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let path = rest[rest.index(after: slash)...]
            guard path.isEmpty || Int(path) != nil else { return nil }
            database = Int(path) ?? 0
            rest = rest[..<slash]
        }
        var host = String(rest)
        var port = 6379
        if let colon = rest.lastIndex(of: ":"), !rest.hasPrefix("[") {
            guard let number = Int(rest[rest.index(after: colon)...]), (1...65535).contains(number) else { return nil }
            port = number
            host = String(rest[..<colon])
        }
        guard !host.isEmpty, (0...15).contains(database) else { return nil }
        self.host = host
        self.port = port
        self.database = database
    }

    package var description: String { "redis://\(host):\(port)" + (database == 0 ? "" : "/\(database)") }
}

/// A reply, copied out of hiredis's memory.
package enum RedisValue: Equatable, Sendable {
    case string([UInt8])
    case integer(Int64)
    case array([RedisValue])
    case null
    case status(String)
    case error(String)

    package var text: String? {
        switch self {
        case .string(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .status(let text): return text
        default: return nil
        }
    }

    package var integer: Int64? {
        switch self {
        case .integer(let value): return value
        case .string(let bytes): return Int64(String(decoding: bytes, as: UTF8.self))
        default: return nil
        }
    }

    package var array: [RedisValue]? {
        if case .array(let items) = self { return items }
        return nil
    }
}

/// What went wrong talking to Redis: the connection (gone, refused, timed out) or a command's error reply.
package enum RedisError: Error, CustomStringConvertible, Sendable {
    case connection(String)
    case reply(String)

    package var description: String {
        switch self {
        case .connection(let text): return text
        case .reply(let text): return "Redis answered: \(text)"
        }
    }
}

/// One blocking connection to Redis through hiredis (Debian's libhiredis). One thread at a time:
/// each of the engine's threads has its own. A connection that failed stays failed; make a new one.
package final class RedisConnection {
    private let context: UnsafeMutablePointer<redisContext>
    package let url: RedisURL

    /// Connects (within `timeoutSeconds`), then selects the database.
    package init(_ url: RedisURL, timeoutSeconds: Double = 2) throws(RedisError) {
        self.url = url
        let timeout = timeval(tv_sec: Int(timeoutSeconds), tv_usec: Int(timeoutSeconds.truncatingRemainder(dividingBy: 1) * 1_000_000))
        guard let context = redisConnectWithTimeout(url.host, Int32(url.port), timeout) else {
            throw RedisError.connection("cannot connect to \(url): out of memory")
        }
        if context.pointee.err != 0 {
            let reason = RedisConnection.errorText(context)
            redisFree(context)
            throw RedisError.connection("cannot connect to \(url): \(reason)")
        }
        self.context = context
        _ = redisEnableKeepAlive(context)
        setTimeout(seconds: timeoutSeconds)
        if url.database != 0 { _ = try command(["SELECT", String(url.database)]) }
    }

    deinit { redisFree(context) }

    /// How long a reply may take (0: wait for ever, as a blocking read wants).
    package func setTimeout(seconds: Double) {
        let timeout = timeval(tv_sec: Int(seconds), tv_usec: Int(seconds.truncatingRemainder(dividingBy: 1) * 1_000_000))
        _ = redisSetTimeout(context, timeout)
    }

    /// Sends one command and waits for its reply; an error reply is returned, not thrown.
    package func command(_ arguments: [String]) throws(RedisError) -> RedisValue {
        try command(arguments.map { Array($0.utf8) })
    }

    package func command(_ arguments: [[UInt8]]) throws(RedisError) -> RedisValue {
        try pipeline([arguments])[0]
    }

    /// Sends every command, then reads every reply, in order: one round trip for all of them.
    package func pipeline(_ commands: [[[UInt8]]]) throws(RedisError) -> [RedisValue] {
        for arguments in commands {
            let status = withArguments(arguments) { count, values, lengths in redisAppendCommandArgv(context, count, values, lengths) }
            guard status == REDIS_OK else { throw RedisError.connection("writing to \(url) failed: \(RedisConnection.errorText(context))") }
        }
        var replies: [RedisValue] = []
        replies.reserveCapacity(commands.count)
        for _ in commands {
            var raw: UnsafeMutableRawPointer?
            guard redisGetReply(context, &raw) == REDIS_OK, let raw else {
                throw RedisError.connection("reading from \(url) failed: \(RedisConnection.errorText(context))")
            }
            let reply = raw.assumingMemoryBound(to: redisReply.self)
            replies.append(RedisConnection.value(of: reply))
            freeReplyObject(raw)
        }
        return replies
    }

    private func withArguments<T>(_ arguments: [[UInt8]], _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> T) -> T
    {
        let lengths = arguments.map(\.count)
        // hiredis copies the arguments into its output buffer before returning.
        let copies = arguments.map { bytes -> UnsafeMutablePointer<CChar> in
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(1, bytes.count))
            bytes.withUnsafeBufferPointer { source in
                source.withMemoryRebound(to: CChar.self) { copy.update(from: $0.baseAddress!, count: bytes.count) }
            }
            return copy
        }
        defer { copies.forEach { $0.deallocate() } }
        var pointers: [UnsafePointer<CChar>?] = copies.map { UnsafePointer($0) }
        return pointers.withUnsafeMutableBufferPointer { values in
            lengths.withUnsafeBufferPointer { body(Int32(arguments.count), values.baseAddress!, $0.baseAddress!) }
        }
    }

    private static func value(of reply: UnsafeMutablePointer<redisReply>) -> RedisValue {
        let node = reply.pointee
        switch node.type {
        case REDIS_REPLY_STRING:
            return .string(node.str.map { Array(UnsafeRawBufferPointer(start: $0, count: node.len)) } ?? [])
        case REDIS_REPLY_INTEGER:
            return .integer(node.integer)
        case REDIS_REPLY_ARRAY:
            return .array((0..<node.elements).compactMap { node.element[$0].map(value(of:)) })
        case REDIS_REPLY_STATUS:
            return .status(node.str.map { String(cString: $0) } ?? "")
        case REDIS_REPLY_ERROR:
            return .error(node.str.map { String(cString: $0) } ?? "error")
        default:
            return .null
        }
    }

    private static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: context.pointee.errstr) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}
