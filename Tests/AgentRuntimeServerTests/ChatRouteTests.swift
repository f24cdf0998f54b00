import AgentRuntimeServer
import AgentRuntimeWire
import LabKernel
import LabTestSupport
import Testing

@Suite("Agent runtime: discovery, start, meta and auth")
struct ChatRouteTests {
    @Test("the repository's workflow files load, and discovery lists them keyed by name with the entry point")
    func discovery() throws {
        #expect(Fixtures.workflows.map(\.name) == ["shell-echo", "support-triage", "trip-planner"])
        var world = Fixtures.world()
        let listing = try #require(world.http("GET", "/api/workflows", token: nil).jsonBody?.objectValue)
        #expect(listing.keys.sorted() == ["shell-echo", "support-triage", "trip-planner"])
        #expect(listing["trip-planner"]?["entry_point"] == true && listing["support-triage"]?["entry_point"] == false)
        #expect(listing["support-triage"]?["startup_mode"] == "AgentDriven")
        #expect(listing["trip-planner"]?["ui_components"] == ["ActionPlan", "TextInput"])
        let transport = try #require(world.http("GET", "/api/workflows/trip-planner/transport", token: nil).jsonBody)
        #expect(transport["websocket_path"] == "/ws/trip-planner/{app_id}/{chat_id}/{user_id}")
        #expect(world.http("GET", "/api/workflows/nope/transport", token: nil).status == 404)
    }

    @Test("a start with the same client_request_id returns the same chat (reused), force_new a new one")
    func idempotentStart() throws {
        var world = Fixtures.world()
        let token = world.token(app: "acme", user: "ada")
        func start(_ body: JSONValue) -> JSONValue? { world.http("POST", "/api/chats/acme/trip-planner/start", token: token, json: body).jsonBody }
        let first = try #require(start(["user_id": "ada", "client_request_id": "r-1"]))
        #expect(first["reused"] == false && first["success"] == true)
        let chat = try #require(first["chat_id"]?.stringValue)
        #expect(first["websocket_url"]?.stringValue == "/ws/trip-planner/acme/\(chat)/ada")
        #expect(first["cache_seed"]?.numberValue != nil)
        world.advance(by: .minutes(5))
        let again = try #require(start(["user_id": "ada", "client_request_id": "r-1"]))
        #expect(again["chat_id"]?.stringValue == chat && again["reused"] == true && again["cache_seed"] == first["cache_seed"])
        let fresh = try #require(start(["user_id": "ada", "client_request_id": "r-1", "force_new": true]))
        #expect(fresh["chat_id"]?.stringValue != chat && fresh["reused"] == false)
        let other = try #require(start(["user_id": "ada", "client_request_id": "r-2"]))
        #expect(other["chat_id"]?.stringValue != chat)
        // Past the window the same id starts afresh.
        world.advance(by: .hours(25))
        #expect(start(["user_id": "ada", "client_request_id": "r-1"])?["chat_id"]?.stringValue != chat)
    }

    @Test("without a client_request_id, a start within 15 s reuses the in-progress chat (Mozaiks), later ones do not")
    func recentReuse() throws {
        var world = Fixtures.world()
        let a = Fixtures.start(&world), b = Fixtures.start(&world)
        #expect(a == b)
        world.advance(by: .seconds(16))
        #expect(Fixtures.start(&world) != a)
    }

