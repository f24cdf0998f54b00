import DeviceWorkflows
import Orch8Wire
import Foundation
import LabKernel
import Testing
@testable import MobileSyncServer

@Suite("Sync server: dashboard sign-in")
struct DashboardSessionTests {
    /// Posts the sign-in form; returns the answer and the cookie it set, if any.
    func signIn(_ h: inout ServerHarness, key: String) throws -> (HTTPResponseMessage, String?) {
        let form = "key=" + PercentEncoding.encode(key)
        let reply = h.server.handle(HTTPRequestMessage(method: "POST", target: "/dashboard/mobile-sync/session",
                                                       headers: ["content-type": "application/x-www-form-urlencoded"], body: Array(form.utf8)),
                                    now: h.now).response
        let cookie = reply.header("set-cookie").flatMap { $0.split(separator: ";").first.map(String.init) }
        return (reply, cookie)
    }

    @Test("the form's key becomes an HttpOnly, SameSite=Strict session cookie, not the key itself")
    func signInSetsCookie() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme)
        let (reply, cookie) = try signIn(&h, key: acme)
        #expect(reply.status == 303 && reply.header("location") == "/dashboard/mobile-sync")
        let setCookie = try #require(reply.header("set-cookie"))
        #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict") && setCookie.contains("Path=/"))
        #expect(!setCookie.contains(acme), "the cookie holds a session token, not the API key")
        let session = try #require(cookie)
        let devices = try h.send("GET", "/api/v1/mobile/devices", headers: ["cookie": session])
        #expect(devices.status == 200 && devices.jsonBody?["total"] == 1)
        let who = try h.send("GET", "/dashboard/mobile-sync/session", headers: ["cookie": session])
        #expect(who.jsonBody?["tenant_id"] == "acme" && who.jsonBody?["root"] == false)
    }

    @Test("a wrong key sets no cookie; another tenant's rows stay hidden; a changing request needs the page's header")
    func refusals() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        let globex = try h.tenant("globex")
        _ = try h.register("phone-1", key: acme)
        let (wrong, none) = try signIn(&h, key: "fl_acme_guess")
        #expect(wrong.status == 303 && wrong.header("location") == "/dashboard/mobile-sync?signin=failed" && none == nil)
        let (_, globexCookie) = try signIn(&h, key: globex)
        let session = try #require(globexCookie)
        #expect(try h.send("GET", "/api/v1/mobile/devices", headers: ["cookie": session]).jsonBody?["total"] == 0)

        let command: JSONValue = ["device_id": "phone-1", "command_type": "cancel_instance", "payload": ["instance_id": .string(ServerHarness.uuid(1))]]
        let (_, acmeCookie) = try signIn(&h, key: acme)
        let acmeSession = try #require(acmeCookie)
        let forged = try h.send("POST", "/api/v1/mobile/commands", command, headers: ["cookie": acmeSession])
        #expect(forged.status == 403, "a cross-site form carries the cookie but cannot set the header")
        #expect(h.server.state.commands.isEmpty)
        let fromPage = try h.send("POST", "/api/v1/mobile/commands", command, headers: ["cookie": acmeSession, "x-fleetlab-dashboard": "1"])
        #expect(fromPage.status == 201)
    }

    @Test("signing out ends the session; a session expires after 12 hours")
    func endAndExpiry() throws {
        var h = try ServerHarness()
        var (_, cookie) = try signIn(&h, key: h.root)
        var session = try #require(cookie)
        let out = h.server.handle(HTTPRequestMessage(method: "POST", target: "/dashboard/mobile-sync/session/end", headers: ["cookie": session]),
                                  now: h.now).response
        #expect(out.status == 303 && out.header("set-cookie")?.contains("Max-Age=0") == true)
        #expect(try h.send("GET", "/api/v1/mobile/devices", headers: ["cookie": session]).status == 401)

        (_, cookie) = try signIn(&h, key: h.root)
        session = try #require(cookie)
        h.now = h.now + .hours(11)
        #expect(try h.send("GET", "/api/v1/mobile/devices", headers: ["cookie": session]).status == 200)
        h.now = h.now + .hours(2)
        #expect(try h.send("GET", "/api/v1/mobile/devices", headers: ["cookie": session]).status == 401)
    }
}
