import NIOCore

extension Frame {
    /// Reads the payload of a frame whose header has already been checked
    /// (known type, right kind of id, acceptable length). `payload` holds
    /// exactly the frame's payload bytes; byte fields of the result are slices of it.
    static func decode(
        type: FrameType,
        requestID: RequestID,
        payload: inout ByteBuffer
    ) throws(FrameDecodingError) -> Frame {
        switch type {
        case .hello:
            return .hello(try Self.decodeHello(&payload))
        case .welcome:
            guard let version = payload.readInteger(as: UInt16.self) else {
                throw .malformedPayload(.welcome, reason: "\(payload.readableBytes) bytes, need at least 2")
            }
            let settings = try Self.decodeSettings(&payload, in: .welcome)
            return .welcome(Welcome(version: version, settings: settings))
        case .request:
            guard let (timeout, methodLength) = payload.readMultipleIntegers(as: (UInt32, UInt8).self) else {
                throw .malformedPayload(.request, reason: "\(payload.readableBytes) bytes, need at least 5")
            }
            guard methodLength >= 1 else {
                throw .malformedPayload(.request, reason: "method_length is 0")
            }
            guard let method = payload.readPrintableASCII(length: Int(methodLength)) else {
                if payload.readableBytes < Int(methodLength) {
                    throw .malformedPayload(
                        .request,
                        reason: "method_length \(methodLength) exceeds the \(payload.readableBytes) bytes left"
                    )
                }
                throw .malformedPayload(.request, reason: "method is not printable ASCII")
            }
            return .request(requestID, Request(timeoutMilliseconds: timeout, method: method, payload: payload))
        case .response:
            return .response(requestID, payload)
        case .error:
            guard let (rawStatus, messageLength) = payload.readMultipleIntegers(as: (UInt8, UInt16).self) else {
                throw .malformedPayload(.error, reason: "\(payload.readableBytes) bytes, need at least 3")
            }
            guard rawStatus != 0, let status = StatusCode(rawValue: rawStatus) else {
                throw .malformedPayload(.error, reason: "status code \(rawStatus) is not in 1...16")
            }
            let message = try Self.readText(&payload, length: Int(messageLength), field: "message", in: .error)
            return .error(requestID, RequestError(status: status, message: message, details: payload))
        case .cancel:
            guard payload.readableBytes == 0 else {
                throw .malformedPayload(.cancel, reason: "payload must be empty, got \(payload.readableBytes) bytes")
            }
            return .cancel(requestID)
        case .ping, .pong:
            guard payload.readableBytes == Wire.pingPayloadSize, let data = payload.readInteger(as: UInt64.self) else {
                throw .malformedPayload(type, reason: "payload must be exactly 8 bytes, got \(payload.readableBytes)")
            }
            return type == .ping ? .ping(data) : .pong(data)
        case .goAway:
            guard let (last, code, reasonLength) = payload.readMultipleIntegers(as: (UInt32, UInt32, UInt16).self)
            else {
                throw .malformedPayload(.goAway, reason: "\(payload.readableBytes) bytes, need at least 10")
            }
            let reason = try Self.readText(&payload, length: Int(reasonLength), field: "reason", in: .goAway)
            guard payload.readableBytes == 0 else {
                throw .malformedPayload(.goAway, reason: "\(payload.readableBytes) bytes after the reason")
            }
            return .goAway(GoAway(lastRequestID: RequestID(last), code: GoAwayCode(rawValue: code), reason: reason))
        }
    }

    private static func decodeHello(_ payload: inout ByteBuffer) throws(FrameDecodingError) -> Hello {
        guard let (minVersion, maxVersion, keyLength) = payload.readMultipleIntegers(as: (UInt16, UInt16, UInt16).self)
        else {
            throw .malformedPayload(.hello, reason: "\(payload.readableBytes) bytes, need at least 6")
        }
        guard minVersion <= maxVersion else {
            throw .malformedPayload(.hello, reason: "min_version \(minVersion) is above max_version \(maxVersion)")
        }
        guard Wire.apiKeyLengthRange.contains(Int(keyLength)) else {
            throw .malformedPayload(.hello, reason: "api_key_length \(keyLength) is not in 1...512")
        }
        guard let apiKey = payload.readSlice(length: Int(keyLength)) else {
            throw .malformedPayload(
                .hello,
                reason: "api_key_length \(keyLength) exceeds the \(payload.readableBytes) bytes left"
            )
        }
        guard let nameLength = payload.readInteger(as: UInt8.self) else {
            throw .malformedPayload(.hello, reason: "missing client_name_length")
        }
        let name = try Self.readText(&payload, length: Int(nameLength), field: "client_name", in: .hello)
        let settings = try Self.decodeSettings(&payload, in: .hello)
        return Hello(minVersion: minVersion, maxVersion: maxVersion, apiKey: apiKey, clientName: name, settings: settings)
    }

    private static func decodeSettings(
        _ payload: inout ByteBuffer,
        in type: FrameType
    ) throws(FrameDecodingError) -> [Setting] {
        guard payload.readableBytes % 6 == 0 else {
            throw .malformedPayload(type, reason: "settings length \(payload.readableBytes) is not a multiple of 6")
        }
        var settings: [Setting] = []
        settings.reserveCapacity(payload.readableBytes / 6)
        while let (id, value) = payload.readMultipleIntegers(as: (UInt16, UInt32).self) {
            let setting = Setting(SettingID(rawValue: id), value)
            if let reason = setting.invalidReason {
                throw .malformedPayload(type, reason: reason)
            }
            settings.append(setting)
        }
        return settings
    }

    private static func readText(
        _ payload: inout ByteBuffer,
        length: Int,
        field: String,
        in type: FrameType
    ) throws(FrameDecodingError) -> String {
        guard payload.readableBytes >= length else {
            throw .malformedPayload(
                type,
                reason: "\(field) length \(length) exceeds the \(payload.readableBytes) bytes left"
            )
        }
        guard let text = payload.readValidatedUTF8(length: length) else {
            throw .malformedPayload(type, reason: "\(field) is not valid UTF-8")
        }
        return text
    }
}

extension ByteBuffer {
    /// Reads `length` bytes as UTF-8, or returns nil (consuming nothing) if they are not valid UTF-8.
    /// Decoding replaces bad sequences with U+FFFD, so comparing the result's
    /// bytes with the input is an exact validity check that works on every platform.
    @usableFromInline
    mutating func readValidatedUTF8(length: Int) -> String? {
        guard length > 0 else { return "" }
        let string: String? = self.withUnsafeReadableBytes { raw in
            let bytes = UnsafeRawBufferPointer(rebasing: raw.prefix(length))
            let decoded = String(decoding: bytes, as: UTF8.self)
            return decoded.utf8.elementsEqual(bytes) ? decoded : nil
        }
        if string != nil { self.moveReaderIndex(forwardBy: length) }
        return string
    }

    /// Reads `length` bytes of printable ASCII (0x21...0x7E), or nil (consuming nothing).
    @usableFromInline
    mutating func readPrintableASCII(length: Int) -> String? {
        guard self.readableBytes >= length else { return nil }
        let valid = self.withUnsafeReadableBytes { raw in
            raw.prefix(length).allSatisfy { (0x21...0x7E).contains($0) }
        }
        guard valid else { return nil }
        return self.readString(length: length)
    }
}
