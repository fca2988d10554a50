// Module LiveRelayServer: see Package.swift for its role.
