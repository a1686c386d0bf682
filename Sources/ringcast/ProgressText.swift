import RingcastClient

/// Reads progress out of text: a command-line argument (`42%`, `0.42`, `42/100`) or a line another
/// program printed (`42%`, `42/100`, `[42/100]`, tqdm's ` 42%|████      | 42/100 [00:01<00:02, 40.00it/s]`).
/// Pure functions over bytes; no allocation beyond the result.
enum ProgressText {
    /// `42%` (0–100), `0.42` (0–1) or `42/100` (0 ≤ done ≤ total, total > 0); nil for anything else.
    static func parseArgument(_ text: String) -> ProgressValue? {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else { return nil }
        if bytes.last == UInt8(ascii: "%") {
            guard let (value, end) = number(in: bytes, at: 0), end == bytes.count - 1, (0...100).contains(value) else { return nil }
            return .fraction(value / 100)
        }
        if let slash = bytes.firstIndex(of: UInt8(ascii: "/")) {
            guard let (done, doneEnd) = number(in: bytes, at: 0), doneEnd == slash,
                let (total, totalEnd) = number(in: bytes, at: slash + 1), totalEnd == bytes.count,
                total > 0, done <= total
            else { return nil }
            return .units(completed: done, total: total)
        }
        guard let (value, end) = number(in: bytes, at: 0), end == bytes.count, (0...1).contains(value) else { return nil }
        return .fraction(value)
    }

    /// The progress a line shows, if any. When a line holds several forms, the most specific wins:
    /// tqdm's bar, then `[n/total]`, then the first `n%`, then the first bare `n/total`.
    static func scan(line: some Collection<UInt8>) -> ProgressValue? {
        let bytes = Array(line)
        return tqdm(bytes) ?? bracketedFraction(bytes) ?? percent(bytes) ?? bareFraction(bytes)
    }

    static func scan(line: String) -> ProgressValue? { scan(line: Array(line.utf8)) }

    // MARK: The forms

    /// `desc:  42%|████▏     | 42/100 [00:01<00:02, 40.00it/s]`: the counts when tqdm printed them
    /// (`4.20k/10.0k` with unit_scale), else the percentage.
    private static func tqdm(_ bytes: [UInt8]) -> ProgressValue? {
        var index = 0
        while let percentSign = bytes[index...].firstIndex(of: UInt8(ascii: "%")) {
            defer { index = percentSign + 1 }
            guard percentSign + 1 < bytes.count, bytes[percentSign + 1] == UInt8(ascii: "|"),
                let (percentValue, start) = numberEnding(in: bytes, at: percentSign), startsAtBoundary(bytes, start),
                (0...100).contains(percentValue)
            else { continue }
            guard let barEnd = bytes[(percentSign + 2)...].firstIndex(of: UInt8(ascii: "|")) else { continue }
            var cursor = barEnd + 1
            while cursor < bytes.count, bytes[cursor] == UInt8(ascii: " ") { cursor += 1 }
            if let (done, doneEnd) = scaledNumber(in: bytes, at: cursor), doneEnd < bytes.count, bytes[doneEnd] == UInt8(ascii: "/"),
                let (total, _) = scaledNumber(in: bytes, at: doneEnd + 1), total > 0, done <= total
            {
                return .units(completed: done, total: total)
            }
            return .fraction(percentValue / 100)
        }
        return nil
    }

    /// `[3/10] Compiling foo.c` (ninja, make -j, many build tools).
    private static func bracketedFraction(_ bytes: [UInt8]) -> ProgressValue? {
        var index = 0
        while let open = bytes[index...].firstIndex(of: UInt8(ascii: "[")) {
            index = open + 1
            var cursor = open + 1
            while cursor < bytes.count, bytes[cursor] == UInt8(ascii: " ") { cursor += 1 }
            guard let (done, doneEnd) = number(in: bytes, at: cursor, allowFraction: false),
                doneEnd < bytes.count, bytes[doneEnd] == UInt8(ascii: "/"),
                let (total, totalEnd) = number(in: bytes, at: doneEnd + 1, allowFraction: false)
            else { continue }
            cursor = totalEnd
            while cursor < bytes.count, bytes[cursor] == UInt8(ascii: " ") { cursor += 1 }
            guard cursor < bytes.count, bytes[cursor] == UInt8(ascii: "]"), total > 0, done <= total else { continue }
            return .units(completed: done, total: total)
        }
        return nil
    }

