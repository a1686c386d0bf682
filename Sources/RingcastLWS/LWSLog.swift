import CLibWebSockets
import RingcastCore
import RingcastPlatform

/// libwebsockets' own log lines, routed through our logger. lws logs process-wide, so there is one
/// route: the last logger given wins.
package enum LWSLog {
    private static let destination = Locked<Logger?>(nil)

    /// Routes lws's lines to `logger` unless something routed them already: a client context in a
    /// process that also serves must not take the server's log over.
    package static func routeUnlessRouted(to logger: Logger) {
        guard destination.withLock({ $0 == nil }) else { return }
        route(to: logger)
    }

    /// lws's errors and warnings go to `logger` at those levels; its notices only at debug.
    package static func route(to logger: Logger) {
        destination.withLock { $0 = logger }
        var mask = LLL_ERR | LLL_WARN
        if logger.level <= .debug { mask |= LLL_NOTICE }
        lws_set_log_level(Int32(mask)) { level, line in
            guard let line else { return }
            LWSLog.emit(level: level, line: String(cString: line))
        }
    }

    fileprivate static func emit(level: Int32, line: String) {
        guard let logger = destination.withLock({ $0 }) else { return }
        let message = "lws: " + stripped(line)
        switch level {
        case Int32(LLL_ERR): logger.error(message)
        case Int32(LLL_WARN): logger.warning(message)
        default: logger.debug(message)
        }
    }

    /// `[2026/12/01 08:50:31:1234] E: message\n` → `message`: our logger adds its own level.
    static func stripped(_ line: String) -> String {
        var text = Substring(line)
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") { text = text[text.index(after: close)...] }
        text = text.drop { $0 == " " }
        if text.count > 2, text.dropFirst().hasPrefix(": ") { text = text.dropFirst(3) }
        while text.last == "\n" || text.last == " " { text = text.dropLast() }
        return String(text)
    }
}
