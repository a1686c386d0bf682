import RingcastCore

/// Bytes a peer may answer, in pieces, through `HTTPAnswerDecoder` (what the HTTP client of the
/// webhook senders and the command line reads with): the first byte picks the body cap and the
/// piece size. Whatever comes, it must end in an answer, an error or a wait for more, never a trap;
/// no body past the cap and no head past its limit is held; and the answers of the whole input fed
/// at once are the answers of it fed in pieces.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAnswer(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = bytes(data, size)
    guard let first = input.first else { return 0 }
    let cap = [0, 16, 1024, 8192][Int(first & 3)]
    let piece = 1 + Int(first >> 2)
    let answers = decodeAll(Array(input.dropFirst()), cap: cap, piece: Int.max)
    let inPieces = decodeAll(Array(input.dropFirst()), cap: cap, piece: piece)
    expect(answers == inPieces, "fed whole: \(answers); fed \(piece) bytes at a time: \(inPieces)")
    return 0
}

/// Every answer the bytes hold, then how decoding ended (an error's text, or "more").
private func decodeAll(_ input: [UInt8], cap: Int, piece: Int) -> [String] {
    var decoder = HTTPAnswerDecoder(maxBodyBytes: cap)
    var results: [String] = []
    var offset = 0
    while true {
        let end = offset + min(piece, input.count - offset)
        decoder.append(input[offset..<end])
        offset = end
        let closed = offset == input.count
        do {
            while let answer = try decoder.next(closed: closed) {
                expect(answer.body.count <= cap, "a body of \(answer.body.count) bytes past the cap of \(cap)")
                expect((100...999).contains(answer.status), "status \(answer.status)")
                results.append("\(answer.status) \(answer.body.count) \(answer.endedByClose)")
                if answer.endedByClose { return results }
            }
        } catch {
            return results + ["error"]
        }
        if closed { return results + ["more"] }
    }
}
