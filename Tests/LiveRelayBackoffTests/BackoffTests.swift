import LiveRelayBackoff
import NIOCore
import Testing

@Suite("Backoff")
struct BackoffTests {
    let plain = Backoff(initial: .milliseconds(100), maximum: .seconds(1), multiplier: 2, jitter: 0)

    @Test func firstDelayIsTheInitialOneAndNoFailureWaitsNothing() {
        #expect(plain.delay(after: 1, random: 0.7) == .milliseconds(100))
        #expect(plain.delay(after: 0, random: 0) == .zero)
        #expect(plain.delay(after: -3, random: 0) == .zero)
    }

    @Test func doublesPerFailure() {
        #expect((1...4).map { plain.delay(after: $0, random: 0) } == [100, 200, 400, 800].map { TimeAmount.milliseconds($0) })
    }

    @Test func otherMultipliersGrowByTheirFactor() {
        let triple = Backoff(initial: .milliseconds(10), maximum: .seconds(10), multiplier: 3, jitter: 0)
        #expect((1...3).map { triple.delay(after: $0, random: 0) } == [10, 30, 90].map { TimeAmount.milliseconds($0) })
    }

    @Test func capsAtTheMaximum() {
        #expect(plain.delay(after: 5, random: 0) == .seconds(1))
        #expect(plain.delay(after: 60, random: 0) == .seconds(1))
        let small = Backoff(initial: .seconds(5), maximum: .seconds(1), jitter: 0)
        #expect(small.delay(after: 1, random: 0) == .seconds(1))
    }

    @Test func jitterShortensWithinItsShareNeverLengthens() {
        let jittered = Backoff(initial: .milliseconds(100), maximum: .seconds(1), multiplier: 2, jitter: 0.5)
        #expect(jittered.delay(after: 1, random: 0) == .milliseconds(100))
        #expect(jittered.delay(after: 1, random: 1) == .milliseconds(50))
        #expect(jittered.delay(after: 1, random: 0.5) == .milliseconds(75))
        #expect(jittered.delay(after: 30, random: 0.5) == .milliseconds(750))
        for step in 0...100 {
            let random = Double(step) / 100
            for failures in 1...12 {
                let nominal = plain.delay(after: failures, random: 0)
                let delay = jittered.delay(after: failures, random: random)
                #expect(delay <= nominal)
                #expect(delay.nanoseconds >= nominal.nanoseconds / 2)
            }
        }
    }

    @Test func randomOutsideTheUnitIntervalIsClamped() {
        let jittered = Backoff(initial: .milliseconds(100), maximum: .seconds(1), jitter: 0.5)
        #expect(jittered.delay(after: 1, random: -4) == .milliseconds(100))
        #expect(jittered.delay(after: 1, random: 9) == .milliseconds(50))
        #expect(jittered.delay(after: 1, random: .nan) == .milliseconds(100))
    }

    @Test func monotonicWithoutJitter() {
        var previous = TimeAmount.zero
        for failures in 0...200 {
            let delay = plain.delay(after: failures, random: 0)
            #expect(delay >= previous)
            previous = delay
        }
        #expect(previous == .seconds(1))
    }

    @Test func hugeFailureCountsNeitherOverflowNorLoop() {
        #expect(plain.delay(after: .max, random: 0) == .seconds(1))
        #expect(plain.delay(after: .max, random: 1) == .seconds(1))
        let unbounded = Backoff(initial: .seconds(1), maximum: .nanoseconds(.max), multiplier: 10, jitter: 0)
        #expect(unbounded.delay(after: .max, random: 0) == .nanoseconds(.max))
        #expect(unbounded.delay(after: 1_000, random: 0) == .nanoseconds(.max))
    }

    @Test func initializerClampsNonsense() {
        let odd = Backoff(initial: .milliseconds(100), maximum: .seconds(1), multiplier: 0.5, jitter: 7)
        #expect(odd.multiplier == 1)
        #expect(odd.jitter == 1)
        #expect(odd.delay(after: 5, random: 0) == .milliseconds(100))
        #expect(odd.delay(after: 5, random: 1) == .zero)
    }
}
