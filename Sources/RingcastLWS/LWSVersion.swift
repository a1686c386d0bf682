import CLibWebSockets

/// The libwebsockets this process runs, for `ringcast version`.
package enum LWSLibrary {
    /// lws's own description, e.g. `4.1.6-v4.1.6`.
    package static var version: String { String(cString: lws_get_library_version()) }
}
