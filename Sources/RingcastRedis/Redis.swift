import CHiredis
import Glibc
import RingcastPlatform

/// A Redis address from config: `redis://HOST[:PORT][/DB]`. HOST is a name or an IPv4 address, or
/// an IPv6 address in brackets (`redis://[::1]:6379`); PORT is 6379 unless given; DB is 0 to 15.
package struct RedisURL: Equatable, Sendable, CustomStringConvertible {
    package static let defaultPort = 6379
    /// Redis's default number of databases: DB is below it.
    package static let databases = 16

    /// As hiredis takes it: an IPv6 address without its brackets.
    package var host: String
    package var port: Int
    package var database: Int

    /// Reads `text`, or throws what is wrong with it.
    package init(_ text: String) throws(RedisURLError) {
        func refuse(_ reason: String) -> RedisURLError { RedisURLError(text: text, reason: reason) }
        let scheme = "redis://"
        guard text.hasPrefix(scheme) else {
            if text.hasPrefix("rediss://") { throw refuse("TLS to Redis (rediss://) is not supported") }
            throw refuse("it does not begin with \(scheme)")
        }
        var rest = Substring(text.dropFirst(scheme.count))
        if let mark = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) {
            throw refuse("it has a query or fragment (\(rest[mark...])), which Ringcast does not read")
        }
        if rest.contains("@") { throw refuse("a user or password (…@HOST) is not supported") }

        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let path = rest[rest.index(after: slash)...]
            if !path.isEmpty {
                guard let number = RedisURL.decimal(path), number < RedisURL.databases else {
                    throw refuse("the database '\(path)' is not a number from 0 to \(RedisURL.databases - 1)")
                }
                database = number
            }
            rest = rest[..<slash]
        }

        let hostPart: Substring
        var portPart: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw refuse("the IPv6 address has no closing ]") }
            hostPart = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw refuse("'\(after)' follows the IPv6 address; write [ADDRESS]:PORT") }
                portPart = after.dropFirst()
            }
            guard hostPart.contains(":"), hostPart.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw refuse("'\(hostPart)' in brackets is not an IPv6 address")
            }
        } else {
            let colons = rest.filter { $0 == ":" }.count
            guard colons <= 1 else { throw refuse("an IPv6 address goes in brackets, like redis://[::1]:6379") }
            if let colon = rest.firstIndex(of: ":") {
                hostPart = rest[..<colon]
                portPart = rest[rest.index(after: colon)...]
            } else {
                hostPart = rest
            }
            if let odd = hostPart.first(where: { !($0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_")) }) {
                throw refuse("the host '\(hostPart)' has \(odd.debugDescription), which no host name has")
            }
        }
        guard !hostPart.isEmpty else { throw refuse("it names no host") }

        var port = RedisURL.defaultPort
        if let portPart {
            guard let number = RedisURL.decimal(portPart), (1...65535).contains(number) else {
                throw refuse("the port '\(portPart)' is not a number from 1 to 65535")
            }
            port = number
        }
        self.host = String(hostPart)
        self.port = port
        self.database = database
    }

    /// Plain decimal digits only (no sign, no spaces), short enough not to overflow.
    private static func decimal(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.count <= 5, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(text)
    }

    package var description: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return "redis://\(host):\(port)" + (database == 0 ? "" : "/\(database)")
    }
}

/// Why a text is not a Redis URL, said so that the reader can write one.
package struct RedisURLError: Error, Equatable, CustomStringConvertible, Sendable {
    package let text: String
    package let reason: String
    /// What to write instead.
    package var example = "redis://HOST[:PORT][/DB], like redis://127.0.0.1:6379"

    package init(text: String, reason: String, example: String = "redis://HOST[:PORT][/DB], like redis://127.0.0.1:6379") {
        self.text = text
        self.reason = reason
        self.example = example
    }

    package var description: String {
        "'\(text)' is not a Redis URL: \(reason); write \(example)"
    }
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

    /// A hiredis call that failed while doing something: says what, then the call's reason and name.
    static func failed(_ error: CCallError, doing: String) -> RedisError { .connection("\(doing): \(error.detail) (\(error.call))") }

    package var description: String {
        switch self {
        case .connection(let text): return text
        case .reply(let text): return "Redis answered: \(text)"
        }
    }
}

