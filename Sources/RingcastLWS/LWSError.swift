/// A libwebsockets (or shim) call that failed: which call, and what a user can do about it.
package struct LWSError: Error, CustomStringConvertible, Sendable {
    package let call: String
    package let detail: String

    package init(_ call: String, _ detail: String) {
        self.call = call
        self.detail = detail
    }

    package var description: String { "\(call) failed: \(detail)" }
}

/// The one place a C call's result is checked: a negative status (lws's convention) throws an error
/// naming the call.
@discardableResult
package func checked(_ status: Int32, _ call: String, _ detail: @autoclosure () -> String = "it returned an error") throws(LWSError) -> Int32 {
    guard status >= 0 else { throw LWSError(call, detail()) }
    return status
}

/// A C call that returns NULL on failure.
package func checked<T>(_ value: T?, _ call: String, _ detail: @autoclosure () -> String = "it returned NULL") throws(LWSError) -> T {
    guard let value else { throw LWSError(call, detail()) }
    return value
}