    /// `Downloading… 42%` or `42.5%`, standing on its own (not `x42%`), 0–100.
    private static func percent(_ bytes: [UInt8]) -> ProgressValue? {
        var index = 0
        while let percentSign = bytes[index...].firstIndex(of: UInt8(ascii: "%")) {
            index = percentSign + 1
            guard let (value, start) = numberEnding(in: bytes, at: percentSign), startsAtBoundary(bytes, start),
                (0...100).contains(value)
            else { continue }
            return .fraction(value / 100)
        }
        return nil
    }

    /// `42/100` standing on its own: not part of a path or a date (`a/42/100`, `2024/05/01`).
    private static func bareFraction(_ bytes: [UInt8]) -> ProgressValue? {
        var index = 0
        while let slash = bytes[index...].firstIndex(of: UInt8(ascii: "/")) {
            index = slash + 1
            guard let (done, start) = numberEnding(in: bytes, at: slash, allowFraction: false), startsAtBoundary(bytes, start),
                start == 0 || bytes[start - 1] != UInt8(ascii: "/"),
                let (total, end) = number(in: bytes, at: slash + 1, allowFraction: false),
                end == bytes.count || !(isWordByte(bytes[end]) || bytes[end] == UInt8(ascii: "/")),
                total > 0, done <= total
            else { continue }
            return .units(completed: done, total: total)
        }
        return nil
    }

    // MARK: Numbers

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private static func isWordByte(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z")) || byte == UInt8(ascii: "_")
    }

    /// True when nothing word-like (or a `.`, as in `v1.42%`) sits right before `start`.
    private static func startsAtBoundary(_ bytes: [UInt8], _ start: Int) -> Bool {
        start == 0 || !(isWordByte(bytes[start - 1]) || bytes[start - 1] == UInt8(ascii: ".") || bytes[start - 1] == UInt8(ascii: "-"))
    }

    /// A decimal number (`42`, `42.5`; with `allowFraction` false only digits) starting at `start`:
    /// its value and the index after it.
    private static func number(in bytes: [UInt8], at start: Int, allowFraction: Bool = true) -> (Double, Int)? {
        var end = start
        while end < bytes.count, isDigit(bytes[end]) { end += 1 }
        guard end > start, end - start <= 15 else { return nil }
        if allowFraction, end + 1 < bytes.count, bytes[end] == UInt8(ascii: "."), isDigit(bytes[end + 1]) {
            end += 1
            while end < bytes.count, isDigit(bytes[end]) { end += 1 }
        }
        guard let value = Double(String(decoding: bytes[start..<end], as: UTF8.self)) else { return nil }
        return (value, end)
    }

    /// The number that ends right before `end`: its value and where it starts.
    private static func numberEnding(in bytes: [UInt8], at end: Int, allowFraction: Bool = true) -> (Double, Int)? {
        var start = end
        while start > 0, isDigit(bytes[start - 1]) { start -= 1 }
        if allowFraction, start > 1, start < end, bytes[start - 1] == UInt8(ascii: "."), isDigit(bytes[start - 2]) {
            start -= 1
            while start > 0, isDigit(bytes[start - 1]) { start -= 1 }
        }
        guard start < end, let (value, parsedEnd) = number(in: bytes, at: start, allowFraction: allowFraction), parsedEnd == end else { return nil }
        return (value, start)
    }

    /// tqdm's unit_scale numbers: `4.20k`, `1.5M`.
    private static func scaledNumber(in bytes: [UInt8], at start: Int) -> (Double, Int)? {
        guard let (value, end) = number(in: bytes, at: start) else { return nil }
        guard end < bytes.count else { return (value, end) }
        let exponents: [UInt8: String] = [
            UInt8(ascii: "k"): "e3", UInt8(ascii: "M"): "e6", UInt8(ascii: "G"): "e9",
            UInt8(ascii: "T"): "e12", UInt8(ascii: "P"): "e15",
        ]
        // Scaled in the text, so 4.60k reads as exactly 4600.
        guard let exponent = exponents[bytes[end]],
            let scaled = Double(String(decoding: bytes[start..<end], as: UTF8.self) + exponent)
        else { return (value, end) }
        return (scaled, end + 1)
    }
}
