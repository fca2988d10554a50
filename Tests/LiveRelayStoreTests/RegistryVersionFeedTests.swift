import LiveRelayStore
import LiveRelayTestSupport
import Testing

@Suite struct RegistryVersionFeedTests {
    @Test func eachStreamIncreasesStrictlyWhateverOrderVersionsArriveIn() async throws {
        let feed = RegistryVersionFeed()
        let recorder = VersionRecorder(feed.subscribe(pollEvery: .seconds(3600)) { 3 })
        try await recorder.wait(for: 3)
        for version: Int64 in [2, 3, 5, 4, 5, 7, 6] { feed.publish(version) }
        try await recorder.wait(for: 7)
        let versions = await recorder.versions
        #expect(versions.first == 3)
        #expect(versions == versions.sorted() && Set(versions).count == versions.count, "\(versions)")
        feed.finish()
        try await recorder.waitForEnd()
    }

    @Test func theSafetyNetPollFindsWhatNobodyPublished() async throws {
        let feed = RegistryVersionFeed()
        let current = Counter()
        let recorder = VersionRecorder(feed.subscribe(pollEvery: .milliseconds(10)) { await current.value })
        try await recorder.wait(for: 0)
        await current.set(9)
        try await recorder.wait(for: 9)
        feed.finish()
    }

    @Test func aFailingPollIsSkipped() async throws {
        struct Down: Error {}
        let feed = RegistryVersionFeed()
        let calls = Counter()
        let recorder = VersionRecorder(
            feed.subscribe(pollEvery: .milliseconds(10)) {
                if await calls.increment() < 3 { throw Down() }
                return 5
            })
        try await recorder.wait(for: 5)
        feed.finish()
    }

    @Test func aConsumerThatLeavesIsForgotten() async throws {
        let feed = RegistryVersionFeed()
        let recorder = VersionRecorder(feed.subscribe(pollEvery: .milliseconds(10)) { 1 })
        try await recorder.wait(for: 1)
        #expect(feed.subscriberCount == 1)
        recorder.cancel()
        try await recorder.waitForEnd()
        try await eventually("the subscriber to be removed") { feed.subscriberCount == 0 }
        feed.finish()
    }

    @Test func aStreamAskedForAfterFinishEndsAtOnce() async throws {
        let feed = RegistryVersionFeed()
        feed.finish()
        let recorder = VersionRecorder(feed.subscribe(pollEvery: .milliseconds(10)) { 1 })
        try await recorder.waitForEnd()
        #expect(await recorder.versions.isEmpty)
        #expect(feed.subscriberCount == 0)
    }
}

private actor Counter {
    var value: Int64 = 0
    func set(_ value: Int64) { self.value = value }
    func increment() -> Int64 {
        value += 1
        return value
    }
}
