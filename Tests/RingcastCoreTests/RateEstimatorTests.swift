import XCTest

@testable import RingcastCore

/// tqdm's estimator with smoothing α = 0.3: EMA(x) ← α·x + (1−α)·EMA(x) for Δprogress and Δseconds, both
/// divided by the bias correction 1 − (1−α)^n. The correction cancels in the ratio, so rate = EMA(Δp)/EMA(Δt).
final class RateEstimatorTests: XCTestCase {
    func testKnownSequence() {
        var estimator = RateEstimator()
        // (0, t0): the first observation is only a baseline.
        XCTAssertNil(estimator.observe(progress: 0, at: t0))
        XCTAssertNil(estimator.rate)

        // (0.1, +1 s): Δp = 0.1, Δt = 1. EMA(Δp) = 0.03, EMA(Δt) = 0.3, correction 1 − 0.7 = 0.3
        // → corrected 0.1 and 1 → rate 0.1/s (the first estimate is the raw one, not 0.3 of it).
        XCTAssertEqual(estimator.observe(progress: 0.1, at: t0 + 1000)!, 0.1, accuracy: 1e-12)

        // (0.3, +1 s): Δp = 0.2, Δt = 1. EMA(Δp) = 0.3·0.2 + 0.7·0.03 = 0.081; EMA(Δt) = 0.3·1 + 0.7·0.3 = 0.51
        // → rate 0.081/0.51 = 0.158823529411…
        XCTAssertEqual(estimator.observe(progress: 0.3, at: t0 + 2000)!, 0.081 / 0.51, accuracy: 1e-12)
        XCTAssertEqual(estimator.rate!, 0.15882352941176, accuracy: 1e-12)

        // (0.4, +2 s): Δp = 0.1, Δt = 2. EMA(Δp) = 0.03 + 0.7·0.081 = 0.0867; EMA(Δt) = 0.6 + 0.7·0.51 = 0.957
        // → rate 0.0867/0.957 = 0.090595611285…; ETA = (1 − 0.4)/rate = 0.5742/0.0867 = 6.622837370…
        let rate = estimator.observe(progress: 0.4, at: t0 + 4000)!
        XCTAssertEqual(rate, 0.09059561128526, accuracy: 1e-12)
        XCTAssertEqual(RateEstimator.eta(progress: 0.4, rate: rate)!, 6.62283737024221, accuracy: 1e-9)
    }

    func testSteadyRateIsExact() {
        var estimator = RateEstimator()
        _ = estimator.observe(progress: 0, at: t0)
        for k in 1...10 {
            // 0.05 every 500 ms is 0.1/s, whatever the weights.
            XCTAssertEqual(estimator.observe(progress: 0.05 * Double(k), at: t0 + 500 * Double(k))!, 0.1, accuracy: 1e-12)
        }
    }

    func testGoingBackwardsResets() {
        var estimator = RateEstimator()
        _ = estimator.observe(progress: 0.2, at: t0)
        _ = estimator.observe(progress: 0.6, at: t0 + 1000)
        XCTAssertNil(estimator.observe(progress: 0.1, at: t0 + 2000), "a restart forgets the old rate")
        XCTAssertNil(estimator.rate)
        // The reset observation is the new baseline: (0.1 → 0.3 over 4 s) = 0.05/s.
        XCTAssertEqual(estimator.observe(progress: 0.3, at: t0 + 6000)!, 0.05, accuracy: 1e-12)
    }

    func testObservationsWithoutProgressDoNotShortenTheInterval() {
        // A title or detail update at the same progress is not a measurement: 0.1 → 0.2 took 2 s, not 1 s.
        var estimator = RateEstimator()
        _ = estimator.observe(progress: 0, at: t0)
        XCTAssertEqual(estimator.observe(progress: 0.1, at: t0 + 1000)!, 0.1, accuracy: 1e-12)
        XCTAssertEqual(estimator.observe(progress: 0.1, at: t0 + 2000)!, 0.1, accuracy: 1e-12, "unchanged progress keeps the rate")
        // Δp = 0.1, Δt = 2: EMA(Δp) = 0.03 + 0.7·0.03 = 0.051; EMA(Δt) = 0.6 + 0.7·0.3 = 0.81 → 0.0629629…
        XCTAssertEqual(estimator.observe(progress: 0.2, at: t0 + 3000)!, 0.051 / 0.81, accuracy: 1e-12)
    }

