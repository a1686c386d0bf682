import RingcastCore

/// JSONParser.parse over any bytes. Beyond not crashing: what it accepts is valid UTF-8, nested no
/// deeper than its limit, and survives a round trip: parse(encode(v)) == v, and encoding is stable.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    let value: JSONValue
    do {
        value = try JSONParser.parse(input)
    } catch {
        expect(error.offset >= 0 && error.offset <= input.count, "error offset \(error.offset) outside \(input.count) bytes")
        expect(!error.reason.isEmpty, "an error says why")
        return 0
    }
    expect(String(validating: input, as: UTF8.self) != nil, "accepted invalid UTF-8")
    expect(depth(value) <= JSONParser.maxDepth, "accepted nesting of \(depth(value))")
    let encoded = JSONWriter.encode(value)
    let again = parseJSON(encoded, "the encoding of an accepted document")
    expect(again == value, "round trip changed the value: \(text(encoded).prefix(300))")
    expect(JSONWriter.encode(again) == encoded, "encoding is not stable: \(text(encoded).prefix(300))")
    return 0
}

private func depth(_ value: JSONValue) -> Int {
    switch value {
    case .array(let elements): return 1 + (elements.map(depth).max() ?? 0)
    case .object(let members): return 1 + (members.map { depth($0.1) }.max() ?? 0)
    default: return 1
    }
}
