// Module LiveRelayActivities: see Package.swift for its role.
