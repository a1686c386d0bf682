/// What a hook's body looks like (`format` in config.json's `webhooks`): Ringcast's own signed JSON,
/// or the incoming-webhook shape of the place a team already reads (Slack, Discord, ntfy), so a
/// finished build reaches a channel with no relay in between.
public enum WebhookFormat: String, CaseIterable, Sendable {
    /// `{"delivery", "event", "state", "previousState", "at", "task"}`, signed (X-Ringcast-Signature).
    case ringcast
    /// Slack's incoming webhook: `{"text": …}` in Slack's mrkdwn, with the task's page as a link.
    case slack
    /// Discord's webhook: `{"content": …, "allowed_mentions": {"parse": []}}` in Discord's markdown.
    case discord
    /// ntfy's publish-as-JSON: `{"topic", "title", "message", "priority", "tags", "click"}`, POSTed to
    /// the server's root (the topic is the hook URL's one path segment).
    case ntfy

    /// Whether the receiver verifies Ringcast's signature: only our own format's does, so the others
    /// need no secret (one given is still sent as X-Ringcast-Signature).
    public var needsSecret: Bool { self == .ringcast }
}

/// The one line a chat or phone shows for a task that changed state: its title, how it ended, how
/// long it took, and its page. Pure: the same task, time and link give the same bytes (every
/// attempt of a delivery sends the same body).
public enum WebhookMessage {
    /// A person's words for the state a task entered.
    static func stateWords(_ state: TaskState) -> String {
        switch state {
        case .done: return "done"
        case .failed: return "failed"
        case .cancelled: return "cancelled"
        case .stalled: return "stalled (no update from its publisher)"
        case .paused: return "paused"
        case .running: return "running again"
        }
    }

    /// An emoji short name both Slack and ntfy know (ntfy shows a tag that names one as the emoji).
    static func emojiName(_ state: TaskState) -> String {
        switch state {
        case .done: return "white_check_mark"
        case .failed: return "x"
        case .cancelled: return "no_entry_sign"
        case .stalled: return "warning"
        case .paused: return "double_vertical_bar"
        case .running: return "arrow_forward"
        }
    }

    static func emoji(_ state: TaskState) -> String {
        switch state {
        case .done: return "✅"
        case .failed: return "❌"
        case .cancelled: return "🚫"
        case .stalled: return "⚠️"
        case .paused: return "⏸️"
        case .running: return "▶️"
        }
    }

    /// ntfy's priority (1 min … 5 max): a failure or a stall is worth a buzz, a success is not.
    static func ntfyPriority(_ state: TaskState) -> Int {
        switch state {
        case .failed, .stalled: return 4
        case .done, .cancelled: return 3
        case .paused, .running: return 2
        }
    }

    /// "took 1:05", "ran 2:03:04": how long the run has lasted, as the dashboard writes it.
    static func duration(_ task: TaskRecord, now: Double) -> String {
        let span = (now - task.runStartedAt) / 1000
        let seconds = span.isFinite ? Int(span.rounded(.down).clamped(to: 0...8_640_000_000)) : 0
        let (hours, minutes, rest) = (seconds / 3600, seconds / 60 % 60, seconds % 60)
        let clock =
            hours > 0
            ? "\(hours):\(twoDigits(minutes)):\(twoDigits(rest))"
            : "\(minutes):\(twoDigits(rest))"
        return (task.state.isTerminal ? "took " : "running for ") + clock
    }

    private static func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }

    /// The task's page on the dashboard, from the server's public address.
    public static func pageURL(_ id: String, publicURL: String) -> String {
        (publicURL.hasSuffix("/") ? publicURL : publicURL + "/") + "task.html?id=" + id
    }

    /// The body `format` sends for `task` entering its state; nil for `.ringcast` (WebhookPlanner
    /// writes that one with the delivery's id).
    static func body(_ format: WebhookFormat, task: TaskRecord, topic: String?, publicURL: String, now: Double) -> [UInt8]? {
        let title = oneLine(task.title.isEmpty ? task.id : task.title, limit: 200)
        let link = pageURL(task.id, publicURL: publicURL)
        let took = duration(task, now: now)
        let detail = task.detail.map { oneLine($0, limit: 300) }
        var writer = JSONWriter(capacity: 512)
        switch format {
        case .ringcast:
            return nil
        case .slack:
            // mrkdwn: &, < and > are escaped, and a link is <url|text>.
            var text = "\(emoji(task.state)) *\(slackEscaped(title))* \(stateWords(task.state)) · \(took) · <\(link)|\(slackEscaped(task.id))>"
            if let detail { text += "\n> \(slackEscaped(detail))" }
            writer.beginObject()
            writer.key("text")
            writer.string(text)
            writer.endObject()
        case .discord:
            // Markdown with its specials escaped; no @everyone, role or user pings from a title.
            var content = "\(emoji(task.state)) **\(discordEscaped(title))** \(stateWords(task.state)) · \(took)"
            content += " · [\(discordEscaped(task.id))](<\(link)>)"
            if let detail { content += "\n> \(discordEscaped(detail))" }
            writer.beginObject()
            writer.key("content")
            writer.string(String(content.unicodeScalars.prefix(2000)))
            writer.key("allowed_mentions")
            writer.beginObject()
            writer.key("parse")
            writer.beginArray()
            writer.endArray()
            writer.endObject()
            writer.endObject()
        case .ntfy:
            writer.beginObject()
            writer.key("topic")
            writer.string(topic ?? "")
            writer.key("title")
            writer.string("\(title) \(stateWords(task.state))")
            writer.key("message")
            writer.string(took + (detail.map { " · \($0)" } ?? ""))
            writer.key("priority")
            writer.number(ntfyPriority(task.state))
            writer.key("tags")
            writer.beginArray()
            writer.string(emojiName(task.state))
            writer.string(task.state.rawValue)
            writer.endArray()
            writer.key("click")
            writer.string(link)
            writer.endObject()
        }
        return writer.bytes
    }

    /// One line of at most `limit` code points: line breaks and other controls become spaces.
    static func oneLine(_ text: String, limit: Int) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars.prefix(limit) {
            scalars.append(scalar.properties.generalCategory == .control ? " " : scalar)
        }
        return String(scalars)
    }

    static func slackEscaped(_ text: String) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    static func discordEscaped(_ text: String) -> String {
        var escaped = ""
        for character in text {
            if "\\*_~`|>[]()<@#".contains(character) { escaped.append("\\") }
            escaped.append(character)
        }
        return escaped
    }
}

extension Double {
    fileprivate func clamped(to range: ClosedRange<Double>) -> Double { Swift.min(Swift.max(self, range.lowerBound), range.upperBound) }
}
