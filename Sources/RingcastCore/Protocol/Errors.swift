/// What a client did wrong, as the protocol reports it: `{"error": CODE, "message": TEXT, "field": NAME-or-null}`.
public struct APIError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case invalidJSON = "invalid_json"
        case invalidRequest = "invalid_request"
        case invalidField = "invalid_field"
        case unknownField = "unknown_field"
        case missingField = "missing_field"
        case invalidID = "invalid_id"
        case invalidPattern = "invalid_pattern"
        case invalidEvent = "invalid_event"
        case notFound = "not_found"
        case notATimer = "not_a_timer"
        case conflict = "conflict"
        case methodNotAllowed = "method_not_allowed"
        case bodyTooLarge = "body_too_large"
        case unauthorized = "unauthorized"
        case forbidden = "forbidden"
        case misdirected = "misdirected_request"
        case tooManyTasks = "too_many_tasks"
        case rateLimited = "rate_limited"
        case storageFailed = "storage_failed"
        case lengthRequired = "length_required"
        case notImplemented = "not_implemented"
        case uriTooLong = "uri_too_long"
        case headerTooLarge = "header_too_large"

        public var status: Int {
            switch self {
            case .invalidJSON, .invalidRequest, .invalidID, .invalidPattern, .invalidEvent: return 400
            case .invalidField, .unknownField, .missingField: return 422
            case .notFound: return 404
            case .notATimer, .conflict: return 409
            case .methodNotAllowed: return 405
            case .bodyTooLarge: return 413
            case .unauthorized: return 401
            case .forbidden: return 403
            case .misdirected: return 421
            case .tooManyTasks: return 409
            case .rateLimited: return 429
            case .storageFailed: return 503
            case .lengthRequired: return 411
            case .notImplemented: return 501
            case .uriTooLong: return 414
            case .headerTooLarge: return 431
            }
        }
    }

    public let code: Code
    public let message: String
    public let field: String?

    public init(_ code: Code, _ message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }

    public var status: Int { code.status }

    /// The answer to a change that storage could not keep.
    public static let storageFailed = APIError(
        .storageFailed, "the change was applied but storage could not keep it (see the server's log); send it again")
    /// A request whose line the transport could not read whole: a CR, LF or NUL in its path or query.
    public static let cutRequestLine = APIError(
        .invalidRequest,
        "the request line was cut short: a percent-encoded CR, LF or NUL (%0D, %0A, %00) is not allowed in a path or query; remove it")
    public var description: String { "\(code.rawValue): \(message)" }

    /// The same error, its field prefixed by where it sat in a batch (`events[2].progress`).
    public func within(_ prefix: String) -> APIError {
        APIError(code, "\(prefix): \(message)", field: field.map { "\(prefix).\($0)" } ?? prefix)
    }

    public func writeFields(into writer: inout JSONWriter) {
        writer.key("error")
        writer.string(code.rawValue)
        writer.key("message")
        writer.string(message)
        writer.key("field")
        if let field { writer.string(field) } else { writer.null() }
    }

    public var encodedBody: [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writeFields(into: &writer)
        writer.endObject()
        return writer.bytes
    }

    /// The `error` event sent on a WebSocket for a bad client message; `id` names the task the
    /// refused event was for, when it named one.
    public func encodedEvent(id: String? = nil) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("type")
        writer.string("error")
        if let id {
            writer.key("id")
            writer.string(id)
        }
        writeFields(into: &writer)
        writer.endObject()
        return writer.bytes
    }
}
