/// A task as an SVG badge for a README: `GET /badge/{id}.svg` answers a small,
/// static SVG — the label (the task's title, or `?label=`) on grey, then the percentage of a
/// running task over a bar of it, or its state word, in the state's colour. An unknown task gets a
/// grey "unknown" badge, not an error page, so an image never breaks. No script, no style
/// attribute (the server's Content-Security-Policy holds for it too); `Cache-Control: max-age=10`
/// and an ETag, so an image proxy such as GitHub's shows it fresh and asks cheaply. Read-only.
public enum Badge {
    public static let cacheControl = "max-age=10"
    public static let contentType = "image/svg+xml"
    static let maxLabel = 60

    /// What the badge says and in which colours.
    struct Look: Equatable {
        var label: String
        var message: String
        var color: String
        /// The fraction shown as a bar under the message (a running determinate task).
        var fill: Double?
        /// The bar's unfilled part.
        var track: String?
    }

    static let labelColor = "#555"
    static let colors: [TaskState: String] = [
        .running: "#1f78c1", .paused: "#9a7400", .done: "#2a8a3e", .failed: "#c9362c", .cancelled: "#6e6e6e", .stalled: "#c25e00",
    ]
    static let unknownColor = "#8c8c8c"
    static let runningTrack = "#234a6b"

    static func look(for task: TaskRecord?, id: String, label: String?) -> Look {
        guard let task else {
            return Look(label: label ?? (TaskID.isValid(id) ? id : "ringcast"), message: "unknown", color: unknownColor)
        }
        let label = label ?? task.title
        let color = colors[task.state] ?? unknownColor
        guard task.state == .running, let progress = task.progress else {
            return Look(label: label, message: task.state.rawValue, color: color)
        }
        let fraction = min(1, max(0, progress))
        return Look(label: label, message: "\(Int((fraction * 100 + 1e-9).rounded(.down)))%", color: color, fill: fraction, track: runningTrack)
    }

    /// `GET /badge/{id}.svg[?label=…]`, answered 200 with the badge, or 304 when `If-None-Match`
    /// names its ETag.
    static func answer(_ request: APIRequest, file: String, store: TaskStore) -> APIResponse {
        // By bytes: as Characters, a Prepend character (U+0600) at the end of the id and the dot of
        // `.svg` are one, and neither the suffix nor the id would be found.
        let id = String(decoding: file.utf8.dropLast(".svg".utf8.count), as: UTF8.self)
        let label = request.query["label"].map { String($0.prefix(maxLabel * 2)) }.flatMap { $0.isEmpty ? nil : $0 }
        let body = svg(look(for: TaskID.isValid(id) ? store.task(id) : nil, id: id, label: label))
        let tag = etag(body)
        var response = APIResponse(status: matches(request.headers.ifNoneMatch, tag) ? 304 : 200, body: [], contentType: contentType)
        if response.status == 200 { response.body = body }
        response.cacheControl = cacheControl
        response.headers = [("etag:", tag)]
        return response
    }

    /// A strong tag: the first 16 bytes of the SHA-256 of the badge, in hex.
    static func etag(_ body: [UInt8]) -> String {
        "\"" + Hex.lowercase(Crypto.current.sha256(body).prefix(16)) + "\""
    }

    /// `If-None-Match: "a", W/"b"` or `*`.
    static func matches(_ header: String?, _ tag: String) -> Bool {
        guard let header else { return false }
        return header.split(separator: ",").contains { candidate in
            var text = candidate.trimmingSpaces
            if text.hasPrefix("W/") { text.removeFirst(2) }
            return text == tag || text == "*"
        }
    }

    // MARK: Drawing

    static func svg(_ look: Look) -> [UInt8] {
        let label = cut(xmlText(look.label), to: maxLabel)
        let message = xmlText(look.message)
        let labelWidth = textWidth(label) + 12
        let messageWidth = textWidth(message) + 12
        let width = labelWidth + messageWidth
        let summary = escape("\(label): \(message)")
        var parts = [
            #"<svg xmlns="http://www.w3.org/2000/svg" width="\#(width)" height="20" viewBox="0 0 \#(width) 20" role="img" aria-label="\#(summary)">"#,
            "<title>\(summary)</title>",
            #"<clipPath id="round"><rect width="\#(width)" height="20" rx="3"/></clipPath>"#,
            #"<g clip-path="url(#round)">"#,
            #"<rect width="\#(labelWidth)" height="20" fill="\#(labelColor)"/>"#,
        ]
        if let fill = look.fill, let track = look.track {
            parts.append(#"<rect x="\#(labelWidth)" width="\#(messageWidth)" height="20" fill="\#(track)"/>"#)
            let filled = (Double(messageWidth) * fill * 10).rounded() / 10
            parts.append(#"<rect x="\#(labelWidth)" width="\#(number(filled))" height="20" fill="\#(look.color)"/>"#)
        } else {
            parts.append(#"<rect x="\#(labelWidth)" width="\#(messageWidth)" height="20" fill="\#(look.color)"/>"#)
        }
        parts += [
            "</g>",
            ##"<g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,Geneva,sans-serif" font-size="11">"##,
            #"<text x="\#(number(Double(labelWidth) / 2))" y="14">\#(escape(label))</text>"#,
            #"<text x="\#(number(Double(labelWidth) + Double(messageWidth) / 2))" y="14">\#(escape(message))</text>"#,
            "</g>",
            "</svg>",
        ]
        return Array((parts.joined(separator: "\n") + "\n").utf8)
    }

    /// Only characters XML 1.0 allows; line breaks and tabs become spaces.
    static func xmlText(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x09, 0x0A, 0x0D: scalars.append(" ")
            case 0..<0x20, 0x7F..<0xA0, 0xFFFE, 0xFFFF, 0x202A...0x202E, 0x2066...0x2069: continue
            default: scalars.append(scalar)
            }
        }
        return String(scalars)
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }

    static func cut(_ text: String, to count: Int) -> String { text.count > count ? String(text.prefix(count - 1)) + "…" : text }

    /// About how wide 11 px Verdana sets `text`, in whole pixels: the badge is sized by it, the
    /// viewer's font does the rest.
    static func textWidth(_ text: String) -> Int {
        var width = 0.0
        for character in text {
            switch character {
            case "i", "j", "l", "'", "|", "!", ".", ",", ":", ";": width += 3.6
            case "f", "r", "t", " ", "(", ")", "[", "]", "{", "}", "-", "/": width += 4.7
            case "m", "w", "M", "W", "@", "%": width += 10.4
            case "0"..."9", "a"..."z", "#", "$", "?", "_", "+", "=", "<", ">", "~", "*", "^": width += 6.9
            case "A"..."Z", "&": width += 7.8
            default: width += TerminalText.columns(of: character) == 2 ? 11 : 7.5
            }
        }
        return Int(width.rounded(.up))
    }

    /// `12`, or `12.5`: no trailing `.0` in the SVG.
    static func number(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String((value * 10).rounded() / 10)
    }
}
