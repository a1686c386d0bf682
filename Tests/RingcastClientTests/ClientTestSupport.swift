import Foundation
import RingcastClient
import RingcastTestSupport

// What this target's tests share.

/// Reconnects quickly, so tests do not wait for the production back-off.
let quickReconnects: RingcastClient.Options = {
    var options = RingcastClient.Options()
    options.reconnectBase = 0.05
    options.reconnectCap = 0.3
    return options
}()

/// What an AsyncStream of the client's yields (one consumer), collected so tests can wait on it.
/// @unchecked Sendable: the items live in an Inbox; `task` is set once, in init.
final class Collector<Element: Sendable>: @unchecked Sendable {
    private let inbox = Inbox<Element>()
    private var task: Task<Void, Never>?

    init(_ stream: AsyncStream<Element>) {
        task = Task { [inbox] in
            for await item in stream { inbox.append(contentsOf: [item]) }
            inbox.close()
        }
    }

    var items: [Element] { inbox.all }
    var isFinished: Bool { inbox.isClosed }

    @discardableResult
    func wait(timeout: Double = 5, file: StaticString = #filePath, line: UInt = #line, until predicate: ([Element]) -> Bool) -> [Element] {
        inbox.wait(timeout: timeout, file: file, line: line, until: predicate)
    }

    func waitForFinish(timeout: Double = 5) -> Bool { inbox.waitForClose(timeout: timeout) }
}
