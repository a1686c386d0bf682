/// Joins the pieces lws hands over (HTTP body chunks, WebSocket fragments) into one message, and
/// stops collecting once the message passes `limit`: a client cannot make us buffer more than that.
package struct MessageAssembler {
    package let limit: Int
    package private(set) var bytes: [UInt8] = []
    /// The message passed `limit`; what came of it was dropped.
    package private(set) var isTooLarge = false

    package init(limit: Int) { self.limit = limit }

    package mutating func append(_ piece: UnsafeRawBufferPointer) {
        guard !isTooLarge else { return }
        guard bytes.count + piece.count <= limit else {
            isTooLarge = true
            bytes = []
            return
        }
        bytes.append(contentsOf: piece)
    }

    /// Marks the message too large before any of it arrives (a Content-Length over the limit).
    package mutating func refuse() {
        isTooLarge = true
        bytes = []
    }

    /// The message so far, and a fresh start for the next one.
    package mutating func take() -> (bytes: [UInt8], isTooLarge: Bool) {
        defer {
            bytes = []
            isTooLarge = false
        }
        return (bytes, isTooLarge)
    }
}
