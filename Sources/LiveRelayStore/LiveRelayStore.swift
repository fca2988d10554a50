// Module LiveRelayStore: see Package.swift for its role.
