import Foundation
import Testing

@testable import LiveRelayAPNs

/// APNs's documented reason table, transcribed, against ``APNsDisposition``.
@Suite("APNs response table")
struct APNsDispositionTests {
    static let table: [(status: Int, reasons: [String?], expected: APNsDisposition)] = [
        (200, [nil], .delivered),
        (400, ["BadDeviceToken", "DeviceTokenNotForTopic"], .pruneToken),
        (
            400,
            [
                "BadCollapseId", "BadExpirationDate", "BadMessageId", "BadPriority", "BadTopic", "DuplicateHeaders",
                "IdleTimeout", "InvalidPushType", "MissingDeviceToken", "MissingTopic", "PayloadEmpty", "TopicDisallowed",
            ],
            .failRequest
        ),
        (403, ["ExpiredProviderToken"], .refreshProviderTokenAndRetry),
        (
            403,
            [
                "InvalidProviderToken", "MissingProviderToken", "UnrelatedKeyIdInToken", "BadEnvironmentKeyIdInToken",
                "BadCertificate", "BadCertificateEnvironment", "Forbidden",
            ], .credentialsRejected
        ),
        (404, ["BadPath"], .failRequest),
        (405, ["MethodNotAllowed"], .failRequest),
        (410, ["Unregistered", "ExpiredToken"], .pruneToken),
        (413, ["PayloadTooLarge"], .failRequest),
        (429, ["TooManyProviderTokenUpdates"], .retryWithoutNewProviderToken),
        (429, ["TooManyRequests"], .retryWithBackoff),
        (500, ["InternalServerError"], .retryWithBackoff),
        (503, ["ServiceUnavailable", "Shutdown"], .retryWithBackoff),
    ]

    @Test func everyRowMapsToItsAction() {
        for row in Self.table {
            for reason in row.reasons {
                #expect(
                    APNsResponse(status: row.status, reason: reason).disposition == row.expected,
                    "\(row.status) \(reason ?? "-")")
            }
        }
        #expect(APNsDisposition.delivered.isFinal && APNsDisposition.pruneToken.isFinal)
        #expect(!APNsDisposition.refreshProviderTokenAndRetry.isFinal && !APNsDisposition.retryWithBackoff.isFinal)
    }

    /// A transport failure has one name, used by the call's account and the metrics alike, never an APNs reason.
    @Test func transportErrorsHaveOneStableReasonEach() {
        let errors: [APNsTransportError] = [
            .connectFailed("dns"), .refusedByGoAway, .connectionLost, .timedOut,
            .shutDown, .malformedResponse("no :status"), .expiredBeforeSending,
        ]
        #expect(
            errors.map(\.reason) == [
                "ConnectFailed", "RefusedByGoAway", "ConnectionLost", "TimedOut",
                "TransportShutDown", "MalformedResponse", "ExpiredBeforeSending",
            ])
        #expect(errors.map(\.kind) == APNsTransportError.Kind.allCases)
        let apnsReasons = Set(Self.table.flatMap { $0.reasons.compactMap { $0 } })
        #expect(apnsReasons.isDisjoint(with: errors.map(\.reason)))
    }

    /// The body the mock writes goes through the one escaper and reads back through the client's reader.
    @Test func errorBodiesAreEscapedAndReadBack() {
        let response = APNsResponse(status: 410, reason: "Odd\"Reason\\", timestampMilliseconds: 1_700_000_000_123)
        #expect(response.bodyBytes == Array(#"{"reason":"Odd\"Reason\\","timestamp":1700000000123}"#.utf8))
        #expect(APNsResponse(status: 410, apnsID: nil, body: response.bodyBytes) == response)
        #expect(APNsResponse(status: 200).bodyBytes.isEmpty)
    }

    /// Every push's apns-id is a lowercase UUID that starts with its call's prefix.
    @Test func apnsIDsAreUUIDsNamingTheirCall() {
        let call = APNsCallID(instance: 0xDEAD_BEEF, call: 0x1234_5678_9ABC)
        #expect(call.description == "eadbeef5-6789-4abc")
        let id = call.apnsID(push: 0x3F)
        #expect(id == "eadbeef5-6789-4abc-8000-00000000003f")
        #expect(id.hasPrefix(call.description))
        let other = APNsCallID(instance: 0xDEAD_BEEF, call: 0x1234_5678_9ABD)
        #expect(other.apnsID(push: 0x3F) != id)
    }

    /// Every reason the verifier can give maps to a 403 credential answer, or the refresh for an expired token.
    @Test func verifierReasonsAreInTheTable() {
        let all: [ProviderTokenRejection] = [
            .missing, .malformed, .wrongAlgorithm, .badSignature, .unknownKeyID,
            .wrongTeam, .expired, .issuedInFuture,
        ]
        for rejection in all {
            let disposition = APNsDisposition(status: rejection.httpStatus, reason: rejection.apnsReason)
            #expect(disposition == (rejection == .expired ? .refreshProviderTokenAndRetry : .credentialsRejected))
        }
    }

    /// If the rule book is checked out next to the repository, the transcription above must cover its table.
    @Test func transcriptionCoversTheRuleBook() throws {
        let repo = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let facts = repo.deletingLastPathComponent().appendingPathComponent("shared/apns-facts.md")
        guard let text = try? String(contentsOf: facts, encoding: .utf8) else { return }
        var rows = 0
        for line in text.split(separator: "\n") where line.hasPrefix("| 200") || line.hasPrefix("| 4") || line.hasPrefix("| 5") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            let statuses = cells[0].split(separator: "/").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            let reasons =
                cells.count > 1 ? cells[1].split(separator: ",").map { $0.split(separator: " ").first.map(String.init) ?? "" } : []
            rows += 1
            for reason in reasons where !reason.isEmpty {
                let known = Self.table.contains { statuses.contains($0.status) && $0.reasons.contains(reason) }
                #expect(known, "\(statuses) \(reason) from apns-facts.md is not in the transcription")
            }
        }
        #expect(rows >= 10)
    }
}
