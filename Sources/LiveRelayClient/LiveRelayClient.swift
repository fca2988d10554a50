// Module LiveRelayClient: see Package.swift for its role.
