import LiveRelayMessages
import LiveRelayService
import LiveRelayWire
import NIOCore

extension RPCConnectionHandler {
    /// Resolves the method, checks the key may call it, decodes and validates
    /// the request, and calls the service. Each refusal is an answer to this
    /// call only; the connection carries on.
    func dispatch(_ dispatch: ServerConnectionStateMachine.Dispatch) {
        guard let context, let principal else {
            // The state machine dispatches only after authentication succeeded.
            apply(stateMachine.fail(dispatch.id, status: .internal, message: "internal error", now: clock()))
            return
        }
        let id = dispatch.id
        guard let method = LiveRelayMethod(rawValue: dispatch.method) else {
            if let adminMethod = AdminMethod(rawValue: dispatch.method) {
                dispatchAdmin(adminMethod, dispatch, principal: principal, context: context)
                return
            }
            calls[id] = Call(cancellation: CancellationFlag(), method: ServerMetrics.unknownMethod, start: clock(), workDone: true)
            finish(id, RPCError(.unimplemented, "unknown method \(dispatch.method)"))
            return
        }
        let flag = CancellationFlag()
        calls[id] = Call(cancellation: flag, method: ServerMetrics.index(of: method), start: clock())
        guard principal.allowedMethods.contains(method) else {
            finish(id, RPCError(.permissionDenied, "API key \(principal.keyID) may not call \(method.methodName)"))
            return
        }
        let callContext = CallContext(
            principal: principal,
            eventLoop: context.eventLoop,
            deadline: dispatch.deadline,
            requestID: id,
            cancellation: flag
        )
        let service = self.service
        switch method {
        case .registerToken:
            invoke(dispatch, callContext, service.registerToken)
        case .startActivity:
            invoke(dispatch, callContext, service.startActivity)
        case .updateActivity:
            invoke(dispatch, callContext, service.updateActivity)
        case .endActivity:
            invoke(dispatch, callContext, service.endActivity)
        case .ping:
            invoke(dispatch, callContext, service.ping)
        case .createChannel:
            invoke(dispatch, callContext, service.createChannel)
        case .listChannels:
            invoke(dispatch, callContext, service.listChannels)
        case .deleteChannel:
            invoke(dispatch, callContext, service.deleteChannel)
        case .listEvents:
            invoke(dispatch, callContext, service.listEvents)
        }
    }

    /// The admin API: admin keys only (a tenant key is PERMISSION_DENIED, whatever its methods).
    private func dispatchAdmin(
        _ method: AdminMethod, _ dispatch: ServerConnectionStateMachine.Dispatch, principal: Principal, context: ChannelHandlerContext
    ) {
        let id = dispatch.id
        let flag = CancellationFlag()
        calls[id] = Call(cancellation: flag, method: ServerMetrics.index(of: method), start: clock())
        guard principal.isAdmin else {
            finish(id, RPCError(.permissionDenied, "API key \(principal.keyID) is not an admin key; \(method.methodName) is an admin RPC"))
            return
        }
        guard let admin else {
            finish(id, RPCError(.unimplemented, "this server does not serve the admin API"))
            return
        }
        let callContext = CallContext(
            principal: principal, eventLoop: context.eventLoop, deadline: dispatch.deadline, requestID: id, cancellation: flag)
        switch method {
        case .createApp: invoke(dispatch, callContext, admin.createApp)
        case .updateApp: invoke(dispatch, callContext, admin.updateApp)
        case .getApp: invoke(dispatch, callContext, admin.getApp)
        case .listApps: invoke(dispatch, callContext, admin.listApps)
        case .disableApp: invoke(dispatch, callContext, admin.disableApp)
        case .putAPNsCredentials: invoke(dispatch, callContext, admin.putAPNsCredentials)
        case .createAPIKey: invoke(dispatch, callContext, admin.createAPIKey)
        case .listAPIKeys: invoke(dispatch, callContext, admin.listAPIKeys)
        case .revokeAPIKey: invoke(dispatch, callContext, admin.revokeAPIKey)
        case .getAppStats: invoke(dispatch, callContext, admin.getAppStats)
        case .putWebhook: invoke(dispatch, callContext, admin.putWebhook)
        case .getWebhook: invoke(dispatch, callContext, admin.getWebhook)
        case .deleteWebhook: invoke(dispatch, callContext, admin.deleteWebhook)
        case .resetWebhook: invoke(dispatch, callContext, admin.resetWebhook)
        }
    }

    /// Generic over the message types so each method gets a specialized path:
    /// no existential decode, no boxing of the reply.
    private func invoke<Request: LiveRelayMessage, Reply: LiveRelayMessage>(
        _ dispatch: ServerConnectionStateMachine.Dispatch,
        _ callContext: CallContext,
        _ method: (Request, CallContext) -> EventLoopFuture<Reply>
    ) {
        let id = dispatch.id
        let request: Request
        do {
            request = try Request(serializedBytes: dispatch.payload)
        } catch {
            finish(id, RPCError(error))
            return
        }
        let future = method(request, callContext)
        let loop = callContext.eventLoop
        let onLoop = future.eventLoop === loop ? future : future.hop(to: loop)
        onLoop.assumeIsolated().whenComplete { result in
            switch result {
            case .success(let reply):
                self.finish(id, reply: reply)
            case .failure(let error):
                self.finish(id, error)
            }
        }
    }

    private func finish<Reply: LiveRelayMessage>(_ id: RequestID, reply: Reply) {
        guard markWorkDone(id), let context else { return }
        var payload = context.channel.allocator.buffer(capacity: 0)
        reply.serialize(into: &payload)
        apply(stateMachine.respond(id, payload: payload, now: clock()))
        flushSoon()
    }

    private func finish(_ id: RequestID, _ error: any Error) {
        guard markWorkDone(id), let context else { return }
        let rpcError: RPCError
        if let error = error as? RPCError, error.status != .ok {
            rpcError = error
        } else {
            // Not meant for callers: its text may hold internals. Log it, answer generically.
            logger.error("service failed", metadata: ["request_id": "\(id)", "error": "\(error)"])
            rpcError = RPCError(.internal, "internal error")
        }
        var details = context.channel.allocator.buffer(capacity: 0)
        rpcError.details.serialize(into: &details)
        apply(stateMachine.fail(id, status: rpcError.status, message: rpcError.message, details: details, now: clock()))
        flushSoon()
    }

    /// False if the call was already answered (cancelled, expired) or the
    /// connection is gone: its result is dropped.
    private func markWorkDone(_ id: RequestID) -> Bool {
        guard calls[id] != nil else { return false }
        calls[id]!.workDone = true
        return true
    }
}
