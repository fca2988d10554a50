// Module LiveRelayDomain: see Package.swift for its role.
