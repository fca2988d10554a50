extension APNsResponse {
    /// Builds a response from what came off the wire: the `:status`, the
    /// `apns-id` header and the body, which on errors is
    /// `{"reason":"...","timestamp":...}` (timestamp only with 410, in ms).
    ///
    /// Shared by the HTTP/2 client and the mock so both read bodies the same
    /// way. Returns nil for a non-200 answer whose body is not such an object:
    /// without a reason the dispatcher cannot apply the response table.
    public init?(status: Int, apnsID: String?, body: [UInt8]) {
        if status == 200 {
            self.init(status: 200, apnsID: apnsID)
            return
        }
        guard let object = FlatJSONObject(body), let reason = object.string("reason") else { return nil }
        self.init(status: status, reason: reason, timestampMilliseconds: object.integer("timestamp"), apnsID: apnsID)
    }

    /// The error body APNs sends for this response (empty for 200): what the mock writes.
    public var bodyBytes: [UInt8] {
        guard status != 200, let reason else { return [] }
        var text = "{\"reason\":" + jsonQuoted(reason)
        if let timestampMilliseconds { text += ",\"timestamp\":\(timestampMilliseconds)" }
        return Array((text + "}").utf8)
    }
}
