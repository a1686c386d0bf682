import RingcastClient
import XCTest

@testable import ringcast

/// ProgressText, as `push --progress` and `pipe` read it.
final class ProgressTextTests: XCTestCase {
    func testProgressTextForms() {
        XCTAssertEqual(ProgressText.parseArgument("42%"), .fraction(0.42))
        XCTAssertEqual(ProgressText.parseArgument("42.5%"), .fraction(0.425))
        XCTAssertEqual(ProgressText.parseArgument("0.42"), .fraction(0.42))
        XCTAssertEqual(ProgressText.parseArgument("1"), .fraction(1))
        XCTAssertEqual(ProgressText.parseArgument("42/100"), .units(completed: 42, total: 100))
        for bad in ["", "42", "-1%", "101%", "1.5", "4/0", "5/4", "42 %", "abc", "0x10", "1e2%", "/4", "4/"] {
            XCTAssertNil(ProgressText.parseArgument(bad), bad)
        }
        let lines: [(String, ProgressValue?)] = [
            ("Downloading 42%", .fraction(0.42)),
            ("[ 3/10] Building CXX object", .units(completed: 3, total: 10)),
            ("  42%|████      | 42/100 [00:01<00:02, 40.00it/s]", .units(completed: 42, total: 100)),
            ("100%|██████████| 1.00M/1.00M [00:09<00:00, 110kB/s]", .units(completed: 1_000_000, total: 1_000_000)),
            (" 42%|####      | ? [00:01<?, ?it/s]", .fraction(0.42)),
            ("processed 7/20", .units(completed: 7, total: 20)),
            ("50% done, step 2/4", .fraction(0.5)),
            ("[2/4] 50%", .units(completed: 2, total: 4)),
            ("date 2024/05/01", nil), ("path a/1/2", nil), ("3/2 overshoot", nil), ("version v1.42%", nil),
            ("rate 40.00it/s", nil), ("x42%", nil), ("150%", nil), ("", nil), ("  [00:01<00:02, 40.00it/s]", nil),
        ]
        for (line, expected) in lines {
            XCTAssertEqual(ProgressText.scan(line: line), expected, line)
        }
    }
}
