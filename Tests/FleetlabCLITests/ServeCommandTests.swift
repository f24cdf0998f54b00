import AIBridgeWire
import Foundation
import LabKernel
import Testing
import LabTestSupport

@Suite("fleetlab serve")
struct ServeCommandTests {
    @Test("serves on loopback, prints its endpoints and the sync server's key, and stops cleanly on SIGTERM")
    func serveAndStop() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("serve-data").path)
        let host = try #require(served.output.split(separator: "\n").first { $0.contains("  host") }?
            .split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
        let health = try await HTTPProbe.get(host + "/health")
        #expect(health.status == 200)
        let devices = try await HTTPProbe.request("GET", served.syncURL + "/api/v1/mobile/devices", headers: ["x-api-key": served.rootKey])
        #expect(devices.status == 200 && devices.text == #"{"items":[],"total":0}"#)
        #expect(try await HTTPProbe.request("GET", served.syncURL + "/api/v1/mobile/devices").status == 401)
        let chat = try #require(served.output.split(separator: "\n").first { $0.contains("  chat") }?
            .split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
        let wellKnown = try await HTTPProbe.get(chat + "/.well-known/d3chat-server")
        #expect(wellKnown.status == 200 && wellKnown.text.contains(#""protocol_version":2"#))
        #expect(try await HTTPProbe.request("GET", chat + "/api/v1/users/me").status == 401)
        // A conversation's secrets never reach the logs.
        let json = ["content-type": "application/json"]
        let registered = try await HTTPProbe.request("POST", chat + "/api/v1/auth/register",
                                                     body: Data(#"{"username":"logcheck","password":"hunter2-secret-pass"}"#.utf8), headers: json)
        let access = try #require((registered.json as? [String: Any])?["access_token"] as? String)
        let channel = try await HTTPProbe.request("POST", chat + "/api/v1/channels", body: Data(#"{"name":"ops"}"#.utf8),
                                                  headers: json.merging(["authorization": "Bearer \(access)"]) { $1 })
        let channelID = try #require((channel.json as? [String: Any])?["id"] as? String)
        let sent = try await HTTPProbe.request("POST", chat + "/api/v1/channels/\(channelID)/messages",
                                               body: Data(#"{"content":"the launch code is 0000"}"#.utf8),
                                               headers: json.merging(["authorization": "Bearer \(access)"]) { $1 })
        #expect(sent.status == 422 && sent.text.contains("end-to-end encrypted"), "a new channel is ciphertext only: \(sent.text)")
        served.stop()
        #expect(served.process.terminationStatus == 0)
        let logs = served.output + served.remainingOutput()
        for secret in [access, "hunter2-secret-pass", "the launch code"] { #expect(!logs.contains(secret)) }
    }

    @Test("a taken port is exit status 2 with a message, not a crash")
    func portTaken() async throws {
        let blocker = try TCPListener()
        let data = TestPaths.scratchDirectory("serve-taken").path
        let result = try await CommandRunner.fleetlabAsync(["serve", "--port", "host=\(blocker.port)", "--port", "mobile-sync=0", "--port", "chat=0", "--port", "agent-runtime=0", "--data", data])
        #expect(result.status == 2)
        #expect(result.stderr.contains("port \(blocker.port) on 127.0.0.1 is already in use"))
        let bad = try await CommandRunner.fleetlabAsync(["serve", "--port", "agents=9", "--data", data])
        #expect(bad.status == 2 && bad.stderr.contains("no server named 'agents'"))
    }
}

@Suite("fleetlab serve: crashes stay inside one server")
struct ServeIsolationTests {
    @Test("the requests that used to crash every server are 4xx answers, and every server is still up")
    func formerCrashers() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("serve-crashers").path)
        defer { served.stop() }
        let json = ["content-type": "application/json"]
        let account = try await HTTPProbe.request("POST", served.chatURL + "/api/v1/auth/register",
                                                  body: Data(#"{"username":"pager","password":"long enough pass"}"#.utf8), headers: json)
        let access = try #require((account.json as? [String: Any])?["access_token"] as? String)
        let auth = json.merging(["authorization": "Bearer \(access)"]) { $1 }
        let channel = try await HTTPProbe.request("POST", served.chatURL + "/api/v1/channels", body: Data(#"{"name":"g"}"#.utf8), headers: auth)
        let id = try #require((channel.json as? [String: Any])?["id"] as? String)
        for before in ["9999-01-01T00:00:00Z", "0001-01-01T00:00:00Z"] {
            let page = try await HTTPProbe.request("GET", served.chatURL + "/api/v1/channels/\(id)/messages?before=\(before)", headers: auth)
            #expect(page.status == 200, "before=\(before): \(page.text)")
        }
        let key = ["x-api-key": served.rootKey, "content-type": "application/json"]
        for (field, value) in [("when", #""x[99999999999999999999] == 1""#), ("timeout", "999999999999999")] {
            let body = #"{"sequence":{"name":"s","version":1,"blocks":[{"type":"step","id":"a","handler":"noop","\#(field)":\#(value)}]}}"#
            let published = try await HTTPProbe.request("POST", served.syncURL + "/api/v1/mobile/manifest/sequences", body: Data(body.utf8), headers: key)
            #expect(published.status == 400 && published.text.contains("blocks[0].\(field)"), "\(field): \(published.text)")
        }
        for url in [served.syncURL + "/api/v1/mobile/devices", served.chatURL + "/.well-known/d3chat-server", served.hostURL + "/health"] {
            #expect(try await HTTPProbe.request("GET", url, headers: ["x-api-key": served.rootKey]).status == 200, "\(url)")
        }
    }

    @Test("a handler that traps costs only its own server a restart: the others keep answering, its data survives", .timeLimit(.minutes(2)))
    func trapRestartsOneServer() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("serve-trap").path, environment: ["FLEETLAB_FAULT_TRAP_PATH": "/trap"])
        defer { served.stop() }
        let json = ["content-type": "application/json"]
        let registered = try await HTTPProbe.request("POST", served.chatURL + "/api/v1/auth/register",
                                                     body: Data(#"{"username":"survivor","password":"long enough pass"}"#.utf8), headers: json)
        #expect(registered.status == 201)
        func chatWorker() async throws -> [String: Any] {
            let version = try await HTTPProbe.get(served.hostURL + "/version")
            return try #require(((version.json as? [String: Any])?["servers"] as? [[String: Any]])?.first { $0["name"] as? String == "chat" })
        }
        let before = try await chatWorker()
        #expect(before["restarts"] as? Int == 0)
        _ = try? await HTTPProbe.get(served.chatURL + "/trap")  // the connection dies with the worker
        // The sync server never noticed.
        #expect(try await HTTPProbe.request("GET", served.syncURL + "/api/v1/mobile/devices", headers: ["x-api-key": served.rootKey]).status == 200)
        var after: [String: Any] = [:]
        for _ in 0..<200 {
            after = try await chatWorker()
            if after["restarts"] as? Int == 1, (try? await HTTPProbe.get(served.chatURL + "/.well-known/d3chat-server"))?.status == 200 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(after["restarts"] as? Int == 1 && after["pid"] as? Int != before["pid"] as? Int && after["port"] as? Int == before["port"] as? Int)
        let login = try await HTTPProbe.request("POST", served.chatURL + "/api/v1/auth/login",
                                                body: Data(#"{"username":"survivor","password":"long enough pass"}"#.utf8), headers: json)
        #expect(login.status == 200, "the account registered before the crash is still there")
        served.stop()
        #expect(served.process.terminationStatus == 0)
        let logs = served.remainingOutput()
        #expect(logs.contains("the chat server stopped (signal 4, a trap); restarting it"))
    }
}

@Suite("fleetlab serve: the agent runtime and fleetlab token")
struct ServeAgentRuntimeTests {
    @Test("serve prints the agent runtime and its development token, which starts a chat; fleetlab token mints one for any tenant")
    func tokenLines() async throws {
        let data = TestPaths.scratchDirectory("serve-agent").path
        let served = try await ServedFleetlab.start(data: data)
        defer { served.stop() }
        let line = try #require(served.output.split(separator: "\n").first { $0.hasPrefix("  agent-runtime  http://127.0.0.1:") })
        #expect(line.contains("/ws/{workflow}/{app}/{chat}/{user}"))
        let tokenLine = try #require(served.output.split(separator: "\n").first { $0.contains("token for") })
        #expect(tokenLine.hasPrefix("      token for app_id=dev-app user_id=dev-user: ey"))
        let json = ["content-type": "application/json"]
        let workflows = try await HTTPProbe.get(served.agentURL + "/api/workflows")
        #expect(workflows.status == 200 && workflows.text.contains(#""trip-planner":"#))
        let start = try await HTTPProbe.request("POST", served.agentURL + "/api/chats/dev-app/trip-planner/start", body: Data(#"{"user_id":"dev-user"}"#.utf8),
                                                headers: json.merging(["authorization": "Bearer \(served.agentToken)"]) { $1 })
        #expect(start.status == 200 && start.text.contains(#""reused":false"#))
        let minted = try await CommandRunner.fleetlabAsync(["token", "--app", "acme", "--user", "ada", "--data", data, "--ttl", "1h"])
        #expect(minted.status == 0)
        let token = minted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let own = try await HTTPProbe.request("POST", served.agentURL + "/api/chats/acme/trip-planner/start", body: Data(#"{"user_id":"ada"}"#.utf8),
                                              headers: json.merging(["authorization": "Bearer \(token)"]) { $1 })
        #expect(own.status == 200)
        let crossTenant = try await HTTPProbe.request("POST", served.agentURL + "/api/chats/dev-app/trip-planner/start", body: Data(#"{"user_id":"ada"}"#.utf8),
                                                      headers: json.merging(["authorization": "Bearer \(token)"]) { $1 })
        #expect(crossTenant.status == 403)
        let other = TestPaths.scratchDirectory("serve-agent-other").path
        let foreign = try await CommandRunner.fleetlabAsync(["token", "--app", "acme", "--user", "ada", "--data", other])
        let refused = try await HTTPProbe.request("POST", served.agentURL + "/api/chats/acme/trip-planner/start", body: Data(#"{"user_id":"ada"}"#.utf8),
                                                  headers: json.merging(["authorization": "Bearer \(foreign.stdout.trimmingCharacters(in: .whitespacesAndNewlines))"]) { $1 })
        #expect(refused.status == 401, "a key from another --data signs nothing here")
        let bad = try await CommandRunner.fleetlabAsync(["token", "--app", "a/b", "--user", "u", "--data", data])
        #expect(bad.status == 2 && bad.stderr.contains("--app"))
    }

    @Test("--without skips a server; an unknown name or a broken workflow folder is exit status 2")
    func without() async throws {
        let data = TestPaths.scratchDirectory("serve-without").path
        let unknown = try await CommandRunner.fleetlabAsync(["serve", "--without", "nope", "--data", data])
        #expect(unknown.status == 2 && unknown.stderr.contains("no server named 'nope'"))
        let folder = TestPaths.scratchDirectory("broken-workflows")
        try "name: x\nturns: []\n".write(to: folder.appendingPathComponent("x.yaml"), atomically: true, encoding: .utf8)
        let broken = try await CommandRunner.fleetlabAsync(["serve", "--agent-workflows", folder.path, "--data", data, "--port", "host=0",
                                                            "--port", "mobile-sync=0", "--port", "chat=0", "--port", "agent-runtime=0"])
        #expect(broken.status == 2 && broken.stderr.contains("x.yaml") && broken.stderr.contains("turns"))
    }
}

@Suite("fleetlab serve: the AI bridge")
struct ServeAIBridgeTests {
    func post(_ url: String, _ body: String, token: String? = nil, from peer: String? = nil) async throws -> HTTPProbe.Reply {
        var headers = ["content-type": "application/json"]
        if let token { headers["authorization"] = "Bearer \(token)" }
        if let peer { return try await HTTPProbe.request(from: peer, "POST", url, body: Data(body.utf8), headers: headers) }
        return try await HTTPProbe.request("POST", url, body: Data(body.utf8), headers: headers)
    }

    @Test("prompts and tokens reach no log line and no file under --data, sealed or plain; wrong PINs are throttled per address")
    func nothingLeaks() async throws {
        let data = TestPaths.scratchDirectory("serve-ai-bridge").path
        let served = try await ServedFleetlab.start(data: data)
        let marker = "MARKER-purple-elephant-\(UInt32.random(in: 0...UInt32.max))"
        let paired = try await post(served.aiBridgeURL + "/v1/pair/confirm", #"{"pin":"\#(served.aiPIN)","device_id":"cli-test"}"#)
        let pairing = try #require(paired.json as? [String: Any])
        let token = try #require(pairing["token"] as? String)
        let key = try #require((pairing["server_public_key"] as? String).flatMap(Base64.decode))
        // Plain: the relay forwards the prompt but keeps none of it.
        let plain = try await post(served.aiBridgeURL + "/v1/chat", #"{"command":"ai_chat","version":1,"payload":{"conversation_id":"c","message":"\#(marker)"}}"#, token: token)
        #expect(plain.status == 200 && plain.text.contains("event: done"))
        // Sealed: the relay sees ciphertext only, and the answer opens with the request's key.
        let envelope = CommandEnvelope(command: "ai_chat", payload: ["conversation_id": "c", "message": .string(marker)]).json
        let sealed = try BridgeSeal.seal(envelope, to: key, ephemeralSeed: [UInt8](repeating: 7, count: 32), nonce: [UInt8](repeating: 1, count: 24))
        let answer = try await post(served.aiBridgeURL + "/v1/chat", sealed.body.canonicalText, token: token)
        var parser = ServerSentEvents.Parser()
        let chunks = try parser.feed(Array(answer.body)).filter { $0.name == "chunk" }
        let opened = chunks.compactMap { (try? JSONValue.parse($0.data)).flatMap { BridgeSeal.openReply($0, key: sealed.key) }?["text"]?.stringValue }.joined()
        #expect(!chunks.isEmpty && opened.hasPrefix("I read your 1-word message."))
        #expect(!answer.text.contains("I read your"), "the answer crossed the relay sealed")
        let unknown = try await post(served.aiBridgeURL + "/v1/chat", #"{"command":"nope","version":1,"payload":{}}"#, token: token)
        #expect(unknown.status == 400 && unknown.text.contains(#""supported":["ai_chat","list_models"]"#))
        // Wrong PINs: five from 127.0.0.2 and it is throttled; 127.0.0.1 is not.
        for n in 0..<5 {
            let wrong = try await post(served.aiBridgeURL + "/v1/pair/confirm", #"{"pin":"00000\#(n)"}"#, from: "127.0.0.2")
            #expect(wrong.status == 401)
        }
        let throttled = try await post(served.aiBridgeURL + "/v1/pair/confirm", #"{"pin":"000009"}"#, from: "127.0.0.2")
        #expect(throttled.status == 429 && throttled.headers["retry-after"] != nil)
        let other = try await post(served.aiBridgeURL + "/v1/pair/confirm", #"{"pin":"000009"}"#, from: "127.0.0.1")
        #expect(other.status == 401)
        served.stop()
        let logs = served.output + served.remainingOutput()
        #expect(!logs.contains(marker) && !logs.contains(token))
        for file in FileManager.default.enumerator(atPath: data)?.compactMap({ $0 as? String }) ?? [] {
            guard let bytes = FileManager.default.contents(atPath: data + "/" + file) else { continue }
            #expect(bytes.range(of: Data(marker.utf8)) == nil && bytes.range(of: Data(token.utf8)) == nil, "\(file) holds the prompt or the token")
        }
    }
}
