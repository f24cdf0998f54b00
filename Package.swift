// swift-tools-version:6.2
import PackageDescription

// Module boundaries follow docs/architecture.md: pure cores (LabKernel and the protocol
// modules) never import NIO or read a clock; only Simulator, Live and the CLI drive them.
let strictSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "fleetlab",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "fleetlab", targets: ["fleetlab"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        // The chat server's /ws (only the server module is built: its TLS client is not used).
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        // TLS for the live clients: a load test points at https:// and wss:// deployments.
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // Already built for Hummingbird; named so Live can import their modules directly.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        // System libraries from Debian (libsqlite3-dev, libsodium-dev).
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CSodium", providers: [.apt(["libsodium-dev"])]),

        // Pure vocabulary: time, seeded randomness, distributions, timers, histograms.
        // Optimised in debug builds too: its histograms, JSON and HTTP messages run on every
        // simulated event, and unoptimised they were half of the README's debug-built demo
        // (docs/architecture.md, "Decisions"). Results are the same bit for bit.
        .target(name: "LabKernel", swiftSettings: strictSettings + [.unsafeFlags(["-O"], .when(configuration: .debug))]),

        // SQLite access and the results database.
        .target(name: "LabStore", dependencies: ["LabKernel", "CSQLite", "CSodium"], swiftSettings: strictSettings),

        // libsodium: hashes, signatures, and (with the chat issue) the whole e2e profile.
        .target(name: "LabCrypto", dependencies: ["LabKernel", "CSodium"], swiftSettings: strictSettings),

        // orch8's vocabulary, shared by the device and the server without either depending
        // on the other: the sequence format (blocks, expressions, the loader that checks
        // them) and the sync wire shapes.
        .target(name: "Orch8Wire", dependencies: ["LabKernel"], swiftSettings: strictSettings),

        // orch8: the on-device workflow engine, its stores and built-in handlers, the sync
        // reporter and signed manifest sync.
        .target(name: "DeviceWorkflows", dependencies: ["LabKernel", "Orch8Wire"], swiftSettings: strictSettings),

        // The engine's synchronous driver (`EngineHost`: `fleetlab workflow run`, live
        // devices, tests), its SQLite store, signed manifest sync and the engine benchmark.
        .target(name: "WorkflowHost", dependencies: ["LabKernel", "LabStore", "LabCrypto", "Orch8Wire", "DeviceWorkflows"],
                swiftSettings: strictSettings),

        // The orch8 mobile sync server: sync, devices, approvals, commands, credentials,
        // telemetry and the signed manifest publisher, as a sans-I/O core with a SQLite store.
        .target(name: "MobileSyncServer", dependencies: ["LabKernel", "LabCrypto", "Orch8Wire"],
                swiftSettings: strictSettings),

        // The chat encryption profile (docs/chat.md): X3DH, the Double Ratchet, sender keys.
        .target(name: "ChatCrypto", dependencies: ["LabKernel", "LabCrypto"], swiftSettings: strictSettings),

        // The d3chat reference server: accounts, devices, key bundles, channels, messages,
        // sockets and moderation, as a sans-I/O core.
        .target(name: "SecureChatServer", dependencies: ["LabKernel", "LabCrypto", "ChatCrypto"], swiftSettings: strictSettings),

        // The d3chat client core: keys, sessions, encryption, startup, sends and timelines.
        .target(name: "SecureChatClient", dependencies: ["LabKernel", "LabCrypto", "ChatCrypto"], swiftSettings: strictSettings),

        // Mozaiks (the agent runtime): envelopes, client frames, scripted workflow
        // definitions and multipart bodies, shared by the server and the client.
        .target(name: "AgentRuntimeWire", dependencies: ["LabKernel"], swiftSettings: strictSettings),

        // The agent runtime server: discovery, chats, the socket, scripted turns, resume,
        // tool calls, uploads, HS256 tokens, as a sans-I/O core.
        .target(name: "AgentRuntimeServer", dependencies: ["LabKernel", "LabCrypto", "AgentRuntimeWire"], swiftSettings: strictSettings),

        // The agent runtime's mobile client core: the seed's startup flow and reliability policy.
        .target(name: "AgentRuntimeClient", dependencies: ["LabKernel", "AgentRuntimeWire"], swiftSettings: strictSettings),

        // The Mobile AI Bridge: the command envelope and its errors, payloads sealed to the
        // daemon, the relay–daemon tunnel messages.
        .target(name: "AIBridgeWire", dependencies: ["LabKernel", "LabCrypto"], swiftSettings: strictSettings),

        // The bridge's relay (the seed's worker) and its desktop daemon, as sans-I/O cores.
        .target(name: "AIBridgeRelay", dependencies: ["LabKernel", "LabCrypto", "AIBridgeWire"], swiftSettings: strictSettings),
        .target(name: "AIBridgeDaemon", dependencies: ["LabKernel", "LabCrypto", "AIBridgeWire"], swiftSettings: strictSettings),

        // The bridge's phone client core: pairing, keychain, sealed requests, streamed answers, banners.
        .target(name: "AIBridgeClient", dependencies: ["LabKernel", "LabCrypto", "AIBridgeWire"], swiftSettings: strictSettings),

        // The desktop bridge: JSON-RPC 2.0 read strictly, the two ACP dialects, session updates.
        .target(name: "DesktopBridgeWire", dependencies: ["LabKernel"], swiftSettings: strictSettings),

        // The desktop (the seed's macOS app) and the phone's client, as sans-I/O cores.
        .target(name: "DesktopBridgeServer", dependencies: ["LabKernel", "DesktopBridgeWire"], swiftSettings: strictSettings),
        .target(name: "DesktopBridgeClient", dependencies: ["LabKernel", "DesktopBridgeWire"], swiftSettings: strictSettings),

        // The reference servers' SQLite files: each request's rows committed, the whole
        // state loaded back at start, secrets sealed (an adapter: the cores never see SQLite);
        // and the temporary files a simulation sets the servers' and phones' history aside in.
        .target(name: "ServerStorage", dependencies: ["LabKernel", "LabStore", "LabCrypto", "MobileSyncServer", "SecureChatServer", "SecureChatClient", "AgentRuntimeServer", "AIBridgeRelay",
                                                  "DesktopBridgeWire", "DesktopBridgeServer"],
                swiftSettings: strictSettings),

        // Discrete-event kernel, virtual network, device model, scenarios, recorder.
        .target(
            name: "Simulator",
            dependencies: ["LabKernel", "LabStore", "LabCrypto", "Orch8Wire", "DeviceWorkflows", "MobileSyncServer", "SecureChatServer", "SecureChatClient", "ServerStorage",
                           "AgentRuntimeWire", "AgentRuntimeServer", "AgentRuntimeClient", "AIBridgeWire", "AIBridgeRelay", "AIBridgeDaemon", "AIBridgeClient",
                           "DesktopBridgeWire", "DesktopBridgeServer", "DesktopBridgeClient",
                           .product(name: "Yams", package: "Yams")],
            swiftSettings: strictSettings
        ),

        // The benchmarks `fleetlab bench` runs: each beside its reference, in one run.
        .target(name: "Benchmarks", dependencies: ["LabKernel", "LabCrypto", "CSodium", "ChatCrypto", "Orch8Wire", "DeviceWorkflows",
                                                   "WorkflowHost", "Simulator"], swiftSettings: strictSettings),

        // Self-contained HTML dashboards drawn from a results database.
        .target(name: "Reports", dependencies: ["LabKernel", "LabStore"], swiftSettings: strictSettings),

        // Hummingbird host for the reference servers.
        .target(
            name: "Live",
            dependencies: [
                "LabKernel", "LabCrypto", "MobileSyncServer", "Orch8Wire", "DeviceWorkflows", "WorkflowHost", "SecureChatServer", "SecureChatClient", "ServerStorage",
                "AgentRuntimeWire", "AgentRuntimeServer", "AgentRuntimeClient", "AIBridgeWire", "AIBridgeRelay", "AIBridgeDaemon", "AIBridgeClient",
                "DesktopBridgeWire", "DesktopBridgeServer", "DesktopBridgeClient",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
            ],
            swiftSettings: strictSettings
        ),

        // fleetlab loadtest: the client cores against real servers on the wall clock.
        .target(
            name: "LoadTest",
            dependencies: ["LabKernel", "LabStore", "Simulator", "Live", "DeviceWorkflows", "WorkflowHost", "Orch8Wire", "AgentRuntimeWire", "AgentRuntimeClient", "SecureChatClient", "AIBridgeClient", "AIBridgeDaemon",
                           .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                           .product(name: "NIOHTTP1", package: "swift-nio")],
            swiftSettings: strictSettings
        ),

        .executableTarget(
            name: "fleetlab",
            dependencies: [
                "LabKernel", "LabStore", "Orch8Wire", "DeviceWorkflows", "WorkflowHost", "Benchmarks", "ServerStorage", "ChatCrypto", "SecureChatServer", "Simulator", "Reports", "Live", "LoadTest",
                "AgentRuntimeWire", "AgentRuntimeServer", "AgentRuntimeClient", "AIBridgeDaemon",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings
        ),

        .target(name: "LabTestSupport", dependencies: ["LabKernel", "SecureChatClient", "SecureChatServer", "AgentRuntimeWire", "AgentRuntimeServer", "AgentRuntimeClient",
                                                 "AIBridgeWire", "AIBridgeRelay", "AIBridgeDaemon", "AIBridgeClient", "DesktopBridgeWire", "DesktopBridgeServer", "DesktopBridgeClient",
                                                 .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
                                                 .product(name: "NIOSSL", package: "swift-nio-ssl")], path: "Tests/LabTestSupport",
                swiftSettings: strictSettings),
        .testTarget(name: "LabKernelTests", dependencies: ["LabKernel", "LabTestSupport"], swiftSettings: strictSettings),
        .testTarget(name: "LabCryptoTests", dependencies: ["LabCrypto", "LabKernel", "LabTestSupport", "CSodium"], swiftSettings: strictSettings),
        .testTarget(name: "ChatCryptoTests", dependencies: ["ChatCrypto", "LabCrypto", "LabKernel", "LabTestSupport", "CSodium"],
                    swiftSettings: strictSettings),
        .testTarget(name: "SecureChatServerTests", dependencies: ["SecureChatServer", "ServerStorage", "ChatCrypto", "LabCrypto", "LabKernel", "LabTestSupport"],
                    swiftSettings: strictSettings),
        .testTarget(name: "SecureChatClientTests", dependencies: ["SecureChatClient", "SecureChatServer", "ChatCrypto", "LabCrypto", "LabKernel"],
                    swiftSettings: strictSettings),
        .testTarget(name: "AgentRuntimeServerTests", dependencies: ["AgentRuntimeServer", "AgentRuntimeWire", "AgentRuntimeClient", "ServerStorage", "Simulator", "LabKernel", "LabTestSupport"],
                    swiftSettings: strictSettings),
        .testTarget(name: "AgentRuntimeClientTests", dependencies: ["AgentRuntimeClient", "AgentRuntimeServer", "AgentRuntimeWire", "LabKernel", "LabTestSupport"],
                    swiftSettings: strictSettings),
        .testTarget(name: "AIBridgeTests", dependencies: ["AIBridgeWire", "AIBridgeRelay", "AIBridgeDaemon", "AIBridgeClient", "ServerStorage", "LabCrypto", "LabKernel",
                                                    "LabTestSupport"], swiftSettings: strictSettings),
        .testTarget(name: "DesktopBridgeTests", dependencies: ["DesktopBridgeWire", "DesktopBridgeServer", "DesktopBridgeClient", "LabKernel", "LabTestSupport"],
                    swiftSettings: strictSettings),
        .testTarget(name: "LabStoreTests", dependencies: ["LabStore", "LabTestSupport"], swiftSettings: strictSettings),
        .testTarget(name: "DeviceWorkflowsTests", dependencies: ["DeviceWorkflows", "Orch8Wire", "WorkflowHost", "Benchmarks", "LabStore", "LabTestSupport"], swiftSettings: strictSettings),
        .testTarget(name: "MobileSyncServerTests", dependencies: ["MobileSyncServer", "ServerStorage", "Orch8Wire", "DeviceWorkflows", "WorkflowHost", "LabCrypto", "LabStore", "LabKernel", "LabTestSupport"],
                    swiftSettings: strictSettings),
        .testTarget(name: "SimulatorTests", dependencies: ["Simulator", "Benchmarks", "DeviceWorkflows", "Orch8Wire", "MobileSyncServer", "ServerStorage", "SecureChatClient", "LabStore", "LabTestSupport", "SecureChatServer",
                                                    "AgentRuntimeServer", "AgentRuntimeClient", "AIBridgeRelay", "AIBridgeClient", "DesktopBridgeClient", "DesktopBridgeWire", "DesktopBridgeServer"], swiftSettings: strictSettings),
        .testTarget(name: "ReportsTests", dependencies: ["Reports", "Simulator", "LabStore", "LabTestSupport"], swiftSettings: strictSettings),
        .testTarget(name: "LiveTests", dependencies: [
            "Live", "LabTestSupport", "LabKernel", "LabCrypto", "MobileSyncServer", "Orch8Wire", "DeviceWorkflows", "WorkflowHost", "SecureChatServer", "SecureChatClient",
            "AgentRuntimeWire", "AgentRuntimeServer", "AgentRuntimeClient", "DesktopBridgeWire", "DesktopBridgeServer",
            .product(name: "Hummingbird", package: "hummingbird"), .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ], swiftSettings: strictSettings),
        // One test body per protocol, run on the simulated and the loopback driver.
        .testTarget(name: "ConformanceTests", dependencies: [
            "Live", "LabTestSupport", "LabKernel", "MobileSyncServer", "Orch8Wire", "DeviceWorkflows", "WorkflowHost", "SecureChatServer",
            "SecureChatClient", "LabCrypto", "AgentRuntimeWire", "AgentRuntimeServer", "AgentRuntimeClient", "AIBridgeWire", "AIBridgeDaemon", "AIBridgeClient",
            "DesktopBridgeWire", "DesktopBridgeServer", "DesktopBridgeClient",
        ], swiftSettings: strictSettings),
        .testTarget(name: "LoadTestTests", dependencies: ["LoadTest", "LabKernel", "Simulator", "Live", "DeviceWorkflows", "WorkflowHost", "LabTestSupport"], swiftSettings: strictSettings),
        .testTarget(name: "FleetlabCLITests", dependencies: ["LabKernel", "LabStore", "LabTestSupport", "AIBridgeWire"], swiftSettings: strictSettings),
        .testTarget(name: "TidyTests", dependencies: ["LabTestSupport"], swiftSettings: strictSettings),
    ]
)
