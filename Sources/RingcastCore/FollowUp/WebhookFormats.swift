/// What a hook's body looks like: Ringcast's own signed JSON, or the incoming-webhook JSON of the
/// place a team reads (Slack, Discord, ntfy), one line each with the title, the state, how long the
/// run took and a link to the task's page.
public enum WebhookFormat: String, Sendable, CaseIterable {
    case ringcast, slack, discord, ntfy
}

enum WebhookMessage {
    /// `3m05s`, `42s`, `1h02m`: how long a run took, as the command line says it.
    static func duration(_ seconds: Double) -> String {
        // A time read back from anywhere may be absurd: clamped before it meets an integer.
        let total = seconds.isFinite ? Int(min(max(0, seconds), 315_576_000_000).rounded()) : 0
        if total < 60 { return "\(total)s" }
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        if total < 3600 { return "\(total / 60)m\(two(total % 60))s" }
        return "\(total / 3600)h\(two(total % 3600 / 60))m"
    }

    /// "failed after 3m05s: exit 2", the line's words after the title.
    static func summary(_ task: TaskRecord, now: Double) -> String {
        var text = task.state.rawValue
        if task.state.isTerminal || task.state == .stalled { text += " after \(duration((now - task.runStartedAt) / 1000))" }
        if let detail = task.detail, !detail.isEmpty { text += ": \(detail)" }
        return text
    }

    /// The task's page on the server readers reach (the hook's `pageBase`), else the publisher's own link.
    static func link(_ task: TaskRecord, pageBase: String?) -> String? {
        if let pageBase { return (pageBase.hasSuffix("/") ? String(pageBase.dropLast()) : pageBase) + "/tasks/" + task.id }
        return task.url
    }

    /// The ntfy topic: the first segment of the hook's URL path (`https://ntfy.sh/ci-builds`).
    static func topic(_ url: String) -> String {
        let afterScheme = url.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        guard afterScheme.count == 4 else { return "" }
        return String(afterScheme[3].prefix { $0 != "/" && $0 != "?" })
    }

    static func body(_ format: WebhookFormat, _ task: TaskRecord, rule: WebhookRule, now: Double) -> [UInt8] {
        let title = task.title.isEmpty ? task.id : task.title
        let summary = summary(task, now: now)
        let link = link(task, pageBase: rule.pageBase)
        var writer = JSONWriter(capacity: 256)
        writer.beginObject()
        switch format {
        case .ringcast:
            break
        case .slack:
            // Slack's mrkdwn: &, < and > are escaped; a link is <url|text>.
            func escaped(_ text: String) -> String {
                text.replacingAll("&", with: "&amp;").replacingAll("<", with: "&lt;").replacingAll(">", with: "&gt;")
            }
            writer.key("text")
            writer.string((link.map { "<\($0)|\(escaped(title))>" } ?? "*\(escaped(title))*") + " " + escaped(summary))
        case .discord:
            // Discord's markdown: a masked link [text](url); its content is at most 2000 characters.
            let plainTitle = title.replacingAll("[", with: "\\[").replacingAll("]", with: "\\]")
            let line = (link.map { "[\(plainTitle)](\($0))" } ?? "**\(plainTitle)**") + " " + summary
            writer.key("content")
            writer.string(String(line.prefix(2000)))
            // A title is the publisher's text: "@everyone" in it must ping nobody.
            writer.key("allowed_mentions")
            writer.beginObject()
            writer.key("parse")
            writer.beginArray()
            writer.endArray()
            writer.endObject()
        case .ntfy:
            writer.key("topic")
            writer.string(topic(rule.url))
            writer.key("title")
            writer.string(title)
            writer.key("message")
            writer.string(summary)
            writer.key("priority")
            writer.number(task.state == .done ? 3 : 4)
            writer.key("tags")
            writer.beginArray()
            writer.string(task.state == .done ? "white_check_mark" : task.state == .cancelled ? "no_entry_sign" : "x")
            writer.endArray()
            if let link {
                writer.key("click")
                writer.string(link)
            }
        }
        writer.endObject()
        return writer.bytes
    }
}

extension String {
    fileprivate func replacingAll(_ target: String, with replacement: String) -> String {
        split(separator: Substring(target), omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