    func testUpdatesInTheSameMillisecondAreNotLost() {
        // A batch applies 0.1 and 0.2 at the same instant: the next measurement must span both steps.
        var estimator = RateEstimator()
        _ = estimator.observe(progress: 0, at: t0)
        XCTAssertNil(estimator.observe(progress: 0.1, at: t0), "no time has passed: no rate yet")
        _ = estimator.observe(progress: 0.2, at: t0)
        // 0 → 0.4 over 1 s.
        XCTAssertEqual(estimator.observe(progress: 0.4, at: t0 + 1000)!, 0.4, accuracy: 1e-12)
    }

    func testAClockThatGoesBackRestartsTheInterval() {
        var estimator = RateEstimator()
        _ = estimator.observe(progress: 0, at: t0)
        _ = estimator.observe(progress: 0.1, at: t0 + 1000)  // 0.1/s
        XCTAssertEqual(estimator.observe(progress: 0.2, at: t0)!, 0.1, accuracy: 1e-12, "no measurement across a clock step")
        // Measured from the step back: Δp = 0.2, Δt = 1. EMA(Δp) = 0.06 + 0.7·0.03 = 0.081; EMA(Δt) = 0.3 + 0.7·0.3 = 0.51.
        XCTAssertEqual(estimator.observe(progress: 0.4, at: t0 + 1000)!, 0.081 / 0.51, accuracy: 1e-12)
    }

    func testEta() {
        XCTAssertEqual(RateEstimator.eta(progress: 0.25, rate: 0.25), 3)
        XCTAssertEqual(RateEstimator.eta(progress: 1, rate: 0.5), 0)
        XCTAssertNil(RateEstimator.eta(progress: 0.5, rate: nil))
        XCTAssertNil(RateEstimator.eta(progress: 0.5, rate: 0))
    }
}

/// The estimator's cost per update does not grow with the number of updates before it: a million
/// observations, checked against the closed form of their averages.
final class RateEstimatorScaleTests: XCTestCase {
    func testAMillionObservationsMatchTheClosedForm() {
        // Steps of δ = 1e-7 progress, taking 1 s and 3 s in turn. With β = 1 − α, after n (even)
        // steps EMA(Δp) = δ(1 − βⁿ) and EMA(Δt) = α(3 + β)(1 − βⁿ)/(1 − β²); corrected by 1 − βⁿ:
        // Δp̂ = δ, Δt̂ = α(3 + β)/(1 − β²) = (3 + β)/(1 + β), and rate = δ(1 + β)/(3 + β).
        let n = 1_000_000
        let delta = 1e-7
        let beta = 1 - RateEstimator.smoothing
        var estimator = RateEstimator()
        var time = t0
        _ = estimator.observe(progress: 0, at: time)
        var last: Double?
        for k in 1...n {
            time += k % 2 == 1 ? 1000 : 3000
            last = estimator.observe(progress: Double(k) * delta, at: time)
        }
        let expectedRate = delta * (1 + beta) / (3 + beta)
        XCTAssertEqual(last!, expectedRate, accuracy: expectedRate * 1e-6)
        let averages = estimator.correctedAverages!
        XCTAssertEqual(averages.delta, delta, accuracy: delta * 1e-6)
        XCTAssertEqual(averages.seconds, (3 + beta) / (1 + beta), accuracy: 1e-6)
    }

    func testTheBiasCorrectionAfterAFewStepsIsTqdms() {
        // After 3 steps the zero start still weighs β³ = 0.343: corrected Δt̂ = EMA(Δt)/(1 − 0.343).
        var estimator = RateEstimator()
        _ = estimator.observe(progress: 0, at: t0)
        for k in 1...3 { _ = estimator.observe(progress: 0.1 * Double(k), at: t0 + 2000 * Double(k)) }
        let averages = estimator.correctedAverages!
        XCTAssertEqual(averages.seconds, 2, accuracy: 1e-12, "a steady 2 s step is 2 s once corrected")
        XCTAssertEqual(averages.delta, 0.1, accuracy: 1e-12)
        XCTAssertNil(RateEstimator().correctedAverages)
    }
}
