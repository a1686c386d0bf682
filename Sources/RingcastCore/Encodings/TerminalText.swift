/// Text on its way to somebody's terminal: a title, a detail, a log line, a request's path in the
/// server's log. Whoever wrote it may lie, so nothing in it may act on the terminal: move the
/// cursor, erase a line, set the window title or the clipboard (OSC 0, 52), open a link (OSC 8),
/// reorder what follows (bidirectional overrides). Every surface that prints such text (`ringcast
/// ls` and `ls --watch`, `?format=text`, the command line's error lines, the server's text log)
/// cleans it here, and measures it here in the columns a terminal gives it.
public enum TerminalText {
    // MARK: Cleaning

    /// `text` with nothing a terminal acts on: escape sequences go whole (CSI `ESC [ … final`,
    /// OSC `ESC ] … BEL|ST`, DCS, SOS, PM and APC up to ST, `ESC` with intermediates and a final,
    /// and the 8-bit C1 introducers of the same), every other C0 control (tab, CR, LF, BS, BEL …),
    /// DEL and C1 control becomes a space, and the bidirectional marks, embeddings, overrides and
    /// isolates (U+061C, U+200E–200F, U+202A–202E, U+2066–2069, U+206A–206F) go. U+2028 and U+2029,
    /// which some terminals take for line ends, become spaces too.
    public static func clean(_ text: String) -> String {
        // The common case (plain words) costs one scan and no copy.
        guard text.unicodeScalars.contains(where: needsCleaning) else { return text }
        var kept = String.UnicodeScalarView()
        let scalars = Array(text.unicodeScalars)
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            let value = scalar.value
            switch value {
            case 0x1B:
                index = endOfEscape(scalars, from: index + 1)
                continue
            case 0x9B:
                index = endOfControlSequence(scalars, from: index + 1)
                continue
            case 0x90, 0x98, 0x9D, 0x9E, 0x9F:
                index = endOfString(scalars, from: index + 1)
                continue
            case 0..<0x20, 0x7F..<0xA0, 0x2028, 0x2029:
                kept.append(" ")
            case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x206F:
                break
            default:
                kept.append(scalar)
            }
            index += 1
        }
        return String(kept)
    }

    private static func needsCleaning(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0..<0x20, 0x7F..<0xA0, 0x061C, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x206F: return true
        default: return false
        }
    }

    /// After an ESC: where the sequence it starts ends (ECMA-48: `[` a control sequence; `]`, `P`,
    /// `X`, `^`, `_` a control string; else intermediates 0x20–0x2F and one final 0x30–0x7E). A
    /// sequence cut short ends where the next character cannot belong to it, which is kept.
    private static func endOfEscape(_ scalars: [Unicode.Scalar], from start: Int) -> Int {
        guard start < scalars.count else { return start }
        switch scalars[start].value {
        case 0x5B: return endOfControlSequence(scalars, from: start + 1)
        case 0x5D, 0x50, 0x58, 0x5E, 0x5F: return endOfString(scalars, from: start + 1)
        default:
            var index = start
            while index < scalars.count, (0x20...0x2F).contains(scalars[index].value) { index += 1 }
            if index < scalars.count, (0x30...0x7E).contains(scalars[index].value) { index += 1 }
            return index
        }
    }

    /// Parameters and intermediates (0x20–0x3F), then the final byte (0x40–0x7E).
    private static func endOfControlSequence(_ scalars: [Unicode.Scalar], from start: Int) -> Int {
        var index = start
        while index < scalars.count, (0x20...0x3F).contains(scalars[index].value) { index += 1 }
        if index < scalars.count, (0x40...0x7E).contains(scalars[index].value) { index += 1 }
        return index
    }

    /// A control string (OSC's title or clipboard, DCS …) runs to BEL, ST (`ESC \` or U+009C), or,
    /// when nothing ends it, to the end of the text: none of it is shown.
    private static func endOfString(_ scalars: [Unicode.Scalar], from start: Int) -> Int {
        var index = start
        while index < scalars.count {
            switch scalars[index].value {
            case 0x07, 0x9C: return index + 1
            case 0x1B: return index + 1 < scalars.count && scalars[index + 1] == "\\" ? index + 2 : index + 1
            default: index += 1
            }
        }
        return index
    }

    // MARK: Columns

    /// Columns a terminal gives one grapheme cluster: 0 for marks and format characters, 2 for East
    /// Asian Wide and Fullwidth ones and emoji presentation (an emoji with U+FE0F, a flag, a ZWJ
    /// family), 1 for the rest. A cluster is measured, and cut, whole.
    public static func columns(of character: Character) -> Int {
        guard let first = character.unicodeScalars.first else { return 0 }
        switch first.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format, .control: return 0
        default: break
        }
        if first.properties.isEmojiPresentation || character.unicodeScalars.contains(where: { $0.value == 0xFE0F }) { return 2 }
        switch first.value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
            0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x20000...0x3FFFD:
            return 2
        default:
            return 1
        }
    }

    public static func columns(of text: String) -> Int { text.reduce(0) { $0 + columns(of: $1) } }

    /// `text` in at most `width` columns: whole clusters, and `…` in the last column when some were cut.
    public static func cut(_ text: String, toColumns width: Int) -> String {
        guard columns(of: text) > width else { return text }
        guard width > 0 else { return "" }
        var used = 0
        var kept = ""
        for character in text {
            let size = columns(of: character)
            if used + size > width - 1 { break }
            kept.append(character)
            used += size
        }
        return kept + "…"
    }

    /// `text` in exactly `width` columns: cut with `…`, or padded with spaces.
    public static func fit(_ text: String, _ width: Int) -> String { pad(cut(text, toColumns: width), width) }

    /// `text` followed by spaces up to `width` columns (nothing cut).
    public static func pad(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(0, width - columns(of: text))) }
}
