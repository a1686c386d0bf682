import Glibc

/// A C function that failed: which call, what it returned, errno right after it, and what that
/// means in words a user can act on. Every C library the product calls (libwebsockets, the
/// operating system's sockets, SQLite, hiredis) reports its failures as this, through `checked`.
package struct CCallError: Error, CustomStringConvertible, Sendable {
    package let call: String
    /// What the call returned (-1 for a NULL pointer).
    package let status: Int32
    /// errno as it was right after the call; 0 for a failure found without a call.
    package let errno: Int32
    package let detail: String

    package init(_ call: String, _ detail: String, status: Int32 = -1, errno: Int32 = 0) {
        self.call = call
        self.detail = detail
        self.status = status
        self.errno = errno
    }

    package var description: String { "\(call) failed: \(detail)" }

    /// errno's text and number, as the operating system's calls report a failure.
    package static func errnoText(_ code: Int32) -> String { "\(String(cString: strerror(code))) (errno \(code))" }
}

/// The one place a C call's result is checked: when `failed(status)` holds (by default, a negative
/// status: the convention of the operating system's calls and of libwebsockets), throws a
/// `CCallError` naming the call, with errno read at once, before anything else can change it, and
/// the `detail` made from the status and errno (by default, errno's text). Returns the status.
@discardableResult
package func checked(
    _ status: Int32, _ call: @autoclosure () -> String, failsWhen failed: (Int32) -> Bool = { $0 < 0 },
    detail: (_ status: Int32, _ errno: Int32) -> String = { _, code in CCallError.errnoText(code) }
) throws(CCallError) -> Int32 {
    guard failed(status) else { return status }
    let code = Glibc.errno
    throw CCallError(call(), detail(status, code), status: status, errno: code)
}

/// The same for a C call that returns NULL when it fails (its status is then -1). Named apart so
/// that a status is never taken for a pointer that is there.
package func checkedNotNil<T>(
    _ value: T?, _ call: @autoclosure () -> String,
    detail: (_ status: Int32, _ errno: Int32) -> String = { _, code in CCallError.errnoText(code) }
) throws(CCallError) -> T {
    guard let value else {
        let code = Glibc.errno
        throw CCallError(call(), detail(-1, code), errno: code)
    }
    return value
}

/// `setsockopt` with an `Int32` or a `timeval`, checked: the option's name is in the error.
package func setSocketOption<Value>(_ descriptor: Int32, _ level: Int32, _ option: Int32, _ name: String, _ value: Value) throws(CCallError) {
    var value = value
    try checked(setsockopt(descriptor, level, option, &value, socklen_t(MemoryLayout<Value>.size)), "setsockopt(\(name))")
}