    @Test("auth: no token 401, a bad signature, another key, alg none or an expired token 401; user and app must be the token's")
    func authentication() throws {
        var world = Fixtures.world()
        let path = "/api/chats/acme/trip-planner/start"
        let body: JSONValue = ["user_id": "ada"]
        #expect(world.http("POST", path, token: nil, json: body).status == 401)
        let good = world.token(app: "acme", user: "ada")
        #expect(world.http("POST", path, token: good + "x", json: body).status == 401)
        #expect(world.http("POST", path, token: world.token(app: "acme", user: "ada", key: Array("another key of thirty-two bytes!".utf8)), json: body).status == 401)
        let parts = good.split(separator: ".")
        let none = Base64URL.encode(Array(#"{"alg":"none","typ":"JWT"}"#.utf8)) + "." + parts[1] + "."
        let refused = world.http("POST", path, token: none, json: body)
        #expect(refused.status == 401 && refused.jsonBody?["detail"]?.stringValue?.contains("algorithm") == true)
        let expired = world.token(app: "acme", user: "ada", lifetime: .seconds(1))
        world.advance(by: .seconds(2))
        #expect(world.http("POST", path, token: expired, json: body).jsonBody?["detail"] == "Token expired")
        let token = world.token(app: "acme", user: "ada")
        let mismatch = world.http("POST", path, token: token, json: ["user_id": "bob"])
        #expect(mismatch.status == 403 && mismatch.jsonBody?["detail"] == "user_id mismatch")
        #expect(world.http("POST", "/api/chats/globex/trip-planner/start", token: token, json: body).jsonBody?["detail"] == "app_id mismatch")
        #expect(world.http("POST", path, token: token, json: body).status == 200)
        #expect(world.server.state.chats.count == 1)
    }

    @Test("tenants are isolated: another app's token (or another user's) finds none of a chat, its tool calls or its socket")
    func tenantIsolation() throws {
        var world = Fixtures.world()
        let chat = Fixtures.start(&world, app: "acme", user: "ada")
        let evil = world.token(app: "globex", user: "ada")
        let neighbour = world.token(app: "acme", user: "bob")
        #expect(world.http("GET", "/api/chats/meta/globex/trip-planner/\(chat)", token: evil).status == 404)
        #expect(world.http("GET", "/api/chats/meta/acme/trip-planner/\(chat)", token: evil).status == 403)
        #expect(world.http("GET", "/api/chats/meta/acme/trip-planner/\(chat)", token: neighbour).status == 404)
        #expect(world.http("GET", "/api/chats/exists/acme/trip-planner/\(chat)", token: neighbour).jsonBody?["exists"] == false)
        #expect(world.http("GET", "/api/chats/acme/trip-planner", token: neighbour).jsonBody?["chat_ids"] == [])
        #expect(world.http("GET", "/api/chats/acme/trip-planner", token: world.token(app: "acme", user: "ada")).jsonBody?["chat_ids"] == [.string(chat)])
        #expect(world.connect("/ws/trip-planner/acme/\(chat)/ada?access_token=\(neighbour)").refusal == 1008)
        #expect(world.connect("/ws/trip-planner/acme/\(chat)/bob?access_token=\(neighbour)").refusal == 1008)
        #expect(world.connect("/ws/trip-planner/acme/\(chat)/ada").refusal == 1008)
        let input = world.http("POST", "/chat/acme/\(chat)/bob/input", token: neighbour, json: ["message": "hi", "workflow_name": "trip-planner"])
        #expect(input.status == 404)
        #expect(world.server.state.transcripts[chat]?.count == 2)  // the greeting and its input request, nothing else
    }

    @Test("chat meta reports cache seed, status, counts and where the run stands")
    func meta() throws {
        var world = Fixtures.world()
        let chat = Fixtures.start(&world)
        let token = world.token(app: "acme", user: "ada")
        let meta = try #require(world.http("GET", "/api/chats/meta/acme/trip-planner/\(chat)", token: token).jsonBody)
        #expect(meta["status"] == "in_progress" && meta["total_messages"] == 2 && meta["last_message_index"] == 1)
        #expect(meta["restore"]?["awaiting_input"] == true && meta["last_artifact"] == .null)
        #expect(meta["cache_seed"] != nil && meta["chat_exists"] == true)
        #expect(world.http("GET", "/api/chats/meta/acme/support-triage/\(chat)", token: token).status == 404)
    }

    @Test("with --no-auth every identifier is taken as given")
    func noAuth() throws {
        var world = Fixtures.world(authRequired: false)
        let response = world.http("POST", "/api/chats/anyapp/trip-planner/start", token: nil, json: ["user_id": "someone"])
        let chat = try #require(response.jsonBody?["chat_id"]?.stringValue)
        #expect(world.connect("/ws/trip-planner/anyapp/\(chat)/someone").connection != nil)
    }
}
