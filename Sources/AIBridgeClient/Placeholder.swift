enum AIBridgeClientPlaceholder {}
