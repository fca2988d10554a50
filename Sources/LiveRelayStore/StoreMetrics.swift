import Metrics

/// What every store reports of its write batches, through swift-metrics:
/// `liverelay_store_commit_duration{store}` (a histogram of seconds from a
/// batch's first statement to its COMMIT's answer) and
/// `liverelay_store_batch_size{store}` (a histogram of the calls a batch
/// carried). Together they show whether the store keeps up: batches grow
/// before latency does.
///
/// Made once per store, recorded once per batch (not per call): the cost is
/// two histogram updates per commit.
public struct StoreMetrics: Sendable {
    /// The `liverelay_store_batch_size` buckets: calls per batch, powers of two up to the largest batch.
    public static let batchSizeBuckets: [Double] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    public static let batchSizeLabel = "liverelay_store_batch_size"

    private let commitDuration: Timer
    private let batchSize: Recorder

    /// - Parameter store: the `store` label: "sqlite" or "postgres".
    public init(store: String) {
        commitDuration = Timer(label: "liverelay_store_commit_duration", dimensions: [("store", store)])
        batchSize = Recorder(label: Self.batchSizeLabel, dimensions: [("store", store)])
    }

    /// One committed batch of `calls` calls that took `nanoseconds`.
    public func committed(calls: Int, nanoseconds: Int64) {
        commitDuration.recordNanoseconds(nanoseconds)
        batchSize.record(calls)
    }
}
