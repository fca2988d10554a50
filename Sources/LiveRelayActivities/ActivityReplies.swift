import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet

// How the service words its replies: RegisterToken's result, and the
// DeliverySummary of an activity call from the rule's plan and the sink's
// account (or a replay's stored account).
extension ActivityService {
    /// RegisterToken's reply for the rule's result.
    static func reply(to result: TokenRegistration.Result) -> RegisterTokenReply {
        switch result {
        case .created: RegisterTokenReply(result: .created)
        case let .rotated(replaced): RegisterTokenReply(result: .rotated, replacedToken: replaced)
        case .unchanged: RegisterTokenReply(result: .unchanged)
        case .removed: RegisterTokenReply(result: .removed)
        case .notFound: RegisterTokenReply(result: .notFound)
        }
    }

    /// The summary as the rule planned it: every target queued, the unresolved ones named.
    static func planned(_ reply: StoredReply) -> DeliverySummary {
        let targeted = UInt32(clamping: reply.targeted)
        return DeliverySummary(
            targeted: targeted, queued: targeted,
            unresolved: reply.unresolved.map {
                UnresolvedTarget(kind: $0.kind.wire, value: $0.value, reason: $0.reason)
            })
    }

    /// A replay's summary: the call's final account once its dispatch intent
    /// was settled (`complete`), or at once for a call that reached no token
    /// (nothing was ever in flight); until then, or for a call accepted without
    /// a durable intent, the plan (every push `queued`, not `complete`), since
    /// whether its pushes are in flight, waiting to be resumed or lost is not
    /// known here. Nothing is sent again either way: the intent, if any, does that.
    ///
    /// The account covers the pushes the call's intent went out to, which for
    /// an update resumed after a crash are the activity's tokens as the resume
    /// read them: fewer than the call targeted if some were removed, rotated
    /// or pruned in between (those count failed, ``tokenRemovedBeforeResume``),
    /// more if tokens registered in between (they got the push: `targeted` is
    /// the account's total). Either way the summary adds up: `targeted` =
    /// delivered + failed + pruned + superseded + expired.
    static func replayed(_ reply: StoredReply) -> DeliverySummary {
        guard var account = reply.account ?? (reply.targeted == 0 ? EnqueueResult() : nil) else { return planned(reply) }
        var planned = planned(reply)
        let total = account.total
        if total < reply.targeted {
            account.failures[tokenRemovedBeforeResume, default: 0] += reply.targeted - total
        } else if total > reply.targeted {
            planned.targeted = UInt32(clamping: total)
        }
        return summary(planned, after: account)
    }

    /// The failure reason of a token a call targeted that was gone (removed,
    /// rotated or pruned) when its update was resumed after a crash.
    static let tokenRemovedBeforeResume = "TokenRemovedBeforeResume"

    /// `targeted` and `unresolved` come from the rule; the rest is the sink's account.
    static func summary(_ planned: DeliverySummary, after result: EnqueueResult) -> DeliverySummary {
        var summary = planned
        summary.queued = UInt32(clamping: result.queued)
        summary.delivered = UInt32(clamping: result.delivered)
        summary.pruned = UInt32(clamping: result.pruned)
        summary.superseded = UInt32(clamping: result.superseded)
        summary.expired = UInt32(clamping: result.expired)
        summary.failures = result.failures.sorted { $0.key < $1.key }
            .map { FailureCount(reason: $0.key, count: UInt32(clamping: $0.value)) }
        summary.failed = summary.failures.reduce(0) { $0 &+ $1.count }
        // Final only when nothing is left in flight (no pushes, or none taken).
        summary.complete = summary.queued == 0
        return summary
    }
}

/// `mutation`'s stored reply if it replays an earlier call, else nothing at all
/// (nil, no writes): how a call refused before its rule runs learns whether it
/// is the resend of one accepted before.
struct ReplayOnly<M: StoreMutation>: StoreMutation where M.Outcome == ActivityCallOutcome {
    var mutation: M

    var scope: MutationScope { mutation.scope }

    func tokensRead(in state: some TokenCounts, upTo limit: Int) -> Int { mutation.tokensRead(in: state, upTo: limit) }

    func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<StoredReply?> {
        MutationPlan(outcome: try mutation.plan(state, now: now).outcome.replayed)
    }
}
