enum AIBridgeDaemonPlaceholder {}