/// One blocking connection to Redis through hiredis (Debian's libhiredis). One thread at a time:
/// each of the engine's threads has its own. A connection that failed stays failed; make a new one.
/// hiredis writes without MSG_NOSIGNAL: the process must ignore SIGPIPE (`ringcast` does), or a
/// write to a Redis that went away ends it.
package final class RedisConnection {
    private let context: UnsafeMutablePointer<redisContext>
    package let url: RedisURL
    /// What `setTimeout` last set, to say so when a reply does not come within it.
    private var replyTimeout: Double

    /// Connects (within `timeoutSeconds`), then selects the database.
    package init(_ url: RedisURL, timeoutSeconds: Double = 2) throws(RedisError) {
        self.url = url
        replyTimeout = timeoutSeconds
        let timeout = timeval(tv_sec: Int(timeoutSeconds), tv_usec: Int(timeoutSeconds.truncatingRemainder(dividingBy: 1) * 1_000_000))
        let context: UnsafeMutablePointer<redisContext>
        do throws(CCallError) {
            context = try checkedNotNil(redisConnectWithTimeout(url.host, Int32(url.port), timeout), "redisConnectWithTimeout") { _, _ in
                "out of memory"
            }
        } catch {
            throw RedisError.failed(error, doing: "cannot connect to \(url)")
        }
        self.context = context
        // From here on, a throw frees `context` through `deinit`.
        try hiredis(context.pointee.err == 0 ? REDIS_OK : REDIS_ERR, "redisConnectWithTimeout", doing: "cannot connect to \(url)")
        try hiredis(redisEnableKeepAlive(context), "redisEnableKeepAlive", doing: "cannot turn on TCP keep-alive to \(url)")
        try setTimeout(seconds: timeoutSeconds)
        if url.database != 0, case .error(let reason) = try command(["SELECT", String(url.database)]) {
            throw RedisError.connection("cannot select database \(url.database) on \(url): \(reason)")
        }
    }

    deinit { redisFree(context) }

    /// How long a reply may take (0: wait for ever, as a blocking read wants).
    package func setTimeout(seconds: Double) throws(RedisError) {
        let timeout = timeval(tv_sec: Int(seconds), tv_usec: Int(seconds.truncatingRemainder(dividingBy: 1) * 1_000_000))
        try hiredis(redisSetTimeout(context, timeout), "redisSetTimeout", doing: "cannot set a \(seconds) s timeout on \(url)")
        replyTimeout = seconds
    }

    /// A hiredis call's status (REDIS_OK or REDIS_ERR, with the reason in the context), checked.
    private func hiredis(_ status: Int32, _ call: String, doing: @autoclosure () -> String) throws(RedisError) {
        do throws(CCallError) {
            try checked(status, call, failsWhen: { $0 != REDIS_OK }, detail: { _, _ in RedisConnection.errorText(context) })
        } catch {
            throw RedisError.failed(error, doing: doing())
        }
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
            try hiredis(status, "redisAppendCommandArgv", doing: "writing to \(url) failed")
        }
        var replies: [RedisValue] = []
        replies.reserveCapacity(commands.count)
        for _ in commands {
            var raw: UnsafeMutableRawPointer?
            let status = redisGetReply(context, &raw)
            // hiredis reports a blocking read that timed out as the socket's EAGAIN.
            if status != REDIS_OK, context.pointee.err == REDIS_ERR_IO, errno == EAGAIN, replyTimeout > 0 {
                throw RedisError.connection("\(url) did not answer within \(replyTimeout) s")
            }
            try hiredis(status, "redisGetReply", doing: "reading from \(url) failed")
            guard let raw else { throw RedisError.connection("reading from \(url) failed: hiredis gave no reply (redisGetReply)") }
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
