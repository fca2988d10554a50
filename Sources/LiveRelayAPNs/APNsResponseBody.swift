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

    /// Builds the answer to a channel management call: any 2xx is a success, with the
    /// `apns-channel-id` header (a create's 201) and the JSON body (a read's or a list's
    /// 200) kept as they came; anything else needs a JSON reason, as for a push.
    public init?(managementStatus status: Int, requestID: String?, channelID: String?, body: [UInt8]) {
        if (200..<300).contains(status) {
            self.init(status: status, apnsID: requestID)
            self.body = body
        } else {
            guard let object = FlatJSONObject(body), let reason = object.string("reason") else { return nil }
            self.init(status: status, reason: reason, apnsID: requestID)
        }
        self.channelID = channelID
    }

    /// The body APNs sends for this response: the error body, or a success's ``body``
    /// (empty for a push's 200). What the mock writes.
    public var bodyBytes: [UInt8] {
        if isSuccess { return body }
        guard let reason else { return [] }
        var text = "{\"reason\":" + jsonQuoted(reason)
        if let timestampMilliseconds { text += ",\"timestamp\":\(timestampMilliseconds)" }
        return Array((text + "}").utf8)
    }
}
